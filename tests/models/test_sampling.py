"""Tests for models/sampling.py and `beam_search.sampling_search`, on both backends: the hash
against a Python reference, the draws' frequencies against the distribution, top-k, top-p and
temperature, reproducibility under a seed, and the search's scores."""

import math

import keras
import numpy as np
import pytest
from keras import ops

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from models.beam_search import greedy_search, sampling_search
from models.sampling import hash_uint32, sentence_keys, token_sampler, uniform

MASK = 0xFFFFFFFF


def python_hash(x):
    """The hash of models/sampling.py in plain Python integers."""
    x ^= x >> 16
    x = (x * 0x7FEB352D) & MASK
    x ^= x >> 15
    x = (x * 0x846CA68B) & MASK
    return x ^ (x >> 16)


def test_hash_equals_python_reference():
    values = [0, 1, 2, 12345, 2**31, MASK]
    got = ops.convert_to_numpy(hash_uint32(ops.convert_to_tensor(values, "uint32")))
    assert [int(v) for v in got] == [python_hash(v) for v in values]


def test_uniform_is_in_the_open_interval_and_depends_on_every_counter():
    keys = sentence_keys(7, ops.arange(4))
    tokens = ops.broadcast_to(ops.arange(1000)[None, :], (4, 1000))
    draws = ops.convert_to_numpy(uniform(keys, 3, tokens))
    assert draws.min() > 0.0 and draws.max() < 1.0
    assert abs(draws.mean() - 0.5) < 0.02
    assert len(np.unique(draws)) > 3990  # Rows (keys) and columns (tokens) give new draws.
    other_step = ops.convert_to_numpy(uniform(keys, 4, tokens))
    assert np.mean(draws == other_step) < 0.01


def draw(logits, seed=0, rows=20000, step=0, **options):
    """`rows` draws from one row of `logits`, one per sentence key 0..rows-1."""
    sampler = token_sampler(sentence_keys(seed, ops.arange(rows)), **options)
    tiled = ops.convert_to_tensor(np.tile(np.asarray(logits, "float32"), (rows, 1)))
    return ops.convert_to_numpy(sampler(tiled, step))


PROBABILITIES = np.array([0.05, 0.5, 0.25, 0.15, 0.05])


def test_draws_follow_the_distribution():
    tokens = draw(np.log(PROBABILITIES))
    frequencies = np.bincount(tokens, minlength=5) / len(tokens)
    # 20000 draws: a binomial standard deviation of at most 0.0036; allow 4 of them.
    np.testing.assert_allclose(frequencies, PROBABILITIES, atol=0.015)


def test_temperature_reshapes_the_distribution():
    temperature = 2.0
    tokens = draw(np.log(PROBABILITIES), temperature=temperature)
    expected = PROBABILITIES ** (1 / temperature)
    expected /= expected.sum()
    np.testing.assert_allclose(np.bincount(tokens, minlength=5) / len(tokens), expected, atol=0.015)
    cold = draw(np.log(PROBABILITIES), temperature=0.01, rows=500)
    assert set(cold.tolist()) == {1}


def test_top_k_restricts_and_renormalises():
    tokens = draw(np.log(PROBABILITIES), top_k=2)
    assert set(tokens.tolist()) == {1, 2}
    np.testing.assert_allclose(np.mean(tokens == 1), 0.5 / 0.75, atol=0.015)
    assert set(draw(np.log(PROBABILITIES), top_k=1, rows=300).tolist()) == {1}
    # top_k at or above the vocabulary size is the whole vocabulary.
    np.testing.assert_array_equal(draw(np.log(PROBABILITIES), top_k=5), draw(np.log(PROBABILITIES), top_k=0))


@pytest.mark.parametrize(
    "options, kept",
    [
        # Sorted: 0.5, 0.25, 0.15, 0.05, 0.05; a token is kept while the mass before it is below top_p.
        ({"top_p": 0.4}, {1}),
        ({"top_p": 0.7}, {1, 2}),
        ({"top_p": 0.8}, {1, 2, 3}),
        # Top-k first, renormalised (2/3, 1/3): top-p 0.6 then keeps the first token alone.
        ({"top_k": 2, "top_p": 0.6}, {1}),
        # Top-p on the tempered distribution (0.35, 0.24, 0.19, 0.11, 0.11 at temperature 2).
        ({"top_p": 0.6, "temperature": 2.0}, {1, 2, 3}),
    ],
)
def test_top_p_draws_within_the_nucleus_renormalised(options, kept):
    tokens = draw(np.log(PROBABILITIES), rows=6000, **options)
    assert set(tokens.tolist()) == kept
    nucleus = sorted(kept)
    tempered = PROBABILITIES[nucleus] ** (1 / options.get("temperature", 1.0))
    # 6000 draws: a binomial standard deviation of at most 0.0065; allow 4 of them.
    np.testing.assert_allclose(
        np.bincount(tokens, minlength=5)[nucleus] / len(tokens), tempered / tempered.sum(), atol=0.026
    )
    expected = draw(np.log(PROBABILITIES), rows=6000, **{k: v for k, v in options.items() if k != "top_p"})
    # A token's noise does not depend on its rank: where the unrestricted draw is in the nucleus,
    # the nucleus draw is that token.
    inside = np.isin(expected, nucleus)
    np.testing.assert_array_equal(tokens[inside], expected[inside])


def test_top_p_one_draws_as_no_top_p():
    logits = np.log(PROBABILITIES)
    np.testing.assert_array_equal(draw(logits, seed=3, rows=500, top_p=1.0), draw(logits, seed=3, rows=500))
    np.testing.assert_array_equal(
        draw(logits, rows=500, top_k=3, top_p=1.0, temperature=0.7), draw(logits, rows=500, top_k=3, temperature=0.7)
    )


@pytest.mark.parametrize("options", [{}, {"top_p": 0.8}])
def test_same_seed_same_draws_other_seed_other_draws(options):
    first = draw(np.log(PROBABILITIES), seed=1, rows=2000, **options)
    np.testing.assert_array_equal(first, draw(np.log(PROBABILITIES), seed=1, rows=2000, **options))
    assert np.mean(first != draw(np.log(PROBABILITIES), seed=2, rows=2000, **options)) > 0.3


def test_a_sentence_draws_by_its_key_not_its_row():
    logits = ops.convert_to_tensor(np.tile(np.log(PROBABILITIES).astype("float32"), (6, 1)))
    keys = [10, 11, 12, 13, 14, 15]
    forward = ops.convert_to_numpy(token_sampler(sentence_keys(3, ops.array(keys)))(logits, 5))
    backward = ops.convert_to_numpy(token_sampler(sentence_keys(3, ops.array(keys[::-1])))(logits, 5))
    np.testing.assert_array_equal(forward, backward[::-1])


@pytest.mark.parametrize(
    "options, message",
    [
        ({"top_k": -1}, "top_k"),
        ({"temperature": 0.0}, "temperature"),
        ({"top_p": 0.0}, "top_p must be a number in"),
        ({"top_p": 1.5}, "top_p must be a number in"),
        ({"top_p": float("nan")}, "top_p"),
    ],
)
def test_bad_options_raise(options, message):
    with pytest.raises(ValueError, match=message):
        token_sampler(sentence_keys(0, ops.arange(2)), **options)


# A fake decoder: the next token's logits depend on the previous token only (a bigram table), so
# sampled sentences vary and end with EOS; PAD, BOS and UNK are (almost) never drawn.
BIGRAM = np.log(
    np.array(
        [
            [1e-9, 1e-9, 0.30, 1e-9, 0.37, 0.30],  # after PAD (unused)
            [1e-9, 1e-9, 0.05, 1e-9, 0.62, 0.30],  # after BOS
            [1e-9, 1e-9, 0.95, 1e-9, 0.01, 0.01],  # after EOS (unused)
            [1e-9, 1e-9, 0.30, 1e-9, 0.37, 0.30],  # after UNK (unused)
            [1e-9, 1e-9, 0.30, 1e-9, 0.17, 0.50],
            [1e-9, 1e-9, 0.40, 1e-9, 0.47, 0.10],
        ],
        "float32",
    )
)


def next_logits_fn(ids, step, state):
    return ops.take(ops.convert_to_tensor(BIGRAM), ids, axis=0), state


def sample_sentences(seed, rows=64, top_k=0, temperature=1.0, alpha=0.6, top_p=1.0, prefix_ids=None):
    keys = sentence_keys(seed, ops.arange(rows))
    return sampling_search(
        next_logits_fn,
        ops.full((rows,), BOS_ID, "int32"),
        {},
        max_decode_length=12,
        sampler=token_sampler(keys, top_k=top_k, temperature=temperature, top_p=top_p),
        alpha=alpha,
        prefix_ids=prefix_ids,
    )


def rescore(ids, alpha):
    """log P(ids) / lp under BIGRAM in NumPy, EOS (or the length cut) included."""
    previous, total, length = BOS_ID, 0.0, 0
    for token in ids:
        if token == PAD_ID:
            break
        log_probs = BIGRAM[previous] - np.log(np.exp(BIGRAM[previous]).sum())
        total += log_probs[token]
        length += 1
        previous = token
        if token == EOS_ID:
            break
    return total / ((5 + length) / 6) ** alpha


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_sampling_search_scores_are_the_models_log_probabilities(alpha):
    ids, scores = (ops.convert_to_numpy(x) for x in sample_sentences(seed=4, alpha=alpha))
    assert len({tuple(row[0]) for row in ids}) > 5  # The samples differ.
    for row, score in zip(ids[:, 0], scores[:, 0]):
        assert math.isclose(score, rescore(row, alpha), rel_tol=1e-5, abs_tol=1e-5)
        tokens = list(row)
        end = tokens.index(EOS_ID) + 1 if EOS_ID in tokens else len(tokens)
        assert all(t == PAD_ID for t in tokens[end:])


def test_sampling_search_is_reproducible():
    first = ops.convert_to_numpy(sample_sentences(seed=9).ids)
    np.testing.assert_array_equal(first, ops.convert_to_numpy(sample_sentences(seed=9).ids))
    assert not np.array_equal(first, ops.convert_to_numpy(sample_sentences(seed=10).ids))


def test_a_prefix_is_forced_before_the_draws_and_scored():
    # Even rows: the prefix 4 5 4, tokens the distribution would rarely draw in a row; odd rows: none.
    prefix_ids = np.zeros((16, 3), "int32") + PAD_ID
    prefix_ids[::2] = [4, 5, 4]
    plain_ids, plain_scores = (ops.convert_to_numpy(x) for x in sample_sentences(seed=4, rows=16))
    ids, scores = (ops.convert_to_numpy(x) for x in sample_sentences(seed=4, rows=16, prefix_ids=prefix_ids))
    assert np.all(ids[::2, 0, :3] == [4, 5, 4])
    for row, score in zip(ids[::2, 0], scores[::2, 0]):
        assert math.isclose(score, rescore(row, 0.6), rel_tol=1e-5, abs_tol=1e-5)
    np.testing.assert_array_equal(ids[1::2], plain_ids[1::2])
    np.testing.assert_array_equal(scores[1::2], plain_scores[1::2])
    # Even where the temperature flattens the masked logits to the level of the noise, the forced
    # tokens are taken.
    hot = ops.convert_to_numpy(sample_sentences(seed=4, rows=16, temperature=1e30, prefix_ids=prefix_ids).ids)
    assert np.all(hot[::2, 0, :3] == [4, 5, 4])


def test_top_one_sampling_is_greedy():
    greedy = greedy_search(next_logits_fn, ops.full((4,), BOS_ID, "int32"), {}, max_decode_length=12)
    sampled = sample_sentences(seed=1, rows=4, top_k=1)
    np.testing.assert_array_equal(ops.convert_to_numpy(sampled.ids), ops.convert_to_numpy(greedy.ids))
    np.testing.assert_allclose(ops.convert_to_numpy(sampled.scores), ops.convert_to_numpy(greedy.scores), rtol=1e-6)


TRACED_OPTIONS = [{}, {"top_k": 3, "top_p": 0.7}]


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="jax.jit runs under the JAX backend only")
@pytest.mark.parametrize("options", TRACED_OPTIONS)
def test_jax_jit_equals_eager(options):
    import jax

    eager = ops.convert_to_numpy(sample_sentences(seed=5, **options).ids)
    jitted = jax.jit(lambda: sample_sentences(seed=5, **options).ids)()
    np.testing.assert_array_equal(np.asarray(jitted), eager)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="tf.function runs under TensorFlow only")
@pytest.mark.parametrize("options", TRACED_OPTIONS)
def test_tf_function_equals_eager(options):
    import tensorflow as tf

    eager = ops.convert_to_numpy(sample_sentences(seed=5, **options).ids)
    traced = tf.function(lambda: sample_sentences(seed=5, **options).ids, autograph=False)()
    np.testing.assert_array_equal(traced.numpy(), eager)
