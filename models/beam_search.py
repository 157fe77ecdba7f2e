"""Batched beam search with a length penalty, over a decoder that keeps a key/value cache.

The search of "Attention Is All You Need" (Vaswani et al., 2017), section 6.1: beam size 4 and
length penalty alpha = 0.6, with the length penalty of Wu et al. (2016), "Google's Neural Machine
Translation System", eq. 14:

    lp(Y) = ((5 + |Y|) / 6) ** alpha,        score(Y) = log P(Y | X) / lp(Y)

The algorithm is the one of tensor2tensor / tensorflow-models `beam_search.py`: every sentence keeps
`beam_size` *alive* hypotheses (still growing) and `beam_size` *finished* ones (ended). At each step
the `2 * beam_size` best one-token extensions of the alive hypotheses are taken, so that even if
`beam_size` of them end, `beam_size` remain to stay alive; the ended ones compete, by
length-penalised score, for the finished set, the others (by log-probability) for the alive set. A
sentence is done when no alive hypothesis can beat its worst finished one (or none is left); the
loop stops when every sentence is done.

Conventions (the exact policy, relied on by the tests):

- Length |Y| counts the tokens produced, *including* the final EOS and excluding BOS: "a b EOS" has
  length 3 and score log P / ((5 + 3) / 6) ** alpha (as in tensor2tensor, whose step `i` scores
  length `i + 1`).
- A hypothesis that reaches its sentence's maximum length without producing EOS is finished there
  (forced end, no EOS appended) and scored with that length. Hence every sentence ends with finished
  hypotheses and the search never needs tensor2tensor's fallback of returning alive ones.
- The returned ids include the EOS token; every position after it is `pad_id`.
- With `min_lengths`, EOS cannot end a hypothesis shorter than its sentence's minimum (EOS is taken
  out of the choice, as fairseq's `--min-len` and OpenNMT's `min_length` do); scores stay the model's
  own log-probabilities, not renormalised over the other tokens.
- With `prefix_ids` (a target prefix, fairseq's `prefix_tokens`), the first tokens of a sentence are
  its prefix's: at each of those steps every other token is out of the choice, so one hypothesis
  extends the prefix, and the search goes on from it as from BOS. Scores and lengths count the
  whole output, the forced tokens with their model log-probabilities included. A sentence without a
  prefix (its row all `pad_id`) is searched exactly as without `prefix_ids`.
- With `constraint_ids` (terminology: target phrases every output must contain), the search is
  lexically constrained beam search with dynamic beam allocation (`_constrained_search`). A
  hypothesis can end, by EOS, only once it contains every phrase of its sentence; one that reaches
  the max length without them is dropped, so a sentence none of whose hypotheses meets its
  constraints returns no hypothesis (every row `pad_id`, score `UNMET_SCORE`). A sentence without
  constraints (its rows all `pad_id`) is searched by the same algorithm, not bit for bit as
  without `constraint_ids`: callers search such batches without them.

The search knows the model only through `next_logits_fn(ids, step, state) -> (logits, state)`. It is
written with `keras.ops` only, with fixed shapes (a preallocated id buffer and a `while_loop` whose
variables never change shape), so it runs eagerly or under `jax.jit` with the JAX backend and traces
into a `tf.function` (no XLA needed) for a SavedModel with the TensorFlow backend.

Layout: the beams of one sentence are contiguous, row `b * beam_size + k` of every `[batch * beam]`
tensor is beam `k` of sentence `b`.
"""

import numbers
from typing import Any, NamedTuple

import keras
from keras import ops

from common.special_ids import EOS_ID, PAD_ID
from models.search_config import DEFAULT_SEARCH

# Scores are always computed in float32, whatever the model's compute dtype (bfloat16 / float16
# logits are cast before the log-softmax), so "log 0" is a float32 constant: finite, far below any
# real log-probability, and small enough in magnitude that adding two of them stays finite (float32
# max is ~3.4e38). The loop state never holds -inf (a token the model gives -inf logits makes a dead
# candidate, replaced by this constant), so no -inf - (-inf) = NaN can arise.
_SCORE_DTYPE = "float32"
_LARGE_NEGATIVE = -1e30
# Anything at or below this is a dead hypothesis (one that started from `_LARGE_NEGATIVE`).
_DEAD_THRESHOLD = 0.5 * _LARGE_NEGATIVE
# The score of a returned row that holds no hypothesis (a sentence whose constraints were not met,
# or fewer possible hypotheses than `num_return`): a score at or below it is no translation.
UNMET_SCORE = _LARGE_NEGATIVE


class SearchResult(NamedTuple):
    """The n-best hypotheses of every sentence, best first.

    Attributes:
        ids: int32 `[batch, num_return, max_decode_length]`, the tokens after BOS, EOS included,
            `pad_id` after the EOS (and after the last token of a hypothesis cut at its max length).
        scores: float32 `[batch, num_return]`, log-probability divided by the length penalty.
    """

    ids: Any
    scores: Any


def length_penalty(length, alpha):
    """Wu et al. (2016), eq. 14: `((5 + length) / 6) ** alpha`, in float32.

    Args:
        length: int or tensor of ints, the number of tokens produced, EOS included.
        alpha: float >= 0; 0 disables the penalty (scores are plain log-probabilities).

    Returns:
        A float32 tensor with the shape of `length`.
    """
    length = ops.cast(length, _SCORE_DTYPE)
    return ops.power((5.0 + length) / 6.0, alpha)


def beam_search(
    next_logits_fn,
    initial_ids,
    initial_state,
    *,
    beam_size,
    max_decode_length,
    max_lengths=None,
    min_lengths=None,
    alpha=DEFAULT_SEARCH.alpha,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
    num_return=1,
    reorder_state=None,
    prefix_ids=None,
    constraint_ids=None,
):
    """Finds the `num_return` best translations of every sentence by beam search.

    Section 6.1 of the paper decodes with `beam_size=4, alpha=0.6` and a maximum output length of
    the input length + 50 (pass that as `max_lengths`).

    Args:
        next_logits_fn: `(ids, step, state) -> (logits, state)`. `ids` is int32 `[batch * beam]`,
            the token each hypothesis chose at the previous step (the initial ids at step 0);
            `step` is a scalar int32, the 0-based position being produced (it is also the number of
            tokens each hypothesis has produced so far); `state` is a nested structure (dicts,
            lists, tuples) of tensors, typically the decoder's self-attention key/value cache,
            with leading dimension `batch * beam` unless `reorder_state` handles it. Returns `logits` `[batch * beam, vocab]` (any
            float dtype; the search takes the log-softmax in float32) and the updated `state` with
            the same structure, shapes and dtypes. When hypotheses are reselected, the search
            reorders every tensor of `state` along axis 0 with a gather (or calls `reorder_state`). Anything identical across
            the beams of a sentence (encoder output, cross-attention keys/values, source padding
            mask) should be captured by the caller in the closure, tiled to `batch * beam` rows or
            kept one per sentence where the model reads it so (`models/translation.py` keeps the
            cross-attention keys/values per sentence); it is never reordered, since a hypothesis
            never moves to another sentence.
        initial_ids: int `[batch]`, the first input token of every sentence (BOS).
        initial_state: the `state` for step 0, leading dimension `batch * beam` already (unless
            `reorder_state` is given): the caller tiles it (e.g. `ops.repeat(x, beam_size, axis=0)`, which gives the contiguous
            layout, row `b * beam_size + k`).
        beam_size: int >= 1, hypotheses kept per sentence (alive and finished each).
        max_decode_length: int >= 1, static, the size of the id buffer and of the cache: no
            hypothesis is longer, whatever `max_lengths` says.
        max_lengths: optional int `[batch]`, the maximum output length (tokens, EOS included) of
            each sentence; values are clipped to `[1, max_decode_length]`. A hypothesis that
            reaches it ends there, without EOS. `None` means `max_decode_length` for all. With it,
            a sentence gives the same result alone as in a batch of sentences of other lengths.
        min_lengths: optional int `[batch]`, the minimum output length (tokens, EOS included) of
            each sentence: EOS is not chosen at a shorter length. A minimum above the sentence's
            max length acts as the max length (EOS is allowed there). `None`: no minimum.
        alpha: float >= 0, the length-penalty exponent (0: no penalty).
        eos_id: int, the token that ends a hypothesis.
        pad_id: int, written after the end of every hypothesis.
        num_return: int in `[1, beam_size]`, hypotheses returned per sentence.
        reorder_state: optional `(state, parent_rows) -> state`, called after every step with
            `parent_rows` int32 `[batch * beam]`, the row of the hypothesis each new one extends;
            it returns the state of the new hypotheses. Default: every tensor of `state` gathered
            along axis 0. A state that is not one row per hypothesis (`models/translation.py`:
            caches whose slots the beams of a sentence share, read through each hypothesis's
            ancestry) reorders only its per-hypothesis part.
        prefix_ids: optional int `[batch, prefix_length]`, static `prefix_length`: the tokens each
            sentence's output starts with, forced, then `pad_id` (a row of `pad_id` alone: no
            prefix). A prefix longer than its sentence's max length is cut there.
        constraint_ids: optional int `[batch, phrases, phrase_length]`, static `phrases` and
            `phrase_length`: each sentence's target phrases (terminology constraints), each row a
            phrase's tokens then `pad_id` (a row of `pad_id` alone: no phrase). Every returned
            hypothesis contains each phrase of its sentence as consecutive tokens; a sentence
            where none could (within its max length) returns rows of `pad_id` scored
            `UNMET_SCORE`. See `_constrained_search`.

    Returns:
        A `SearchResult(ids, scores)`, unpackable as a tuple: `ids` int32
        `[batch, num_return, max_decode_length]` (EOS included, `pad_id` after it), `scores`
        float32 `[batch, num_return]`, sorted best first. In the degenerate case of a vocabulary
        with fewer than `num_return` possible hypotheses, the missing rows are all `pad_id` with
        score -1e30 (`UNMET_SCORE`).

    Raises:
        ValueError: if an argument is out of range or `initial_ids` / `max_lengths` / `min_lengths` is
            not rank 1.
    """
    initial_ids, max_lengths, min_lengths, prefix_ids = _validate(
        beam_size, max_decode_length, alpha, num_return, initial_ids, max_lengths, min_lengths, prefix_ids
    )
    if constraint_ids is not None:
        constraint_ids = ops.convert_to_tensor(constraint_ids)
        if len(constraint_ids.shape) != 3 or None in constraint_ids.shape[1:]:
            raise ValueError(
                "`constraint_ids` must be None or have rank 3, shape [batch, phrases, phrase_length] with "
                f"static phrases and phrase_length. Received: shape {tuple(constraint_ids.shape)}"
            )
    search = _search if constraint_ids is None else _constrained_search
    options = {} if constraint_ids is None else {"constraint_ids": constraint_ids}
    return search(
        next_logits_fn,
        initial_ids,
        initial_state,
        beam_size=int(beam_size),
        num_candidates=2 * int(beam_size),
        max_decode_length=int(max_decode_length),
        max_lengths=max_lengths,
        min_lengths=min_lengths,
        alpha=float(alpha),
        eos_id=eos_id,
        pad_id=pad_id,
        num_return=int(num_return),
        reorder_state=reorder_state,
        prefix_ids=prefix_ids,
        **options,
    )


def greedy_search(
    next_logits_fn,
    initial_ids,
    initial_state,
    *,
    max_decode_length,
    max_lengths=None,
    min_lengths=None,
    alpha=DEFAULT_SEARCH.alpha,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
    prefix_ids=None,
):
    """Greedy decoding: at every step take the most likely token, stop at EOS or max length.

    It runs the loop of `beam_search` with one hypothesis and one candidate per step, so it is
    exactly the argmax loop. (`beam_search(beam_size=1)` is not: it looks at the 2 best tokens,
    keeps a finished hypothesis that ended with the second-best EOS, and goes on after the argmax
    EOS while the alive hypothesis may still beat it, so it can return a better-scoring,
    different sequence.)

    Args:
        next_logits_fn: as in `beam_search`, with `beam = 1`.
        initial_ids: int `[batch]`, the first input token of every sentence (BOS).
        initial_state: the `state` for step 0, leading dimension `batch`.
        max_decode_length: int >= 1, static, the size of the id buffer and of the cache.
        max_lengths: optional int `[batch]`, as in `beam_search`.
        min_lengths: optional int `[batch]`, as in `beam_search`: the argmax over the tokens other
            than EOS below it.
        alpha: float >= 0, used only for the returned scores (the tokens do not depend on it), so
            that they compare with `beam_search` scores.
        eos_id: int, the token that ends a hypothesis.
        pad_id: int, written after the end of every hypothesis.
        prefix_ids: optional int `[batch, prefix_length]`, as in `beam_search`: forced first tokens.

    Returns:
        A `SearchResult` as from `beam_search` with `num_return=1`: `ids` int32
        `[batch, 1, max_decode_length]`, `scores` float32 `[batch, 1]`.

    Raises:
        ValueError: if an argument is out of range or `initial_ids` / `max_lengths` / `min_lengths` is
            not rank 1.
    """
    return sampling_search(
        next_logits_fn,
        initial_ids,
        initial_state,
        max_decode_length=max_decode_length,
        sampler=None,
        max_lengths=max_lengths,
        min_lengths=min_lengths,
        alpha=alpha,
        eos_id=eos_id,
        pad_id=pad_id,
        prefix_ids=prefix_ids,
    )


def sampling_search(
    next_logits_fn,
    initial_ids,
    initial_state,
    *,
    max_decode_length,
    sampler,
    max_lengths=None,
    min_lengths=None,
    alpha=DEFAULT_SEARCH.alpha,
    eos_id=EOS_ID,
    pad_id=PAD_ID,
    prefix_ids=None,
):
    """Decoding by sampling: every step draws the next token with `sampler` (see
    `models.sampling.token_sampler`) instead of taking the argmax; otherwise `greedy_search`.

    Args:
        sampler: `(logits [batch, vocab], step) -> int32 [batch]`, the token drawn for each
            sentence; None takes the argmax (`greedy_search`).
        The others: as in `greedy_search`. The returned scores are the model's own
        log-probabilities of the drawn tokens (not those of the tempered or top-k distribution),
        divided by the length penalty, so that they compare with the searches' scores. A forced
        prefix token replaces the draw at its step.

    Returns:
        A `SearchResult` as from `greedy_search`.
    """
    initial_ids, max_lengths, min_lengths, prefix_ids = _validate(
        1, max_decode_length, alpha, 1, initial_ids, max_lengths, min_lengths, prefix_ids
    )
    return _search(
        next_logits_fn,
        initial_ids,
        initial_state,
        beam_size=1,
        num_candidates=1,
        max_decode_length=int(max_decode_length),
        max_lengths=max_lengths,
        min_lengths=min_lengths,
        alpha=float(alpha),
        eos_id=eos_id,
        pad_id=pad_id,
        num_return=1,
        sampler=sampler,
        prefix_ids=prefix_ids,
    )


def _validate(beam_size, max_decode_length, alpha, num_return, initial_ids, max_lengths, min_lengths, prefix_ids):
    """Raises ValueError on a bad argument; returns `initial_ids, max_lengths, min_lengths, prefix_ids`
    as tensors (None stays None)."""

    def is_int(value):  # Python or NumPy integer scalar, not a tensor
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)

    if not is_int(beam_size) or beam_size < 1:
        raise ValueError(f"`beam_size` must be an int >= 1. Received: beam_size={beam_size!r}")
    if not is_int(max_decode_length) or max_decode_length < 1:
        raise ValueError(
            "`max_decode_length` must be a static Python int >= 1 (the size of the id buffer and "
            f"of the cache). Received: max_decode_length={max_decode_length!r}"
        )
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool) or not alpha >= 0:
        raise ValueError(
            "`alpha` (length-penalty exponent) must be a float >= 0: with a negative alpha the "
            f"early-stopping bound is wrong. Received: alpha={alpha!r}"
        )
    if not is_int(num_return) or not 1 <= num_return <= beam_size:
        raise ValueError(
            f"`num_return` must be an int in [1, beam_size={beam_size}]. Received: num_return={num_return!r}"
        )
    initial_ids = ops.convert_to_tensor(initial_ids)
    if len(initial_ids.shape) != 1:
        raise ValueError(
            "`initial_ids` must have rank 1, shape [batch] (one BOS per sentence). "
            f"Received: shape {tuple(initial_ids.shape)}"
        )
    lengths = {"max_lengths": max_lengths, "min_lengths": min_lengths}
    for name, value in lengths.items():
        if value is not None:
            lengths[name] = ops.convert_to_tensor(value)
            if len(lengths[name].shape) != 1:
                raise ValueError(
                    f"`{name}` must be None or have rank 1, shape [batch]. Received: shape {tuple(lengths[name].shape)}"
                )
    if prefix_ids is not None:
        prefix_ids = ops.convert_to_tensor(prefix_ids)
        if len(prefix_ids.shape) != 2 or prefix_ids.shape[1] is None:
            raise ValueError(
                "`prefix_ids` must be None or have rank 2, shape [batch, prefix_length] with a static "
                f"prefix_length. Received: shape {tuple(prefix_ids.shape)}"
            )
    return initial_ids, lengths["max_lengths"], lengths["min_lengths"], prefix_ids


def _search(
    next_logits_fn,
    initial_ids,
    initial_state,
    *,
    beam_size,
    num_candidates,
    max_decode_length,
    max_lengths,
    alpha,
    eos_id,
    pad_id,
    num_return,
    min_lengths=None,
    reorder_state=None,
    sampler=None,
    prefix_ids=None,
):
    """The alive/finished search; `num_candidates` extensions per sentence and step, or with
    `sampler` (`(logits, step) -> tokens [rows]`, one hypothesis per sentence) the drawn token;
    `prefix_ids` forces the first tokens."""
    start = _search_start(
        initial_ids, prefix_ids, max_lengths, min_lengths, max_decode_length, alpha, beam_size, pad_id
    )
    forced_columns, positions, sentence_index, max_lengths, min_lengths = start[:5]
    alive_seq, alive_log_probs, finished_seq, finished_scores = start.hypotheses

    def cond(step, alive_seq, alive_log_probs, finished_seq, finished_scores, state):
        return _searching(step, alive_log_probs, finished_scores, start)

    def body(step, alive_seq, alive_log_probs, finished_seq, finished_scores, state):
        ids = ops.reshape(ops.take(alive_seq, step, axis=2), [-1])  # [batch * beam]
        logits, state = next_logits_fn(ids, step, state)
        logits = ops.cast(logits, _SCORE_DTYPE)  # [batch * beam, vocab]
        forced = None if forced_columns is None else ops.take(forced_columns, step, axis=1)  # [batch]
        cand_log_probs, cand_beam, cand_token = _best_extensions(
            logits,
            step,
            alive_log_probs,
            min_lengths,
            forced,
            beam_size=beam_size,
            num_candidates=num_candidates,
            eos_id=eos_id,
            pad_id=pad_id,
            sampler=sampler,
        )
        cand_seq = _gather_beams(alive_seq, cand_beam, sentence_index)  # [batch, candidates, L + 1]
        cand_seq = ops.where(positions == step + 1, cand_token[:, :, None], cand_seq)

        length = step + 1
        ended, real = _ended_candidates(cand_log_probs, cand_token, length, max_lengths, eos_id)
        finished_seq, finished_scores = _keep_best_finished(
            finished_seq, finished_scores, cand_seq, cand_log_probs, ended, length, alpha, beam_size, sentence_index
        )
        alive_seq, alive_log_probs, parent_beam = _keep_best_alive(
            cand_seq, cand_log_probs, cand_beam, ended, real, beam_size, sentence_index
        )
        state = _follow_parents(state, parent_beam, sentence_index, beam_size, reorder_state)
        return step + 1, alive_seq, alive_log_probs, finished_seq, finished_scores, state

    step = ops.convert_to_tensor(0, dtype="int32")
    _, _, _, finished_seq, finished_scores, _ = ops.while_loop(
        cond,
        body,
        (step, alive_seq, alive_log_probs, finished_seq, finished_scores, initial_state),
    )
    return SearchResult(ids=finished_seq[:, :num_return, 1:], scores=finished_scores[:, :num_return])


def _constrained_search(
    next_logits_fn,
    initial_ids,
    initial_state,
    *,
    beam_size,
    num_candidates,
    max_decode_length,
    max_lengths,
    alpha,
    eos_id,
    pad_id,
    num_return,
    constraint_ids,
    min_lengths=None,
    reorder_state=None,
    prefix_ids=None,
):
    """Lexically constrained beam search with dynamic beam allocation (DBA: Post & Vilar, 2018,
    "Fast Lexically Constrained Decoding with Dynamic Beam Allocation for Neural Machine
    Translation"), the algorithm of fairseq's `--constraints` and Sockeye.

    Why DBA and not grid beam search (Hokamp & Liu, 2017): grid beam search keeps a whole beam for
    every count of constraint tokens met, so its cost grows with the constraints' length; DBA keeps
    one beam of `beam_size` and divides it among those counts (the "banks") at every step, so a
    step costs about what an unconstrained step costs, whatever the constraints.

    Each step, every alive hypothesis offers its `num_candidates` best tokens and, for each phrase
    it has not met, the phrase's next token (the one after the part of the phrase that ends the
    hypothesis; its first token when none does). Candidates that end (EOS, allowed only once every
    phrase is met, or the max length) go to the finished set by length-penalised score as in
    `_search` if they contain every phrase, and are dropped otherwise. The others compete for the
    `beam_size` alive slots: round robin over the banks, from the most constraint tokens met down,
    each bank's best remaining hypothesis (by log-probability) in turn. That divides the beam evenly
    among the banks, and a bank short of hypotheses leaves its slots to the others.

    A phrase's progress in a hypothesis is how many of its first tokens end the hypothesis: the next
    token of the phrase adds one, else its first token restarts it at 1, else it falls to 0; a
    phrase complete once stays met. So a phrase counted met is in the output. A phrase whose start
    repeats inside it can be missed where it overlaps itself ("a a b" after "a a a"), which only
    costs the search that path.
    """
    phrases = ops.cast(constraint_ids, "int32")  # [batch, phrases, phrase_length]
    num_phrases, phrase_length = phrases.shape[1], phrases.shape[2]
    phrase_lengths = ops.sum(ops.cast(phrases != pad_id, "int32"), axis=2)  # [batch, phrases]
    row_phrases = ops.repeat(phrases, beam_size, axis=0)  # [batch * beam, phrases, phrase_length]
    row_lengths = ops.repeat(phrase_lengths, beam_size, axis=0)  # [batch * beam, phrases]
    # Above any bank (count of constraint tokens met), a static bound for the allocation's keys.
    banks = num_phrases * phrase_length + 1
    start = _search_start(
        initial_ids, prefix_ids, max_lengths, min_lengths, max_decode_length, alpha, beam_size, pad_id
    )
    forced_columns, positions, sentence_index, max_lengths, min_lengths = start[:5]
    alive_seq, alive_log_probs, finished_seq, finished_scores = start.hypotheses
    alive_progress = ops.zeros_like(alive_seq[:, :, :1]) + ops.zeros((1, 1, num_phrases), "int32")

    def cond(step, alive_seq, alive_log_probs, alive_progress, finished_seq, finished_scores, state):
        return _searching(step, alive_log_probs, finished_scores, start)

    def body(step, alive_seq, alive_log_probs, alive_progress, finished_seq, finished_scores, state):
        ids = ops.reshape(ops.take(alive_seq, step, axis=2), [-1])  # [batch * beam]
        logits, state = next_logits_fn(ids, step, state)
        logits = ops.cast(logits, _SCORE_DTYPE)  # [batch * beam, vocab]
        progress = ops.reshape(alive_progress, [-1, num_phrases])  # [batch * beam, phrases]
        met = progress >= row_lengths
        forced = None if forced_columns is None else ops.take(forced_columns, step, axis=1)  # [batch]
        unmet = ops.logical_not(ops.all(met, axis=1))  # EOS is barred until every phrase is met
        choice_logits, _ = _choice_logits(logits, step, min_lengths, forced, beam_size, eos_id, pad_id, unmet)
        per_row = min(num_candidates, logits.shape[-1] or num_candidates)
        row_tokens, row_logits, row_progress = _constrained_extensions(
            choice_logits, progress, met, row_phrases, per_row
        )
        row_log_probs = row_logits - ops.logsumexp(logits, axis=-1, keepdims=True)
        candidates = _constrained_candidates(alive_log_probs, row_log_probs, row_tokens, row_progress, phrase_lengths)
        cand_log_probs, cand_token, cand_beam, cand_progress, cand_met, cand_bank = candidates
        cand_seq = _gather_beams(alive_seq, cand_beam, sentence_index)  # [batch, candidates, L + 1]
        cand_seq = ops.where(positions == step + 1, cand_token[:, :, None], cand_seq)

        length = step + 1
        ended, real = _ended_candidates(cand_log_probs, cand_token, length, max_lengths, eos_id)
        finished = ops.logical_and(ended, cand_met)  # an ending that misses a phrase is dropped
        finished_seq, finished_scores = _keep_best_finished(
            finished_seq, finished_scores, cand_seq, cand_log_probs, finished, length, alpha, beam_size, sentence_index
        )
        growing = ops.logical_and(real, ops.logical_not(ended))
        chosen = _allocate_beam(cand_log_probs, cand_bank, growing, beam_size, banks)  # [batch, beam]
        alive_log_probs = ops.take_along_axis(ops.where(growing, cand_log_probs, _LARGE_NEGATIVE), chosen, axis=1)
        alive_seq = _gather_beams(cand_seq, chosen, sentence_index)
        alive_progress = _gather_beams(cand_progress, chosen, sentence_index)
        parent_beam = ops.take_along_axis(cand_beam, chosen, axis=1)
        state = _follow_parents(state, parent_beam, sentence_index, beam_size, reorder_state)
        return step + 1, alive_seq, alive_log_probs, alive_progress, finished_seq, finished_scores, state

    step = ops.convert_to_tensor(0, dtype="int32")
    loop = ops.while_loop(
        cond,
        body,
        (step, alive_seq, alive_log_probs, alive_progress, finished_seq, finished_scores, initial_state),
    )
    finished_seq, finished_scores = loop[4], loop[5]
    return SearchResult(ids=finished_seq[:, :num_return, 1:], scores=finished_scores[:, :num_return])


def _constrained_extensions(choice_logits, progress, met, row_phrases, per_row):
    """The tokens each hypothesis offers (`_constrained_search`): its `per_row` best, then for each
    phrase not met the phrase's next token, once (not where it is among the best or an earlier
    phrase's). Returns `row_tokens` int32 and `row_logits` float32 `[batch * beam, per_row +
    phrases]` (a token not offered has logit `_LARGE_NEGATIVE`), and `row_progress` int32 `[batch *
    beam, per_row + phrases, phrases]`, every phrase's progress after each token."""
    num_phrases, phrase_length = row_phrases.shape[1], row_phrases.shape[2]
    best_logits, best_tokens = ops.top_k(choice_logits, per_row)  # [batch * beam, per_row]
    next_index = ops.minimum(progress, phrase_length - 1)[:, :, None]
    next_tokens = ops.take_along_axis(row_phrases, next_index, axis=2)[:, :, 0]  # [batch * beam, phrases]
    among_best = ops.any(next_tokens[:, :, None] == best_tokens[:, None, :], axis=2)
    index = ops.arange(num_phrases)
    earlier = (index[None, :] < index[:, None])[None, :, :]  # [1, phrase, earlier phrase]
    # An earlier phrase not met offers the same token (a met phrase offers none).
    earlier = ops.logical_and(earlier, ops.logical_not(met)[:, None, :])
    repeated = ops.any(ops.logical_and(next_tokens[:, :, None] == next_tokens[:, None, :], earlier), axis=2)
    offered = ops.logical_not(ops.logical_or(met, ops.logical_or(among_best, repeated)))
    phrase_logits = ops.where(offered, ops.take_along_axis(choice_logits, next_tokens, axis=1), _LARGE_NEGATIVE)
    row_tokens = ops.concatenate([best_tokens, next_tokens], axis=1)
    token = row_tokens[:, :, None]
    restarted = ops.where(token == row_phrases[:, None, :, 0], 1, 0)
    moved = ops.where(token == next_tokens[:, None, :], progress[:, None, :] + 1, restarted)
    row_progress = ops.where(met[:, None, :], progress[:, None, :], moved)
    return row_tokens, ops.concatenate([best_logits, phrase_logits], axis=1), row_progress


def _constrained_candidates(alive_log_probs, row_log_probs, row_tokens, row_progress, phrase_lengths):
    """Every hypothesis's offered tokens (`_constrained_extensions`) as one sentence's candidates,
    each `[batch, candidates]` (`[batch, candidates, phrases]` for the progress): `cand_log_probs`,
    `cand_token`, `cand_beam` (the hypothesis extended), `cand_progress`, `cand_met` (every phrase
    met) and `cand_bank` (constraint tokens met)."""
    beam_size, per_row = alive_log_probs.shape[1], row_tokens.shape[1]
    extended = alive_log_probs[:, :, None] + ops.reshape(row_log_probs, [-1, beam_size, per_row])
    cand_log_probs = ops.reshape(extended, [-1, beam_size * per_row])
    cand_token = ops.reshape(row_tokens, [-1, beam_size * per_row])
    cand_beam = ops.zeros_like(cand_token) + ops.arange(beam_size * per_row, dtype="int32")[None, :] // per_row
    cand_progress = ops.reshape(row_progress, [-1, beam_size * per_row, row_progress.shape[2]])
    lengths = phrase_lengths[:, None, :]  # [batch, 1, phrases]
    cand_met = ops.all(cand_progress >= lengths, axis=2)
    cand_bank = ops.sum(ops.minimum(cand_progress, lengths), axis=2)
    return cand_log_probs, cand_token, cand_beam, cand_progress, cand_met, cand_bank


def _allocate_beam(log_probs, banks_met, eligible, beam_size, banks):
    """int32 `[batch, beam]`: the candidates (indices into axis 1 of `log_probs` `[batch,
    candidates]`) that stay alive. Among the `eligible` ones, round robin over `banks_met` (constraint
    tokens met, each < `banks`): first the best of every bank, from the highest bank down, then the
    second best of every bank, and so on; ineligible candidates come last, in order."""
    count = log_probs.shape[1]
    index = ops.arange(count, dtype="int32")
    # above[b, i, j]: candidate j ranks above candidate i within a bank (ties to the lower index).
    higher = log_probs[:, None, :] > log_probs[:, :, None]
    tied_before = ops.logical_and(
        log_probs[:, None, :] == log_probs[:, :, None], index[None, None, :] < index[None, :, None]
    )
    above = ops.logical_and(ops.logical_or(higher, tied_before), banks_met[:, None, :] == banks_met[:, :, None])
    rank = ops.sum(ops.cast(ops.logical_and(above, eligible[:, None, :]), "int32"), axis=2)  # [batch, candidates]
    key = ops.where(eligible, rank * banks + (banks - 1 - banks_met), banks * count + index[None, :])
    _, chosen = ops.top_k(-ops.cast(key, "float32"), beam_size)
    return chosen


class _SearchStart(NamedTuple):
    """What a search's loop starts from and compares with (`_search_start`)."""

    forced_columns: Any  # int32 [batch, L] or None: the token forced at each step (`_forced_columns`)
    positions: Any  # int32 [L + 1]: buffer position 0 holds the initial id, t + 1 the token of step t
    sentence_index: Any  # int32 [batch, 1]: the sentence of every row, for gathers over [batch * beams]
    max_lengths: Any  # int32 [batch] (`_length_limits`)
    min_lengths: Any  # int32 [batch] or None
    max_length_penalty: Any  # float32 [batch]: no continuation scores above alive_log_prob / this
    max_decode_length: int
    hypotheses: tuple  # `_initial_hypotheses`


def _search_start(initial_ids, prefix_ids, max_lengths, min_lengths, max_decode_length, alpha, beam_size, pad_id):
    """The `_SearchStart` of a search's arguments."""
    initial_ids = ops.cast(initial_ids, "int32")
    forced_columns = None if prefix_ids is None else _forced_columns(prefix_ids, max_decode_length, pad_id)
    positions = ops.arange(max_decode_length + 1, dtype="int32")  # [L + 1]
    sentence_index = ops.arange(ops.shape(initial_ids)[0], dtype="int32")[:, None]  # [batch, 1]
    max_lengths, min_lengths = _length_limits(initial_ids, max_lengths, min_lengths, max_decode_length)
    return _SearchStart(
        forced_columns,
        positions,
        sentence_index,
        max_lengths,
        min_lengths,
        length_penalty(max_lengths, alpha),
        max_decode_length,
        _initial_hypotheses(initial_ids, positions, beam_size, pad_id),
    )


def _searching(step, alive_log_probs, finished_scores, start):
    """The loop's condition: steps are left and some sentence is not done (`_sentence_done`)."""
    return ops.logical_and(
        step < start.max_decode_length,
        ops.logical_not(ops.all(_sentence_done(alive_log_probs, finished_scores, start.max_length_penalty))),
    )


def _length_limits(initial_ids, max_lengths, min_lengths, max_decode_length):
    """The lengths every step compares with: `max_lengths` int32 `[batch]` clipped to
    `[1, max_decode_length]` (`max_decode_length` for all when None), `min_lengths` capped at them
    (None stays None)."""
    if max_lengths is None:
        max_lengths = ops.full_like(initial_ids, max_decode_length)
    else:
        max_lengths = ops.clip(ops.cast(max_lengths, "int32"), 1, max_decode_length)
    if min_lengths is not None:
        # A hypothesis at its max length may still end with EOS.
        min_lengths = ops.minimum(ops.cast(min_lengths, "int32"), max_lengths)
    return max_lengths, min_lengths


def _forced_columns(prefix_ids, max_decode_length, pad_id):
    """int32 `[batch, max_decode_length]`: the token forced at each step, `pad_id` where none is
    (`prefix_ids` cut or padded with `pad_id` to the length of the search)."""
    prefix_ids = ops.cast(prefix_ids, "int32")
    prefix_length = prefix_ids.shape[1]
    if prefix_length >= max_decode_length:
        return prefix_ids[:, :max_decode_length]
    padding = ops.full((ops.shape(prefix_ids)[0], max_decode_length - prefix_length), pad_id, dtype="int32")
    return ops.concatenate([prefix_ids, padding], axis=1)


def _initial_hypotheses(initial_ids, positions, beam_size, pad_id):
    """The loop's starting sets: `alive_seq` `[batch, beam, L + 1]` (the initial id, then `pad_id`)
    with `alive_log_probs` `[batch, beam]`, and an empty finished set, `finished_seq` and
    `finished_scores` of the same shapes."""
    tiled_ids = ops.tile(initial_ids[:, None], [1, beam_size])  # [batch, beam]
    alive_seq = ops.where(positions == 0, tiled_ids[:, :, None], pad_id)  # [batch, beam, L + 1]
    # One live beam per sentence at step 0, so the beams do not all extend the same prefix.
    first_beam_only = ops.cast(ops.where(ops.arange(beam_size) == 0, 0.0, _LARGE_NEGATIVE), _SCORE_DTYPE)
    alive_log_probs = ops.zeros_like(tiled_ids, _SCORE_DTYPE) + first_beam_only  # [batch, beam]
    finished_seq = ops.full_like(alive_seq, pad_id)  # [batch, beam, L + 1]
    # An empty finished slot scores _LARGE_NEGATIVE: any real hypothesis replaces it.
    finished_scores = ops.full_like(alive_log_probs, _LARGE_NEGATIVE)  # [batch, beam]
    return alive_seq, alive_log_probs, finished_seq, finished_scores


def _gather_beams(x, beam_indices, sentence_index):
    """x `[batch, beams, ...]`, beam_indices `[batch, n]` -> `[batch, n, ...]`; `sentence_index` is
    `arange(batch)[:, None]`, the sentence of every row."""
    num_beams = ops.shape(x)[1]
    rows = ops.reshape(sentence_index * num_beams + beam_indices, [-1])
    gathered = ops.take(ops.reshape(x, (-1,) + tuple(x.shape[2:])), rows, axis=0)
    return ops.reshape(gathered, (-1, ops.shape(beam_indices)[1]) + tuple(x.shape[2:]))


def _sentence_done(alive_log_probs, finished_scores, max_length_penalty):
    """[batch] bool: the sentence's finished set can no longer change."""
    best_alive = ops.max(alive_log_probs, axis=1)
    # For alpha >= 0, lp grows with the length and a log-probability only falls when tokens
    # are added, so an alive hypothesis can end with at best best_alive / lp(max length).
    best_possible = best_alive / max_length_penalty
    # Stays _LARGE_NEGATIVE until beam_size hypotheses have finished, so the n-best is exact.
    worst_finished = ops.min(finished_scores, axis=1)
    no_alive = best_alive <= _DEAD_THRESHOLD
    return ops.logical_or(no_alive, best_possible < worst_finished)


def _best_extensions(
    logits, step, alive_log_probs, min_lengths, forced, *, beam_size, num_candidates, eos_id, pad_id, sampler
):
    """The `num_candidates` best one-token extensions of every sentence's alive hypotheses (with
    `sampler`, the drawn token): `cand_log_probs` float32, `cand_beam` (the hypothesis extended) and
    `cand_token`, each `[batch, candidates]`, from float32 `logits` `[batch * beam, vocab]`;
    `forced` int32 `[batch]` (or None) is the token each sentence must take at this step, `pad_id`
    where it is free."""
    choice_logits, forced = _choice_logits(logits, step, min_lengths, forced, beam_size, eos_id, pad_id)

    # Candidates: the best one-token extensions over (beam x vocab) of every sentence. Each is
    # among its own hypothesis's `num_candidates` best tokens, so those are taken per row first
    # (on the logits: the log-softmax shifts a row by a constant) and only they are normalised
    # and compared across the beams; no [batch, beam * vocab] tensor of log-probabilities is
    # built. Ties go to the lower (beam, token), as in one top_k over the flattened scores.
    per_row = min(num_candidates, logits.shape[-1] or num_candidates)  # a vocabulary may be tiny
    if sampler is None:
        row_logits, row_tokens = ops.top_k(choice_logits, per_row)  # [batch * beam, per_row]
    else:
        row_tokens = sampler(choice_logits, step)  # [batch]
        if forced is not None:
            # The draw is replaced, not only steered by the masked logits: an extreme temperature
            # could otherwise lose the forced token to the noise.
            row_tokens = ops.where(forced != pad_id, forced, row_tokens)
        row_tokens = row_tokens[:, None]  # [batch, 1]
        row_logits = ops.take_along_axis(logits, row_tokens, axis=1)
    row_log_probs = row_logits - ops.logsumexp(logits, axis=-1, keepdims=True)
    extended = alive_log_probs[:, :, None] + ops.reshape(row_log_probs, [-1, beam_size, per_row])
    flat = ops.reshape(extended, [-1, beam_size * per_row])  # [batch, beam * per_row]
    cand_log_probs, cand_index = ops.top_k(flat, num_candidates)  # [batch, candidates]
    cand_beam = ops.floor_divide(cand_index, per_row)
    cand_token = ops.take_along_axis(ops.reshape(row_tokens, [-1, beam_size * per_row]), cand_index, axis=1)
    return cand_log_probs, cand_beam, cand_token


def _choice_logits(logits, step, min_lengths, forced, beam_size, eos_id, pad_id, eos_barred=None):
    """`logits` with the tokens a hypothesis may not take at this step set to `_LARGE_NEGATIVE`: EOS
    below the sentence's minimum length (and in the rows of bool `eos_barred` `[batch * beam]`),
    every token but the forced one where a prefix forces one. Returns them and `forced` repeated to
    `[batch * beam]` (None stays None)."""
    choice_logits = logits
    if min_lengths is not None or eos_barred is not None:
        # EOS is out of the choice; the normaliser of the log-probabilities stays the model's.
        barred = eos_barred
        if min_lengths is not None:
            barred = ops.repeat(step + 1 < min_lengths, beam_size, axis=0)  # [batch * beam]
            barred = barred if eos_barred is None else ops.logical_or(barred, eos_barred)
        is_eos = (ops.arange(ops.shape(logits)[-1]) == eos_id)[None, :]
        choice_logits = ops.where(ops.logical_and(barred[:, None], is_eos), _LARGE_NEGATIVE, logits)
    if forced is not None:
        forced = ops.repeat(forced, beam_size, axis=0)  # [batch * beam]
        is_forced = ops.arange(ops.shape(logits)[-1], dtype="int32")[None, :] == forced[:, None]
        # The forced token keeps its logit even where a minimum length bars it (a forced EOS).
        only_forced = ops.where(is_forced, logits, _LARGE_NEGATIVE)
        choice_logits = ops.where((forced != pad_id)[:, None], only_forced, choice_logits)
    return choice_logits, forced


def _ended_candidates(cand_log_probs, cand_token, length, max_lengths, eos_id):
    """`ended` (by EOS or at the sentence's max length) and `real` (a hypothesis at all), each bool
    `[batch, candidates]`."""
    at_max_length = (length >= max_lengths)[:, None]  # [batch, 1]
    # Extensions of a dead hypothesis (only picked when fewer than `num_candidates` real ones
    # exist) or by a token with -inf logits are not hypotheses.
    real = cand_log_probs > _DEAD_THRESHOLD
    ended = ops.logical_and(ops.logical_or(cand_token == eos_id, at_max_length), real)
    return ended, real


def _keep_best_finished(
    finished_seq, finished_scores, cand_seq, cand_log_probs, ended, length, alpha, beam_size, sentence_index
):
    """The new finished set: the best `beam_size` of the old finished and the ended candidates, by
    length-penalised score."""
    cand_scores = ops.where(ended, cand_log_probs / length_penalty(length, alpha), _LARGE_NEGATIVE)
    pooled_seq = ops.concatenate([finished_seq, cand_seq], axis=1)
    pooled_scores = ops.concatenate([finished_scores, cand_scores], axis=1)
    # Once a sentence is done, every later candidate scores below its worst finished
    # hypothesis (see `_sentence_done`), so its finished set no longer changes while the rest of
    # the batch goes on.
    finished_scores, chosen = ops.top_k(pooled_scores, beam_size)
    finished_seq = _gather_beams(pooled_seq, chosen, sentence_index)
    return finished_seq, finished_scores


def _keep_best_alive(cand_seq, cand_log_probs, cand_beam, ended, real, beam_size, sentence_index):
    """The new alive set: the best `beam_size` candidates that did not end, by log-probability;
    returns `alive_seq`, `alive_log_probs` and `parent_beam` `[batch, beam]`, the beam each extends."""
    cand_alive = ops.where(ops.logical_or(ended, ops.logical_not(real)), _LARGE_NEGATIVE, cand_log_probs)
    alive_log_probs, chosen = ops.top_k(cand_alive, beam_size)  # [batch, beam]
    alive_seq = _gather_beams(cand_seq, chosen, sentence_index)
    parent_beam = ops.take_along_axis(cand_beam, chosen, axis=1)  # [batch, beam]
    return alive_seq, alive_log_probs, parent_beam


def _follow_parents(state, parent_beam, sentence_index, beam_size, reorder_state):
    """The state of the new alive hypotheses: each takes its parent's rows (gathered along axis 0,
    or by `reorder_state`)."""
    if beam_size == 1:  # With one hypothesis per sentence the parent is always itself.
        return state
    parent_rows = ops.reshape(sentence_index * beam_size + parent_beam, [-1])
    if reorder_state is None:
        return keras.tree.map_structure(lambda x: ops.take(x, parent_rows, axis=0), state)
    return reorder_state(state, parent_rows)
