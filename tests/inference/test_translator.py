"""`inference.translator.Translator`: order restored around length sorting, batch independence,
empty, token-less and over-long lines. (Under JAX, weights read at call time, not baked in at trace
time: tests/export/test_cross_backend.py, in its process under JAX.)"""

import contextlib
import logging

import keras
import numpy as np
import pytest

from common.errors import UserError
from common.special_ids import EOS_ID
from inference.translator import ConstraintError, PrefixError, Sampling, Translator
from models.search_config import SearchConfig
from models.translation import score_ids, translate_ids

SENTENCES = [
    "Print",
    "The document could not be saved because the disk is full.",
    "Open the file.",
    "Select the cells that you want to format, and then choose a style from the list.",
    "Close",
]


@pytest.mark.slow  # A search per sentence and one of the batch, each to its length limit.
def test_sentence_alone_equals_it_in_a_batch_of_other_lengths(tiny_model, eos_bias_model):
    model, tokenizer, _, _ = tiny_model
    # EOS forbidden: every translation runs to its own length limit, so a sentence whose limit
    # came from its batch (the padded length) would show it.
    for candidate in (model, eos_bias_model(model, -1e9)):
        translator = Translator(
            candidate, tokenizer, search=SearchConfig(beam_size=4, max_extra_length=4), batch_size=8
        )
        together, together_scores = translator.translate(SENTENCES)
        for index, sentence in enumerate(SENTENCES):
            alone, alone_scores = translator.translate([sentence])
            assert alone == [together[index]], sentence
            assert abs(alone_scores[0] - together_scores[index]) < 1e-4


def test_empty_lines_translate_to_empty_lines_and_long_lines_are_cut_and_reported(tiny_model):
    model, tokenizer, _, _ = tiny_model
    long_line = " ".join(["the file"] * 200)
    sentences = ["", "Open the file.", "   ", long_line, "Print"]
    translator = Translator(
        model, tokenizer, search=SearchConfig(beam_size=2, max_extra_length=3, max_input_length=16), batch_size=2
    )
    translations, scores = translator.translate(sentences, split_sentences=False)
    assert len(translations) == len(sentences)
    assert translations[0] == "" and translations[2] == ""
    assert scores[0] == 0.0 and scores[2] == 0.0
    assert translator.truncated_indices == [3]
    assert translator.truncated == 1
    # The long line was decoded from its first 16 tokens, at most 16 + 3 output pieces.
    assert len(tokenizer.tokenize([translations[3]]).to_list()[0]) <= 16 + 3
    assert translator.translate([]) == ([], [])
    # Split into sentences (the default), the long line is cut by length, not truncated, and a
    # line of whitespace keeps it (tests/inference/test_documents.py).
    translations, scores = translator.translate(sentences)
    assert translator.truncated_indices == [] and translations[2] == "   " and scores[2] == 0.0


def test_lines_without_tokens_translate_to_empty_lines(tiny_model, eos_bias_model):
    model, tokenizer, _, _ = tiny_model
    # U+200B ZERO WIDTH SPACE and U+00A0 NO-BREAK SPACE: not blank to str.strip (U+200B) or not
    # empty, but SentencePiece's normalization leaves no tokens; the export translates them to "".
    sentences = ["\u200b", "Open the file.", "\u00a0\u200b ", ""]
    lengths = [len(row) for row in tokenizer.tokenize(sentences).to_list()]
    assert lengths[0] == lengths[2] == lengths[3] == 0 < lengths[1]
    # EOS forbidden: any searched line gives output, so "" shows that no search ran.
    translator = Translator(
        eos_bias_model(model, -1e9), tokenizer, search=SearchConfig(beam_size=2, max_extra_length=3), batch_size=2
    )
    translations, scores = translator.translate(sentences, split_sentences=False)
    assert translations[0] == translations[2] == translations[3] == "" and translations[1] != ""
    assert scores[0] == scores[2] == scores[3] == 0.0
    assert translator.empty_indices == [0, 2, 3]


def test_n_best_lists_are_the_searchs_own(tiny_model):
    import keras
    import numpy as np

    from models.translation import translate_ids

    model, tokenizer, _, _ = tiny_model
    translator = Translator(model, tokenizer, search=SearchConfig(beam_size=4, max_extra_length=6), batch_size=8)
    texts, scores = translator.translate(SENTENCES, n_best=4)
    best, best_scores = translator.translate(SENTENCES)
    source = translator._pad(translator.encode(SENTENCES))
    ids, search_scores = translate_ids(
        model, keras.ops.convert_to_tensor(source), search=SearchConfig(beam_size=4, max_extra_length=6), num_return=4
    )
    ids, search_scores = keras.ops.convert_to_numpy(ids), keras.ops.convert_to_numpy(search_scores)
    for index in range(len(SENTENCES)):
        assert len(texts[index]) == len(scores[index]) == 4
        assert scores[index] == sorted(scores[index], reverse=True)
        assert texts[index][0] == best[index] and abs(scores[index][0] - best_scores[index]) < 1e-4
        expected = [tokenizer.detokenize(row[None]).numpy()[0].decode() for row in ids[index]]
        assert texts[index] == expected
        np.testing.assert_allclose(scores[index], search_scores[index], atol=1e-4)
    with pytest.raises(ValueError, match="n_best must be in"):
        translator.translate(SENTENCES, n_best=5)
    two, _ = translator.translate(SENTENCES, n_best=2, search=translator.search.override(beam_size=2))
    assert all(len(row) == 2 for row in two)


def test_score_is_the_models_cross_entropy_on_the_pair(tiny_model):
    import keras
    import numpy as np

    from common.special_ids import BOS_ID, EOS_ID

    model, tokenizer, _, _ = tiny_model
    sources = ["Open the file.", "Print", "", "Select the cells that you want to format."]
    targets = ["Öffnen Sie die Datei.", "Drucken", "Leer", ""]
    translator = Translator(model, tokenizer, batch_size=3)
    with _tensorflow_warnings() as warnings:
        results = translator.score(sources, targets)
    # Such as autograph's "could not transform" of a function it cannot parse. A retracing note
    # counts the calls of every function this process traced before, so it says nothing here.
    assert not [message for message in warnings if "triggered tf.function retracing" not in message]
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")
    for source, target, result in zip(sources, targets, results):
        source_ids = np.zeros((1, 16), "int32")  # PAD after the tokens, as the translator pads
        row = tokenizer.tokenize([source]).to_list()[0] + [EOS_ID]
        source_ids[0, : len(row)] = row
        target_ids = tokenizer.tokenize([target]).to_list()[0] + [EOS_ID]
        decoder_input = np.array([[BOS_ID] + target_ids[:-1]], "int32")
        logits = model((source_ids, decoder_input), training=False)
        expected = -float(loss(np.array([target_ids]), logits))
        assert result.tokens == len(target_ids)
        assert abs(result.log_prob - expected) < 1e-3 * max(1.0, abs(expected)), (source, target)
        assert abs(result.perplexity - np.exp(-expected / len(target_ids))) < 1e-3 * result.perplexity
    with pytest.raises(ValueError, match="one target per source"):
        translator.score(sources, targets[:2])


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@contextlib.contextmanager
def _tensorflow_warnings():
    """The messages TensorFlow's Python logger gets at WARNING and above within the block (the tools
    hide them: `common.quiet_logs`; here they are what a cause left in the code would say)."""
    logger, records = logging.getLogger("tensorflow"), _Records()
    level = logger.level
    logger.setLevel(logging.WARNING)
    logger.addHandler(records)
    try:
        yield records.messages
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)


def test_forced_decoding_of_the_search_output_gives_the_search_score(tiny_model):
    """With alpha 0 a search's score is its output's log-probability: `score_ids` of the returned
    ids (which end with EOS) must give it back."""
    import keras
    import numpy as np

    from models.translation import score_ids, translate_ids

    model, tokenizer, _, _ = tiny_model
    translator = Translator(model, tokenizer)
    source = keras.ops.convert_to_tensor(translator._pad(translator.encode(SENTENCES)))
    ids, scores = translate_ids(
        model, source, search=SearchConfig(beam_size=4, alpha=0.0, max_extra_length=40), num_return=4
    )
    for rank in range(4):
        log_probs, lengths = score_ids(model, source, ids[:, rank])
        np.testing.assert_allclose(
            keras.ops.convert_to_numpy(log_probs)[: len(SENTENCES)],
            keras.ops.convert_to_numpy(scores)[: len(SENTENCES), rank],
            atol=1e-3,
        )


@pytest.mark.slow  # several sampled searches (the sampler itself: tests/models/test_sampling.py)
def test_sampling_is_reproducible_and_follows_the_sentence(tiny_model):
    from inference.translator import Sampling

    model, tokenizer, _, _ = tiny_model
    # One batch: each sampler is traced for one shape.
    translator = Translator(model, tokenizer, search=SearchConfig(max_extra_length=8), batch_size=len(SENTENCES))
    first, _ = translator.translate(SENTENCES, search=translator.search.override(sampling=Sampling(seed=1)))
    again, _ = translator.translate(SENTENCES, search=translator.search.override(sampling=Sampling(seed=1)))
    other, _ = translator.translate(SENTENCES, search=translator.search.override(sampling=Sampling(seed=2)))
    assert first == again
    assert first != other
    reversed_texts, _ = translator.translate(
        SENTENCES[::-1], search=translator.search.override(sampling=Sampling(seed=1)), keys=range(len(SENTENCES))[::-1]
    )
    assert reversed_texts[::-1] == first
    greedy, _ = translator.translate(SENTENCES, search=translator.search.override(beam_size=1))
    # Top-k 2, then a nucleus this small: the most likely token alone.
    assert (
        translator.translate(
            SENTENCES, search=translator.search.override(sampling=Sampling(top_k=2, top_p=1e-6, seed=5))
        )[0]
        == greedy
    )
    with pytest.raises(ValueError, match="n_best must be 1"):
        translator.translate(SENTENCES, n_best=2, search=translator.search.override(sampling=Sampling()))


def test_min_length_ratio_bars_an_early_end(tiny_model, eos_bias_model):
    model, tokenizer, _, _ = tiny_model
    # EOS forced first: without a minimum every translation is empty.
    translator = Translator(
        eos_bias_model(model, 1e9), tokenizer, search=SearchConfig(beam_size=2, max_extra_length=4), batch_size=8
    )
    assert translator.translate(SENTENCES)[0] == [""] * len(SENTENCES)
    texts, _ = translator.translate(SENTENCES, search=translator.search.override(min_length_ratio=0.5))
    for sentence, text in zip(SENTENCES, texts):
        source_tokens = len(tokenizer.tokenize([sentence]).to_list()[0]) + 1  # EOS included
        if source_tokens // 2 > 1:  # At least one token before the EOS.
            assert text, sentence
    assert (
        Translator(eos_bias_model(model, 1e9), tokenizer, search=SearchConfig(min_length_ratio=0.5)).translate(
            SENTENCES
        )[0]
        == texts
    )
    with pytest.raises(ValueError, match="min_length_ratio must be >= 0"):
        translator.translate(SENTENCES, search=translator.search.override(min_length_ratio=-1.0))


def test_prefixes_start_the_translations_and_no_prefix_changes_nothing(tiny_model):
    model, tokenizer, _, _ = tiny_model
    sentences = SENTENCES + [""]
    translator = Translator(model, tokenizer, search=SearchConfig(beam_size=4, max_extra_length=6), batch_size=8)
    plain, plain_scores = translator.translate(sentences, n_best=4)
    assert translator.empty_indices == [5]
    for no_prefixes in ([""] * len(sentences), [None] * len(sentences)):
        assert translator.translate(sentences, n_best=4, prefixes=no_prefixes) == (plain, plain_scores)
    # An empty source with a prefix is searched too.
    prefixes = ["Drucken", "", "Öffnen Sie", "", "", "Leer"]
    texts, scores = translator.translate(sentences, n_best=4, prefixes=prefixes)
    assert translator.empty_indices == []
    for index, prefix in enumerate(prefixes):
        if prefix:
            assert all(text.startswith(prefix) for text in texts[index]), texts[index]
            assert scores[index] == sorted(scores[index], reverse=True)
        else:  # Searched in a batch with prefixes: bit for bit the search without them.
            assert texts[index] == plain[index] and scores[index] == plain_scores[index]


def test_a_forced_prefix_scores_as_the_scoring_path_gives_it(tiny_model):
    """The search's score of the forced tokens (alpha 0) is the model's log-probability of them,
    as `score` (translate.py --score) computes it: a prefix of the target's pieces and EOS, forced,
    is the whole hypothesis. A prefix of the pieces alone is continued, and the score of each of the
    n best is `score_ids` of the whole output, forced part included."""
    model, tokenizer, _, _ = tiny_model
    sources, targets = ["Open the file.", "Print"], ["Öffnen Sie die Datei.", "Drucken"]
    translator = Translator(model, tokenizer, batch_size=2)
    source = keras.ops.convert_to_tensor(translator._pad(translator.encode(sources)))
    pieces = tokenizer.tokenize(targets).to_list()
    whole = translator._pad_prefixes([row + [EOS_ID] for row in pieces])
    _, scores = translate_ids(
        model, source, search=SearchConfig(beam_size=4, alpha=0.0, max_extra_length=8), prefix_ids=whole
    )
    expected = [result.log_prob for result in translator.score(sources, targets)]
    np.testing.assert_allclose(keras.ops.convert_to_numpy(scores)[:, 0], expected, atol=1e-4)

    prefix = translator._pad_prefixes([row[:2] for row in pieces])
    ids, scores = translate_ids(
        model, source, search=SearchConfig(beam_size=4, alpha=0.0, max_extra_length=8), num_return=4, prefix_ids=prefix
    )
    ids, scores = keras.ops.convert_to_numpy(ids), keras.ops.convert_to_numpy(scores)
    for rank in range(4):
        np.testing.assert_array_equal(ids[:, rank, :2], [row[:2] for row in pieces])
        log_probs, _ = score_ids(model, source, ids[:, rank])
        np.testing.assert_allclose(keras.ops.convert_to_numpy(log_probs), scores[:, rank], atol=1e-4)


def test_a_prefix_longer_than_the_maximum_output_is_refused_before_any_search(tiny_model):
    model, tokenizer, _, _ = tiny_model
    translator = Translator(model, tokenizer, search=SearchConfig(max_extra_length=2), batch_size=2)
    source_tokens = len(tokenizer.tokenize(["Print"]).to_list()[0]) + 1
    too_long = " ".join(["Drucken"] * (source_tokens + 3))
    with pytest.raises(PrefixError, match=r"prefixes\[1\]: the target prefix has \d+ SentencePiece pieces") as caught:
        translator.translate(["Open the file.", "Print"], prefixes=["", too_long])
    assert isinstance(caught.value, UserError) and caught.value.index == 1
    assert f"maximum output length of {source_tokens + 2} tokens" in str(caught.value)
    with pytest.raises(ValueError, match="one string"):
        translator.translate(["Print"], prefixes=["", ""])


def test_constraints_appear_in_every_translation_and_leave_the_other_sentences_alone(tiny_model):
    """Every one of the n best holds its sentence's phrases; a sentence without constraints is
    translated as in a call without any (it is searched apart from the constrained ones); an empty
    source with a phrase is searched; no constraints at all is the plain search, bit for bit."""
    model, tokenizer, _, _ = tiny_model
    sentences = SENTENCES + [""]
    translator = Translator(model, tokenizer, search=SearchConfig(beam_size=4, max_extra_length=8), batch_size=4)
    plain, plain_scores = translator.translate(sentences, n_best=2)
    for none in ([None] * len(sentences), [[]] * len(sentences)):
        assert translator.translate(sentences, n_best=2, constraints=none) == (plain, plain_scores)
    constraints = [["Drucken"], None, ["Datei", "Öffnen"], [], ["Liste"], ["Leer"]]
    texts, scores = translator.translate(sentences, n_best=2, constraints=constraints)
    assert translator.unmet_indices == [] and translator.empty_indices == []
    for index, phrases in enumerate(constraints):
        if phrases:
            assert all(phrase in text for text in texts[index] for phrase in phrases), texts[index]
            assert scores[index] == sorted(scores[index], reverse=True)
        else:
            assert texts[index] == plain[index] and scores[index] == plain_scores[index]


def test_constraints_that_cannot_all_be_met_give_the_unconstrained_translation(tiny_model):
    """Two phrases that each fit the maximum output length but not together: the sentence is
    translated without them and its position is recorded."""
    model, tokenizer, _, _ = tiny_model
    translator = Translator(model, tokenizer, search=SearchConfig(beam_size=2, max_extra_length=2), batch_size=2)
    limit = len(tokenizer.tokenize(["Print"]).to_list()[0]) + 1 + 2
    pieces = [len(row) for row in tokenizer.tokenize(["Datei", "Drucken"]).to_list()]
    phrases = [" ".join([word] * (limit // count)) for word, count in zip(("Datei", "Drucken"), pieces)]
    lengths = [len(row) for row in tokenizer.tokenize(phrases).to_list()]
    assert max(lengths) <= limit < sum(lengths)
    plain, plain_scores = translator.translate(["Print", "Open the file."])
    texts, scores = translator.translate(["Print", "Open the file."], constraints=[phrases, ["Datei"]])
    assert translator.unmet_indices == [0]
    assert texts[0] == plain[0] and scores[0] == plain_scores[0]
    assert "Datei" in texts[1]


def test_bad_constraints_are_refused_before_any_search(tiny_model):
    model, tokenizer, _, _ = tiny_model
    translator = Translator(model, tokenizer, search=SearchConfig(max_extra_length=2), batch_size=2)
    source_tokens = len(tokenizer.tokenize(["Print"]).to_list()[0]) + 1
    too_long = " ".join(["Drucken"] * (source_tokens + 3))
    with pytest.raises(ConstraintError, match=r"constraints\[1\]: phrase 2 has \d+ SentencePiece pieces") as caught:
        translator.translate(["Open the file.", "Print"], constraints=[None, ["Datei", too_long]])
    assert isinstance(caught.value, UserError) and caught.value.index == 1
    assert f"maximum output length of {source_tokens + 2} tokens" in str(caught.value)
    for empty in ("", "  ", "\u200b"):
        with pytest.raises(ConstraintError, match=r"constraints\[0\]: phrase 1 .* is empty"):
            translator.translate(["Print"], constraints=[[empty]])
    with pytest.raises(ValueError, match="one list of phrases"):
        translator.translate(["Print"], constraints=[None, None])
    with pytest.raises(ValueError, match="not strings"):
        translator.translate(["Print"], constraints=["Drucken"])
    with pytest.raises(ValueError, match="constraints need the beam search"):
        translator.translate(
            ["Print"], constraints=[["Drucken"]], search=translator.search.override(sampling=Sampling(top_k=5))
        )


def test_length_batches_pad_rows_by_length_to_one_shape_per_length():
    from inference.translator import LENGTH_MULTIPLE, length_batches

    rows = [[5] * 10, [6, 2], [7] * 3, [8] * 9]
    batches = list(length_batches(rows, 3, pad_id=0))
    assert [indices for indices, _ in batches] == [[1, 2, 3], [0]]
    first, second = (batch for _, batch in batches)
    assert first.shape == (3, 2 * LENGTH_MULTIPLE) and second.shape == (3, 2 * LENGTH_MULTIPLE)
    assert first[0].tolist() == [6, 2] + [0] * 14 and first[2].tolist() == [8] * 9 + [0] * 7
    assert second[1].tolist() == [EOS_ID] + [0] * 15  # A filler row: a lone EOS.
    assert [indices for indices, _ in length_batches(rows, 4, 0, order=[3, 0])] == [[3, 0]]
