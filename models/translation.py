"""Translation with a trained `Transformer`: encode once, then beam search over the decoding cache.

Backend-agnostic (keras.ops only): it runs eagerly, under `jax.jit`, and traces into a TensorFlow
graph for the SavedModel. The model is seen by the search only through `next_logits_fn`.
"""

import contextlib

import keras
from keras import ops

from common.special_ids import BOS_ID, EOS_ID
from models import attention_cache, int8_weights
from models.beam_search import SearchResult, beam_search, greedy_search, sampling_search, search_options
from models.multi_head_attention import GroupedBias, rows_bias, shared_key_bias
from models.sampling import sentence_keys, token_sampler
from models.search_config import DEFAULT_SEARCH
from models.shapes import dimension
from models.token_scores import token_log_probs
from models.vocabulary_shortlist import SPECIAL_IDS, batch_shortlist, needs_static_shapes

# Positions a self cache's slot starts with, and gains when full, in a TensorFlow graph
# (`_shared_slot_decoding`): a step's self-attention reads its slots' positions, not the whole length.
CAPACITY_STEP = 8


def translate_ids(
    model,
    source_ids,
    search=DEFAULT_SEARCH,
    *,
    num_return=1,
    max_decode_length=None,
    keys=None,
    prefix_ids=None,
    constraint_ids=None,
    lexical_table=None,
    bos_id=BOS_ID,
    eos_id=EOS_ID,
    encoded=None,
):
    """Beam search (section 6.1: beam 4, alpha 0.6, at most input length + 50 tokens).

    Args:
        model: a `models.transformer.Transformer`, or an object with the parts of it the search
            reads: `encode`, `initial_cache`, `plan_decoding`, `decode`, `output_projection`
            (with the Transformer's signatures), `pad_id`, and `variables` (where int8 matrices
            are found, `int8_weights.products_cast_once`).
        source_ids: int `[batch, source_length]`, each row tokens + EOS, padded with the model's
            pad id. Padding does not change a sentence's translation.
        search: the `SearchConfig` (its `max_input_length` is the caller's: rows come cut).
            `beam_size` 1 is greedy decoding (`greedy_search`); n source tokens (EOS included) get
            at most n + `max_extra_length` and at least floor(n * `min_length_ratio`) output tokens;
            with `sampling` every token is drawn instead of searched, one hypothesis per sentence.
        num_return: hypotheses returned per sentence (n-best), at most `beam_size` (1 with sampling).
        max_decode_length: the overall cap and each hypothesis's slot of the self caches; default
            the padded source length + `max_extra_length` (must then be static).
        prefix_ids: int `[batch, prefix_length]` (static length), each row the tokens its output
            starts with (forced, then searched on), padded with the model's pad id; a row of pad
            ids alone searches as without `prefix_ids`. A prefix longer than its sentence's
            maximum output length is cut there: callers check.
        keys: ints `[batch]` that fix each sentence's draws with the sampling seed
            (`models.sampling.sentence_keys`); default the rows' positions. Only with sampling.
        constraint_ids: int `[batch, phrases, phrase_length]` (static sizes), each sentence's target
            phrases (terminology constraints), each row a phrase's tokens padded with the model's
            pad id (a row of pad ids: no phrase). Searched by `beam_search`'s constrained search
            (also at `beam_size=1`); a sentence whose phrases no hypothesis met returns rows
            scored `models.beam_search.UNMET_SCORE`. Not with sampling.
        lexical_table: the `LexicalTable` `search.shortlist` reads (`models.vocabulary_shortlist`:
            the forced pieces join the columns; a translation then depends on its batch).
        bos_id, eos_id: the tokenizer's beginning- and end-of-sentence ids.
        encoded: `model.encode(source_ids)`, where the caller keeps it for a forced pass after.

    Returns:
        `SearchResult(ids [batch, num_return, max_decode_length], scores [batch, num_return])`,
        ids ending with EOS (or cut at the length limit) and padded after it.
    """
    sampling = search.sampling
    beam_size = 1 if sampling is not None else search.beam_size
    max_decode_length = _decode_length(source_ids, max_decode_length, search.max_extra_length, sampling, num_return)
    if sampling is not None and constraint_ids is not None:
        raise ValueError("sampling does not search, so it cannot meet constraints: pass constraint_ids or sampling")
    _check_shortlist(model, search, lexical_table, bos_id, eos_id)
    # Every weight is read, and an int8 model's matrices cast for their products, once here, not at every step.
    with int8_weights.products_cast_once(model.variables), _weights_read_once(model.variables):
        encoder_output, padding_mask = model.encode(source_ids, training=False) if encoded is None else encoded
        batch_size = ops.shape(source_ids)[0]
        source_lengths = ops.sum(ops.cast(padding_mask, "int32"), axis=1)  # [batch]
        capacity = _first_capacity(source_lengths, search, max_decode_length)
        cache = model.initial_cache(encoder_output, beam_size * capacity)
        columns = _shortlist_columns(model, search, lexical_table, source_ids, (prefix_ids, constraint_ids))
        sizes = (batch_size, beam_size, max_decode_length, capacity)
        cross_bias = shared_key_bias(padding_mask, beam_size)  # Made once, added at every step.
        next_logits_fn, state, compact_state = _shared_slot_decoding(model, cache, cross_bias, sizes, columns)
        options = _search_options(model, source_lengths, max_decode_length, search, eos_id, compact_state)
        initial_ids = ops.full((batch_size,), bos_id, dtype="int32")
        if columns is not None:  # The search runs over column indices (the special ids keep theirs).
            initial_ids, prefix_ids, constraint_ids = columns.to_columns(initial_ids, prefix_ids, constraint_ids)
        if prefix_ids is not None:
            options["prefix_ids"] = prefix_ids
        if sampling is not None:
            sampler = _sampler(sampling, ops.arange(batch_size) if keys is None else keys)
            result = sampling_search(next_logits_fn, initial_ids, state, sampler=sampler, **options)
        else:
            result = _run_search(next_logits_fn, initial_ids, state, beam_size, num_return, constraint_ids, options)
        return result if columns is None else SearchResult(columns.to_vocabulary(result.ids), result.scores)


@contextlib.contextmanager
def _weights_read_once(variables):
    """A block in which the model's layers read each of `variables` as one tensor read on entering
    it. Under TensorFlow a layer reads its variables where it uses them, so a search's loop would
    read every weight again at every step, an op each; under JAX a search is jitted, where a read
    costs nothing and an eager copy would copy the weights."""
    if keras.backend.backend() != "tensorflow":
        yield
        return
    distinct = {id(variable): variable for variable in variables}.values()  # An ensemble may hold a model twice.
    with keras.StatelessScope(state_mapping=[(variable, ops.copy(variable)) for variable in distinct]):
        yield


def _shortlist_columns(model, search, lexical_table, source_ids, forced_ids):
    """The batch's `BatchShortlist` when `search` has a shortlist, else None."""
    if not search.shortlist:
        return None
    vocabulary_size = model.vocabulary_size
    static = needs_static_shapes()
    return batch_shortlist(lexical_table, source_ids, search.shortlist, vocabulary_size, forced_ids, static)


def _check_shortlist(model, search, lexical_table, bos_id, eos_id):
    """Raises ValueError for a shortlist's search without its table, or with special ids it does not keep."""
    if search.shortlist and lexical_table is None:
        raise ValueError(f"search.shortlist={search.shortlist} needs the lexical table: pass lexical_table")
    if search.shortlist and not {bos_id, eos_id, model.pad_id} <= set(SPECIAL_IDS):
        raise ValueError(f"a shortlist's search needs the special ids {SPECIAL_IDS} for BOS, EOS and padding")


def _sampler(sampling, keys):
    """The token sampler of `sampling` (a `Sampling`), each sentence's draws fixed by its key."""
    return token_sampler(
        sentence_keys(sampling.seed, keys),
        top_k=sampling.top_k,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
    )


def _run_search(next_logits_fn, initial_ids, initial_state, beam_size, num_return, constraint_ids, options):
    """The greedy search for one slot per sentence and no constraints, else the beam search
    (constrained when `constraint_ids` is given), with `options` (`_search_options`), from
    `_shared_slot_decoding`'s `initial_state`."""
    if beam_size == 1 and constraint_ids is None:  # One slot per sentence: no ancestry to keep.
        return greedy_search(next_logits_fn, initial_ids, initial_state, **options)
    if constraint_ids is not None:
        options = {**options, "constraint_ids": constraint_ids}
    if beam_size == 1:  # Constrained, with one slot per sentence: the greedy state.
        return beam_search(next_logits_fn, initial_ids, initial_state, beam_size=1, **options)
    return beam_search(
        next_logits_fn,
        initial_ids,
        initial_state,
        beam_size=beam_size,
        num_return=num_return,
        reorder_state=_reorder_ancestry,
        **options,
    )


def _decode_length(source_ids, max_decode_length, max_extra_length, sampling, num_return):
    """`max_decode_length`, by default the static padded source length + `max_extra_length`; raises
    ValueError on settings `translate_ids` cannot search with."""
    if sampling is not None and num_return != 1:
        raise ValueError(f"sampling draws one hypothesis: it needs num_return=1, received {num_return}")
    if max_decode_length is None:
        source_length = source_ids.shape[1]
        if source_length is None:
            raise ValueError(
                "translate_ids needs a static source length or an explicit max_decode_length, "
                f"received source_ids of shape {source_ids.shape}"
            )
        max_decode_length = int(source_length) + int(max_extra_length)
    return max_decode_length


def _shared_slot_decoding(model, cache, cross_bias, sizes, columns=None):
    """The search's `next_logits_fn(ids, step, state)` over caches that are never reordered, its
    initial `state` (`{"self": the self caches, ...}`) and its `compact_state` (`_compactor`; None
    where slots do not grow); `sizes` is `(batch_size, beam_size, max_decode_length, capacity)`,
    `capacity` the positions per slot of `cache["self"]` (`_first_capacity`); with `columns` (a
    `BatchShortlist`), `ids` and the logits are those of its columns.

    Hypotheses are rows b * beam + k (beam k of sentence b); the caches stay one row per sentence,
    never reordered. Encoder keys/values (`cache["cross"]`): projected once, read by the sentence's
    beams together (`MultiHeadAttention._attend_shared`). Self-attention keys/values: `beam` slots
    per sentence; the hypothesis in slot k writes position t of slot k at step t, and reads each
    earlier position in the slot of its ancestor there, recorded in `state["ancestry"]` (`[batch *
    beam, positions per slot]`, the only state reordered with the beams, by `_reorder_ancestry`).
    No step copies the caches: a reordering gather of every cache per step is a large share of a
    beam search's memory traffic on a GPU. A slot holds `max_decode_length` positions where shapes
    are fixed (JAX); in a TensorFlow graph it starts at `CAPACITY_STEP` and grows by that many when
    a step needs room (`_with_room`), so that the self-attention of step t reads about t positions
    per slot, not the whole length. `cross_bias` is the encoder padding mask as the
    cross-attention's `GroupedBias` (`shared_key_bias`). What every step's decoding call shares is
    made here once: where it writes (`plan_decoding`, shifted per step, planned again when the slots
    grow), and the self-attention mask comes as the `GroupedBias` the decoder would make of it.
    """
    batch_size, beam_size, max_decode_length, capacity = sizes
    slots = ops.arange(beam_size, dtype="int32")
    # The output projection (a shortlist's columns, or every id) in a step's layout, made once.
    projection = model.output_projection(None if columns is None else columns.columns)
    rows = batch_size * beam_size
    first_write = model.plan_decoding(cache["self"], rows)
    state = {"self": cache["self"]}
    own_slot = ops.mod(ops.arange(rows, dtype="int32"), beam_size)  # [batch * beam]
    growing = not isinstance(capacity, int)  # An int32 scalar: the slots grow (`_with_room`).
    if growing:  # What changes with the slots or the sentences left travels in the state.
        state.update(write=first_write, capacity=capacity, cross=cache["cross"], cross_bias=cross_bias)
        state["own_slot"] = own_slot
    whole_slots = None if growing else ops.arange(max_decode_length, dtype="int32")
    if beam_size > 1:
        state["ancestry"] = ops.zeros((rows, capacity), dtype="int32")

    def next_logits_fn(ids, step, state):
        if growing:
            state = _with_room(model, state, step, beam_size, max_decode_length)
        mask = None  # One slot per sentence (greedy): the decoder's causal mask.
        if beam_size > 1:
            held = state["capacity"] if growing else max_decode_length
            positions = ops.arange(held, dtype="int32") if growing else whole_slots
            slot = state["own_slot"] if growing else own_slot
            ancestry = ops.where(positions[None, :] == step, slot[:, None], state["ancestry"])
            # [batch * beam, beam, held]: slot k, position p holds an ancestor's (or its own) keys.
            visible = ops.logical_and(positions[None, None, :] <= step, ancestry[:, None, :] == slots[None, :, None])
            # Grouped by sentence: its beams' rows see its cache row's `beam * held` keys.
            grouped = ops.reshape(visible, (-1, beam_size, beam_size * held))
            mask = rows_bias(grouped, dimension(grouped, 0) if growing else batch_size, beam_size)
            state = {**state, "ancestry": ancestry}
        logits, new_cache = model.decode(
            ops.expand_dims(ids if columns is None else columns.to_vocabulary(ids), 1),
            encoder_padding_mask=state["cross_bias"] if growing else cross_bias,
            cache={"self": state["self"], "cross": state["cross"] if growing else cache["cross"]},
            cache_index=_write_at(state["write"] if growing else first_write, step),
            self_attention_mask=mask,
            projection=projection,
        )
        logits = logits[:, 0, :]  # [batch * beam, vocab or columns]
        if columns is not None and columns.bias is not None:
            logits = logits + columns.bias[None, :]
        return logits, {**state, "self": new_cache["self"]}

    return next_logits_fn, state, _compactor(model, beam_size) if growing else None


def _compactor(model, beam_size):
    """The search's `compact_state` of `_shared_slot_decoding`'s growing state: the rows of the
    sentences kept in every per-sentence tensor, and the write planned again for them."""
    slots = ops.arange(beam_size, dtype="int32")

    def compact_state(state, kept):
        left = dimension(kept, 0)
        caches = _rows(state["self"], kept)
        bias = state["cross_bias"]
        compacted = {
            "self": caches,
            "cross": _rows(state["cross"], kept),
            "cross_bias": GroupedBias(_rows(bias.bias, kept), ops.convert_to_tensor(left, "int32"), bias.group_rows),
            "write": model.plan_decoding(caches, left * beam_size),
            "own_slot": ops.mod(ops.arange(left * beam_size, dtype="int32"), beam_size),
        }
        if "ancestry" in state:
            hypotheses = ops.reshape(kept[:, None] * beam_size + slots[None, :], (-1,))
            compacted["ancestry"] = _rows(state["ancestry"], hypotheses)
        return {**state, **compacted}

    return compact_state


def _rows(tree, rows):
    """Every tensor of `tree` at `rows` (int32 `[n]`) of its first axis."""
    return keras.tree.map_structure(lambda x: ops.take(x, rows, axis=0), tree)


def _first_capacity(source_lengths, search, max_decode_length):
    """Positions per slot the self caches start with (`_shared_slot_decoding`): `max_decode_length`
    where shapes are fixed (JAX) or it is at most `CAPACITY_STEP`; else at most `CAPACITY_STEP`, an
    int32 scalar computed from the batch's maximum output lengths (`source_lengths` `[batch]` plus
    `search.max_extra_length`) so that the graph leaves the caches' length open to grow."""
    if needs_static_shapes() or max_decode_length <= CAPACITY_STEP:
        return max_decode_length
    max_lengths = ops.cast(source_lengths, "int32") + search.max_extra_length
    longest = ops.max(ops.concatenate([max_lengths, ops.ones((1,), "int32")]))
    return ops.minimum(longest, CAPACITY_STEP)


def _with_room(model, state, step, slots, max_decode_length):
    """`state` whose self caches hold position `step` in each of their `slots` slots per row: when
    full (`state["capacity"]` positions per slot), `CAPACITY_STEP` more (at most
    `max_decode_length`), zeros after each slot's own and after the ancestry's, and the write
    planned again for them."""
    capacity = state["capacity"]

    def grown():
        extra = ops.minimum(capacity + CAPACITY_STEP, max_decode_length) - capacity
        caches = keras.tree.map_structure(lambda x: _padded_slots(x, slots, extra), state["self"])
        rows = dimension(state["own_slot"], 0)
        room = {"self": caches, "write": model.plan_decoding(caches, rows), "capacity": capacity + extra}
        if "ancestry" in state:
            room["ancestry"] = ops.pad(state["ancestry"], [[0, 0], [0, extra]])
        return {**state, **room}

    return ops.cond(step >= capacity, grown, lambda: state)


def _padded_slots(buffer, slots, extra):
    """`buffer` `[batch, heads, slots * capacity, head_dim]` with `extra` zero positions after each of its slots."""
    shape = ops.shape(buffer)
    per_slot = ops.reshape(buffer, (shape[0], shape[1], slots, -1, shape[3]))
    padded = ops.pad(per_slot, [[0, 0], [0, 0], [0, 0], [0, extra], [0, 0]])
    return ops.reshape(padded, (shape[0], shape[1], -1, shape[3]))


def _write_at(first_write, step):
    """`plan_decoding`'s plan (one per member of an ensemble) shifted to position `step`."""
    if isinstance(first_write, list):
        return [attention_cache.shift_plan(plan, step) for plan in first_write]
    return attention_cache.shift_plan(first_write, step)


def _reorder_ancestry(state, parent_rows):
    """The search's `reorder_state`: only the ancestry follows the reselected hypotheses, the self
    caches (and their write plan and capacity) stay in place (see `_shared_slot_decoding`)."""
    return {**state, "ancestry": ops.take(state["ancestry"], parent_rows, axis=0)}


def _search_options(model, source_lengths, max_decode_length, search, eos_id, compact_state=None):
    """The keyword arguments every search takes: the length limits of each sentence from its source
    length and `search`, the settings the search takes as they are (`search_options`), EOS, the
    model's pad id and the state's `compact_state` (None: every sentence stays to the end)."""
    options = dict(
        search_options(search),
        max_decode_length=max_decode_length,
        max_lengths=source_lengths + search.max_extra_length,
        eos_id=eos_id,
        pad_id=model.pad_id,
        compact_state=compact_state,
    )
    if search.min_length_ratio:
        ratio = search.min_length_ratio
        options["min_lengths"] = ops.cast(ops.floor(ops.cast(source_lengths, "float32") * ratio), "int32")
    return options


def score_ids(model, source_ids, target_ids, *, bos_id=BOS_ID):
    """Forced decoding: the model's log-probability of given targets, with no search.

    Args:
        model: a `models.transformer.Transformer`.
        source_ids: int `[batch, source_length]`, tokens + EOS, padded with the model's pad id.
        target_ids: int `[batch, target_length]`, tokens + EOS, padded with the model's pad id.
        bos_id: the first decoder input.

    Returns:
        `(log_probs, lengths)`: float32 `[batch]`, the sum over the target tokens (EOS included)
        of log P(token | source, previous tokens), and int32 `[batch]`, how many tokens that is.
        `log_probs / lengths` is the per-token average, `exp(-log_probs / lengths)` the perplexity.
    """
    log_probs, lengths = token_log_probs(model, source_ids, target_ids, bos_id=bos_id)
    return ops.sum(log_probs, axis=1), lengths


def cross_attention_weights(model, source_ids, target_input_ids, layer=-1):
    """Decoder layer `layer`'s (default: the last) encoder-decoder attention for a forced target,
    float32 `[batch, heads, target_length, source_length]` (for plots and word alignments)."""
    encoder_output, padding_mask = model.encode(source_ids, training=False)
    _, weights = model.decode(
        target_input_ids, encoder_output, padding_mask, return_attention_scores=True, attention_layer=layer
    )
    return ops.cast(weights, "float32")
