import os
import subprocess
import sys

import numpy as np
import pytest
import sentencepiece
import tensorflow as tf

from common.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from data import tokenizer, vocabulary_options

NORMAL_TEXT = [
    "The small dog waits for the train at 7 o'clock.",
    "Der kleine Hund wartet um 7 Uhr auf den Zug.",
    'Anna writes: "Öffnet das Fenster!" (twice)',
    "Zoë bought 3 croissants for 4,50 € — unseen words and symbols 😀 included.",
]


def test_special_ids_are_pinned(small_tokenizer):
    pieces = small_tokenizer.id_to_piece(tf.constant([PAD_ID, BOS_ID, EOS_ID, UNK_ID])).numpy()
    assert pieces.tolist() == [b"<pad>", b"<s>", b"</s>", b"<unk>"]
    assert small_tokenizer.vocabulary_size == 400


def test_round_trip(small_tokenizer):
    ids = small_tokenizer.tokenize(tf.constant(NORMAL_TEXT))
    assert isinstance(ids, tf.RaggedTensor) and ids.dtype == tf.int32
    assert not tf.reduce_any(ids.flat_values == UNK_ID)  # byte fallback, no <unk>
    assert [t.decode() for t in small_tokenizer.detokenize(ids).numpy()] == NORMAL_TEXT


def test_detokenize_stops_at_eos_and_skips_pad_and_bos(small_tokenizer):
    ids = small_tokenizer.tokenize(tf.constant(["Anna sings a song.", "The cat"])).to_list()
    dense = [
        [BOS_ID] + ids[0] + [EOS_ID] + ids[1] + [PAD_ID] * 3,
        [BOS_ID] + ids[1] + [PAD_ID] * (len(ids[0]) + 4),
    ]
    expected = [b"Anna sings a song.", b"The cat"]
    assert small_tokenizer.detokenize(tf.constant(dense)).numpy().tolist() == expected
    ragged = tf.ragged.constant([ids[0] + [EOS_ID, 5, 6], ids[1]])
    assert small_tokenizer.detokenize(ragged).numpy().tolist() == expected


def test_subword_sampling_varies_the_segmentation_and_keeps_the_text(small_tokenizer, small_tsv, tmp_path):
    """BPE-dropout: each call draws another segmentation of the same text, as the input pipeline
    does at each pass; the plain tokenizer (evaluation, translation, export) never varies. A unigram
    vocabulary samples too, from its n best."""
    texts = tf.constant(NORMAL_TEXT[:2] * 2)
    plain = small_tokenizer.tokenize(texts).to_list()
    assert not small_tokenizer.samples and plain[:2] == plain[2:]
    assert all(small_tokenizer.tokenize(texts).to_list() == plain for _ in range(3))
    sampled = small_tokenizer.sampling(0.3)
    assert sampled.samples and sampled.vocabulary_size == small_tokenizer.vocabulary_size
    draws = [sampled.tokenize(texts) for _ in range(4)]
    assert len({str(draw.to_list()) for draw in draws}) == 4
    for draw in draws:
        assert sampled.detokenize(draw).numpy().tolist() == texts.numpy().tolist()
    # Dropped merges leave smaller pieces: longer sequences on average.
    assert np.mean([len(row) for draw in draws for row in draw.to_list()]) > np.mean([len(row) for row in plain])
    unigram = tokenizer.Tokenizer.from_file(
        tokenizer.train_sentencepiece(small_tsv, str(tmp_path / "uni"), vocab_size=400, model_type="unigram")
    )
    assert not unigram.samples and unigram.sampling(0.5, nbest_size=8).samples
    draws = [unigram.sampling(0.5, nbest_size=8).tokenize(texts) for _ in range(6)]
    assert len({str(draw.to_list()) for draw in draws}) > 1
    assert all(unigram.detokenize(draw).numpy().tolist() == texts.numpy().tolist() for draw in draws)


def test_user_defined_symbols_are_whole_pieces_after_the_special_ids(small_tsv, tmp_path):
    model = tokenizer.train_sentencepiece(
        small_tsv, str(tmp_path / "tags"), vocab_size=400, user_defined_symbols=["<2fr>", "<2de>", "@@NUM@@"]
    )
    tags = tokenizer.Tokenizer.from_file(model)
    pieces = tags.id_to_piece(tf.constant([4, 5, 6])).numpy().tolist()
    assert pieces == [b"<2fr>", b"<2de>", b"@@NUM@@"]
    ids = tags.tokenize(tf.constant(["<2de> The cat reads @@NUM@@ books.", "<2fr>"])).to_list()
    # Whole pieces wherever they occur (after the "▁" that starts every sentence).
    assert 5 in ids[0] and 6 in ids[0] and ids[1][-1] == 4
    assert [tags.id_to_piece(tf.constant(row)).numpy().tolist().count(b"<2fr>") for row in ids] == [0, 1]
    assert tags.detokenize(tf.ragged.constant(ids)).numpy().tolist() == [
        b"<2de> The cat reads @@NUM@@ books.",
        b"<2fr>",
    ]
    assert vocabulary_options.vocabulary_stem(400) == "spm-bpe-400"
    stems = {
        vocabulary_options.vocabulary_stem(400, symbols) for symbols in ([], ["<2fr>"], ["<2de>"], ["<2fr>", "<2de>"])
    }
    assert len(stems) == 4


@pytest.mark.parametrize(
    "symbols, message",
    [
        (["<2fr>", "<pad>"], "'<pad>' collides with the special piece of id 0"),
        (["</s>"], "'</s>' collides with the special piece of id 2"),
        (["<0x41>"], "'<0x41>' collides with a byte-fallback piece"),
        (["two words"], "'two words': a symbol must be non-empty and hold no whitespace"),
        ([""], "a symbol must be non-empty"),
        (["<2fr>", "<2fr>"], "'<2fr>' is given twice"),
    ],
)
def test_bad_user_defined_symbols_are_refused_and_nothing_is_written(small_tsv, tmp_path, symbols, message):
    with pytest.raises(vocabulary_options.SymbolError, match=message):
        tokenizer.train_sentencepiece(small_tsv, str(tmp_path / "bad"), vocab_size=400, user_defined_symbols=symbols)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "alpha, nbest_size, message",
    [
        (1.5, -1, "--subword_alpha=1.5 must lie in \\(0, 1\\]"),
        (-0.1, -1, "--subword_alpha=-0.1 must lie in"),
        (0.1, 1, "--subword_nbest=1 leaves no segmentation to sample from"),
        (0.1, 0, "--subword_nbest=0 leaves no segmentation"),
        (0.1, -2, "--subword_nbest=-2 leaves no segmentation"),
        (0.1, 513, "--subword_nbest=513: SentencePiece samples from at most the 512 best"),
    ],
)
def test_bad_subword_sampling_settings_are_refused(small_tokenizer, alpha, nbest_size, message):
    with pytest.raises(ValueError, match=message):
        small_tokenizer.sampling(alpha, nbest_size)


def test_runs_inside_a_graph(small_tokenizer):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
    def round_trip(texts):
        return small_tokenizer.detokenize(small_tokenizer.tokenize(texts).to_tensor())

    assert round_trip(tf.constant(NORMAL_TEXT[:2])).numpy().tolist() == [t.encode() for t in NORMAL_TEXT[:2]]


@pytest.mark.slow  # A fresh process loads the SavedModel.
def test_saved_model_carries_the_vocabulary_and_keeps_two_apart(small_tokenizer, small_tsv, tmp_path):
    """A SavedModel holds its vocabularies: one round-trips text in a fresh process, and two in one
    graph (separate source and target vocabularies) each tokenize as their own, not as the first."""
    german = tokenizer.Tokenizer.from_file(
        tokenizer.train_sentencepiece(small_tsv, str(tmp_path / "de"), vocab_size=350, tsv_column=1)
    )
    module = tf.Module()
    module.tokenizer = tokenizer.Tokenizer(small_tokenizer.model_proto)
    module.german = german
    module.tokenize = tf.function(
        lambda texts: {
            name: side.tokenize(texts).to_tensor(default_value=PAD_ID)
            for name, side in (("shared", module.tokenizer), ("german", module.german))
        },
        input_signature=[tf.TensorSpec([None], tf.string)],
        autograph=False,
    )
    module.detokenize = tf.function(
        module.tokenizer.detokenize, input_signature=[tf.TensorSpec([None, None], tf.int32)], autograph=False
    )
    tf.saved_model.save(module, str(tmp_path / "saved"))
    # A fresh process has neither the .model files nor these Python objects.
    code = (
        "import sys, tensorflow as tf, tensorflow_text\n"
        "m = tf.saved_model.load(sys.argv[1])\n"
        "ids = m.tokenize(tf.constant([sys.argv[2]]))\n"
        "print(ids['german'][0].numpy().tolist())\n"
        "print(m.detokenize(ids['shared'])[0].numpy().decode())\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "saved"), NORMAL_TEXT[1]],
        capture_output=True,
        text=True,
        check=True,
    )
    *_, german_ids, text = result.stdout.strip().splitlines()
    assert text == NORMAL_TEXT[1]
    assert german_ids == str(german.tokenize([NORMAL_TEXT[1]]).to_list()[0])
    assert german_ids != str(small_tokenizer.tokenize([NORMAL_TEXT[1]]).to_list()[0])


def test_rejects_a_model_with_other_special_ids(small_tsv, tmp_path):
    prefix = str(tmp_path / "default_ids")
    sentencepiece.SentencePieceTrainer.train(
        input=small_tsv,
        model_prefix=prefix,
        vocab_size=300,
        minloglevel=2,  # unk=0 bos=1 eos=2
    )
    with pytest.raises(ValueError, match="special ids"):
        tokenizer.Tokenizer.from_file(prefix + ".model")


def test_train_from_an_iterator_is_deterministic(tmp_path):
    sentences = [f"Sentence {i} is about {w}." for i in range(300) for w in ("cats", "dogs")]
    first = tokenizer.train_sentencepiece(iter(sentences), str(tmp_path / "a"), vocab_size=320)
    second = tokenizer.train_sentencepiece(iter(sentences), str(tmp_path / "b"), vocab_size=320)
    # The files differ only in the trainer options they record (the output path).
    pieces = [
        [(p.id_to_piece(i), p.get_score(i)) for i in range(p.get_piece_size())]
        for p in (sentencepiece.SentencePieceProcessor(model_file=m) for m in (first, second))
    ]
    assert pieces[0] == pieces[1]
    assert np.array_equal(
        tokenizer.Tokenizer.from_file(first).tokenize(["Sentence 5."]).flat_values.numpy(),
        tokenizer.Tokenizer.from_file(second).tokenize(["Sentence 5."]).flat_values.numpy(),
    )


SENTENCES = [f"Sentence {i} is about {w}." for i in range(300) for w in ("cats", "dogs")]


def test_the_sample_is_drawn_from_every_shard(tmp_path):
    # The first shard's words use only the letters a-m, the last shard's only n-z: a sample of
    # the first lines would leave n-z to byte pieces.
    words = ["".join("abcdefghijklm"[(i * 7 + j) % 13] for j in range(4 + i % 3)) for i in range(40)]
    late = ["".join("nopqrstuvwxyz"[(i * 5 + j) % 13] for j in range(4 + i % 3)) for i in range(40)]
    shards = []
    for index, vocabulary in enumerate((words, words, late)):
        path = tmp_path / f"train-{index:05d}-of-00003.tsv"
        rows = [f"{vocabulary[i % 40]} {vocabulary[(i * 3) % 40]}\t{vocabulary[(i * 11) % 40]}" for i in range(1000)]
        path.write_text("".join(f"{row}\n" for row in rows), encoding="utf-8")
        shards.append(str(path))
    model = tokenizer.train_sentencepiece(shards, str(tmp_path / "spm"), vocab_size=400, input_sentence_size=300)
    processor = sentencepiece.SentencePieceProcessor(model_file=model)
    pieces = processor.encode(" ".join(late[:10]), out_type=str)
    assert pieces and not any(piece.startswith("<0x") for piece in pieces)


def test_vocab_size_too_small_names_the_bound(tmp_path):
    text = tmp_path / "sentences.txt"
    text.write_text("".join(f"{s}\n" for s in SENTENCES), encoding="utf-8")
    with pytest.raises(tokenizer.TokenizerError) as error:
        tokenizer.train_sentencepiece(str(text), str(tmp_path / "m"), vocab_size=100)
    message = str(error.value)
    # 25 characters, 256 byte pieces and 4 special pieces.
    assert message.startswith(f"vocab_size=100 is too small for {text}: SentencePiece needs at least 285")
    assert "Vocabulary size is smaller than required_chars. 100 vs 285." in message  # its own text
    assert isinstance(error.value, ValueError)
    assert tokenizer.train_sentencepiece(str(text), str(tmp_path / "m"), vocab_size=285)


def test_vocab_size_too_large_names_the_bound(tmp_path):
    with pytest.raises(tokenizer.TokenizerError) as error:
        tokenizer.train_sentencepiece(SENTENCES, str(tmp_path / "m"), vocab_size=8000)
    message = str(error.value)
    bound = int(message.split("<= ")[1].split(" ")[0])
    assert message.startswith(
        f"vocab_size=8000 is too large for 600 sentences given in a list: SentencePiece can build at "
        f"most {bound} pieces from it; set vocab_size <= {bound}"
    )
    assert "Vocabulary size too high (8000)" in message
    tokenizer.train_sentencepiece(SENTENCES, str(tmp_path / "m"), vocab_size=bound)
    assert not list(tmp_path.glob(".spm-*"))  # the failed run left no temporary directory


@pytest.mark.parametrize("inputs", ["empty.tsv", [], iter([]), ["", ""]])
def test_no_sentences_is_an_error(tmp_path, inputs):
    (tmp_path / "empty.tsv").write_text("\n\t\n", encoding="utf-8")
    if inputs == "empty.tsv":
        inputs = str(tmp_path / "empty.tsv")
    with pytest.raises(tokenizer.TokenizerError, match="No sentences to train SentencePiece on in"):
        tokenizer.train_sentencepiece(inputs, str(tmp_path / "m"), vocab_size=300)


def test_a_missing_file_is_not_read_as_a_sentence(tmp_path):
    text = tmp_path / "sentences.txt"
    text.write_text("".join(f"{s}\n" for s in SENTENCES), encoding="utf-8")
    typo = str(tmp_path / "sentence.txt")
    for inputs, named in [
        (typo, typo),
        (tmp_path / "sentence.txt", typo),  # PathLike
        (str(tmp_path / "corpus"), str(tmp_path / "corpus")),  # no extension: alone, still a path
        ([str(text), "train.tsv"], "train.tsv"),
    ]:
        with pytest.raises(FileNotFoundError, match=f"'{named}': no such file"):
            tokenizer.train_sentencepiece(inputs, str(tmp_path / "m"), vocab_size=300)
    assert not (tmp_path / "m.model").exists()
    # Other strings in a list are sentences, separators and all.
    assert tokenizer.train_sentencepiece(
        [str(text), "Not a path/just words.", "and/or", "Hello."], str(tmp_path / "m"), vocab_size=300
    )


def test_a_vocabulary_that_cannot_be_written_is_a_write_error_and_leaves_no_file(small_tsv, tmp_path):
    """SentencePiece's own file writer reports success for a model cut by a file-size limit; the
    model is written by the tokenizer module instead, so the failure is a WriteError naming the file
    and no `.model`, `.vocab` or temporary file is left."""
    import resource
    import signal

    from common.write_errors import WriteError

    prefix = tmp_path / "limited"
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    previous_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, previous_limit[1]))
    try:
        with pytest.raises(WriteError, match=f"cannot write {prefix}.model: File too large"):
            tokenizer.train_sentencepiece(small_tsv, str(prefix), vocab_size=400)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous_limit)
        signal.signal(signal.SIGXFSZ, previous_handler)
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    model = tokenizer.train_sentencepiece(small_tsv, str(prefix), vocab_size=400)
    processor = sentencepiece.SentencePieceProcessor(model_file=model)
    assert processor.get_piece_size() == 400
    with open(f"{prefix}.vocab", encoding="utf-8") as listing:
        assert [line.split("\t")[0] for line in listing] == [processor.id_to_piece(i) for i in range(400)]
