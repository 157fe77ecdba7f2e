"""One SentencePiece vocabulary shared by source and target, run inside the TF graph.

`train_sentencepiece` trains it (BPE by default: the paper's Section 5.1) with the special ids of
`common.special_ids` and byte fallback (no `<unk>`); `Tokenizer` runs it as tensorflow-text ops, so
a SavedModel carries it as an asset."""

import hashlib
import io
import itertools
import os
import re
import tempfile
from collections.abc import Iterable, Iterator

import sentencepiece
import tensorflow as tf
import tensorflow_text as tf_text

from common.errors import UserError
from common.special_ids import BOS_ID, EOS_ID, PAD_ID, SPECIAL_PIECES, UNK_ID
from common.write_errors import WriteError, default_mode, writing
from data.vocabulary_options import check_user_defined_symbols, sampling_refusal
from data.vocabulary_size import DEFAULT_VOCAB_SIZE


class TokenizerError(UserError, ValueError):
    """SentencePiece cannot train a model on this input: no sentences, or a vocab_size outside the
    range the input allows. The message names the value, the input and the bound."""


# SentencePiece's trainer reports a vocab_size out of range with these messages; the number is the
# bound it computed from the input (the bound itself is a valid vocab_size).
_TOO_SMALL = re.compile(r"Vocabulary size is smaller than required_chars\. \d+ vs (\d+)")
_TOO_LARGE = re.compile(r"Vocabulary size too high \(\d+\)\. Please set it to a value <= (\d+)")


def _looks_like_path(text: str) -> bool:
    """Whether a string given among sentences is meant as a file: it ends in `.tsv` or `.txt`.
    (A separator is no sign: "and/or", "km/h" and URLs are sentences too.)"""
    return text.endswith((".tsv", ".txt"))


def _describe(inputs) -> str:
    """The training input for an error message: its file paths, and how many sentences."""
    if isinstance(inputs, (str, os.PathLike)):
        return os.fspath(inputs)
    if isinstance(inputs, (list, tuple)):
        # Only the first items are checked, so a long list of sentences costs no file lookups.
        files = [
            os.fspath(item)
            for item in inputs[:100]
            if isinstance(item, os.PathLike) or (isinstance(item, str) and os.path.isfile(item))
        ]
        sentences = len(inputs) - len(files)
        parts = files + ([f"{sentences} sentences given in a list"] if sentences else [])
        return ", ".join(parts) or "an empty list"
    return "the given sentences"


def _sentences(inputs: str | os.PathLike | Iterable[str], tsv_column: int | None = None) -> Iterator[str]:
    """Sentences from text files (a `.tsv` gives both columns, or `tsv_column`) or an iterable of
    strings, where a PathLike, or a str that `_looks_like_path`, is a file. Raises
    `FileNotFoundError` on such a path that is not an existing file; `TypeError` on an item that is
    neither a str nor a PathLike."""
    if isinstance(inputs, (str, os.PathLike)):
        if not os.path.isfile(inputs):
            raise FileNotFoundError(f"SentencePiece training input {os.fspath(inputs)!r}: no such file.")
        inputs = [inputs]
    for item in inputs:
        if isinstance(item, (str, os.PathLike)) and os.path.isfile(item):
            with open(item, encoding="utf-8") as f:
                for line in f:
                    line = line.rstrip("\n")
                    if os.fspath(item).endswith(".tsv"):
                        sides = line.split("\t")
                        if tsv_column is not None:
                            sides = sides[tsv_column : tsv_column + 1]
                        yield from (side for side in sides if side)
                    elif line:
                        yield line
        elif isinstance(item, os.PathLike) or (isinstance(item, str) and _looks_like_path(item)):
            raise FileNotFoundError(
                f"SentencePiece training input {os.fspath(item)!r}: no such file (a string ending in "
                ".tsv or .txt is read as a path, not a sentence)."
            )
        elif isinstance(item, str):
            if item:
                yield item
        else:
            raise TypeError(f"Expected a text file path or a string, got {type(item).__name__}: {item!r}")


class _Guarded:
    """Iterates `sentences` for the trainer, keeping an exception for `train_sentencepiece` to raise."""

    def __init__(self, sentences: Iterator[str]):
        self._sentences = sentences
        self.error: BaseException | None = None

    def __iter__(self):
        return self

    def __next__(self) -> str:
        try:
            return next(self._sentences)
        except StopIteration:
            raise
        except Exception as error:  # re-raised by train_sentencepiece after the trainer returns
            self.error = error
            raise StopIteration from None


def _trainer_error(error: RuntimeError, vocab_size: int, inputs) -> TokenizerError:
    """A TokenizerError for a SentencePiece trainer failure, naming vocab_size and the input."""
    original = str(error)
    source = _describe(inputs)
    if match := _TOO_SMALL.search(original):
        return TokenizerError(
            f"vocab_size={vocab_size} is too small for {source}: SentencePiece needs at least "
            f"{match.group(1)} pieces (one per character of the input, plus the special and byte-fallback pieces); "
            f"set vocab_size >= {match.group(1)}. SentencePiece said: {original}"
        )
    if match := _TOO_LARGE.search(original):
        return TokenizerError(
            f"vocab_size={vocab_size} is too large for {source}: SentencePiece can build at most "
            f"{match.group(1)} pieces from it; set vocab_size <= {match.group(1)} or train on more "
            f"text. SentencePiece said: {original}"
        )
    return TokenizerError(f"SentencePiece cannot train a vocab_size={vocab_size} model on {source}: {original}")


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
    user_defined_symbols: Iterable[str] = (),
    tsv_column: int | None = None,
) -> str:
    """Trains a shared SentencePiece model; returns the path of `model_prefix + ".model"`.

    Args:
        text_files_or_iterator: a path, a list of paths (a `.tsv` gives both columns) or an
            iterable of sentences; in a list, a str is a sentence unless it is an existing file or
            ends in `.tsv` / `.txt`.
        model_prefix: output path without extension; `.model` and `.vocab` are written atomically.
        vocab_size: number of pieces, special and byte pieces included.
        character_coverage: share of characters given single-character pieces; the rest fall back
            to bytes.
        input_sentence_size: size of SentencePiece's uniform sample of the input.
        user_defined_symbols: pieces kept whole (`<2fr>`), ids right after the special ones.
        tsv_column: learn from this column (0 or 1) of `.tsv` inputs only; None reads both.

    Raises:
        FileNotFoundError: a path, as above, that is not an existing file.
        WriteError: a file could not be written.
        TokenizerError: no sentences, or a vocab_size out of the range this input allows.
        data.vocabulary_options.SymbolError: a user-defined symbol that cannot be a piece.
    """
    if model_type not in ("bpe", "unigram"):
        raise ValueError(f"model_type must be 'bpe' or 'unigram', got {model_type!r}.")
    user_defined_symbols = check_user_defined_symbols(user_defined_symbols)
    if tsv_column not in (None, 0, 1):
        raise ValueError(f"tsv_column must be None, 0 or 1, got {tsv_column!r}.")
    sentences = _sentences(text_files_or_iterator, tsv_column)
    first = next(sentences, None)
    if first is None:
        raise TokenizerError(
            f"No sentences to train SentencePiece on in {_describe(text_files_or_iterator)} "
            "(empty files or an empty list)."
        )
    guarded = _Guarded(itertools.chain([first], sentences))
    directory = os.path.dirname(os.path.abspath(model_prefix))
    with writing(directory):
        os.makedirs(directory, exist_ok=True)
    options = dict(
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        byte_fallback=byte_fallback,
        input_sentence_size=input_sentence_size,
        user_defined_symbols=list(user_defined_symbols),
        num_threads=num_threads or os.cpu_count() or 1,
    )
    try:
        model = _trained_model(guarded, seed, options)
    except RuntimeError as error:
        if guarded.error is not None:
            raise guarded.error from None
        raise _trainer_error(error, vocab_size, text_files_or_iterator) from error
    if guarded.error is not None:
        raise guarded.error
    _write_model(model_prefix, model)
    return model_prefix + ".model"


def _trained_model(sentences, seed, options):
    """The serialized model trained from `sentences`, its special ids pinned, built in memory
    (the trainer's own file writes do not report a failed write)."""
    proto = io.BytesIO()
    sentencepiece.set_random_generator_seed(seed)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=sentences,
        model_writer=proto,
        pad_id=PAD_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        unk_id=UNK_ID,
        pad_piece=SPECIAL_PIECES[PAD_ID],
        bos_piece=SPECIAL_PIECES[BOS_ID],
        eos_piece=SPECIAL_PIECES[EOS_ID],
        unk_piece=SPECIAL_PIECES[UNK_ID],
        shuffle_input_sentence=True,
        minloglevel=2,
        **options,
    )
    return proto.getvalue()


def _write_model(model_prefix, model):
    """Writes `model_prefix.vocab` then `model_prefix.model`; a failed model write removes both."""
    processor = sentencepiece.SentencePieceProcessor(model_proto=model)
    vocab = "".join(
        f"{processor.id_to_piece(i)}\t{processor.get_score(i):g}\n" for i in range(processor.get_piece_size())
    )
    _write_aside(model_prefix + ".vocab", vocab.encode("utf-8"))
    try:
        _write_aside(model_prefix + ".model", model)
    except WriteError:
        os.remove(model_prefix + ".vocab")  # No vocabulary listing without its model.
        raise


def _write_aside(path, content):
    """Writes `content` to a temporary file beside `path` and renames it into place."""
    temporary = None
    try:
        with writing(path):
            handle, temporary = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=".spm-")
            with os.fdopen(handle, "wb") as out:
                out.write(content)
            os.chmod(temporary, default_mode())
            os.replace(temporary, path)
    finally:
        if temporary is not None and os.path.exists(temporary):
            os.remove(temporary)


class Tokenizer(tf.Module):
    """A SentencePiece model as TF graph ops.

    Args:
        model_proto: the bytes of a `.model` file using `common.special_ids`.
        alpha, nbest_size: subword regularization (`sampling`); alpha 0 is deterministic.

    `tokenize`: `tf.string` `[batch]` -> ragged int32 `[batch, (tokens)]`, without BOS/EOS.
    `detokenize`: int `[batch, length]`, dense or ragged -> `tf.string` `[batch]`.
    """

    def __init__(self, model_proto: bytes, name: str | None = None, *, alpha: float = 0.0, nbest_size: int = 0):
        super().__init__(name=name)
        refusal = sampling_refusal(alpha, nbest_size) if alpha else None
        if refusal:
            raise ValueError(refusal)
        processor = sentencepiece.SentencePieceProcessor(model_proto=model_proto)
        found = {
            "pad": processor.pad_id(),
            "bos": processor.bos_id(),
            "eos": processor.eos_id(),
            "unk": processor.unk_id(),
        }
        expected = {"pad": PAD_ID, "bos": BOS_ID, "eos": EOS_ID, "unk": UNK_ID}
        if found != expected:
            raise ValueError(
                f"SentencePiece model has special ids {found}, expected {expected} "
                f"(common/special_ids.py); retrain it with data.tokenizer.train_sentencepiece."
            )
        self._model_proto = model_proto
        self._vocabulary_size = processor.get_piece_size()
        # tensorflow-text's defaults (nbest_size 0, alpha 1.0) segment deterministically.
        self._sampling = dict(alpha=alpha, nbest_size=nbest_size) if alpha else dict(alpha=1.0, nbest_size=0)
        self._sentencepiece = self._op()

    def _op(self):
        # tensorflow-text's SentencePiece resource is named after its op's node, which a graph
        # rebuilds (a SavedModel loaded, a tf.data service's workers): two models in one graph
        # under the default name share the first one's resource. A name per model and setting
        # keeps them apart (separate source and target vocabularies).
        digest = hashlib.sha256(self._model_proto + repr(sorted(self._sampling.items())).encode()).hexdigest()[:16]
        return tf_text.SentencepieceTokenizer(
            model=self._model_proto, out_type=tf.int32, name=f"sentencepiece_{digest}", **self._sampling
        )

    def sampling(self, alpha: float, nbest_size: int = -1) -> "Tokenizer":
        """This vocabulary with subword regularization (`sampling_refusal`), for training only."""
        return Tokenizer(self._model_proto, alpha=alpha, nbest_size=nbest_size)

    @property
    def samples(self) -> bool:
        """Whether `tokenize` samples segmentations (subword regularization)."""
        return self._sampling["nbest_size"] != 0

    def ensure_resource(self) -> None:
        """Recreates the SentencePiece op's resource if TensorFlow dropped it (eager only). Clearing
        the eager kernel cache (`tf.random.set_seed`, `keras.utils.set_random_seed`) destroys it
        ("SentencepieceResource does not exist"); a graph traced before still holds the old handle,
        so set seeds first."""
        with tf.init_scope():  # while tracing a tf.function or dataset function: check eagerly
            if not tf.executing_eagerly():
                return
            try:
                self._sentencepiece.vocab_size()
            except tf.errors.NotFoundError:
                self._sentencepiece = self._op()

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
        """Token ids `[batch, length]` (dense or ragged) -> `tf.string` `[batch]`, each row read up
        to its first EOS_ID, PAD_ID and BOS_ID skipped."""
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
