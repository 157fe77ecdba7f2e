"""The served signatures on bad and mixed input (export/serving_module.py's input policy)."""

import numpy as np
import pytest
import tensorflow as tf

from common.special_ids import EOS_ID, PAD_ID
from export.serving_module import MAX_PHRASE_PIECES, MAX_PHRASES, resolve_buckets
from models.beam_search import UNMET_SCORE, length_penalty
from models.search_config import SearchConfig
from tests.export.helpers import SENTENCES, composed_documents, padded
from tests.helpers import EXPORT_SETTINGS, SHARED_EXPORT_GROUP

# One process runs this module: the first call of each signature of the loaded export (`served`)
# takes seconds (TensorFlow optimizes its graph then), and so does tracing the `steered` modules.
pytestmark = pytest.mark.xdist_group(SHARED_EXPORT_GROUP)


def serve(signature, sentences):
    outputs = signature(inputs=tf.constant(sentences, dtype=tf.string))
    return [t.decode("utf-8") for t in outputs["translations"].numpy()], outputs["scores"].numpy()


def test_resolve_buckets_sorts_clips_and_ends_with_max_input_length():
    assert resolve_buckets((64, 16, 16, 300), 128) == (16, 64, 128)
    assert resolve_buckets((), 48) == (48,)
    with pytest.raises(ValueError, match="positive ints"):
        resolve_buckets((0,), 48)
    with pytest.raises(ValueError, match="max_input_length"):
        resolve_buckets((8,), 1)


def test_empty_and_whitespace_sentences_give_themselves(served):
    _, serving, _ = served
    inputs = ["", "   ", "\t \u3000", SENTENCES[0]]
    outputs = serving(inputs=tf.constant(inputs))
    translations, scores = serve(serving, inputs)
    assert translations[:3] == inputs[:3]  # no sentence: the separators alone
    np.testing.assert_array_equal(scores[:3], 0.0)
    np.testing.assert_array_equal(outputs["confidence"].numpy()[:3], 1.0)
    assert scores[3] < 0.0 and 0.0 < outputs["confidence"].numpy()[3] < 1.0


def test_empty_batch_gives_empty_outputs(served):
    _, serving, _ = served
    outputs = serving(inputs=tf.zeros([0], tf.string))
    assert outputs["translations"].shape == (0,) and outputs["scores"].shape == (0,)
    assert outputs["translations"].dtype == tf.string and outputs["scores"].dtype == tf.float32


def test_long_sentence_is_truncated_to_max_input_length_tokens_where_taken_whole(served, tiny_run):
    from data.tokenizer import Tokenizer

    model_dir, _ = tiny_run
    tokenizer = Tokenizer.from_file(f"{model_dir}/spm.model")
    long_text = ("Click OK to save your changes. " * 400)[:10_000]
    kept = tokenizer.tokenize([long_text])[0][: EXPORT_SETTINGS["max_input_length"] - 1].numpy()
    loaded, _, translate_ids = served
    # The prefix signature takes each input whole (without a prefix: the plain search).
    translations, scores = serve(
        lambda inputs: loaded.signatures["prefix"](inputs=inputs, prefixes=tf.constant([""])), [long_text]
    )
    # The policy: the first max_input_length - 1 tokens, then EOS.
    source = np.concatenate([kept, [EOS_ID]])[None].astype("int32")
    expected = translate_ids(source_ids=tf.constant(source))
    assert translations[0] == tokenizer.detokenize(expected["ids"]).numpy()[0].decode("utf-8")
    np.testing.assert_allclose(scores, expected["scores"].numpy(), atol=1e-5)
    # The ids signature applies the same cut to a longer id sequence.
    longer = np.concatenate([tokenizer.tokenize([long_text])[0].numpy()[:200], [EOS_ID]])[None].astype("int32")
    from_longer = translate_ids(source_ids=tf.constant(longer))
    np.testing.assert_array_equal(from_longer["ids"].numpy(), expected["ids"].numpy())


def test_invalid_utf8_is_replaced_not_fatal(served):
    _, serving, _ = served
    bad = [b"\xff\xfe Open the file.", b"Click \xc3 OK", b"\xc3"]
    translations, scores = serve(serving, bad)
    repaired, repaired_scores = serve(serving, ["\ufffd\ufffd Open the file.", "Click \ufffd OK", "\ufffd"])
    assert translations == repaired
    np.testing.assert_allclose(scores, repaired_scores, atol=1e-5)
    assert np.all(np.isfinite(scores))


def test_batch_of_64_mixed_lengths_equals_one_by_one(served):
    """Up to 39 words, empty ones among them: every length bucket of the export in one batch."""
    rng = np.random.default_rng(0)
    words = " ".join(SENTENCES).split()
    sentences = []
    for index in range(64):
        if index % 37 == 0:
            sentences.append("")
        else:
            count = int(rng.integers(1, 40))
            sentences.append(" ".join(rng.choice(words, count)))
    _, serving, _ = served
    batch_translations, batch_scores = serve(serving, sentences)
    single = [serve(serving, [sentence]) for sentence in sentences]
    assert batch_translations == [translations[0] for translations, _ in single]
    np.testing.assert_allclose(batch_scores, [scores[0] for _, scores in single], atol=1e-4)


def test_translate_ids_signature_matches_the_text_signature(served, tiny_run):
    from data.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_file(f"{tiny_run[0]}/spm.model")
    rows = [list(row) + [EOS_ID] for row in tokenizer.tokenize(SENTENCES).to_list()]
    source = np.full((len(rows), max(map(len, rows)) + 5), PAD_ID, dtype="int32")
    for index, row in enumerate(rows):
        source[index, : len(row)] = row
    _, serving, translate_ids = served
    outputs = translate_ids(source_ids=tf.constant(source))
    width = EXPORT_SETTINGS["max_input_length"] + EXPORT_SETTINGS["max_extra_length"]
    assert outputs["ids"].shape == (len(rows), width)
    translations, scores = serve(serving, SENTENCES)
    assert [t.decode("utf-8") for t in tokenizer.detokenize(outputs["ids"]).numpy()] == translations
    np.testing.assert_allclose(outputs["scores"].numpy(), scores, atol=1e-5)


def test_n_best_signature_is_the_beam_best_first_led_by_serving_default(served, tiny_model_and_tokenizer):
    from inference.translator import Translator

    loaded, serving, _ = served
    sentences = SENTENCES[:4] + [""]
    outputs = loaded.signatures["n_best"](inputs=tf.constant(sentences))
    texts = [[t.decode("utf-8") for t in row] for row in outputs["translations"].numpy()]
    scores = outputs["scores"].numpy()
    beam = EXPORT_SETTINGS["beam_size"]
    assert scores.shape == (len(sentences), beam)
    best, best_scores = serve(serving, sentences)
    assert [row[0] for row in texts] == best
    np.testing.assert_allclose(scores[:, 0], best_scores, atol=1e-5)
    assert (np.diff(scores[:4], axis=1) <= 1e-6).all()
    assert texts[4] == [""] * beam and (scores[4] == 0).all()
    # The same lists as the Python translator's with the export's settings.
    model, tokenizer = tiny_model_and_tokenizer
    settings = {k: EXPORT_SETTINGS[k] for k in ("beam_size", "alpha", "max_extra_length", "max_input_length")}
    expected, expected_scores = Translator(model, tokenizer, SearchConfig(**settings)).translate(
        sentences[:4], n_best=beam
    )
    assert texts[:4] == expected
    np.testing.assert_allclose(scores[:4], expected_scores, atol=1e-4)


def test_score_signature_is_forced_decoding(served, tiny_model_and_tokenizer):
    from inference.translator import Translator

    loaded, _, _ = served
    sources = ["Open the file.", "", "Click OK to save your changes."]
    targets = ["Öffnen Sie die Datei.", "Leer", ""]
    outputs = loaded.signatures["score"](inputs=tf.constant(sources), targets=tf.constant(targets))
    model, tokenizer = tiny_model_and_tokenizer
    expected = Translator(model, tokenizer).score(sources, targets)
    np.testing.assert_allclose(outputs["log_probs"].numpy(), [e.log_prob for e in expected], atol=1e-3)
    assert outputs["lengths"].numpy().tolist() == [e.tokens for e in expected]
    empty = loaded.signatures["score"](inputs=tf.zeros([0], tf.string), targets=tf.zeros([0], tf.string))
    assert empty["log_probs"].shape == (0,)
    with pytest.raises(tf.errors.InvalidArgumentError, match="one target per input"):
        loaded.signatures["score"](inputs=tf.constant(sources), targets=tf.constant(targets[:2]))


def test_the_searching_signatures_share_four_traced_searches(exported):
    from tensorflow.core.protobuf import saved_model_pb2

    saved_model = saved_model_pb2.SavedModel()
    with open(f"{exported[1]}/saved_model.pb", "rb") as handle:
        saved_model.ParseFromString(handle.read())
    library = saved_model.meta_graphs[0].graph_def.library.function
    loops = [node.op for function in library for node in function.node_def if node.op in ("While", "StatelessWhile")]
    # Per length bucket (8, 16 and max_input_length) one loop of the plain search of the best
    # hypothesis, which serving_default, translate_ids, align and constrain share, one of n_best's
    # (the whole beam), one of the prefix signature's and one of the constrain signature's; the
    # signatures and the module's saved functions share them (traced once, in the save). Each drops
    # its done sentences: two loops (the steps inside, the drops outside). Every loop is stateless:
    # a search reads its weights before its loops (models/translation.py). The other loops: the
    # word numbering of the alignment (a tf.scan) that align and markup share, the 4 packing loops
    # of the sentence segmentation (2 passes of the length rule, 2 packings each) that
    # serving_default, align and markup share, and markup's 4 (its tags' pairing and nesting).
    assert loops.count("While") == 0
    assert loops.count("StatelessWhile") == 4 * 2 * (len(EXPORT_SETTINGS["length_buckets"]) + 1) + 1 + 4 + 4
    # Serving takes no gradients: the fast paths' custom gradients are not saved (export/exporter.py).
    assert not [function.signature.name for function in library if "grad_fn" in function.signature.name]


def test_the_prefix_signature_refuses_a_prefix_longer_than_the_maximum_output_length(served, tiny_run):
    """A prefix of as many pieces as its sentence's maximum output length (its source tokens, EOS
    included, + max_extra_length) is forced; one piece more fails the call with the check's message,
    naming the sentence. (Its translations against the Python translator's:
    tests/export/test_fresh_process.py.)"""
    from data.tokenizer import Tokenizer

    tokenizer = Tokenizer.from_file(f"{tiny_run[0]}/spm.model")
    limit = len(tokenizer.tokenize(["Print"]).to_list()[0]) + 1 + EXPORT_SETTINGS["max_extra_length"]
    longest, too_long = (" ".join(["Sie"] * count) for count in (limit, limit + 1))  # "▁Sie": one piece
    assert [len(row) for row in tokenizer.tokenize([longest, too_long]).to_list()] == [limit, limit + 1]
    loaded, _, _ = served
    prefix = loaded.signatures["prefix"]
    translations, _ = serve_prefixes(prefix, ["Open the file.", "Print"], ["", longest])
    assert translations[1].startswith(longest)
    message = (
        r"prefix: a target prefix has more SentencePiece pieces than the maximum output length of its sentence "
        r"\(its source tokens, EOS included, \+ max_extra_length=12\)\] \[sentences \(from 0\):\] \[1\] "
        rf"\[prefix pieces:\] \[{limit + 1}\] \[maximum output lengths:\] \[{limit}\]"
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        serve_prefixes(prefix, ["Open the file.", "Print"], ["", too_long])
    with pytest.raises(tf.errors.InvalidArgumentError, match="one prefix"):
        serve_prefixes(prefix, ["Open the file.", "Print"], [""])


def serve_prefixes(signature, sentences, prefixes):
    outputs = signature(inputs=tf.constant(sentences, tf.string), prefixes=tf.constant(prefixes, tf.string))
    return [t.decode("utf-8") for t in outputs["translations"].numpy()], outputs["scores"].numpy()


@pytest.mark.slow  # the first call of each signature's graph: seconds
def test_the_prefix_align_and_markup_signatures_take_an_empty_batch(served):
    loaded, _, _ = served
    nothing = tf.zeros([0], tf.string)
    for outputs in (
        loaded.signatures["prefix"](inputs=nothing, prefixes=nothing),
        loaded.signatures["align"](inputs=nothing),
        loaded.signatures["markup"](inputs=nothing),
    ):
        assert {name: tuple(value.shape)[0] for name, value in outputs.items()} == dict.fromkeys(outputs, 0)


# Documents: sentences, a sentence over max_input_length (48) ids, a line with no sentence end.
DOCUMENTS = [
    " ".join(SENTENCES[:4]),
    "Help.  " + SENTENCES[6] + "\n" + SENTENCES[3] + " " + SENTENCES[3].replace(".", ","),
    "Click " * 60,
    "",
    " \t ",
    SENTENCES[5],
]


@pytest.mark.slow  # the align signature's first call; its graph in the fast tier: test_graph_documents.py
def test_documents_are_their_sentences_translated_one_by_one_and_joined(served, tiny_run):
    """The graph's segmentation, join, summed scores, confidence and offset alignments against
    their Python composition with the export's own `align` signature, one piece at a time."""
    from data.tokenizer import Tokenizer

    loaded, serving, _ = served
    tokenizer = Tokenizer.from_file(f"{tiny_run[0]}/spm.model")

    def count(pieces):
        return [len(row) + 1 for row in tokenizer.tokenize(pieces).to_list()]

    expected = composed_documents(loaded.signatures["align"], DOCUMENTS, count, EXPORT_SETTINGS["max_input_length"])
    outputs = loaded.signatures["align"](inputs=tf.constant(DOCUMENTS))
    served_outputs = serving(inputs=tf.constant(DOCUMENTS))
    for name in ("translations", "alignments"):
        got = [text.decode("utf-8") for text in outputs[name].numpy()]
        assert got == [row[name] for row in expected]
        if name == "translations":
            assert [text.decode("utf-8") for text in served_outputs[name].numpy()] == got
    for name in ("scores", "confidence"):
        np.testing.assert_allclose(outputs[name].numpy(), [row[name] for row in expected], atol=1e-4)
        np.testing.assert_allclose(served_outputs[name].numpy(), outputs[name].numpy(), atol=1e-5)
    counts = outputs["token_counts"].numpy()
    for row, document in enumerate(expected):
        np.testing.assert_allclose(
            outputs["token_scores"].numpy()[row, : counts[row]], document["token_scores"], atol=1e-4
        )
        tokens = [token.decode("utf-8") for token in outputs["tokens"].numpy()[row, : counts[row]]]
        assert len(tokens) == len(document["token_scores"]) and (not tokens or tokens[-1] == "</s>")
    assert counts[3] == counts[4] == 0 and counts[0] >= 4  # "</s>" at least after each of 4 sentences


@pytest.mark.slow  # the markup signature's first call; its graph in the fast tier: test_graph_markup.py
def test_the_markup_signature_masks_translates_and_restores_as_python_does(served):
    from inference import markup

    loaded, _, _ = served
    lines = [
        'Click <b>OK</b> to save %1 changes. See <a href="x.html">the help</a> at https://example.org.',
        "<br/><i></i>",
        "Open {0} <b>unbalanced",
        "",
    ]
    outputs = loaded.signatures["markup"](inputs=tf.constant(lines))
    masked = [markup.mask(line) for line in lines]
    aligned = loaded.signatures["align"](inputs=tf.constant([item.text for item in masked]))
    for row in range(len(lines)):
        restored = markup.restore(
            masked[row],
            aligned["translations"].numpy()[row].decode("utf-8"),
            aligned["alignments"].numpy()[row].decode("utf-8"),
        )
        assert outputs["translations"].numpy()[row].decode("utf-8") == restored.text
        assert outputs["notes"].numpy()[row].decode("utf-8") == "\n".join(restored.report)
    np.testing.assert_allclose(outputs["scores"].numpy(), aligned["scores"].numpy(), atol=1e-5)
    np.testing.assert_allclose(outputs["confidence"].numpy(), aligned["confidence"].numpy(), atol=1e-5)
    assert outputs["translations"].numpy()[1].decode("utf-8") == lines[1]  # only tags: they come back
    assert "%1" in outputs["translations"].numpy()[0].decode("utf-8")


@pytest.mark.slow  # the first calls of four signatures; the graph's confidence in the fast tier: test_graph_confidence.py
def test_every_text_signature_gives_a_confidence(served):
    loaded, serving, _ = served
    sentences = SENTENCES[:3] + [""]
    best = serving(inputs=tf.constant(sentences))["confidence"].numpy()
    assert ((best > 0) & (best <= 1)).all() and best[3] == 1.0
    n_best = loaded.signatures["n_best"](inputs=tf.constant(sentences))["confidence"].numpy()
    assert n_best.shape == (4, EXPORT_SETTINGS["beam_size"])
    np.testing.assert_allclose(n_best[:, 0], best, atol=1e-5)
    empty = tf.constant([""] * 4)
    plain = serve(serving, sentences)
    for outputs in (
        loaded.signatures["prefix"](inputs=tf.constant(sentences), prefixes=empty),
        loaded.signatures["constrain"](inputs=tf.constant(sentences), constraints=empty),
    ):
        np.testing.assert_allclose(outputs["confidence"].numpy(), best, atol=1e-5)
        # No prefix, no phrase: serving_default's translations.
        assert [text.decode("utf-8") for text in outputs["translations"].numpy()] == plain[0]
        np.testing.assert_allclose(outputs["scores"].numpy(), plain[1], atol=1e-5)
    scored = loaded.signatures["score"](inputs=tf.constant(sentences), targets=tf.constant(["Datei", "", "OK", "x"]))
    np.testing.assert_allclose(
        scored["confidence"].numpy(), np.exp(scored["log_probs"].numpy() / scored["lengths"].numpy()), rtol=1e-5
    )


@pytest.mark.slow  # the first calls of three searches and three signatures
def test_the_searches_scores_are_the_confidences_log_probabilities(served, tiny_model_and_tokenizer):
    """n_best, prefix and constrain take their confidence from their searches' scores (without a
    shortlist): each returned hypothesis's score times its length penalty is the log-probability
    that forcing it through the model (`token_scorer`) gives, and the signature's confidence is
    exp(mean log p) of that pass."""
    loaded, _, _ = served
    _, tokenizer = tiny_model_and_tokenizer
    sentences = SENTENCES[:4]
    source_ids = tf.constant(padded([row + [EOS_ID] for row in tokenizer.tokenize(sentences).to_list()], PAD_ID))
    prefixes, phrases = ["Die", "Öffnen Sie", "Klicken", "Wählen"], ["Datei", "OK", "Zellen", "Text"]
    width = EXPORT_SETTINGS["max_input_length"] + EXPORT_SETTINGS["max_extra_length"]
    prefix_ids = padded(tokenizer.tokenize(prefixes).to_list(), PAD_ID, width)
    constraint_ids = np.full([len(sentences), MAX_PHRASES, MAX_PHRASE_PIECES], PAD_ID, "int32")
    for row, phrase in enumerate(tokenizer.tokenize(phrases).to_list()):
        constraint_ids[row, 0, : len(phrase)] = phrase
    searches = {
        "n_best": loaded.n_best_search(source_ids),
        "prefix": loaded.prefix_search(source_ids, tf.constant(prefix_ids)),
        "constrain": loaded.constrained_search(source_ids, tf.constant(constraint_ids)),
    }
    inputs = tf.constant(sentences)
    signatures = {
        "n_best": loaded.signatures["n_best"](inputs=inputs),
        "prefix": loaded.signatures["prefix"](inputs=inputs, prefixes=tf.constant(prefixes)),
        "constrain": loaded.signatures["constrain"](inputs=inputs, constraints=tf.constant(phrases)),
    }
    for name, (ids, scores, encoder_output, padding_mask) in searches.items():
        hypotheses = ids.shape[1]
        flat = tf.reshape(ids, [-1, ids.shape[2]])
        log_probs, lengths, _ = loaded.token_scorer(
            tf.repeat(encoder_output, hypotheses, axis=0), tf.repeat(padding_mask, hypotheses, axis=0), flat
        )
        forced = tf.reduce_sum(log_probs, axis=1).numpy()
        lengths = lengths.numpy()
        totals = scores.numpy().reshape(-1) * length_penalty(lengths.astype("float32"), EXPORT_SETTINGS["alpha"])
        assert (scores.numpy() > UNMET_SCORE / 2).all(), name  # every phrase placed
        np.testing.assert_allclose(totals, forced, atol=1e-4, err_msg=name)
        confidence = signatures[name]["confidence"].numpy().reshape(-1)
        np.testing.assert_allclose(confidence, np.exp(forced / lengths), atol=1e-5, err_msg=name)


@pytest.mark.full  # the test split of the real corpus
def test_align_gives_the_python_translators_alignments_on_the_test_split(served, python_compared):
    """On `compared_sentences` (every length bucket, sentences over max_input_length among them,
    which both split): the align signature's translations and scores are serving_default's and, with
    its alignments, the Python translator's (`alignments=True`, the default attention)."""
    loaded, serving, _ = served
    compared = python_compared["sentences"]
    texts, scores, alignments = (python_compared[name] for name in ("translations", "scores", "alignments"))
    assert python_compared["truncated"] == 0
    aligned = loaded.signatures["align"](inputs=tf.constant(compared))
    translations, served_scores = serve(serving, compared)
    assert [text.decode("utf-8") for text in aligned["translations"].numpy()] == translations == texts
    np.testing.assert_allclose(aligned["scores"].numpy(), served_scores, atol=1e-6)
    np.testing.assert_allclose(aligned["scores"].numpy(), scores, atol=1e-4)
    assert [text.decode("utf-8") for text in aligned["alignments"].numpy()] == alignments
    print(f"{sum(len(a.split()) for a in alignments)} links in {len(alignments)} alignments")


@pytest.mark.slow  # the constrain signature's first call
def test_the_constrain_signature_refuses_an_empty_phrase_naming_its_sentence(served):
    """Its own check, in the graph (SavedModelTranslator refuses it before: tests/inference)."""
    from export.serving_module import CONSTRAINT_REFUSALS

    loaded, _, _ = served
    with pytest.raises(tf.errors.InvalidArgumentError) as refused:
        loaded.signatures["constrain"](
            inputs=tf.constant(["Print", "Close"]), constraints=tf.constant(["", "Datei\t\tÖffnen"])
        )
    assert f"{CONSTRAINT_REFUSALS['empty']}] [sentences (from 0):] [1]" in refused.value.message


@pytest.mark.slow  # traces a search
def test_align_gives_the_python_translators_alignments_of_many_words(tiny_model_and_tokenizer, tiny_run):
    """The translations of a model whose logits a bias steers to many words (EOS barred, a bonus to
    the pieces that start a word), aligned in the graph of `ServingModule.align` (not saved) and by
    the Python translator; `serve`'s confidence, from the search's scores, equals `align`'s, from
    a forced pass. (The shared export's own, and the ported parts on hand-built pieces:
    tests/export/test_fresh_process.py, tests/export/test_graph_alignment.py.)"""
    import keras

    from export import graph_alignment
    from export.serving_module import ServingModule
    from inference.translator import Translator
    from tests.helpers import EosBiasModel

    class WordyModel(EosBiasModel):
        num_decoder_layers = property(lambda self: self.model.num_decoder_layers)
        num_heads = property(lambda self: self.model.num_heads)

    model, tokenizer = tiny_model_and_tokenizer
    wordy = WordyModel(model, -1e9)
    starts_word = graph_alignment.vocabulary_flags(tokenizer).starts_word
    bias = 10.0 * starts_word + np.random.default_rng(0).uniform(0.0, 3.0, model.vocabulary_size)
    bias[EOS_ID] = -1e9
    wordy.bias = keras.ops.convert_to_tensor(bias.astype("float32"))
    search = SearchConfig(beam_size=2, max_input_length=16, max_extra_length=4)
    module = ServingModule(wordy, tokenizer, f"{tiny_run[0]}/spm.model", search, length_buckets=())

    def count(pieces):
        return [len(row) + 1 for row in tokenizer.tokenize(pieces).to_list()]

    # One sentence within max_input_length: the Python translator's input, split or not.
    sentences = [sentence for sentence in SENTENCES + [""] if count([sentence])[0] <= 16]
    outputs = module.align(tf.constant(sentences))
    texts, _, alignments = Translator(wordy, tokenizer, search, batch_size=4).translate(sentences, alignments=True)
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()] == texts
    assert [a.decode("utf-8") for a in outputs["alignments"].numpy()] == alignments
    links = [len(alignment.split()) for alignment in alignments]
    print(f"links per sentence: {links}")
    assert sum(links) >= 2 * len(sentences)
    # Documents, a sentence over max_input_length among them: alignments offset to the whole input.
    documents = [" ".join(SENTENCES[:3]), "Help. " + "Click " * 20, SENTENCES[3]]
    expected = composed_documents(module.align, documents, count, 16)
    outputs = module.align(tf.constant(documents))
    assert [t.decode("utf-8") for t in outputs["translations"].numpy()] == [row["translations"] for row in expected]
    # serving_default's confidence comes from the search's scores, align's from a forced pass.
    served = module.serve(tf.constant(documents))
    np.testing.assert_allclose(served["confidence"].numpy(), outputs["confidence"].numpy(), rtol=1e-5)
    assert served["confidence"].numpy().max() < 0.99
    assert [a.decode("utf-8") for a in outputs["alignments"].numpy()] == [row["alignments"] for row in expected]
    np.testing.assert_allclose(outputs["scores"].numpy(), [row["scores"] for row in expected], atol=1e-4)
    # The third sentence's links start after the first two sentences' words.
    sources = [int(link.split("-")[0]) for link in expected[0]["alignments"].split()]
    assert max(sources) >= len(" ".join(SENTENCES[:2]).split())


@pytest.fixture(scope="module")
def steered(tiny_model_and_tokenizer, tiny_run):
    """`(model, plain, steered)`: the tiny model with a variable EOS bias (assigned per test: a
    variable, so that each search is traced once for every bias), the Python translator of it with
    the plain search (the graph's plain search gives its translations: the shared export's tests),
    and a `ServingModule` of it with min_length_ratio=0.5 and no_repeat_ngram_size=1 built in."""
    from export.serving_module import ServingModule
    from inference.translator import Translator
    from tests.helpers import EosBiasModel

    model, tokenizer = tiny_model_and_tokenizer
    biased = EosBiasModel(model, 0.0)
    biased.bias = tf.Variable(biased.bias)
    plain = Translator(biased, tokenizer, STEERED_SEARCH, batch_size=2)
    search = STEERED_SEARCH.override(min_length_ratio=0.5, no_repeat_ngram_size=1)
    return biased, plain, ServingModule(biased, tokenizer, f"{tiny_run[0]}/spm.model", search, length_buckets=())


STEERED_SEARCH = SearchConfig(beam_size=2, max_input_length=16, max_extra_length=4)
STEERED_SENTENCES = ["Select the cells that you want to format.", "Open the file."]


def steer(steered_by, model, eos_bias):
    """The translations of STEERED_SENTENCES with `eos_bias` on the EOS logit, by a `ServingModule`
    or a `Translator`."""
    bias = np.zeros(model.model.vocabulary_size, "float32")
    bias[EOS_ID] = eos_bias
    model.bias.assign(bias)
    if hasattr(steered_by, "translate"):
        return steered_by.translate(STEERED_SENTENCES)[0]
    return [t.decode() for t in steered_by.serve(tf.constant(STEERED_SENTENCES))["translations"].numpy()]


@pytest.mark.slow  # One more module traced (`steered`).
def test_min_length_ratio_is_built_into_the_graph(steered, tiny_model_and_tokenizer, tiny_run):
    """EOS forced first: empty translations unless the minimum bars it (the repetition guard also
    built into the steered module cannot lengthen a translation)."""
    from export.serving_module import ServingModule

    model, plain, barred = steered
    assert steer(plain, model, 1e9) == ["", ""]
    assert all(steer(barred, model, 1e9))
    _, tokenizer = tiny_model_and_tokenizer
    with pytest.raises(ValueError, match="min_length_ratio must be >= 0"):
        ServingModule(
            model,
            tokenizer,
            f"{tiny_run[0]}/spm.model",
            STEERED_SEARCH.override(min_length_ratio=-0.5),
            length_buckets=(),
        )


@pytest.mark.slow  # One more module traced (`steered`).
def test_no_repeat_ngram_size_is_built_into_the_graph(steered, tiny_model_and_tokenizer):
    """With EOS barred the tiny model repeats itself; the graph's guard (1: no piece twice) changes
    its translations, to the Python translator's under the same search. (The minimum length also
    built into the steered module changes nothing where EOS is barred.)"""
    from inference.translator import Translator

    model, plain, guarded = steered
    translations = steer(guarded, model, -1e9)
    assert translations != steer(plain, model, -1e9)
    _, tokenizer = tiny_model_and_tokenizer
    search = guarded.search_config
    assert translations == Translator(model, tokenizer, search, batch_size=2).translate(STEERED_SENTENCES)[0]


def test_a_students_export_aligns_from_its_decoders_layers(tiny_model_and_tokenizer, tiny_run):
    """The attention a student's export reads for alignments (export_config.json records it): its
    one decoder layer by default, a layer beyond the decoder's depth refused (nothing traced here)."""
    from export.serving_module import ServingModule
    from inference.protocol import AlignmentConfig, AlignmentError
    from models.transformer import Transformer
    from tests.helpers import TINY_MODEL

    _, tokenizer = tiny_model_and_tokenizer
    student = Transformer(tokenizer.vocabulary_size, **dict(TINY_MODEL, num_layers=3), num_decoder_layers=1)
    student.build()
    vocabulary = f"{tiny_run[0]}/spm.model"
    assert ServingModule(student, tokenizer, vocabulary, length_buckets=()).alignment_attention() == (0, None)
    module = ServingModule(student, tokenizer, vocabulary, length_buckets=(), alignment=AlignmentConfig(layer=-2))
    with pytest.raises(AlignmentError, match="alignment layer -2 is out of range: the decoder has 1 layers"):
        module.alignment_attention()


@pytest.mark.slow  # One more module traced.
def test_the_shortlist_is_built_into_the_graph_and_searches_as_the_python_translator(
    tiny_model_and_tokenizer, tiny_run
):
    """The lexical table as variables of the graph: the served translations are the Python
    translator's with the same table and search, within the table's columns."""
    from export.serving_module import ServingModule
    from inference.translator import Translator
    from models.vocabulary_shortlist import SPECIAL_IDS, LexicalTable

    model, tokenizer = tiny_model_and_tokenizer
    size = tokenizer.vocabulary_size
    candidates = np.random.default_rng(0).integers(len(SPECIAL_IDS), size, (size, 3)).astype("int32")
    candidates[list(SPECIAL_IDS)] = PAD_ID  # Padding and EOS bring no candidates, as in a built table.
    table = LexicalTable(candidates, np.arange(len(SPECIAL_IDS), 40, dtype="int32"))
    search = SearchConfig(beam_size=2, max_input_length=16, max_extra_length=4, min_length_ratio=1.0, shortlist=2)
    sentences = ["Select the cells that you want to format.", "Open the file."]
    module = ServingModule(model, tokenizer, f"{tiny_run[0]}/spm.model", search, length_buckets=(), lexical_table=table)
    served = [t.decode() for t in module.serve(tf.constant(sentences))["translations"].numpy()]
    translator = Translator(model, tokenizer, search, batch_size=2, shortlist=table)
    searched = {}
    assert served == translator.translate_sentences(sentences, searched=searched)[0]
    rows = translator.encode(sentences)
    allowed = {*SPECIAL_IDS, *table.frequent.tolist(), *candidates[[p for row in rows for p in row], :2].ravel()}
    assert {int(piece) for _, ids in searched.values() for piece in ids} <= allowed
    with pytest.raises(ValueError, match="shortlist=2 needs the run's lexical table"):
        ServingModule(model, tokenizer, f"{tiny_run[0]}/spm.model", search, length_buckets=())
