"""The searches: beam search with the length penalty of the paper's section 6.1 (beam 4, alpha 0.6),
greedy search and sampling, each optionally with a minimum length, a forced target prefix or (beam
search) terminology constraints. All run the one loop of models/search_loop.py with the parts they
need; the conventions every search follows are in docs/translating.md, "How the search works".
"""

import numbers

from keras import ops

from common.special_ids import EOS_ID, PAD_ID
from models.constrained_search import LexicalConstraints
from models.forced_prefix import ForcedPrefix
from models.minimum_length import MinimumLength
from models.no_repeat_ngram import NoRepeatNgram
from models.search_config import DEFAULT_SEARCH, check_setting
from models.search_loop import UNMET_SCORE, LoopSettings, SearchResult, clipped_max_lengths, length_penalty, run_search

__all__ = [
    "UNMET_SCORE",
    "SearchResult",
    "beam_search",
    "greedy_search",
    "length_penalty",
    "sampling_search",
    "search_options",
]


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
    no_repeat_ngram_size=0,
    stopping=DEFAULT_SEARCH.stopping,
    compact_state=None,
):
    """Finds the `num_return` best translations of every sentence by beam search.

    Args:
        next_logits_fn: `(ids, step, state) -> (logits [batch * beam, vocab], state)`: `ids` int32
            `[batch * beam]`, each hypothesis's last token; `step` int32, the 0-based position being
            produced; `state` tensors with leading dimension `batch * beam` (the decoder's cache),
            reordered with the hypotheses and returned with the same structure and dtypes, and
            shapes that the loop accepts (a TensorFlow graph's unknown dimensions may change).
            What a sentence's beams share (the encoder output) belongs in the closure.
        initial_ids: int `[batch]`, the first input token of every sentence (BOS).
        initial_state: the `state` of step 0, row `b * beam + k` beam `k` of sentence `b`.
        beam_size: int >= 1, hypotheses kept per sentence (alive and finished each).
        max_decode_length: int >= 1, static: the size of the id buffer; no hypothesis is longer.
        max_lengths: optional int `[batch]`, each sentence's maximum output length (EOS included, at
            most `max_decode_length`, the default); a hypothesis ends there, without EOS.
        min_lengths: optional int `[batch]`, each sentence's minimum output length: EOS barred below.
        alpha: float >= 0, the length-penalty exponent (0: no penalty); `eos_id`, `pad_id`: ints,
            the token that ends a hypothesis and the one written after its end.
        num_return: int in `[1, beam_size]`, hypotheses returned per sentence.
        reorder_state: optional `(state, parent_rows int32 [batch * beam]) -> state`, for a state
            that is not one row per hypothesis; default: every tensor gathered along axis 0.
        prefix_ids: optional int `[batch, prefix_length]`, static `prefix_length`: tokens forced at
            the start of each sentence's output, then `pad_id` (a row of `pad_id`: no prefix).
        constraint_ids: optional int `[batch, phrases, phrase_length]`, static `phrases` and
            `phrase_length`: each sentence's target phrases, each row a phrase then `pad_id`. Every
            returned hypothesis contains each phrase; a sentence where none could returns rows of
            `pad_id` scored `UNMET_SCORE`.
        no_repeat_ngram_size: int >= 0: no hypothesis holds an n-gram of this many output tokens twice.
        stopping: when a sentence's search ends (`SearchConfig.stopping`): "exact", once no alive
            hypothesis could reach the `num_return` best finished ones even at its maximum length,
            so that they are the n-best of the whole search; "heuristic", once none would if it
            ended at the next step (fewer steps; a later, longer ending is not looked for).
        compact_state: optional `(state, kept int32 [kept]) -> state` of the sentences `kept`: the
            search then drops each sentence once done (not with constraints), with the same results.

    Returns:
        `SearchResult(ids, scores)`, best first: `ids` int32 `[batch, num_return, max_decode_length]`
        (EOS included, `pad_id` after it), `scores` float32 `[batch, num_return]`. ValueError for an
        argument out of range or of the wrong rank.
    """
    return _search(
        next_logits_fn,
        initial_ids,
        initial_state,
        beam_size=beam_size,
        candidates_per_beam=2,
        max_decode_length=max_decode_length,
        alpha=alpha,
        eos_id=eos_id,
        pad_id=pad_id,
        num_return=num_return,
        reorder_state=reorder_state,
        max_lengths=max_lengths,
        min_lengths=min_lengths,
        prefix_ids=prefix_ids,
        constraint_ids=constraint_ids,
        no_repeat_ngram_size=no_repeat_ngram_size,
        stopping=stopping,
        compact_state=compact_state,
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
    no_repeat_ngram_size=0,
    stopping=DEFAULT_SEARCH.stopping,
    compact_state=None,
):
    """Greedy decoding: the most likely token at every step, until EOS or the max length.

    This is the loop with one hypothesis and one candidate per step, exactly the argmax loop;
    `beam_search(beam_size=1)` is not (it weighs the two best tokens and may keep a runner-up EOS
    ending). The arguments are `beam_search`'s with one beam; `alpha` only scales the returned
    scores, so that they compare with beam search's.

    Returns:
        A `SearchResult` as from `beam_search` with `num_return=1`.
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
        no_repeat_ngram_size=no_repeat_ngram_size,
        stopping=stopping,
        compact_state=compact_state,
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
    no_repeat_ngram_size=0,
    stopping=DEFAULT_SEARCH.stopping,
    compact_state=None,
):
    """Decoding by sampling: `greedy_search` with each token drawn by `sampler` instead of the argmax.

    Args:
        sampler: a `models.sampling.TokenSampler` (`token_sampler`), `(logits [batch, vocab], step)
            -> int32 [batch]`; None takes the argmax. A forced prefix token replaces the draw at its step.
        compact_state: as in `beam_search`.
        The others: as in `greedy_search`. The scores are the model's own log-probabilities of the
        drawn tokens (not the tempered distribution's) over the length penalty.

    Returns:
        A `SearchResult` as from `greedy_search`.
    """
    return _search(
        next_logits_fn,
        initial_ids,
        initial_state,
        beam_size=1,
        candidates_per_beam=1,
        max_decode_length=max_decode_length,
        alpha=alpha,
        eos_id=eos_id,
        pad_id=pad_id,
        num_return=1,
        sampler=sampler,
        max_lengths=max_lengths,
        min_lengths=min_lengths,
        prefix_ids=prefix_ids,
        no_repeat_ngram_size=no_repeat_ngram_size,
        stopping=stopping,
        compact_state=compact_state,
    )


def search_options(search):
    """The keyword arguments of every search that a `SearchConfig` gives as they are (its length
    settings become each sentence's `max_lengths` and `min_lengths` with its source length)."""
    return {"alpha": search.alpha, "no_repeat_ngram_size": search.no_repeat_ngram_size, "stopping": search.stopping}


def _search(
    next_logits_fn,
    initial_ids,
    initial_state,
    *,
    beam_size,
    candidates_per_beam,
    max_decode_length,
    alpha,
    eos_id,
    pad_id,
    num_return,
    max_lengths,
    min_lengths,
    prefix_ids,
    constraint_ids=None,
    no_repeat_ngram_size=0,
    stopping=DEFAULT_SEARCH.stopping,
    sampler=None,
    reorder_state=None,
    compact_state=None,
):
    """Every search: checks the arguments, then runs the loop (`candidates_per_beam` extensions
    kept per hypothesis and step) with the parts they ask for, in their order: the parts that bar
    tokens, then the forced prefix, which overrides their bars."""
    initial_ids, max_lengths, min_lengths, prefix_ids = _validate(
        beam_size, max_decode_length, alpha, num_return, initial_ids, max_lengths, min_lengths, prefix_ids
    )
    check_setting("stopping", stopping)
    settings = LoopSettings(
        beam_size=int(beam_size),
        num_candidates=candidates_per_beam * int(beam_size),
        max_decode_length=int(max_decode_length),
        alpha=float(alpha),
        eos_id=eos_id,
        pad_id=pad_id,
        num_return=int(num_return),
        stopping=stopping,
        sampler=sampler,
        reorder_state=reorder_state,
        compact_state=compact_state,
    )
    constraint_ids = _validate_constraints(constraint_ids)
    max_lengths = clipped_max_lengths(initial_ids, max_lengths, settings.max_decode_length)
    parts = []
    if min_lengths is not None:
        parts.append(MinimumLength(min_lengths, max_lengths, settings.beam_size, settings.eos_id))
    if constraint_ids is not None:
        parts.append(LexicalConstraints(constraint_ids, settings.beam_size, settings.eos_id, settings.pad_id))
    if no_repeat_ngram_size:
        parts.append(NoRepeatNgram(no_repeat_ngram_size))
    if prefix_ids is not None:
        parts.append(ForcedPrefix(prefix_ids, settings.max_decode_length, settings.beam_size, settings.pad_id))
    result, _ = run_search(next_logits_fn, initial_ids, initial_state, max_lengths, parts, settings)
    return result


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


def _validate_constraints(constraint_ids):
    """`constraint_ids` as a tensor (None stays None); raises ValueError on a bad rank or shape."""
    if constraint_ids is None:
        return None
    constraint_ids = ops.convert_to_tensor(constraint_ids)
    if len(constraint_ids.shape) != 3 or None in constraint_ids.shape[1:]:
        raise ValueError(
            "`constraint_ids` must be None or have rank 3, shape [batch, phrases, phrase_length] with "
            f"static phrases and phrase_length. Received: shape {tuple(constraint_ids.shape)}"
        )
    return constraint_ids
