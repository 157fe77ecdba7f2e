"""One SentencePiece vocabulary shared by source and target language, run inside the TF graph.

`train_sentencepiece` trains the model with the `sentencepiece` trainer (BPE by default: the paper's
byte-pair encoding, Section 5.1) and pins the special ids of `data.special_ids`. `Tokenizer` wraps the
serialized model in tensorflow-text's `SentencepieceTokenizer` ops, so tokenization and
detokenization are graph ops that a SavedModel carries with the model bytes as its own asset.

Byte fallback is on: a character outside the vocabulary becomes its UTF-8 bytes rather than
`<unk>`, so `detokenize(tokenize(s)) == s` holds for any text the NFKC normalisation leaves
unchanged (SentencePiece's default `nmt_nfkc` rule, which also collapses runs of spaces).
"""

import os
import tempfile
from typing import Iterable, Iterator

import sentencepiece
import tensorflow as tf
import tensorflow_text as tf_text

from data.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID

DEFAULT_VOCAB_SIZE = 8000
_SPECIAL_PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}


def _sentences(inputs: str | Iterable[str]) -> Iterator[str]:
    """Sentences from text files (a `.tsv` gives both columns) or from an iterable of strings."""
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    for item in inputs:
        if isinstance(item, (str, os.PathLike)) and os.path.isfile(item):
            with open(item, encoding="utf-8") as f:
                for line in f:
                    line = line.rstrip("\n")
                    if str(item).endswith(".tsv"):
                        yield from (side for side in line.split("\t") if side)
                    elif line:
                        yield line
        elif isinstance(item, str):
            if item:
                yield item
        else:
            raise TypeError(f"Expected a text file path or a string, got {type(item).__name__}: {item!r}")


def train_sentencepiece(
    text_files_or_iterator: str | Iterable[str],
    model_prefix: str,
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    model_type: str = "bpe",
    *,
    character_coverage: float = 0.9995,
    byte_fallback: bool = True,
    input_sentence_size: int = 2_000_000,
    num_threads: int | None = None,
    seed: int = 0,
) -> str:
    """Trains a shared SentencePiece model and returns the path of `model_prefix + ".model"`.

    Args:
        text_files_or_iterator: a file path, a list of paths (a `.tsv` contributes both columns,
            other files every non-empty line), or an iterable of sentences. Note a list mixing
            strings that are not existing files is read as sentences.
        model_prefix: output path without extension; `.model` and `.vocab` are written.
        vocab_size: number of pieces, special and byte pieces included (8000 fits ~70k pairs; the
            paper used 37000 for 4.5M pairs).
        model_type: "bpe" (the paper's byte-pair encoding) or "unigram".
        character_coverage: share of characters covered by single-character pieces; the rest
            fall back to bytes.
        byte_fallback: encode unknown characters as UTF-8 byte pieces instead of `<unk>`.
        input_sentence_size: at most this many sentences are sampled for training.
        num_threads: trainer threads; default all cores.
        seed: the trainer's random seed (sentence sampling), for reproducible models.

    The files are written under a temporary name and renamed, so a crash leaves no partial model.
    """
    if model_type not in ("bpe", "unigram"):
        raise ValueError(f"model_type must be 'bpe' or 'unigram', got {model_type!r}.")
    directory = os.path.dirname(os.path.abspath(model_prefix))
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory, prefix=".spm-") as tmp:
        tmp_prefix = os.path.join(tmp, "spm")
        sentencepiece.set_random_generator_seed(seed)
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=_sentences(text_files_or_iterator),
            model_prefix=tmp_prefix,
            vocab_size=vocab_size,
            model_type=model_type,
            character_coverage=character_coverage,
            byte_fallback=byte_fallback,
            pad_id=PAD_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            unk_id=UNK_ID,
            pad_piece=_SPECIAL_PIECES[PAD_ID],
            bos_piece=_SPECIAL_PIECES[BOS_ID],
            eos_piece=_SPECIAL_PIECES[EOS_ID],
            unk_piece=_SPECIAL_PIECES[UNK_ID],
            input_sentence_size=input_sentence_size,
            shuffle_input_sentence=True,
            num_threads=num_threads or os.cpu_count() or 1,
            minloglevel=2,
        )
        for extension in (".vocab", ".model"):
            os.replace(tmp_prefix + extension, model_prefix + extension)
    return model_prefix + ".model"


class Tokenizer(tf.Module):
    """A SentencePiece model as TF graph ops: strings to ragged ids and ids back to strings.

    Args:
        model_proto: the serialized SentencePiece model (the bytes of a `.model` file). It must
            use the special ids of `data.special_ids`.

    `tokenize(texts)`: `tf.string` `[batch]` -> `tf.RaggedTensor` int32 `[batch, (tokens)]`, without
    BOS/EOS (the input pipeline adds them).
    `detokenize(ids)`: int `[batch, length]`, dense or ragged -> `tf.string` `[batch]`; each row stops
    at its first EOS, and PAD and BOS ids are ignored, so decoder output can be passed as it is.
    """

    def __init__(self, model_proto: bytes, name: str | None = None):
        super().__init__(name=name)
        processor = sentencepiece.SentencePieceProcessor(model_proto=model_proto)
        found = {
            "pad": processor.pad_id(), "bos": processor.bos_id(),
            "eos": processor.eos_id(), "unk": processor.unk_id(),
        }
        expected = {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID, "unk": UNK_ID}
        if found != expected:
            raise ValueError(
                f"SentencePiece model has special ids {found}, expected {expected} "
                f"(data/special_ids.py); retrain it with data.tokenizer.train_sentencepiece."
            )
        self._model_proto = model_proto
        self._vocabulary_size = processor.get_piece_size()
        self._sentencepiece = tf_text.SentencepieceTokenizer(model=model_proto, out_type=tf.int32)

    def ensure_resource(self) -> None:
        """Recreates the SentencePiece op's resource if TensorFlow dropped it (eager only).

        tensorflow-text's SentencePiece resource is owned by an op kernel, and clearing the eager
        kernel cache destroys it: `tf.random.set_seed` and `keras.utils.set_random_seed` do that,
        after which every use fails with NotFoundError "SentencepieceResource does not exist".
        Each call (and each trace of a tf.function or dataset function) checks and rebuilds; a
        graph traced before the seed was set still holds the old handle, so set seeds first.
        """
        with tf.init_scope():  # while tracing a tf.function or dataset function: check eagerly
            if not tf.executing_eagerly():
                return
            try:
                self._sentencepiece.vocab_size()
            except tf.errors.NotFoundError:
                self._sentencepiece = tf_text.SentencepieceTokenizer(
                    model=self._model_proto, out_type=tf.int32
                )

    @classmethod
    def from_file(cls, path: str, name: str | None = None) -> "Tokenizer":
        """Loads a `.model` file."""
        with open(path, "rb") as f:
            return cls(f.read(), name=name)

    @property
    def model_proto(self) -> bytes:
        """The serialized model, e.g. to write it into an export's assets."""
        return self._model_proto

    @property
    def vocabulary_size(self) -> int:
        return self._vocabulary_size

    def tokenize(self, texts) -> tf.RaggedTensor:
        """`tf.string` `[batch]` -> int32 `tf.RaggedTensor` `[batch, (tokens)]` (no BOS/EOS)."""
        texts = tf.convert_to_tensor(texts, dtype=tf.string)
        if texts.shape.rank == 0:
            raise ValueError("tokenize expects a batch of strings [batch], got a scalar.")
        self.ensure_resource()
        return self._sentencepiece.tokenize(texts)

    def detokenize(self, ids) -> tf.Tensor:
        """Token ids `[batch, length]` (dense or ragged) -> `tf.string` `[batch]`.

        Reading stops at a row's first EOS_ID; PAD_ID and BOS_ID are skipped.
        """
        if isinstance(ids, tf.RaggedTensor):
            ids = ids.to_tensor(default_value=PAD_ID)
        self.ensure_resource()
        ids = tf.cast(tf.convert_to_tensor(ids), tf.int32)  # [batch, length]
        before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1), 0)
        keep = before_eos & tf.not_equal(ids, PAD_ID) & tf.not_equal(ids, BOS_ID)
        return self._sentencepiece.detokenize(tf.ragged.boolean_mask(ids, keep))

    def id_to_piece(self, ids) -> tf.Tensor:
        """The pieces (`tf.string`) of int ids of any shape."""
        self.ensure_resource()
        return self._sentencepiece.id_to_string(ids)
