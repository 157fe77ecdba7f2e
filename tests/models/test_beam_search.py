"""Tests for models/beam_search.py: scripted tables, NumPy references, both backends.

The fake decoder is a table of log-probabilities indexed by (source sentence, whole prefix). The
prefix reaches the table only through the `state` (a running code of the prefix, or the prefix
itself), so a search that reordered the state wrongly would score hypotheses with another
hypothesis' distribution, and the scores would disagree with a NumPy rescoring of the returned ids.
The source index is captured in the closure, as the encoder output is by the real decoder.

Beside the hand-computed scripts, random tables check the search against a plain rewrite of its
algorithm and against the exact optimum (every hypothesis listed, or for the larger `BigramTable`
found by dynamic programming), asserting only what an approximate search must satisfy.
"""

import itertools
import math

import keras
import numpy as np
import pytest
from keras import ops

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from models.beam_search import SearchResult, beam_search, greedy_search, length_penalty

VOCAB_SIZE = 6
A, B = 4, 5  # two ordinary tokens; PAD, BOS and UNK (ids 0, 1, 3) are never likely
REAL_TOKENS = (EOS_ID, A, B)
UNLIKELY_LOGIT = -40.0  # probability ~1e-18: never chosen, never changes a real log-probability
assert not {A, B} & {PAD_ID, BOS_ID, EOS_ID}


def lp(length, alpha):
    """NumPy length penalty, written out independently of the module: ((5 + |Y|) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def prefix_code(prefix):
    """The table row of a prefix (the tokens after BOS): BOS, t1, t2 ... read in base VOCAB_SIZE."""
    code = BOS_ID
    for token in prefix:
        code = code * VOCAB_SIZE + token
    return code


class PrefixTable:
    """log P(next token | source, prefix) as a dense table `[sources, VOCAB_SIZE ** length, vocab]`.

    The search looks up prefixes of at most `max_decode_length - 1` tokens, whose codes are below
    `VOCAB_SIZE ** max_decode_length`.
    """

    def __init__(self, logits):
        self.logits = np.asarray(logits, np.float32)

    @classmethod
    def scripted(cls, script, max_decode_length, default):
        """`script`: {prefix tuple: {token: probability}} for one source; others get `default`."""
        logits = np.full((1, VOCAB_SIZE**max_decode_length, VOCAB_SIZE), UNLIKELY_LOGIT)
        logits[0][:, list(default)] = np.log(list(default.values()))
        for prefix, probabilities in script.items():
            logits[0, prefix_code(prefix)] = UNLIKELY_LOGIT
            logits[0, prefix_code(prefix), list(probabilities)] = np.log(list(probabilities.values()))
        return cls(logits)

    @classmethod
    def random(cls, num_sources, max_decode_length, seed, scale=1.5):
        """Normal logits with standard deviation `scale` for the real tokens (larger: sharper)."""
        rng = np.random.default_rng(seed)
        logits = np.full((num_sources, VOCAB_SIZE**max_decode_length, VOCAB_SIZE), UNLIKELY_LOGIT)
        logits[:, :, list(REAL_TOKENS)] = scale * rng.standard_normal(
            (num_sources, VOCAB_SIZE**max_decode_length, len(REAL_TOKENS))
        )
        return cls(logits)

    def log_probs(self, source, prefix):
        row = self.logits[source, prefix_code(prefix)].astype(np.float64)
        return row - np.log(np.sum(np.exp(row - row.max()))) - row.max()

    def score(self, source, tokens, alpha):
        """Length-penalised score of returned ids (pad stripped, EOS included), in float64."""
        tokens = [int(t) for t in tokens if t != PAD_ID]
        log_prob = sum(self.log_probs(source, tokens[:t])[tokens[t]] for t in range(len(tokens)))
        return log_prob / lp(len(tokens), alpha)

    def decoder(self, sources, beam_size, state="code"):
        """`(next_logits_fn, initial_state)` for the search, for sentences of `sources` `[batch]`.

        state="code" carries a running code of the prefix; state="prefix" carries the prefix ids
        themselves `[batch * beam, max_decode_length]` plus a nested list entry.
        """
        rows_per_source = self.logits.shape[1]
        max_decode_length = round(math.log(rows_per_source, VOCAB_SIZE))
        table = ops.convert_to_tensor(self.logits.reshape(-1, VOCAB_SIZE))
        # Identical across the beams of a sentence, so captured here and never reordered.
        source_offset = ops.repeat(ops.cast(sources, "int32"), beam_size, axis=0) * rows_per_source
        rows = ops.shape(source_offset)[0]
        if state == "code":

            def next_logits_fn(ids, step, state):
                code = state["code"] * VOCAB_SIZE + ids
                return ops.take(table, source_offset + code, axis=0), {"code": code}

            return next_logits_fn, {"code": ops.zeros((rows,), "int32")}

        positions = ops.arange(max_decode_length, dtype="int32")
        powers = ops.convert_to_tensor(np.array([VOCAB_SIZE**k for k in range(max_decode_length)], np.int32))

        def next_logits_fn(ids, step, state):
            prefix = ops.where(positions == step, ids[:, None], state["prefix"])
            weights = ops.where(positions <= step, ops.take(powers, ops.maximum(step - positions, 0)), 0)
            code = ops.sum(prefix * weights, axis=1)
            # A list inside the dict: nested structures go through the loop and the reordering.
            steps_seen = [state["nested"][0] + 1.0]
            logits = ops.take(table, source_offset + code, axis=0)
            return logits, {"prefix": prefix, "nested": steps_seen}

        initial_state = {
            "prefix": ops.zeros((rows, max_decode_length), "int32"),
            "nested": [ops.zeros((rows, 2), "float32")],
        }
        return next_logits_fn, initial_state


def run_beam(table, sources, max_decode_length, *, beam_size, state="code", **kwargs):
    sources = np.asarray(sources, np.int32)
    fn, initial_state = table.decoder(sources, beam_size, state)
    bos = np.full(sources.shape, BOS_ID, np.int32)
    ids, scores = beam_search(
        fn,
        bos,
        initial_state,
        beam_size=beam_size,
        max_decode_length=max_decode_length,
        **kwargs,
    )
    return ops.convert_to_numpy(ids), ops.convert_to_numpy(scores)


def run_greedy(table, sources, max_decode_length, **kwargs):
    sources = np.asarray(sources, np.int32)
    fn, initial_state = table.decoder(sources, 1)
    bos = np.full(sources.shape, BOS_ID, np.int32)
    ids, scores = greedy_search(fn, bos, initial_state, max_decode_length=max_decode_length, **kwargs)
    return ops.convert_to_numpy(ids), ops.convert_to_numpy(scores)


def padded(tokens, length):
    return list(tokens) + [PAD_ID] * (length - len(tokens))


def numpy_greedy(table, source, max_length, max_decode_length, alpha, min_length=1, forced=()):
    """The plain argmax loop (over the tokens other than EOS below `min_length`), from the `forced`
    first tokens."""
    prefix = list(forced)
    for _ in range(max_length - len(prefix)):
        log_probs = table.log_probs(source, prefix)
        if len(prefix) + 1 < min_length:
            log_probs[EOS_ID] = -np.inf
        prefix.append(int(np.argmax(log_probs)))
        if prefix[-1] == EOS_ID:
            break
    return padded(prefix, max_decode_length), table.score(source, prefix, alpha)


def numpy_exhaustive(table, source, max_length, max_decode_length, alpha, min_length=1):
    """Every hypothesis over REAL_TOKENS, ending at EOS (not before `min_length`) or at max_length,
    best first."""
    hypotheses = []

    def extend(prefix, log_prob):
        log_probs = table.log_probs(source, prefix)
        for token in REAL_TOKENS:
            tokens = prefix + [token]
            if token == EOS_ID and len(tokens) < min(min_length, max_length):
                continue
            total = log_prob + log_probs[token]
            if token == EOS_ID or len(tokens) == max_length:
                hypotheses.append((total / lp(len(tokens), alpha), tokens))
            else:
                extend(tokens, total)

    extend([], 0.0)
    hypotheses.sort(key=lambda h: -h[0])
    return [padded(t, max_decode_length) for _, t in hypotheses], [s for s, _ in hypotheses]


# Script 1 (beam 2, alpha 0, at most 3 tokens). The arithmetic, step by step:
# step 0: A ln.55=-0.598, B ln.4=-0.916, EOS ln.05=-2.996 -> finished {EOS}, alive {A, B}
# step 1: B EOS ln.4+ln.9=-1.022, AA ln.55+ln.4=-1.514, AB ln.55+ln.35=-1.648,
#         A EOS ln.55+ln.25=-1.984 (then BA ln.4+ln.06=-3.730 falls out of the 2 * 2 candidates)
#         -> finished {B EOS, A EOS}, alive {AA, AB}: the second alive beam comes from beam 0 (the
#         state is reordered); -1.514 > -1.984, so the search goes on
# step 2 (length 3, the maximum: everything ends): AB EOS ln.55+ln.35+ln.9=-1.753,
#         AA EOS ln.55+ln.4+ln.5=-2.207, AAA -2.718, AAB -3.124
#         -> finished {B EOS -1.022, AB EOS -1.753}: "A EOS" (-1.984) is pushed out.
# Greedy takes A, A, EOS (-2.207): the beam finds better.
SCRIPT_1 = {
    (): {A: 0.55, B: 0.4, EOS_ID: 0.05},
    (A,): {A: 0.4, B: 0.35, EOS_ID: 0.25},
    (B,): {EOS_ID: 0.9, A: 0.06, B: 0.04},
    (A, A): {EOS_ID: 0.5, A: 0.3, B: 0.2},
}
DEFAULT_1 = {EOS_ID: 0.9, A: 0.06, B: 0.04}


def test_scripted_table_beam_two():
    table = PrefixTable.scripted(SCRIPT_1, 3, DEFAULT_1)
    ids, scores = run_beam(table, [0], 3, beam_size=2, alpha=0.0, num_return=2)
    np.testing.assert_array_equal(ids, [[[B, EOS_ID, PAD_ID], [A, B, EOS_ID]]])
    expected = [math.log(0.4) + math.log(0.9), math.log(0.55) + math.log(0.35) + math.log(0.9)]
    np.testing.assert_allclose(scores, [expected], atol=1e-5)


# Script 2 (beam 2, at most 4 tokens): "B EOS" has log-prob ln.5+ln.7=-1.050, "AAA EOS" the lower
# ln.4+3ln.9=-1.232 but is longer. Alpha 0 keeps the raw order. Alpha 1, with |Y| counting EOS:
# B EOS -1.050/(7/6)=-0.900, AAA EOS -1.232/(9/6)=-0.822: the longer one wins. (Were EOS not
# counted, the scores would be -1.050/1 and -1.232/(8/6)=-0.924.)
# Alpha 1, step by step: step 0 finished {EOS -2.303}, alive {B, A}; step 1 finished
# {B EOS -0.900, EOS}, alive {AA -1.022, BA -2.303}; bound -1.022/(9/6)=-0.681 > -2.303, go on;
# step 2 finished {B EOS, BA EOS -2.408/(8/6)=-1.806}, alive {AAA -1.127, AAB -4.241};
# step 3 (the maximum) AAA EOS -1.232/(9/6)=-0.822 enters first.
SCRIPT_2 = {
    (): {B: 0.5, A: 0.4, EOS_ID: 0.1},
    (B,): {EOS_ID: 0.7, A: 0.2, B: 0.1},
    (A,): {A: 0.9, EOS_ID: 0.06, B: 0.04},
    (A, A): {A: 0.9, EOS_ID: 0.06, B: 0.04},
}
DEFAULT_2 = {EOS_ID: 0.9, A: 0.06, B: 0.04}


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_length_penalty_changes_the_winner(alpha):
    table = PrefixTable.scripted(SCRIPT_2, 4, DEFAULT_2)
    ids, scores = run_beam(table, [0], 4, beam_size=2, alpha=alpha, num_return=2)
    short = [B, EOS_ID, PAD_ID, PAD_ID]
    long = [A, A, A, EOS_ID]
    short_score = (math.log(0.5) + math.log(0.7)) / ((5 + 2) / 6) ** alpha
    long_score = (math.log(0.4) + 3 * math.log(0.9)) / ((5 + 4) / 6) ** alpha
    if alpha == 0.0:
        np.testing.assert_array_equal(ids, [[short, long]])
        np.testing.assert_allclose(scores, [[short_score, long_score]], atol=1e-5)
    else:
        np.testing.assert_array_equal(ids, [[long, short]])
        np.testing.assert_allclose(scores, [[long_score, short_score]], atol=1e-5)


def test_length_penalty_values():
    # (5 + 3) / 6 = 4/3; (4/3) ** 0.6 = exp(0.6 * ln(4/3)) = exp(0.6 * 0.287682) = 1.188401
    np.testing.assert_allclose(ops.convert_to_numpy(length_penalty(3, 0.6)), 1.188401, atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(length_penalty(np.array([1, 7]), 1.0)), [1.0, 2.0], atol=1e-6)
    np.testing.assert_allclose(ops.convert_to_numpy(length_penalty(9, 0.0)), 1.0)


def test_greedy_search_equals_numpy_argmax_loop():
    alpha = 0.6
    table = PrefixTable.random(num_sources=4, max_decode_length=5, seed=7)
    max_lengths = np.array([5, 2, 4, 5], np.int32)
    ids, scores = run_greedy(table, [0, 1, 2, 3], 5, max_lengths=max_lengths, alpha=alpha)
    for source in range(4):
        expected_ids, expected_score = numpy_greedy(table, source, max_lengths[source], 5, alpha)
        np.testing.assert_array_equal(ids[source, 0], expected_ids)
        np.testing.assert_allclose(scores[source, 0], expected_score, atol=1e-5)


# Target prefixes of 0 to 3 tokens for 4 sentences with max lengths 5, 4, 5, 3; the last prefix
# fills its sentence's max length.
PREFIXES = [(A,), (), (B, A), (A, B, B)]
PREFIX_MAX_LENGTHS = np.array([5, 4, 5, 3], np.int32)


def prefix_rows(prefixes, width=3):
    """int32 `[len(prefixes), width]`: each prefix, then PAD."""
    return np.array([padded(prefix, width) for prefix in prefixes], np.int32)


def test_prefixes_are_forced_then_beam_searched_as_the_plain_reference():
    table = PrefixTable.random(num_sources=4, max_decode_length=5, seed=41)
    kwargs = dict(beam_size=3, num_return=3, alpha=0.6, max_lengths=PREFIX_MAX_LENGTHS)
    ids, scores = run_beam(table, [0, 1, 2, 3], 5, prefix_ids=prefix_rows(PREFIXES), **kwargs)
    for source, prefix in enumerate(PREFIXES):
        reference = numpy_beam_search(table, source, PREFIX_MAX_LENGTHS[source], 3, 0.6, forced=prefix)
        real = [(score, tokens) for score, tokens in reference if score > -20.0]
        np.testing.assert_array_equal(ids[source, : len(real)], [padded(t, 5) for _, t in real])
        # The scores are the whole output's, the forced tokens' log-probabilities included.
        np.testing.assert_allclose(scores[source, : len(real)], [s for s, _ in real], atol=1e-4)
        for rank in range(len(real)):
            assert tuple(ids[source, rank, : len(prefix)]) == prefix
            np.testing.assert_allclose(scores[source, rank], table.score(source, ids[source, rank], 0.6), atol=1e-4)
    # A prefix that fills its sentence's max length is the whole (one) hypothesis.
    np.testing.assert_array_equal(ids[3, 0], padded((A, B, B), 5))
    assert np.all(scores[3, 1:] < -1e29)


@pytest.mark.parametrize("search", ["beam", "greedy"])
def test_sentences_without_a_prefix_are_searched_bit_for_bit_as_without_prefixes(search):
    table = PrefixTable.random(num_sources=4, max_decode_length=5, seed=42)
    run = run_greedy if search == "greedy" else lambda *a, **k: run_beam(*a, beam_size=3, num_return=3, **k)
    kwargs = dict(alpha=0.6, max_lengths=PREFIX_MAX_LENGTHS)
    plain_ids, plain_scores = run(table, [0, 1, 2, 3], 5, **kwargs)
    for prefixes in ([()] * 4, PREFIXES):
        ids, scores = run(table, [0, 1, 2, 3], 5, prefix_ids=prefix_rows(prefixes), **kwargs)
        free = [source for source, prefix in enumerate(prefixes) if not prefix]
        np.testing.assert_array_equal(ids[free], plain_ids[free])
        np.testing.assert_array_equal(scores[free], plain_scores[free])
    if search == "greedy":
        for source, prefix in enumerate(PREFIXES):
            expected_ids, expected_score = numpy_greedy(
                table, source, PREFIX_MAX_LENGTHS[source], 5, 0.6, forced=prefix
            )
            np.testing.assert_array_equal(ids[source, 0], expected_ids)
            np.testing.assert_allclose(scores[source, 0], expected_score, atol=1e-5)


# Script 3: greedy takes A (.5) over EOS (.45), then A, then EOS: ln.5+ln.5+ln.9=-1.492.
# beam_search(beam_size=1) looks at the 2 best tokens: EOS (ln.45=-0.799) finishes, A stays alive;
# after "AA" (-1.386 < -0.799) nothing alive can win, so it returns the better-scoring "EOS".
SCRIPT_3 = {(): {A: 0.5, EOS_ID: 0.45, B: 0.05}, (A,): {A: 0.5, B: 0.3, EOS_ID: 0.2}}


def test_beam_size_one_is_not_greedy():
    table = PrefixTable.scripted(SCRIPT_3, 3, DEFAULT_1)
    ids, scores = run_beam(table, [0], 3, beam_size=1, alpha=0.0)
    np.testing.assert_array_equal(ids, [[[EOS_ID, PAD_ID, PAD_ID]]])
    np.testing.assert_allclose(scores, [[math.log(0.45)]], atol=1e-5)


def test_scripted_tables_greedy():
    # Script 1 as sentence 0 (greedy A, A, EOS where beam 2 finds "B EOS"), script 3 as sentence 1
    # (A, A, EOS where beam 1 finds "EOS").
    table = PrefixTable(
        np.concatenate(
            [
                PrefixTable.scripted(SCRIPT_1, 3, DEFAULT_1).logits,
                PrefixTable.scripted(SCRIPT_3, 3, DEFAULT_1).logits,
            ]
        )
    )
    ids, scores = run_greedy(table, [0, 1], 3, alpha=0.0)
    np.testing.assert_array_equal(ids, [[[A, A, EOS_ID]], [[A, A, EOS_ID]]])
    expected = [
        math.log(0.55) + math.log(0.4) + math.log(0.5),
        2 * math.log(0.5) + math.log(0.9),
    ]
    np.testing.assert_allclose(scores[:, 0], expected, atol=1e-5)


# Script 4 (beam 1, alpha 1, at most 4 tokens): step 0 "EOS" finishes with ln.4=-0.916, "A"
# (ln.55=-0.598) stays alive; step 1 "AA" has ln.55+ln.7=-0.955, below -0.916, but with the
# penalty of the longest allowed length it could still reach -0.955/((5+4)/6)=-0.636, so the search
# goes on; step 2 "AA EOS" scores (ln.55+ln.7+ln.9)/((5+3)/6)=-0.795 and wins.
SCRIPT_4 = {
    (): {A: 0.55, EOS_ID: 0.4, B: 0.05},
    (A,): {A: 0.7, EOS_ID: 0.2, B: 0.1},
    (A, A): {EOS_ID: 0.9, A: 0.06, B: 0.04},
}


def test_early_stopping_bound_allows_for_the_length_penalty():
    table = PrefixTable.scripted(SCRIPT_4, 4, DEFAULT_1)
    ids, scores = run_beam(table, [0], 4, beam_size=1, alpha=1.0)
    np.testing.assert_array_equal(ids, [[[A, A, EOS_ID, PAD_ID]]])
    expected = (math.log(0.55) + math.log(0.7) + math.log(0.9)) / ((5 + 3) / 6)
    np.testing.assert_allclose(scores, [[expected]], atol=1e-5)


def test_fewer_hypotheses_than_requested():
    # Only EOS and A are possible (-inf elsewhere) and at most 2 tokens: the hypotheses are
    # "EOS", "A A" (cut at the maximum) and "A EOS". The 4th row is empty: pad, score -1e30 (not
    # an extension of a dead beam, which with alpha > 0 would score a little above -1e30).
    logits = np.full((1, VOCAB_SIZE**2, VOCAB_SIZE), -np.inf, np.float32)
    logits[..., EOS_ID] = math.log(0.4)
    logits[..., A] = math.log(0.6)
    ids, scores = run_beam(PrefixTable(logits), [0], 2, beam_size=4, num_return=4, alpha=0.6)
    np.testing.assert_array_equal(ids, [[[EOS_ID, PAD_ID], [A, A], [A, EOS_ID], [PAD_ID, PAD_ID]]])
    expected = [
        math.log(0.4),
        2 * math.log(0.6) / lp(2, 0.6),
        (math.log(0.6) + math.log(0.4)) / lp(2, 0.6),
    ]
    np.testing.assert_allclose(scores[0, :3], expected, atol=1e-5)
    assert scores[0, 3] == np.float32(-1e30)


@pytest.mark.parametrize("alpha", [0.6, 2.0])
def test_wide_beam_equals_exhaustive_search(alpha):
    # 4 tokens at most: at most 2 ** 3 = 8 alive hypotheses, whose 8 * 3 real extensions all fit in
    # the 2 * 12 candidates, so beam 12 is exhaustive and its 12-best must be the true 12-best.
    table = PrefixTable.random(num_sources=2, max_decode_length=4, seed=11)
    max_lengths = np.array([4, 3], np.int32)
    ids, scores = run_beam(table, [0, 1], 4, beam_size=12, alpha=alpha, num_return=12, max_lengths=max_lengths)
    for source in range(2):
        expected_ids, expected_scores = numpy_exhaustive(table, source, max_lengths[source], 4, alpha)
        np.testing.assert_array_equal(ids[source], expected_ids[:12])
        np.testing.assert_allclose(scores[source], expected_scores[:12], atol=1e-5)


def numpy_beam_search(table, source, max_length, beam_size, alpha, min_length=1, forced=()):
    """The module's alive/finished search written out plainly, run to `max_length` without the
    early stop: `[(score, tokens)]` of the finished set, best first.

    Every step extends the alive hypotheses by every token, keeps the `2 * beam_size` best by
    log-probability (ties to the lower (beam, token), as the module's top_k does), sends those that
    end (EOS, or at `max_length`) to the finished set by length-penalised score and the others, by
    log-probability, to the alive set. EOS is no candidate below `min_length`. The search starts
    from the one hypothesis `forced` (tokens without EOS, at most `max_length`), which is finished
    if it has `max_length` tokens.
    """
    forced_log_prob = sum(table.log_probs(source, list(forced[:t]))[forced[t]] for t in range(len(forced)))
    alive = [(tuple(forced), forced_log_prob)]
    finished = [(forced_log_prob / lp(max_length, alpha), tuple(forced))] if len(forced) == max_length else []
    for length in range(len(forced) + 1, max_length + 1):
        candidates = []
        for prefix, log_prob in alive:
            log_probs = table.log_probs(source, list(prefix))
            tokens = [t for t in range(len(log_probs)) if t != EOS_ID or length >= min(min_length, max_length)]
            candidates.extend((log_prob + log_probs[token], prefix + (token,)) for token in tokens)
        candidates = sorted(candidates, key=lambda c: -c[0])[: 2 * beam_size]
        ends = [token[-1] == EOS_ID or length == max_length for _, token in candidates]
        ended = [(log_prob / lp(length, alpha), tokens) for (log_prob, tokens), end in zip(candidates, ends) if end]
        finished = sorted(finished + ended, key=lambda h: -h[0])[:beam_size]
        alive = [(tokens, log_prob) for (log_prob, tokens), end in zip(candidates, ends) if not end][:beam_size]
    return finished


BIGRAM_VOCAB_SIZE = 12
BIGRAM_REAL_TOKENS = [EOS_ID] + list(range(4, BIGRAM_VOCAB_SIZE))  # EOS and 8 ordinary tokens


class BigramTable:
    """log P(next token | source, step, previous token) as random logits `[sources, max_length,
    vocab, vocab]`: a larger vocabulary and longer outputs than a `PrefixTable` holds, with the exact
    optimum found by dynamic programming over (length, last token) instead of by listing every
    hypothesis. The same interface as `PrefixTable` (`log_probs`, `score`, `decoder`)."""

    def __init__(self, num_sources, max_length, seed, scale=1.5, eos_bias=0.5):
        rng = np.random.default_rng(seed)
        shape = (num_sources, max_length, BIGRAM_VOCAB_SIZE, BIGRAM_VOCAB_SIZE)
        self.logits = np.full(shape, UNLIKELY_LOGIT, np.float32)
        self.logits[..., BIGRAM_REAL_TOKENS] = scale * rng.standard_normal(shape[:-1] + (len(BIGRAM_REAL_TOKENS),))
        self.logits[..., EOS_ID] += eos_bias

    def step_log_probs(self, source):
        """`[max_length, previous token, next token]` log-probabilities, float64."""
        logits = self.logits[source].astype(np.float64)
        top = logits.max(axis=-1, keepdims=True)
        return logits - top - np.log(np.exp(logits - top).sum(axis=-1, keepdims=True))

    def log_probs(self, source, prefix):
        return self.step_log_probs(source)[len(prefix), prefix[-1] if prefix else BOS_ID]

    def score(self, source, tokens, alpha):
        """Length-penalised score of returned ids (pad stripped, EOS included), in float64."""
        tokens = [int(t) for t in tokens if t != PAD_ID]
        log_prob = sum(self.log_probs(source, tokens[:t])[tokens[t]] for t in range(len(tokens)))
        return log_prob / lp(len(tokens), alpha)

    def optimum(self, source, max_length, alpha):
        """The best score of a complete hypothesis (EOS, or cut at `max_length`)."""
        log_probs = self.step_log_probs(source)
        best_prefix = np.full(BIGRAM_VOCAB_SIZE, -np.inf)  # best log P of a prefix, by its last token
        best_prefix[BOS_ID] = 0.0
        best = -np.inf
        for length in range(1, max_length + 1):
            extended = best_prefix[:, None] + log_probs[length - 1]  # [previous, next]
            ended = extended.max() if length == max_length else extended[:, EOS_ID].max()
            best = max(best, ended / lp(length, alpha))
            best_prefix = extended.max(axis=0)
            best_prefix[EOS_ID] = -np.inf
        return best

    def decoder(self, sources, beam_size, state=None):
        """`(next_logits_fn, initial_state)`; the model reads only the ids the search passes in,
        so `state` (a placeholder the search carries along) does not matter."""
        num_steps = self.logits.shape[1]
        table = ops.convert_to_tensor(self.logits.reshape(-1, BIGRAM_VOCAB_SIZE))
        offset = ops.repeat(ops.cast(sources, "int32"), beam_size, axis=0) * num_steps * BIGRAM_VOCAB_SIZE

        def next_logits_fn(ids, step, state):
            return ops.take(table, offset + step * BIGRAM_VOCAB_SIZE + ids, axis=0), state

        return next_logits_fn, {"unused": ops.zeros((ops.shape(offset)[0],), "int32")}


def test_bigram_optimum_equals_brute_force():
    table = BigramTable(num_sources=3, max_length=4, seed=30)
    for source, max_length in ((0, 4), (1, 3), (2, 1)):
        for alpha in (0.0, 0.6, 2.0):
            scores = []
            for length in range(1, max_length + 1):
                for tokens in itertools.product(BIGRAM_REAL_TOKENS, repeat=length):
                    if EOS_ID not in tokens[:-1] and (tokens[-1] == EOS_ID or length == max_length):
                        scores.append(table.score(source, tokens, alpha))
            np.testing.assert_allclose(table.optimum(source, max_length, alpha), max(scores), atol=1e-9)


# Random "models" for the search-quality tests: prefix tables with 3 real tokens (EOS, A, B) and
# hypotheses of at most 5 tokens, where the optimum is found by listing every hypothesis, and a
# bigram table with 9 real tokens and up to 10, where beam 4 is a real approximation.
NUM_RANDOM_SOURCES = 60


@pytest.fixture(scope="module")
def random_models():
    """`[(table, max_lengths, optimum(source, alpha))]`: a flatter and a sharper prefix table, a bigram table."""
    prefix_max_lengths = np.array([5, 4, 3] * (NUM_RANDOM_SOURCES // 3), np.int32)
    bigram_max_lengths = np.array([10, 7, 4] * (NUM_RANDOM_SOURCES // 3), np.int32)
    models = []
    for table in (PrefixTable.random(NUM_RANDOM_SOURCES, 5, 21), PrefixTable.random(NUM_RANDOM_SOURCES, 5, 22, 3.0)):
        optimum = lambda source, alpha, table=table: numpy_exhaustive(
            table, source, prefix_max_lengths[source], 5, alpha
        )[1][0]
        models.append((table, prefix_max_lengths, optimum))
    bigram = BigramTable(NUM_RANDOM_SOURCES, 10, seed=23)
    models.append(
        (bigram, bigram_max_lengths, lambda source, alpha: bigram.optimum(source, bigram_max_lengths[source], alpha))
    )
    return models


# Each alpha is the same code with other numbers, and so are beams 2 and 4 (beam 1 keeps one alive
# hypothesis): JAX runs the search with and without the penalty at beams 1 and 4, the TensorFlow run
# every alpha and beam.
REFERENCE_ALPHAS = [0.0, 0.6] if keras.backend.backend() == "jax" else [0.0, 0.6, 1.0, 2.0]
REFERENCE_BEAMS = [1, 4] if keras.backend.backend() == "jax" else [1, 2, 4]


@pytest.mark.parametrize("alpha", REFERENCE_ALPHAS)
@pytest.mark.parametrize("beam_size", REFERENCE_BEAMS)
def test_search_equals_plain_reference_and_never_beats_the_optimum(random_models, beam_size, alpha):
    # What must hold for an approximate search: it is exactly the documented algorithm (so the early
    # stop of the finished set never changes the result, whatever alpha); every returned hypothesis
    # is complete (EOS, or cut at its sentence's max length) and scores what the model gives it;
    # the n-best are sorted and distinct; none beats the exhaustive optimum.
    for table, max_lengths, optimum in random_models:
        max_decode_length = int(max_lengths.max())
        ids, scores = run_beam(
            table,
            np.arange(NUM_RANDOM_SOURCES),
            max_decode_length,
            beam_size=beam_size,
            alpha=alpha,
            num_return=beam_size,
            max_lengths=max_lengths,
        )
        for source, max_length in enumerate(max_lengths):
            reference = numpy_beam_search(table, source, max_length, beam_size, alpha)
            # Hypotheses through a never-likely token (logit -40) tie with each other; compare the rest.
            real = [(score, tokens) for score, tokens in reference if score > -20.0]
            np.testing.assert_array_equal(ids[source, : len(real)], [padded(t, max_decode_length) for _, t in real])
            np.testing.assert_allclose(scores[source, : len(real)], [s for s, _ in real], atol=1e-4)
            assert scores[source, 0] <= optimum(source, alpha) + 1e-4
            assert np.all(np.diff(scores[source]) <= 0)
            assert len({tuple(row) for row in ids[source]}) == beam_size
            for rank in range(len(real)):
                tokens = [t for t in ids[source, rank] if t != PAD_ID]
                assert tokens[-1] == EOS_ID or len(tokens) == max_length
                assert EOS_ID not in tokens[:-1]
                np.testing.assert_allclose(scores[source, rank], table.score(source, tokens, alpha), atol=1e-4)


def search_quality(table, max_lengths, beam_size, alpha):
    """Fractions of the sentences where the beam's best is the exact optimum (`optimal`), where
    greedy's output is (`greedy_optimal`), where the beam's best scores above / below greedy's output
    (`above_greedy`, `below_greedy`) and where it is shorter than greedy's output (`shorter`)."""
    sources = np.arange(len(max_lengths))
    max_decode_length = int(max_lengths.max())
    ids, scores = run_beam(table, sources, max_decode_length, beam_size=beam_size, alpha=alpha, max_lengths=max_lengths)
    greedy_ids, greedy_scores = run_greedy(table, sources, max_decode_length, alpha=alpha, max_lengths=max_lengths)
    optimum = np.array([table.optimum(source, max_lengths[source], alpha) for source in sources])
    best, greedy = scores[:, 0], greedy_scores[:, 0]
    return {
        "optimal": np.mean(best >= optimum - 1e-4),
        "greedy_optimal": np.mean(greedy >= optimum - 1e-4),
        "above_greedy": np.mean(best > greedy + 1e-4),
        "below_greedy": np.mean(best < greedy - 1e-4),
        "shorter": np.mean(np.sum(ids[:, 0] != PAD_ID, axis=1) < np.sum(greedy_ids[:, 0] != PAD_ID, axis=1)),
    }


@pytest.mark.parametrize("alpha", [0.6, 1.0])
def test_beam_four_finds_the_optimum_of_a_random_bigram_model(alpha):
    # Beam search is approximate: its best may miss the optimum and may even score below greedy's
    # output (the greedy prefix can fall out of the alive set), so no per-sentence claim holds. Over
    # 300 random sentences of up to 10 tokens from 9, beam 4 must find the exact optimum almost
    # always, far more often than greedy, and must almost never score below greedy.
    max_lengths = np.array([10, 7, 4] * 100, np.int32)
    quality = search_quality(BigramTable(300, 10, seed=31), max_lengths, beam_size=4, alpha=alpha)
    assert quality["optimal"] >= 0.95, quality
    assert quality["optimal"] - quality["greedy_optimal"] >= 0.3, quality
    assert quality["below_greedy"] <= 0.01, quality


def test_eos_ends_a_hypothesis_and_pads_after_it():
    # A then EOS (.95): the hypothesis ends at length 2 although 5 tokens are allowed.
    script = {(): {A: 0.9, B: 0.06, EOS_ID: 0.04}, (A,): {EOS_ID: 0.95, A: 0.03, B: 0.02}}
    table = PrefixTable.scripted(script, 5, {A: 0.5, B: 0.4, EOS_ID: 0.1})
    ids, scores = run_beam(table, [0], 5, beam_size=2, alpha=0.6)
    np.testing.assert_array_equal(ids, [[[A, EOS_ID, PAD_ID, PAD_ID, PAD_ID]]])
    np.testing.assert_allclose(scores, [[(math.log(0.9) + math.log(0.95)) / (7 / 6) ** 0.6]], atol=1e-5)


def test_max_lengths_end_hypotheses():
    # EOS is never likely: hypotheses end at their sentence's max length, without EOS, scored with
    # that length. Sentence 0 (max 2): AA (ln.6+ln.7)/((5+2)/6)**.6 = -0.7909 beats EOS (-2.303) and
    # AB, A EOS. Sentence 1 (max 3): AAA (ln.6+2ln.7)/((5+3)/6)**.6 = -1.0301.
    script = {(): {A: 0.6, B: 0.3, EOS_ID: 0.1}}
    table = PrefixTable(np.repeat(PrefixTable.scripted(script, 4, {A: 0.7, B: 0.2, EOS_ID: 0.1}).logits, 3, 0))
    # (NumPy integer scalars are accepted as the static sizes.)
    ids, scores = run_beam(table, [0, 1, 2], np.int64(4), beam_size=np.int32(2), max_lengths=np.array([2, 3, 9]))
    np.testing.assert_array_equal(ids[:, 0], [[A, A, PAD_ID, PAD_ID], [A, A, A, PAD_ID], [A, A, A, A]])
    expected = [
        (math.log(0.6) + math.log(0.7)) / (7 / 6) ** 0.6,
        (math.log(0.6) + 2 * math.log(0.7)) / (8 / 6) ** 0.6,
        # max_lengths above max_decode_length are capped at it (4 tokens).
        (math.log(0.6) + 3 * math.log(0.7)) / (9 / 6) ** 0.6,
    ]
    np.testing.assert_allclose(scores[:, 0], expected, atol=1e-5)


def test_min_lengths_keep_eos_out_below_the_minimum():
    # EOS is made the likeliest token everywhere, so that without a minimum the searches end at
    # once. With minimum lengths (one above its sentence's max length: the max length holds) every
    # search equals its plain reference with EOS barred below the minimum, and the returned scores
    # are the model's own log-probabilities: EOS's probability is not handed to the other tokens.
    table = PrefixTable.random(num_sources=4, max_decode_length=4, seed=13)
    table.logits[..., EOS_ID] += 6.0
    sources = np.arange(4)
    max_lengths = np.array([4, 4, 3, 2], np.int32)
    min_lengths = np.array([1, 3, 4, 9], np.int32)
    lengths = dict(max_lengths=max_lengths, min_lengths=min_lengths)
    # Beam 12 is exhaustive here (see test_wide_beam_equals_exhaustive_search).
    wide_ids, wide_scores = run_beam(table, sources, 4, beam_size=12, num_return=12, **lengths)
    ids, scores = run_beam(table, sources, 4, beam_size=2, num_return=2, **lengths)
    greedy_ids, greedy_scores = run_greedy(table, sources, 4, alpha=0.6, **lengths)
    unconstrained_ids, _ = run_beam(table, sources, 4, beam_size=2, max_lengths=max_lengths)
    np.testing.assert_array_equal(unconstrained_ids[:, 0, 0], [EOS_ID] * 4)
    for source in sources:
        shortest = min(min_lengths[source], max_lengths[source])
        expected_ids, expected_scores = numpy_exhaustive(table, source, max_lengths[source], 4, 0.6, shortest)
        # (Sentence 3 has 6 hypotheses over the real tokens; the rest go through never-likely ones.)
        real = min(12, len(expected_ids))
        np.testing.assert_array_equal(wide_ids[source, :real], expected_ids[:real])
        np.testing.assert_allclose(wide_scores[source, :real], expected_scores[:real], atol=1e-5)
        reference = numpy_beam_search(table, source, max_lengths[source], 2, 0.6, shortest)
        np.testing.assert_array_equal(ids[source], [padded(tokens, 4) for _, tokens in reference])
        np.testing.assert_allclose(scores[source], [score for score, _ in reference], atol=1e-5)
        expected_greedy_ids, expected_greedy_score = numpy_greedy(table, source, max_lengths[source], 4, 0.6, shortest)
        np.testing.assert_array_equal(greedy_ids[source, 0], expected_greedy_ids)
        np.testing.assert_allclose(greedy_scores[source, 0], expected_greedy_score, atol=1e-5)
        assert np.sum(ids[source, 0] != PAD_ID) >= shortest


def test_sentence_alone_equals_sentence_in_batch():
    table = PrefixTable.random(num_sources=3, max_decode_length=5, seed=5)
    max_lengths = np.array([2, 5, 3], np.int32)
    kwargs = dict(beam_size=3, num_return=3, alpha=0.6)
    ids, scores = run_beam(table, [0, 1, 2], 5, max_lengths=max_lengths, **kwargs)
    for source in (1, 2):
        alone_ids, alone_scores = run_beam(table, [source], 5, max_lengths=max_lengths[source : source + 1], **kwargs)
        np.testing.assert_array_equal(alone_ids[0], ids[source])
        np.testing.assert_allclose(alone_scores[0], scores[source], atol=1e-6)
    assert np.all(ids[0, :, 2:] == PAD_ID) and np.all(ids[2, :, 3:] == PAD_ID)
    # Every returned row is pad after its first EOS.
    for row in ids.reshape(-1, 5):
        eos = np.flatnonzero(row == EOS_ID)
        if eos.size:
            assert np.all(row[eos[0] + 1 :] == PAD_ID), row
    # With a buffer of exactly its max length (3 tokens): the same tokens and scores.
    short_ids, short_scores = run_beam(table, [2], 3, **kwargs)
    np.testing.assert_array_equal(short_ids[0], ids[2, :, :3])
    np.testing.assert_allclose(short_scores[0], scores[2], atol=1e-6)


def test_state_is_reordered_with_the_hypotheses():
    # The decoder sees the prefix only through its state (the ids it wrote there itself), so the
    # search's scores match a rescoring of the returned ids only if the state followed each
    # hypothesis when the beams were reselected.
    table = PrefixTable.random(num_sources=2, max_decode_length=5, seed=9)
    fn, initial_state = table.decoder(np.array([0, 1], np.int32), 3, state="prefix")
    bos = np.full([2], BOS_ID, np.int32)
    result = beam_search(fn, bos, initial_state, beam_size=3, max_decode_length=5, num_return=3)
    assert isinstance(result, SearchResult)
    assert tuple(result.ids.shape) == (2, 3, 5) and tuple(result.scores.shape) == (2, 3)
    assert keras.backend.standardize_dtype(result.ids.dtype) == "int32"
    ids, scores = ops.convert_to_numpy(result.ids), ops.convert_to_numpy(result.scores)
    for source in range(2):
        for rank in range(3):
            np.testing.assert_allclose(scores[source, rank], table.score(source, ids[source, rank], 0.6), atol=1e-5)
        # Sorted best first; distinct hypotheses (step 0 starts from a single live beam).
        assert np.all(np.diff(scores[source]) <= 0), scores
        assert len({tuple(row) for row in ids[source]}) == 3


def test_reorder_state_replaces_the_gather_of_the_state():
    # `reorder_state` gets the state and the parent row of every new hypothesis, and what it returns
    # is the next step's state: gathering the prefix there gives the default search's results, and
    # a state left unreordered feeds the decoder other prefixes than the hypotheses' (their scores
    # then disagree with a rescoring of the returned ids).
    table = PrefixTable.random(num_sources=2, max_decode_length=5, seed=9)
    sources = np.array([0, 1], np.int32)
    calls = []

    def gather_prefix(state, parent_rows):
        calls.append(tuple(parent_rows.shape))
        return keras.tree.map_structure(lambda x: ops.take(x, parent_rows, axis=0), state)

    default = run_beam(table, sources, 5, beam_size=3, state="prefix", num_return=3)
    hooked = run_beam(table, sources, 5, beam_size=3, state="prefix", num_return=3, reorder_state=gather_prefix)
    np.testing.assert_array_equal(hooked[0], default[0])
    np.testing.assert_allclose(hooked[1], default[1], atol=1e-6)
    assert calls and set(calls) == {(2 * 3,)}
    ids, scores = run_beam(
        table, sources, 5, beam_size=3, state="prefix", num_return=3, reorder_state=lambda state, rows: state
    )
    rescored = np.array([[table.score(source, ids[source, rank], 0.6) for rank in range(3)] for source in range(2)])
    assert np.max(np.abs(scores - rescored)) > 1e-3


def test_minus_infinity_and_half_precision_logits():
    # A model that masks tokens with -inf and computes in float16 still gets finite float32 scores.
    table = PrefixTable.scripted(SCRIPT_1, 3, DEFAULT_1)
    masked = PrefixTable(np.where(table.logits == UNLIKELY_LOGIT, -np.inf, table.logits))
    fn, initial_state = masked.decoder(np.array([0], np.int32), 2)

    def half_fn(ids, step, state):
        logits, state = fn(ids, step, state)
        return ops.cast(logits, "float16"), state

    bos = np.array([BOS_ID], np.int32)
    ids, scores = beam_search(half_fn, bos, initial_state, beam_size=2, max_decode_length=3)
    assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), [[[B, EOS_ID, PAD_ID]]])
    scores = ops.convert_to_numpy(scores)
    assert np.all(np.isfinite(scores))
    np.testing.assert_allclose(scores, [[(math.log(0.4) + math.log(0.9)) / lp(2, 0.6)]], atol=2e-3)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="counts eager TF loop steps")
def test_search_stops_early():
    # Eager TensorFlow runs the loop body in Python once per step, so the steps can be counted.
    # Both searches may take 4 steps. Beam 1 on script 3 is decided after 2 (see above); greedy
    # on script 1 ends with EOS after 3.
    steps = []

    def counted(fn):
        def next_logits_fn(ids, step, state):
            steps.append(int(step))
            return fn(ids, step, state)

        return next_logits_fn

    bos = np.array([BOS_ID], np.int32)
    fn, initial_state = PrefixTable.scripted(SCRIPT_3, 4, DEFAULT_1).decoder([0], 1)
    beam_search(counted(fn), bos, initial_state, beam_size=1, max_decode_length=4, alpha=0.0)
    assert steps == [0, 1]
    del steps[:]
    fn, initial_state = PrefixTable.scripted(SCRIPT_1, 4, DEFAULT_1).decoder([0], 1)
    ids, _ = greedy_search(counted(fn), bos, initial_state, max_decode_length=4)
    np.testing.assert_array_equal(ops.convert_to_numpy(ids), [[[A, A, EOS_ID, PAD_ID]]])
    assert steps == [0, 1, 2]
    # A sentence whose hypotheses all reached its max length (2) is done, even with fewer finished
    # hypotheses than beams (only 3 exist, see test_fewer_hypotheses_than_requested).
    del steps[:]
    logits = np.full((1, VOCAB_SIZE**4, VOCAB_SIZE), -np.inf, np.float32)
    logits[..., [EOS_ID, A]] = np.log([0.4, 0.6])
    fn, initial_state = PrefixTable(logits).decoder([0], 4)
    beam_search(counted(fn), bos, initial_state, beam_size=4, max_decode_length=4, max_lengths=[2])
    assert steps == [0, 1]
    # The heuristic stops after one step where the exact rule takes five (see SCRIPT_LONG_WINS); one
    # hypothesis returned stops no later than four, and earlier for some sentences of a batch.
    fn, initial_state = PrefixTable.scripted(SCRIPT_LONG_WINS, 5, DEFAULT_1).decoder([0], 2)
    counts = []
    for stopping in ("exact", "heuristic"):
        del steps[:]
        beam_search(counted(fn), bos, initial_state, beam_size=2, max_decode_length=5, alpha=2.0, stopping=stopping)
        counts.append(len(steps))
    assert counts == [5, 1]
    table = BigramTable(12, 10, seed=23)
    counts = []
    for num_return in (4, 1):
        del steps[:]
        for source in range(12):  # Alone: the loop's steps are the sentence's.
            fn, initial_state = table.decoder(np.array([source], np.int32), 4)
            beam_search(
                counted(fn), bos, initial_state, beam_size=4, max_decode_length=10, alpha=1.0, num_return=num_return
            )
        counts.append(len(steps))
    assert counts[1] < counts[0], counts


# An early ending leads after one step; a long one wins once its length penalty grows (alpha 2):
# "EOS" scores log(0.6) = -0.51, "A A A A EOS" (log(0.35) + 4 log(0.99)) / (10 / 6) ** 2 = -0.39.
SCRIPT_LONG_WINS = {
    (): {EOS_ID: 0.6, A: 0.35, B: 0.05},
    (A,): {A: 0.99, EOS_ID: 0.005, B: 0.005},
    (A, A): {A: 0.99, EOS_ID: 0.005, B: 0.005},
    (A, A, A): {A: 0.99, EOS_ID: 0.005, B: 0.005},
    (A, A, A, A): {EOS_ID: 0.99, A: 0.005, B: 0.005},
}


def test_heuristic_stopping_ends_when_no_alive_hypothesis_would_win_at_the_next_step():
    # After step 1 the best alive "A" (log 0.35) ending at length 2 would score -1.05 / (7 / 6) ** 2
    # = -0.77, below "EOS": the heuristic stops and returns it; the exact rule goes on, since "A"
    # could still reach -1.05 / (10 / 6) ** 2 = -0.38 at the maximum length, and finds the winner.
    table = PrefixTable.scripted(SCRIPT_LONG_WINS, 5, DEFAULT_1)
    exact_ids, exact_scores = run_beam(table, [0], 5, beam_size=2, alpha=2.0)
    np.testing.assert_array_equal(exact_ids, [[[A, A, A, A, EOS_ID]]])
    np.testing.assert_allclose(exact_scores, [[(math.log(0.35) + 4 * math.log(0.99)) / lp(5, 2.0)]], atol=1e-5)
    ids, scores = run_beam(table, [0], 5, beam_size=2, alpha=2.0, stopping="heuristic")
    np.testing.assert_array_equal(ids, [[[EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]]])
    np.testing.assert_allclose(scores, [[math.log(0.6)]], atol=1e-5)
    # With alpha 0 the penalty is 1 at every length, and both rules are the same bound.
    for stopping in ("exact", "heuristic"):
        ids, _ = run_beam(table, [0], 5, beam_size=2, alpha=0.0, stopping=stopping)
        np.testing.assert_array_equal(ids, [[[EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID]]])


def test_a_sentence_done_early_keeps_its_translation_while_its_batch_goes_on():
    # Sentence 1 cannot end before its maximum length, so the loop runs 5 steps; sentence 0 is done
    # after one under the heuristic, and its "A A A A EOS" ending at step 5 must not replace "EOS".
    long_runner = PrefixTable.scripted({}, 5, {A: 0.5, B: 0.5})
    table = PrefixTable(
        np.concatenate([PrefixTable.scripted(SCRIPT_LONG_WINS, 5, DEFAULT_1).logits, long_runner.logits])
    )
    kwargs = dict(beam_size=2, alpha=2.0, stopping="heuristic")
    alone_ids, alone_scores = run_beam(table, [0], 5, **kwargs)
    ids, scores = run_beam(table, [0, 1], 5, **kwargs)
    assert alone_ids[0, 0, 0] == EOS_ID
    np.testing.assert_array_equal(ids[0], alone_ids[0])
    np.testing.assert_allclose(scores[0], alone_scores[0], atol=1e-6)
    assert np.all(ids[1, 0] != PAD_ID)  # the long runner ran to its maximum length


@pytest.mark.parametrize("alpha", [0.6, 2.0])
def test_the_best_hypothesis_alone_is_the_best_of_the_whole_n_best(random_models, alpha):
    # num_return=1 stops once no alive hypothesis could beat the best finished one, not the 4th:
    # the best is still exact, and both rules give every sentence a complete translation.
    for table, max_lengths, _ in random_models:
        sources = np.arange(NUM_RANDOM_SOURCES)
        length = int(max_lengths.max())
        all_ids, all_scores = run_beam(
            table, sources, length, beam_size=4, alpha=alpha, num_return=4, max_lengths=max_lengths
        )
        ids, scores = run_beam(table, sources, length, beam_size=4, alpha=alpha, max_lengths=max_lengths)
        np.testing.assert_array_equal(ids[:, 0], all_ids[:, 0])
        np.testing.assert_allclose(scores[:, 0], all_scores[:, 0], atol=1e-6)
        ids, scores = run_beam(
            table, sources, length, beam_size=4, alpha=alpha, max_lengths=max_lengths, stopping="heuristic"
        )
        assert np.all(scores[:, 0] <= all_scores[:, 0] + 1e-6)
        for source, max_length in enumerate(max_lengths):
            tokens = [t for t in ids[source, 0] if t != PAD_ID]
            assert tokens[-1] == EOS_ID or len(tokens) == max_length
            np.testing.assert_allclose(scores[source, 0], table.score(source, tokens, alpha), atol=1e-4)


@pytest.mark.skipif(keras.backend.backend() != "jax", reason="JAX backend only")
def test_jax_jit_equals_eager():
    import jax

    table = PrefixTable.random(num_sources=3, max_decode_length=5, seed=2)

    def search(sources, max_lengths, prefix_ids, constraint_ids):
        fn, initial_state = table.decoder(sources, 3)
        bos = ops.full_like(sources, BOS_ID)
        return beam_search(
            fn,
            bos,
            initial_state,
            beam_size=3,
            max_decode_length=5,
            max_lengths=max_lengths,
            num_return=2,
            prefix_ids=prefix_ids,
            constraint_ids=constraint_ids,
        )

    sources = np.array([0, 1, 2], np.int32)
    max_lengths = np.array([5, 3, 4], np.int32)
    prefixes = prefix_rows([(A, B), (), (B,)], width=2)
    constraints = np.array([[[B, A]], [[A, PAD_ID]], [[PAD_ID, PAD_ID]]], np.int32)
    # Without steering, and with both parts plugged in at once: each part's code traced under jit.
    for prefix_ids, constraint_ids in ((None, None), (prefixes, constraints)):
        eager_ids, eager_scores = search(sources, max_lengths, prefix_ids, constraint_ids)
        jit_ids, jit_scores = jax.jit(search)(sources, max_lengths, prefix_ids, constraint_ids)
        np.testing.assert_array_equal(np.asarray(jit_ids), np.asarray(eager_ids))
        np.testing.assert_allclose(np.asarray(jit_scores), np.asarray(eager_scores), atol=1e-6)


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="TensorFlow backend only")
def test_tf_function_and_saved_model_equal_eager(tmp_path):
    import tensorflow as tf

    table = PrefixTable.random(num_sources=3, max_decode_length=5, seed=4)

    def search(sources, max_lengths):
        fn, initial_state = table.decoder(sources, 3)
        bos = tf.fill(tf.shape(sources), BOS_ID)
        return tuple(
            beam_search(
                fn,
                bos,
                initial_state,
                beam_size=3,
                max_decode_length=5,
                max_lengths=max_lengths,
                num_return=2,
            )
        )

    sources = tf.constant([0, 1, 2], tf.int32)
    max_lengths = tf.constant([5, 3, 4], tf.int32)
    eager_ids, eager_scores = search(sources, max_lengths)
    # An unknown batch size, as in the servable signature; plain graph, no XLA.
    spec = tf.TensorSpec([None], tf.int32)
    graph_search = tf.function(search, input_signature=[spec, spec], jit_compile=False, autograph=False)
    graph_ids, graph_scores = graph_search(sources, max_lengths)
    np.testing.assert_array_equal(graph_ids.numpy(), eager_ids.numpy())
    np.testing.assert_allclose(graph_scores.numpy(), eager_scores.numpy(), atol=1e-6)

    module = tf.Module()
    module.search = graph_search
    tf.saved_model.save(module, str(tmp_path))
    loaded_ids, loaded_scores = tf.saved_model.load(str(tmp_path)).search(sources, max_lengths)
    np.testing.assert_array_equal(loaded_ids.numpy(), eager_ids.numpy())
    np.testing.assert_allclose(loaded_scores.numpy(), eager_scores.numpy(), atol=1e-6)


def _call(**overrides):
    table = PrefixTable.random(num_sources=1, max_decode_length=3, seed=0)
    fn, initial_state = table.decoder(np.array([0], np.int32), 2)
    kwargs = dict(beam_size=2, max_decode_length=3)
    kwargs.update(overrides)
    initial_ids = kwargs.pop("initial_ids", np.array([BOS_ID], np.int32))
    return beam_search(fn, initial_ids, initial_state, **kwargs)


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(beam_size=0), r"beam_size.*>= 1.*Received: beam_size=0"),
        (dict(beam_size=2.0), r"Received: beam_size=2\.0"),
        (dict(alpha=-0.5), r"alpha.*>= 0.*Received: alpha=-0\.5"),
        (dict(alpha=float("nan")), r"Received: alpha=nan"),
        (dict(max_decode_length=0), r"max_decode_length.*>= 1.*Received: max_decode_length=0"),
        (dict(max_decode_length=None), r"Received: max_decode_length=None"),
        (dict(num_return=3), r"num_return.*\[1, beam_size=2\].*Received: num_return=3"),
        (dict(initial_ids=np.array([[BOS_ID]])), r"initial_ids.*rank 1.*Received: shape \(1, 1\)"),
        (dict(initial_ids=np.int32(BOS_ID)), r"initial_ids.*rank 1.*Received: shape \(\)"),
        (dict(max_lengths=np.array([[3]])), r"max_lengths.*rank 1.*Received: shape \(1, 1\)"),
        (dict(min_lengths=np.array([[3]])), r"min_lengths.*rank 1.*Received: shape \(1, 1\)"),
        (dict(prefix_ids=np.array([A])), r"prefix_ids.*rank 2.*Received: shape \(1,\)"),
        (dict(constraint_ids=np.array([[A]])), r"constraint_ids.*rank 3.*Received: shape \(1, 1\)"),
    ],
)
def test_bad_arguments_raise(overrides, message):
    with pytest.raises(ValueError, match=message):
        _call(**overrides)


def test_greedy_bad_arguments_raise():
    table = PrefixTable.random(num_sources=1, max_decode_length=3, seed=0)
    fn, initial_state = table.decoder(np.array([0], np.int32), 1)
    with pytest.raises(ValueError, match=r"Received: max_decode_length=0"):
        greedy_search(fn, np.array([BOS_ID]), initial_state, max_decode_length=0)
    with pytest.raises(ValueError, match=r"Received: alpha=-1"):
        greedy_search(fn, np.array([BOS_ID]), initial_state, max_decode_length=3, alpha=-1)
