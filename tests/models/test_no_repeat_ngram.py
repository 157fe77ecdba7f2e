"""Tests for models/no_repeat_ngram.py: the tokens it bars, hand-counted, and a bigram model that
loops "A B A B ..." searched with the guard by beam, greedy, sampling and constrained search, and
`translate_ids` applying a `SearchConfig`'s guard to each of its searches on a small model."""

import math

import keras
import numpy as np
import pytest
from keras import ops

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from models.beam_search import beam_search, greedy_search, sampling_search
from models.no_repeat_ngram import NoRepeatNgram
from models.sampling import sentence_keys, token_sampler
from models.search_config import Sampling, SearchConfig
from models.search_part import LARGE_NEGATIVE, StepInputs
from models.translation import translate_ids
from tests.helpers import EosBiasModel
from tests.models.small_model import small_transformer

VOCAB_SIZE = 6
A, B = 4, 5
UNLIKELY_LOGIT = -40.0


def barred_tokens(size, tokens, step):
    """The tokens `NoRepeatNgram(size)` bars after BOS + `tokens` (buffer of 8 positions) at `step`."""
    seq = np.full((1, 1, 8), PAD_ID, np.int32)
    seq[0, 0, 0] = BOS_ID
    seq[0, 0, 1 : 1 + len(tokens)] = tokens
    logits = ops.zeros((1, VOCAB_SIZE))
    inputs = StepInputs(ops.convert_to_tensor(step, "int32"), logits, ops.convert_to_tensor(seq))
    restricted = ops.convert_to_numpy(NoRepeatNgram(size).restrict(logits, inputs, ()))
    return {token for token in range(VOCAB_SIZE) if restricted[0, token] == LARGE_NEGATIVE}


def test_the_barred_tokens_complete_a_repeated_ngram():
    # After A B A B: the bigrams A B, B A, A B end with B, so B A is barred; the trigram B A B
    # after A B would repeat; A and B each repeat a unigram.
    assert barred_tokens(2, [A, B, A, B], step=4) == {A}
    assert barred_tokens(3, [A, B, A, B], step=4) == {A}
    assert barred_tokens(1, [A, B, A, B], step=4) == {A, B}
    assert barred_tokens(2, [A, B, A], step=3) == {B}
    assert barred_tokens(3, [A, B, A], step=3) == set()  # B A has not been followed yet
    assert barred_tokens(2, [A], step=1) == set()  # BOS A is not an n-gram of the output
    assert barred_tokens(2, [], step=0) == set()
    assert barred_tokens(9, [A, B, A, B], step=4) == set()  # longer than the 8 positions: never fires


# log P(next | previous token): BOS -> A; A -> B 0.9 or EOS 0.1; B -> A 0.9 or EOS 0.1.
TABLE = np.full((VOCAB_SIZE, VOCAB_SIZE), UNLIKELY_LOGIT, np.float32)
TABLE[BOS_ID, A] = 0.0
TABLE[A, [B, EOS_ID]] = np.log([0.9, 0.1])
TABLE[B, [A, EOS_ID]] = np.log([0.9, 0.1])
TABLE[[PAD_ID, EOS_ID, 3], EOS_ID] = 0.0


def next_logits_fn(ids, step, state):
    return ops.take(ops.convert_to_tensor(TABLE), ids, axis=0), state


def score(tokens, alpha):
    """The length-penalised log-probability of `tokens` after BOS, in float64."""
    previous, log_prob = [BOS_ID, *tokens[:-1]], 0.0
    for before, token in zip(previous, tokens):
        row = TABLE[before].astype(np.float64)
        log_prob += row[token] - math.log(np.exp(row).sum())
    return log_prob / ((5.0 + len(tokens)) / 6.0) ** alpha


ALPHA = 1.0  # Longer hypotheses win: unguarded, A B A B ... runs to the max length.
GUARDED = [A, B, A, EOS_ID]  # with size 2: after A B A, B would repeat A B; EOS is next best


def search(kind, size, rows=1):
    bos = np.full((rows,), BOS_ID, np.int32)
    state = {"unused": ops.zeros((rows * (2 if kind in ("beam", "constrained") else 1),))}
    options = dict(max_decode_length=6, alpha=ALPHA, no_repeat_ngram_size=size)
    if kind == "beam":
        return beam_search(next_logits_fn, bos, state, beam_size=2, **options)
    if kind == "constrained":
        phrase = np.array([[[B, A]]], np.int32)
        return beam_search(next_logits_fn, bos, state, beam_size=2, constraint_ids=phrase, **options)
    if kind == "greedy":
        return greedy_search(next_logits_fn, bos, state, **options)
    sampler = token_sampler(sentence_keys(3, np.arange(rows)), temperature=1.5)
    return sampling_search(next_logits_fn, bos, state, sampler=sampler, **options)


@pytest.mark.parametrize("kind", ["beam", "greedy", "constrained"])
def test_the_guard_ends_the_loop_of_a_bigram_model(kind):
    ids, scores = (ops.convert_to_numpy(x) for x in search(kind, size=2))
    np.testing.assert_array_equal(ids[0, 0], GUARDED + [PAD_ID, PAD_ID])
    assert abs(scores[0, 0] - score(GUARDED, ALPHA)) < 1e-5
    unguarded = ops.convert_to_numpy(search(kind, size=0).ids)
    np.testing.assert_array_equal(unguarded[0, 0], [A, B, A, B, A, B])


def test_sampled_outputs_never_repeat_a_bigram():
    ids = ops.convert_to_numpy(search("sampling", size=2, rows=32).ids)[:, 0]
    for row in ids:
        tokens = [int(t) for t in row if t != PAD_ID]
        bigrams = list(zip(tokens, tokens[1:]))
        assert len(bigrams) == len(set(bigrams)), tokens
    assert any(len([t for t in row if t != PAD_ID]) > 2 for row in ids)  # the draws went past A EOS


def test_a_bad_size_raises():
    with pytest.raises(ValueError, match="no_repeat_ngram_size"):
        search("greedy", size=-1)


# translate_ids with the guard as a `SearchConfig` field: a small untrained Transformer with EOS
# barred (every output runs to its length limit), which repeats its tokens unguarded.
SOURCE = np.array([[7, 9, 11, 13, EOS_ID], [8, 10, EOS_ID, PAD_ID, PAD_ID]], np.int32)
SEARCHES = {
    "greedy": (SearchConfig(beam_size=1, max_extra_length=6), {}),
    "beam": (SearchConfig(beam_size=3, max_extra_length=6), {}),
    "sampling": (SearchConfig(max_extra_length=6, sampling=Sampling(temperature=0.5, seed=1)), {}),
    "constrained": (SearchConfig(beam_size=2, max_extra_length=6), {"constraint_ids": np.array([[[5, 6]], [[6, 5]]])}),
    "prefixed": (SearchConfig(beam_size=2, max_extra_length=6), {"prefix_ids": np.array([[5, 6], [6, PAD_ID]])}),
}


def translated(model, kind, size):
    search, steering = SEARCHES[kind]
    steering = {name: ops.convert_to_tensor(value, "int32") for name, value in steering.items()}
    result = translate_ids(model, ops.convert_to_tensor(SOURCE), search.override(no_repeat_ngram_size=size), **steering)
    return [[int(t) for t in row if t != PAD_ID] for row in ops.convert_to_numpy(result.ids)[:, 0]]


# Under JAX the guard's work in each search is checked on the bigram model above (beam, greedy,
# constrained, sampling); which search `translate_ids` hands the guard to is Python that the
# TensorFlow run checks for every kind. JAX runs the guard in a beam search over a forced prefix.
TRANSLATE_KINDS = ["prefixed"] if keras.backend.backend() == "jax" else list(SEARCHES)


@pytest.fixture(scope="module")
def looping():
    return EosBiasModel(small_transformer(), -1e9)


@pytest.mark.parametrize("kind", TRANSLATE_KINDS)
def test_translate_ids_applies_the_guard_of_the_search_config_to_every_search(looping, kind):
    unguarded = translated(looping, kind, 0)
    assert any(len(set(row)) < len(row) for row in unguarded), unguarded  # a token repeats: the guard can fire
    if kind == "beam":  # no 20-gram fits in 11 tokens: the guard cannot fire (one search shows it)
        assert translated(looping, kind, 20) == unguarded
    guarded = translated(looping, kind, 1)  # 1: no token twice
    assert all(len(set(row)) == len(row) for row in guarded), guarded
    if kind == "prefixed":
        assert [row[: len(prefix)] for row, prefix in zip(guarded, ([5, 6], [6]))] == [[5, 6], [6]]
    if kind == "constrained":
        assert "5, 6" in str(guarded[0]) and "6, 5" in str(guarded[1])
