"""`models.translation.translate_ids` with the shared tiny model trained on deb-en-de: the cached
search against no-cache references, and what stops a hypothesis (batch independence is tested
through `Translator` in test_translator.py).

(These live under tests/evaluation because they need the trained model of tests/conftest.py.)
"""

import keras
import numpy as np
import pytest
from keras import ops

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from models.beam_search import beam_search
from models.search_config import Sampling, SearchConfig
from models.translation import translate_ids

SENTENCES = [
    "Open the file.",
    "The document could not be saved because the disk is full.",
    "Select the cells that you want to format, and then choose a style from the list.",
    "Print",
]
# The three shorter ones, for a search run to its length limit: the longest sentence sets its steps.
SHORTER = [SENTENCES[0], SENTENCES[1], SENTENCES[3]]


def source_batch(tokenizer, sentences):
    """int32 `[batch, padded length]` (tokens + EOS, PAD after) and the lengths with EOS."""
    rows = [row + [EOS_ID] for row in tokenizer.tokenize(sentences).to_list()]
    length = 8 * -(-max(len(r) for r in rows) // 8)
    source = np.full((len(rows), length), PAD_ID, "int32")
    for index, row in enumerate(rows):
        source[index, : len(row)] = row
    return source, [len(r) for r in rows]


def hypothesis(ids):
    """The tokens of one returned hypothesis up to and including EOS (PAD after is dropped)."""
    ids = [int(i) for i in ids]
    return ids[: ids.index(EOS_ID) + 1] if EOS_ID in ids else [i for i in ids if i != PAD_ID]


def greedy_without_cache(model, source_row, max_length):
    """The argmax loop over full forward passes `model((source, prefix))`: no cache, no search."""
    source = ops.convert_to_tensor(np.asarray([source_row], "int32"))
    prefix = [BOS_ID]
    while len(prefix) - 1 < max_length:
        logits = model((source, ops.convert_to_tensor(np.asarray([prefix], "int32"))), training=False)
        token = int(np.argmax(ops.convert_to_numpy(logits)[0, -1]))
        prefix.append(token)
        if token == EOS_ID:
            break
    return prefix[1:]


@pytest.mark.parametrize(
    "eos_bias", [0.0, pytest.param(-1e9, marks=pytest.mark.slow)], ids=["real", "eos_forbidden"]
)  # EOS forbidden: each search runs to its length limit.
def test_beam_one_equals_greedy_without_cache(tiny_model, eos_bias_model, eos_bias):
    model, tokenizer, _, _ = tiny_model
    wrapped = eos_bias_model(model, eos_bias)
    # Run to their limits, the three shorter sentences: the reference's full passes grow with each.
    sentences = SENTENCES if eos_bias == 0.0 else SHORTER
    source, lengths = source_batch(tokenizer, sentences)
    extra = 6
    ids, _ = translate_ids(wrapped, ops.convert_to_tensor(source), SearchConfig(beam_size=1, max_extra_length=extra))
    ids = ops.convert_to_numpy(ids)
    for row, length in enumerate(lengths):
        expected = greedy_without_cache(wrapped, source[row, :length], length + extra)
        assert hypothesis(ids[row, 0]) == expected, sentences[row]


def beam_search_without_cache(model, source, beam_size, max_extra_length, num_return):
    """`beam_search` over a decoder that re-runs the whole prefix every step (no key/value cache):
    the search state is the prefix itself, reordered with the beams."""
    source = ops.convert_to_tensor(source)
    encoder_output, padding_mask = model.encode(source)
    encoder_output = ops.repeat(encoder_output, beam_size, axis=0)
    padding_mask = ops.repeat(padding_mask, beam_size, axis=0)
    batch, source_length = source.shape
    max_decode_length = source_length + max_extra_length

    def next_logits_fn(ids, step, prefix):
        prefix = ops.slice_update(prefix, (0, step), ops.cast(ids[:, None], "int32"))
        logits = model.decode(prefix, encoder_output, padding_mask)  # [batch * beam, L, vocab]
        return ops.take(logits, step, axis=1), prefix

    lengths = ops.sum(ops.cast(ops.not_equal(source, PAD_ID), "int32"), axis=1)
    return beam_search(
        next_logits_fn,
        ops.full((batch,), BOS_ID, "int32"),
        ops.full((batch * beam_size, max_decode_length), PAD_ID, "int32"),
        beam_size=beam_size,
        max_decode_length=max_decode_length,
        max_lengths=lengths + max_extra_length,
        alpha=0.6,
        num_return=num_return,
    )


def rescored(model, source_row, ids, alpha=0.6):
    """The length-penalised score of returned ids (PAD stripped, EOS included) from one full
    forward pass over them, in float64: log P(Y | X) / ((5 + |Y|) / 6) ** alpha."""
    tokens = [int(t) for t in ids if t != PAD_ID]
    prefix = ops.convert_to_tensor(np.asarray([[BOS_ID] + tokens[:-1]], "int32"))
    logits = ops.convert_to_numpy(model((ops.convert_to_tensor(source_row[None]), prefix), training=False))[0]
    logits = logits.astype(np.float64)
    top = logits.max(axis=-1, keepdims=True)
    log_probs = logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))
    return log_probs[np.arange(len(tokens)), tokens].sum() / ((5.0 + len(tokens)) / 6.0) ** alpha


@pytest.mark.parametrize(
    "eos_bias", [0.0, pytest.param(-1e9, marks=pytest.mark.slow)], ids=["real", "eos_forbidden"]
)  # EOS forbidden: each search runs to its length limit.
def test_cached_beam_search_equals_search_without_cache(tiny_model, eos_bias_model, eos_bias):
    model, tokenizer, _, _ = tiny_model
    wrapped = eos_bias_model(model, eos_bias)
    sentences = SENTENCES if eos_bias == 0.0 else SHORTER  # As above.
    source, _ = source_batch(tokenizer, sentences)
    cached = translate_ids(
        wrapped, ops.convert_to_tensor(source), SearchConfig(beam_size=4, max_extra_length=5), num_return=4
    )
    reference = beam_search_without_cache(wrapped, source, beam_size=4, max_extra_length=5, num_return=4)
    cached_ids, reference_ids = ops.convert_to_numpy(cached.ids), ops.convert_to_numpy(reference.ids)
    cached_scores, reference_scores = ops.convert_to_numpy(cached.scores), ops.convert_to_numpy(reference.scores)
    assert np.abs(cached_scores - reference_scores).max() < 1e-4
    assert abs(rescored(wrapped, source[0], reference_ids[0, 0]) - reference_scores[0, 0]) < 1e-4  # the scoring agrees
    # The same hypotheses, except where two of them tie (a model trained for a few steps repeats
    # tokens, and hypotheses differing in where one token stands score alike): there the two
    # searches' float rounding may rank either first. A hypothesis the cached search returns in
    # another's place must score what it says (and, by the check above, what the other scored).
    differing = [
        (row, rank)
        for row in range(len(sentences))
        for rank in range(4)
        if (cached_ids[row, rank] != reference_ids[row, rank]).any()
    ]
    assert len(differing) <= 2 * len(sentences), differing  # at most half of them
    for row, rank in differing:
        assert abs(rescored(wrapped, source[row], cached_ids[row, rank]) - cached_scores[row, rank]) < 1e-4


@pytest.mark.parametrize("beam_size", [1, 4])
def test_eos_stops_a_hypothesis(tiny_model, eos_bias_model, beam_size):
    model, tokenizer, _, _ = tiny_model
    source, _ = source_batch(tokenizer, SENTENCES)
    ids, scores = translate_ids(
        eos_bias_model(model, 1e9), ops.convert_to_tensor(source), SearchConfig(beam_size=beam_size)
    )
    ids = ops.convert_to_numpy(ids)
    assert (ids[:, 0, 0] == EOS_ID).all()
    assert (ids[:, 0, 1:] == PAD_ID).all()
    np.testing.assert_allclose(ops.convert_to_numpy(scores)[:, 0], 0.0, atol=1e-3)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_min_length_ratio_holds_eos_back(tiny_model, eos_bias_model, beam_size):
    # The model wants EOS first (+1e9 on its logit); with min_length_ratio 0.5 a sentence of n
    # source tokens (EOS included) gets at least floor(n / 2) output tokens, so every output ends
    # with EOS exactly there. Without the ratio, the outputs are a lone EOS (test above).
    model, tokenizer, _, _ = tiny_model
    source, lengths = source_batch(tokenizer, SHORTER)
    ids, _ = translate_ids(
        eos_bias_model(model, 1e9),
        ops.convert_to_tensor(source),
        SearchConfig(beam_size=beam_size, min_length_ratio=0.5),
    )
    ids = ops.convert_to_numpy(ids)
    for row, length in enumerate(lengths):
        tokens = hypothesis(ids[row, 0])
        assert len(tokens) == max(length // 2, 1) and tokens[-1] == EOS_ID, (SHORTER[row], tokens)


@pytest.mark.parametrize("beam_size", [1, 4])
def test_maximum_length_stops_a_hypothesis(tiny_model, eos_bias_model, beam_size):
    model, tokenizer, _, _ = tiny_model
    source, lengths = source_batch(tokenizer, SHORTER)
    extra = 3
    ids, _ = translate_ids(
        eos_bias_model(model, -1e9),
        ops.convert_to_tensor(source),
        SearchConfig(beam_size=beam_size, max_extra_length=extra),
    )
    ids = ops.convert_to_numpy(ids)
    for row, length in enumerate(lengths):
        produced = ids[row, 0]
        # Exactly the sentence's own limit (not the batch's longest), no EOS, PAD after.
        assert (produced[: length + extra] != PAD_ID).all()
        assert (produced[: length + extra] != EOS_ID).all()
        assert (produced[length + extra :] == PAD_ID).all()


def test_real_hypotheses_end_with_eos_or_at_the_limit(tiny_model):
    model, tokenizer, _, _ = tiny_model
    source, lengths = source_batch(tokenizer, SENTENCES)
    extra = 2
    ids, _ = translate_ids(
        model, ops.convert_to_tensor(source), SearchConfig(beam_size=4, max_extra_length=extra), num_return=4
    )
    ids = ops.convert_to_numpy(ids)
    for row, length in enumerate(lengths):
        for produced in ids[row]:
            tokens = hypothesis(produced)
            assert tokens[-1] == EOS_ID or len(tokens) == length + extra
            assert len(tokens) <= length + extra
            assert (produced[len(tokens) :] == PAD_ID).all()


def test_cross_attention_weights_are_distributions_over_real_source_tokens(tiny_model):
    from models.translation import cross_attention_weights

    model, tokenizer, _, _ = tiny_model
    source, lengths = source_batch(tokenizer, SENTENCES[:2])
    target = np.asarray([[BOS_ID, 10, 11], [BOS_ID, 12, 13]], "int32")
    weights = keras.ops.convert_to_numpy(
        cross_attention_weights(model, ops.convert_to_tensor(source), ops.convert_to_tensor(target))
    )
    assert weights.shape == (2, model.num_heads, 3, source.shape[1])
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-5)
    assert np.abs(weights[0, :, :, lengths[0] :]).max() < 1e-6


def _steered(tokenizer, steering, row, words):
    """`steering` (a dict of `translate_ids` arguments) with its "prefix" and "constraint" flags,
    when set, made `prefix_ids` and `constraint_ids`: the first two pieces of `words` forced first on
    sentence `row` of SENTENCES, or a phrase of the next sentence, none on the others."""
    steering = dict(steering)
    pieces = tokenizer.tokenize([words]).to_list()[0][:2]
    if steering.pop("prefix", False):
        steering["prefix_ids"] = np.full((len(SENTENCES), 3), PAD_ID, "int32")
        steering["prefix_ids"][row, :2] = pieces
    if steering.pop("constraint", False):
        steering["constraint_ids"] = np.full((len(SENTENCES), 1, 3), PAD_ID, "int32")
        steering["constraint_ids"][row + 1, 0, :2] = pieces
    return steering


def _traced_search(model, source, capacity_step, monkeypatch, search, **steering):
    """`translate_ids` traced by `tf.function` with `translation.CAPACITY_STEP` at `capacity_step`
    (10_000: every slot holds the whole length from the start): its outputs on `source`, and the
    rank-4 shapes its while loops carry (the self caches among them)."""
    import tensorflow as tf

    from models import translation

    monkeypatch.setattr(translation, "CAPACITY_STEP", capacity_step)
    function = tf.function(lambda s: translate_ids(model, s, search, **steering), jit_compile=False, autograph=False)
    concrete = function.get_concrete_function(tf.constant(source))
    graph = concrete.graph.as_graph_def()
    nodes = list(graph.node) + [node for f in graph.library.function for node in f.node_def]
    carried = {
        tuple(dim.size for dim in shape.dim)
        for node in nodes
        if node.op in ("While", "StatelessWhile")
        for shape in node.attr["output_shapes"].list.shape
        if len(shape.dim) == 4
    }
    return [ops.convert_to_numpy(x) for x in concrete(tf.constant(source))], carried


@pytest.mark.parametrize(
    "search, steering",
    [
        (SearchConfig(beam_size=4, min_length_ratio=0.5), dict(num_return=4, prefix=True)),
        # Sampling grows its slots as greedy search does: the drops test below runs it.
        pytest.param(SearchConfig(beam_size=1), {}, marks=pytest.mark.slow),
    ],
    ids=["beam4_nbest_prefix", "greedy"],
)
def test_a_traced_search_grows_its_self_caches_and_translates_as_with_whole_slots(
    tiny_model, eos_bias_model, monkeypatch, search, steering
):
    """In a TensorFlow graph a slot of the self caches starts at `CAPACITY_STEP` positions and
    grows by as many when full (here from 3, past the limit's remainder); the translations equal
    those of slots of the whole length (the scores to float rounding: the growing search also drops
    its done sentences, so its products run over fewer rows). The greedy search has EOS forbidden:
    it runs to the limit."""
    model, tokenizer, _, _ = tiny_model
    source, _ = source_batch(tokenizer, SENTENCES)
    steering = _steered(tokenizer, steering, 0, "Die Datei")
    limit = source.shape[1] + search.max_extra_length
    wrapped = eos_bias_model(model, -1e9) if search.beam_size == 1 else model
    grown, grown_loops = _traced_search(wrapped, source, 3, monkeypatch, search, **steering)
    whole, whole_loops = _traced_search(wrapped, source, 10_000, monkeypatch, search, **steering)
    np.testing.assert_array_equal(grown[0], whole[0])
    np.testing.assert_allclose(grown[1], whole[1], rtol=1e-6)
    heads = model.num_heads
    assert any(shape[1] == heads and shape[2] == -1 for shape in grown_loops), grown_loops
    assert any(shape[1] == heads and shape[2] == search.beam_size * limit for shape in whole_loops), whole_loops
    assert not any(shape[2] == -1 for shape in whole_loops), whole_loops


class _RowsDecoded:
    """`model` seen through `translate_ids`'s interface, counting the rows of its decoding steps."""

    def __init__(self, model):
        import tensorflow as tf

        self.model, self.rows = model, tf.Variable(0, dtype="int32")
        self.pad_id, self.variables, self.vocabulary_size = model.pad_id, model.variables, model.vocabulary_size
        self.encode, self.initial_cache, self.plan_decoding = model.encode, model.initial_cache, model.plan_decoding
        self.output_projection = model.output_projection

    def decode(self, target_ids, **kwargs):
        self.rows.assign_add(ops.shape(target_ids)[0])
        return self.model.decode(target_ids, **kwargs)


@pytest.mark.parametrize(
    "search, steering",
    [
        # The fast tier has the drops through the growth test above; this one counts the rows.
        pytest.param(SearchConfig(beam_size=4, min_length_ratio=0.5), dict(num_return=2), marks=pytest.mark.slow),
        pytest.param(SearchConfig(beam_size=4), dict(prefix=True, constraint=True), marks=pytest.mark.slow),
        # One hypothesis per sentence (greedy search's loop), its token drawn.
        pytest.param(
            SearchConfig(beam_size=1, stopping="heuristic", min_length_ratio=1.0, sampling=Sampling(seed=3, top_k=5)),
            {},
            marks=pytest.mark.slow,
        ),
    ],
    ids=["beam4_nbest_min_length", "beam4_prefix_constraint", "sampling"],
)
def test_a_traced_search_drops_its_done_sentences_and_translates_as_with_all(tiny_model, monkeypatch, search, steering):
    """In a TensorFlow graph a sentence leaves the search's batch once it is done, so later steps
    decode fewer rows (here "Print" ends long before the others); the translations are those of
    the search that keeps every sentence to the end, the scores to float rounding."""
    import tensorflow as tf

    from models import search_loop

    model, tokenizer, _, _ = tiny_model
    source, _ = source_batch(tokenizer, SENTENCES)
    steering = _steered(tokenizer, steering, 1, "Das Dokument")
    outputs, rows = [], []
    for drops in (True, False):
        if not drops:
            monkeypatch.setattr(search_loop, "_sentence_constants", lambda loop: None)
        counted = _RowsDecoded(model)
        function = tf.function(
            lambda s, m=counted: translate_ids(m, s, search, **steering), jit_compile=False, autograph=False
        )
        outputs.append([ops.convert_to_numpy(x) for x in function(tf.constant(source))])
        rows.append(int(counted.rows.numpy()))
    np.testing.assert_array_equal(outputs[0][0], outputs[1][0])
    np.testing.assert_allclose(outputs[0][1], outputs[1][1], rtol=1e-6)
    beams = search.beam_size
    assert rows[1] % (len(SENTENCES) * beams) == 0  # Every step decoded the whole batch.
    assert rows[0] <= rows[1] - 3 * beams, rows  # Fewer: "Print" left at least three steps early.
