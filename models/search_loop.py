"""The one search loop of every search (beam, greedy, sampling, forced prefixes, constraints): a
`while_loop` over `beam_size` alive and finished hypotheses per sentence, calling `SearchPart`s at
fixed points; its shapes are fixed but where the model's state can drop done sentences
(`LoopSettings.compact_state`). docs/translating.md, "How the search works", explains it."""

from typing import Any, NamedTuple

import keras
from keras import ops

from models.fast_paths import blocked_top_k
from models.fast_paths.narrow_gather import take_along_last
from models.search_part import DEAD_THRESHOLD, LARGE_NEGATIVE, SCORE_DTYPE, Candidates, StepInputs
from models.shapes import dimension

# The score of a returned row that holds no hypothesis (a sentence whose constraints were not met,
# or fewer possible hypotheses than `num_return`): a score at or below it is no translation.
UNMET_SCORE = LARGE_NEGATIVE


class SearchResult(NamedTuple):
    """The n-best hypotheses of every sentence, best first: `ids` int32 `[batch, num_return,
    max_decode_length]` (after BOS, EOS included, `pad_id` after), `scores` float32 `[batch,
    num_return]` (log-probability over the length penalty)."""

    ids: Any
    scores: Any


class LoopSettings(NamedTuple):
    """The static settings of one search (`run_search`)."""

    beam_size: int
    num_candidates: int  # extensions kept per sentence and step (unless a part chooses the alive set)
    max_decode_length: int
    alpha: float
    eos_id: int
    pad_id: int
    num_return: int
    stopping: str = "exact"  # when a sentence is done (`_sentence_done`): "exact" or "heuristic"
    sampler: Any = None  # a `models.sampling.TokenSampler`: each hypothesis draws its one token
    reorder_state: Any = None  # `(state, parent_rows) -> state`; None gathers every tensor on axis 0
    # `(state, kept) -> state` of the sentences `kept` (int32 [kept], ascending): with it a search
    # drops its done sentences (`_drop_done`) where its parts allow (`_sentence_constants`).
    compact_state: Any = None


class _Hypotheses(NamedTuple):
    """The loop's variables besides the step and the model's state."""

    alive_seq: Any  # int32 [batch, beam, L + 1]: position 0 the initial id, t + 1 the token of step t
    alive_log_probs: Any  # float32 [batch, beam]
    part_states: tuple  # each part's state of the alive hypotheses, [batch, beam, ...]
    finished_seq: Any  # int32 [batch, beam, L + 1]
    finished_scores: Any  # float32 [batch, beam], length-penalised
    finished_part_states: tuple  # the state of the finished hypotheses, for parts that keep it
    done: Any  # bool [batch]: the sentence's returned hypotheses are final (`_sentence_done`)


class _Sentences(NamedTuple):
    """What a search that drops its done sentences carries besides the hypotheses: of the sentences
    left, each one's row in the batch (`origin`, int32 `[left]`), `max_lengths`, and the
    `constants` of the parts and the sampler (`_carriers`; `SearchPart.sentence_constants`); of
    those dropped, their rows in the batch (`done_origin`, `[dropped]`) and their returned
    `done_ids` and `done_scores`."""

    origin: Any
    max_lengths: Any
    constants: tuple
    done_origin: Any
    done_ids: Any
    done_scores: Any


class _Loop(NamedTuple):
    """What every step of one search reads."""

    next_logits_fn: Any
    parts: tuple
    chooser: Any  # the part that chooses the alive set, or None: the best by log-probability
    settings: LoopSettings
    sampler: Any  # the `TokenSampler` of these sentences, or None: no draw
    positions: Any  # int32 [L + 1]
    sentence_index: Any  # int32 [batch, 1]: the sentence of every row, for gathers over [batch * beams]
    max_lengths: Any  # int32 [batch]


def length_penalty(length, alpha):
    """Wu et al. (2016), eq. 14: `((5 + length) / 6) ** alpha`, float32, EOS counted; alpha 0: none."""
    length = ops.cast(length, SCORE_DTYPE)
    return ops.power((5.0 + length) / 6.0, alpha)


def clipped_max_lengths(initial_ids, max_lengths, max_decode_length):
    """int32 `[batch]`: `max_lengths` clipped to `[1, max_decode_length]` (all `max_decode_length`
    when None), the lengths at which hypotheses end."""
    if max_lengths is None:
        return ops.full_like(ops.cast(initial_ids, "int32"), max_decode_length)
    return ops.clip(ops.cast(max_lengths, "int32"), 1, max_decode_length)


def run_search(next_logits_fn, initial_ids, initial_state, max_lengths, parts, settings):
    """Searches with `parts` (called in order) under `settings`; `max_lengths` int32 `[batch]`.
    Returns the `SearchResult` and each part's state of the returned hypotheses (`()` if none)."""
    parts = tuple(parts)
    choosers = [part for part in parts if part.chooses_alive]
    if len(choosers) > 1:
        raise ValueError(f"at most one search part may choose the alive set, received {choosers}")
    positions = ops.arange(settings.max_decode_length + 1, dtype="int32")  # [L + 1]
    hypotheses = _initial_hypotheses(ops.cast(initial_ids, "int32"), positions, parts, settings)
    sentence_index = ops.arange(ops.shape(initial_ids)[0], dtype="int32")[:, None]  # [batch, 1]
    chooser = choosers[0] if choosers else None
    loop = _Loop(next_logits_fn, parts, chooser, settings, settings.sampler, positions, sentence_index, max_lengths)
    max_length_penalty = length_penalty(max_lengths, settings.alpha)  # [batch]
    keep = settings.num_return
    constants = _sentence_constants(loop)
    if constants is not None:
        return _run_dropping_done(loop, hypotheses, initial_state, constants)

    def cond(step, hypotheses, state):
        return ops.logical_and(step < settings.max_decode_length, ops.logical_not(ops.all(hypotheses.done)))

    def body(step, hypotheses, state):
        hypotheses, state = _step(loop, step, hypotheses, state)
        step += 1
        return step, _with_done(hypotheses, step, max_lengths, max_length_penalty, settings), state

    step = ops.convert_to_tensor(0, dtype="int32")
    _, hypotheses, _ = ops.while_loop(cond, body, (step, hypotheses, initial_state))
    result = SearchResult(ids=hypotheses.finished_seq[:, :keep, 1:], scores=hypotheses.finished_scores[:, :keep])
    returned_states = keras.tree.map_structure(lambda x: x[:, :keep], hypotheses.finished_part_states)
    return result, returned_states


def _with_done(hypotheses, step, max_lengths, max_length_penalty, settings):
    """`hypotheses` after `step` steps, with `done` updated (`_sentence_done`)."""
    if settings.stopping == "exact":  # The longest an alive hypothesis may grow.
        penalty = max_length_penalty
    else:  # The length of an alive hypothesis that ends at the next step.
        penalty = length_penalty(ops.minimum(step + 1, max_lengths), settings.alpha)
    done = _sentence_done(hypotheses.alive_log_probs, hypotheses.finished_scores, penalty, settings.num_return)
    # Once done, a sentence stays done: the rest of its batch does not change its translation.
    *rest, was_done = hypotheses
    return _Hypotheses(*rest, ops.logical_or(was_done, done))


def _carriers(loop):
    """What holds per-sentence tensors besides the model's state: the parts, then the sampler if any."""
    return loop.parts + (() if loop.sampler is None else (loop.sampler,))


def _sentence_constants(loop):
    """The per-sentence tensors of `_carriers(loop)` (`SearchPart.sentence_constants`) when the
    search drops its done sentences, else None: it does when the model's state can be compacted
    (`compact_state`) and every part hands over its per-sentence tensors and keeps no finished state."""
    if loop.settings.compact_state is None:
        return None
    if any(part.keeps_finished_state for part in loop.parts):
        return None
    constants = tuple(carrier.sentence_constants() for carrier in _carriers(loop))
    return None if any(c is None for c in constants) else constants


def _run_dropping_done(loop, hypotheses, initial_state, constants):
    """`run_search`'s loop where a sentence leaves the batch once it is done (`_drop_done`), so that
    the steps after its end no longer compute its rows: a batch's sentences end at different steps.
    The steps run in an inner loop until a sentence is done, the outer one drops it and goes on
    (no test per step). Translations equal those of the plain loop."""
    settings, keep = loop.settings, loop.settings.num_return
    sentences = _Sentences(
        origin=ops.arange(ops.shape(hypotheses.done)[0], dtype="int32"),
        max_lengths=loop.max_lengths,
        constants=constants,
        done_origin=ops.zeros((0,), "int32"),
        done_ids=ops.zeros((0, keep, settings.max_decode_length), "int32"),
        done_scores=ops.zeros((0, keep), SCORE_DTYPE),
    )

    def searching(step, hypotheses, *rest):
        return ops.logical_and(step < settings.max_decode_length, dimension(hypotheses.done, 0) > 0)

    def until_one_is_done(step, hypotheses, state, sentences):
        carried = tuple(c.with_sentence_constants(k) for c, k in zip(_carriers(loop), sentences.constants))
        parts = carried[: len(loop.parts)]
        sentence_index = ops.arange(dimension(hypotheses.done, 0), dtype="int32")[:, None]
        chooser = None if loop.chooser is None else parts[loop.parts.index(loop.chooser)]
        sampler = None if loop.sampler is None else carried[-1]
        now = _Loop(
            loop.next_logits_fn,
            parts,
            chooser,
            settings,
            sampler,
            loop.positions,
            sentence_index,
            sentences.max_lengths,
        )
        penalty = length_penalty(sentences.max_lengths, settings.alpha)

        def cond(step, hypotheses, state):
            return ops.logical_and(step < settings.max_decode_length, ops.logical_not(ops.any(hypotheses.done)))

        def body(step, hypotheses, state):
            hypotheses, state = _step(now, step, hypotheses, state)
            step += 1
            return step, _with_done(hypotheses, step, sentences.max_lengths, penalty, settings), state

        step, hypotheses, state = ops.while_loop(cond, body, (step, hypotheses, state))
        return (step, *_drop_done(hypotheses, state, sentences, settings))

    # The loop's variables lose their static first size (their batch), which the drops change.
    loop_vars = _open_first((ops.convert_to_tensor(0, dtype="int32"), hypotheses, initial_state, sentences))
    _, hypotheses, _, sentences = ops.while_loop(searching, until_one_is_done, loop_vars)
    # Those still searching at the length limit (the last rows), then the rows in the batch's order.
    origin = ops.concatenate([sentences.done_origin, sentences.origin], axis=0)
    order = ops.argsort(origin)
    ids = ops.concatenate([sentences.done_ids, hypotheses.finished_seq[:, :keep, 1:]], axis=0)
    scores = ops.concatenate([sentences.done_scores, hypotheses.finished_scores[:, :keep]], axis=0)
    result = SearchResult(ids=ops.take(ids, order, axis=0), scores=ops.take(scores, order, axis=0))
    return result, tuple(() for _ in loop.parts)


def _drop_done(hypotheses, state, sentences, settings):
    """The search without its done sentences: their returned hypotheses are final, so they join the
    dropped ones, and every per-sentence tensor keeps the rows of the others."""
    keep = settings.num_return
    done = ops.cast(ops.nonzero(hypotheses.done)[0], "int32")
    kept = ops.cast(ops.nonzero(ops.logical_not(hypotheses.done))[0], "int32")

    def rows(tree, at):
        return keras.tree.map_structure(lambda x: ops.take(x, at, axis=0), tree)

    def joined(dropped, now):
        return ops.concatenate([dropped, rows(now, done)], axis=0)

    sentences = _Sentences(
        rows(sentences.origin, kept),
        rows(sentences.max_lengths, kept),
        rows(sentences.constants, kept),
        joined(sentences.done_origin, sentences.origin),
        joined(sentences.done_ids, hypotheses.finished_seq[:, :keep, 1:]),
        joined(sentences.done_scores, hypotheses.finished_scores[:, :keep]),
    )
    return rows(hypotheses, kept), settings.compact_state(state, kept), sentences


def _open_first(tree):
    """`tree` with each tensor's static first size made unknown to a graph (a gather of all its
    rows by indices the graph cannot count): a while loop's variable may then change that size."""

    def open_first(x):
        if len(x.shape) == 0 or x.shape[0] is None:
            return x
        return ops.take(x, ops.nonzero(ops.ones((x.shape[0],), "bool"))[0], axis=0)

    return keras.tree.map_structure(open_first, tree)


def _initial_hypotheses(initial_ids, positions, parts, settings):
    """Step 0: one live hypothesis per sentence (the initial id), no finished one."""
    beam_size = settings.beam_size
    tiled_ids = ops.tile(initial_ids[:, None], [1, beam_size])  # [batch, beam]
    alive_seq = ops.where(positions == 0, tiled_ids[:, :, None], settings.pad_id)  # [batch, beam, L + 1]
    # One live beam per sentence at step 0, so the beams do not all extend the same prefix.
    first_beam_only = ops.cast(ops.where(ops.arange(beam_size) == 0, 0.0, LARGE_NEGATIVE), SCORE_DTYPE)
    alive_log_probs = ops.zeros_like(tiled_ids, SCORE_DTYPE) + first_beam_only  # [batch, beam]
    part_states = tuple(part.initial_state(ops.zeros_like(tiled_ids)) for part in parts)
    finished_seq = ops.full_like(alive_seq, settings.pad_id)
    # An empty finished slot scores LARGE_NEGATIVE: any real hypothesis replaces it.
    finished_scores = ops.full_like(alive_log_probs, LARGE_NEGATIVE)
    finished_part_states = tuple(s if p.keeps_finished_state else () for p, s in zip(parts, part_states))
    done = ops.zeros_like(initial_ids, "bool")
    return _Hypotheses(
        alive_seq, alive_log_probs, part_states, finished_seq, finished_scores, finished_part_states, done
    )


def _step(loop, step, hypotheses, state):
    """One step: the model's logits, the candidates, the new finished and alive sets."""
    parts, settings, sentence_index = loop.parts, loop.settings, loop.sentence_index
    alive_seq = hypotheses.alive_seq
    ids = ops.reshape(ops.take(alive_seq, step, axis=2), [-1])  # [batch * beam]
    logits, state = loop.next_logits_fn(ids, step, state)
    inputs = StepInputs(step, ops.cast(logits, SCORE_DTYPE), alive_seq)  # [batch * beam, vocab]
    row_tokens, row_log_probs = _offers(inputs, parts, hypotheses.part_states, loop)
    pool_size = None if loop.chooser is not None else settings.num_candidates
    candidates = _candidates(hypotheses.alive_log_probs, row_tokens, row_log_probs, pool_size)
    cand_seq = _gather_beams(alive_seq, candidates.beam, sentence_index)  # [batch, candidates, L + 1]
    cand_seq = ops.where(loop.positions == step + 1, candidates.token[:, :, None], cand_seq)
    cand_states = tuple(
        part.advance(_gather_tree(part_state, candidates.beam, sentence_index), candidates, step)
        for part, part_state in zip(parts, hypotheses.part_states)
    )

    length = step + 1
    ended, real = _ended_candidates(candidates, length, loop.max_lengths, settings.eos_id)
    finishing = ended
    for part, cand_state in zip(parts, cand_states):
        may_finish = part.may_finish(cand_state)
        finishing = finishing if may_finish is None else ops.logical_and(finishing, may_finish)
    # A done sentence's returned hypotheses are final: nothing joins its finished set.
    finishing = ops.logical_and(finishing, ops.logical_not(hypotheses.done)[:, None])
    finished = _keep_best_finished(
        hypotheses, parts, cand_seq, cand_states, candidates, finishing, length, settings, sentence_index
    )

    growing = ops.logical_and(real, ops.logical_not(ended))
    growing_log_probs = ops.where(growing, candidates.log_probs, LARGE_NEGATIVE)
    if loop.chooser is None:
        alive_log_probs, chosen = ops.top_k(growing_log_probs, settings.beam_size)
    else:
        cand_state = cand_states[parts.index(loop.chooser)]
        chosen = loop.chooser.choose_alive(candidates.log_probs, growing, cand_state, settings.beam_size)
        alive_log_probs = take_along_last(growing_log_probs, chosen)
    alive_seq = _gather_beams(cand_seq, chosen, sentence_index)
    part_states = tuple(_gather_tree(cand_state, chosen, sentence_index) for cand_state in cand_states)
    parent_beam = take_along_last(candidates.beam, chosen)  # [batch, beam]
    state = _follow_parents(state, parent_beam, sentence_index, settings)
    return _Hypotheses(alive_seq, alive_log_probs, part_states, *finished, hypotheses.done), state


def _offers(inputs, parts, part_states, loop):
    """Each hypothesis's offered tokens and log-probabilities, `[batch * beam, offers]`."""
    choice_logits = inputs.logits
    for part, part_state in zip(parts, part_states):
        choice_logits = part.restrict(choice_logits, inputs, part_state)
    settings = loop.settings
    if loop.sampler is None:
        # Each of a sentence's best extensions is among its own hypothesis's `num_candidates` best
        # tokens, so only those are normalised (the log-softmax shifts a row by a constant).
        per_row = min(settings.num_candidates, inputs.logits.shape[-1] or settings.num_candidates)
        row_logits, row_tokens = blocked_top_k.top_k(choice_logits, per_row)  # [batch * beam, per_row]
        for part, part_state in zip(parts, part_states):
            extra = part.offer(choice_logits, row_tokens, part_state)
            if extra is not None:
                row_tokens = ops.concatenate([row_tokens, extra[0]], axis=1)
                row_logits = ops.concatenate([row_logits, extra[1]], axis=1)
    else:
        row_tokens = loop.sampler(choice_logits, inputs.step)  # [batch]
        for part, part_state in zip(parts, part_states):
            row_tokens = part.overrule(row_tokens, inputs, part_state)
        row_tokens = row_tokens[:, None]  # [batch, 1]
        row_logits = ops.take_along_axis(inputs.logits, row_tokens, axis=1)
    return row_tokens, row_logits - ops.logsumexp(inputs.logits, axis=-1, keepdims=True)


def _candidates(alive_log_probs, row_tokens, row_log_probs, pool_size):
    """Each sentence's `Candidates`: the best `pool_size` offers over its hypotheses (ties to the
    lower (beam, offer)), or all in (beam, offer) order when `pool_size` is None."""
    beam_size, per_row = alive_log_probs.shape[1], row_tokens.shape[1]
    extended = alive_log_probs[:, :, None] + ops.reshape(row_log_probs, [-1, beam_size, per_row])
    flat = ops.reshape(extended, [-1, beam_size * per_row])  # [batch, beam * per_row]
    flat_tokens = ops.reshape(row_tokens, [-1, beam_size * per_row])
    flat_token_log_probs = ops.reshape(row_log_probs, [-1, beam_size * per_row])
    if pool_size is None:
        index = ops.zeros_like(flat_tokens) + ops.arange(beam_size * per_row, dtype="int32")[None, :]
        return Candidates(flat, flat_tokens, index // per_row, flat_token_log_probs)
    log_probs, index = ops.top_k(flat, pool_size)  # [batch, candidates]
    token = take_along_last(flat_tokens, index)
    token_log_probs = take_along_last(flat_token_log_probs, index)
    return Candidates(log_probs, token, ops.floor_divide(index, per_row), token_log_probs)


def _ended_candidates(candidates, length, max_lengths, eos_id):
    """`ended` (by EOS or at max length) and `real`, each bool `[batch, candidates]`."""
    at_max_length = (length >= max_lengths)[:, None]  # [batch, 1]
    # Extensions of a dead hypothesis (only picked when fewer real ones exist) or by a token with
    # -inf logits are not hypotheses.
    real = candidates.log_probs > DEAD_THRESHOLD
    ended = ops.logical_and(ops.logical_or(candidates.token == eos_id, at_max_length), real)
    return ended, real


def _keep_best_finished(hypotheses, parts, cand_seq, cand_states, candidates, finishing, length, settings, sentences):
    """The new finished set (`finished_seq`, `finished_scores`, `finished_part_states`): the best
    `beam_size` of the old finished and the `finishing` candidates, by length-penalised score."""
    scores = ops.where(finishing, candidates.log_probs / length_penalty(length, settings.alpha), LARGE_NEGATIVE)
    pooled_scores = ops.concatenate([hypotheses.finished_scores, scores], axis=1)
    finished_scores, chosen = ops.top_k(pooled_scores, settings.beam_size)
    finished_seq = _gather_beams(ops.concatenate([hypotheses.finished_seq, cand_seq], axis=1), chosen, sentences)
    finished_part_states = tuple(
        _gather_tree(
            keras.tree.map_structure(lambda a, b: ops.concatenate([a, b], axis=1), old, new), chosen, sentences
        )
        if part.keeps_finished_state
        else ()
        for part, old, new in zip(parts, hypotheses.finished_part_states, cand_states)
    )
    return finished_seq, finished_scores, finished_part_states


def _sentence_done(alive_log_probs, finished_scores, bound_penalty, num_return):
    """[batch] bool: the sentence's `num_return` best finished hypotheses are final.

    An alive hypothesis scores at best `best_alive / bound_penalty` when it ends: with the length
    penalty at the maximum length (`stopping="exact"`), that bound holds for every ending, since for
    alpha >= 0 the penalty grows with the length and a log-probability only falls as tokens are
    added; at the next step's length (`"heuristic"`), it assumes that no longer ending would score
    better, as OpenNMT-py and CTranslate2 stop once the best hypothesis has ended.
    """
    best_alive = ops.max(alive_log_probs, axis=1)
    best_possible = best_alive / bound_penalty
    # Finished scores are kept best first; the num_return-th stays LARGE_NEGATIVE until that many
    # hypotheses have finished, so the returned n-best never holds an empty slot that could fill.
    last_returned = finished_scores[:, num_return - 1]
    no_alive = best_alive <= DEAD_THRESHOLD
    return ops.logical_or(no_alive, best_possible < last_returned)


def _gather_beams(x, beam_indices, sentence_index):
    """x `[batch, beams, ...]`, beam_indices `[batch, n]` -> `[batch, n, ...]`; `sentence_index` is
    `arange(batch)[:, None]`, the sentence of every row."""
    num_beams = dimension(x, 1)
    rows = ops.reshape(sentence_index * num_beams + beam_indices, [-1])
    gathered = ops.take(ops.reshape(x, (-1,) + tuple(x.shape[2:])), rows, axis=0)
    return ops.reshape(gathered, (-1, dimension(beam_indices, 1)) + tuple(x.shape[2:]))


def _gather_tree(tree, beam_indices, sentence_index):
    """`_gather_beams` on every tensor of a nested structure."""
    return keras.tree.map_structure(lambda x: _gather_beams(x, beam_indices, sentence_index), tree)


def _follow_parents(state, parent_beam, sentence_index, settings):
    """The model's state of the new alive hypotheses: each takes its parent's rows."""
    if settings.beam_size == 1:  # With one hypothesis per sentence the parent is always itself.
        return state
    parent_rows = ops.reshape(sentence_index * settings.beam_size + parent_beam, [-1])
    if settings.reorder_state is None:
        return keras.tree.map_structure(lambda x: ops.take(x, parent_rows, axis=0), state)
    return settings.reorder_state(state, parent_rows)
