"""The key/value cache of `MultiHeadAttention`: its layout and its writes.

`(keys, values)`, each `[batch, num_heads, cache_length, head_dim]`: self caches preallocated by
`empty_cache` and written at `cache_index`; cross caches computed once and only read. A cache with
`n` times fewer rows than the queries holds `n` slots per row (a sentence's beams). A decoder
stack plans where a call writes once (`plan_write`) for all its layers' keys and values.
docs/design.md, "The model", says how writes run per backend (`BufferOps`)."""

import contextlib
import threading
from collections.abc import Callable
from typing import Any, NamedTuple

from keras import ops

from models.shapes import dimension


class BufferOps(NamedTuple):
    """How cache buffers are made and written.

    Attributes:
        allocate: `(shape, dtype) -> buffer` of zeros, fresh at every run.
        target: `(coordinates, shape) -> target` of the rows at `coordinates`, three int32 `[n]`
            tensors (batch row, head, position), all distinct, in buffers of `shape` (the int32
            shape of the buffers); computed once and used by every write of a decoding call.
        write_rows: `(buffer, target, rows) -> buffer` with `rows` `[n, head_dim]` written at
            `target`; it may write into `buffer` itself.
        shift: `(target, offset) -> target` of the same rows `offset` (an int32 scalar) positions on.
    """

    allocate: Callable
    target: Callable
    write_rows: Callable
    shift: Callable


class PlannedWrite(NamedTuple):
    """Where a decoding call writes its keys and values (`plan_write`), passed as `cache_index` to
    layers whose self caches all have the shape it was planned for. Tensors only: Keras layers take
    no nested argument that mixes tensors and Python values."""

    cache_index: Any  # int32 scalar tensor: the absolute position of the call's first position
    target: Any  # the `BufferOps.target` of the rows written


KERAS_BUFFER_OPS = BufferOps(
    allocate=lambda shape, dtype: ops.zeros(shape, dtype=dtype),
    target=lambda coordinates, shape: ops.stack(coordinates, axis=-1),
    write_rows=ops.scatter_update,
    shift=lambda target, offset: target + ops.convert_to_tensor([0, 0, 1], "int32") * offset,
)
_state = threading.local()  # `buffer_ops`: what `using_buffer_ops` set in this thread.


def current_buffer_ops():
    """The `BufferOps` that `empty_cache` and `write_cache` use now, in this thread."""
    return getattr(_state, "buffer_ops", KERAS_BUFFER_OPS)


@contextlib.contextmanager
def using_buffer_ops(buffer_ops):
    """Makes `empty_cache` and `write_cache` use `buffer_ops` in the `with` block, in this thread."""
    previous = current_buffer_ops()
    _state.buffer_ops = buffer_ops
    try:
        yield
    finally:
        _state.buffer_ops = previous


def concrete_int(value):
    """Returns `value` as a Python int when it is known outside a trace, else None."""
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except Exception:  # A symbolic TF tensor or a JAX tracer: known only at run time.
        return None


def empty_cache(batch_size, num_heads, cache_length, head_dim, dtype):
    """A zero self-attention cache: `(keys, values)`, each `[batch_size, num_heads, cache_length, head_dim]`."""
    shape = (batch_size, num_heads, cache_length, head_dim)
    buffer_ops = current_buffer_ops()
    return buffer_ops.allocate(shape, dtype), buffer_ops.allocate(shape, dtype)


def check_cache(cache, num_heads, head_dim, name):
    """The cache as a `(keys, values)` tuple, or ValueError (naming layer `name`) saying what is wrong with it."""
    expected = f"(keys, values), each [batch, {num_heads}, cache_length, {head_dim}]"
    if not isinstance(cache, (tuple, list)) or len(cache) != 2:
        raise ValueError(f"{name}: cache must be a pair {expected}, received {type(cache).__name__}")
    for part, tensor in zip(("keys", "values"), cache):
        shape = tuple(tensor.shape)
        if len(shape) != 4 or shape[1] != num_heads or shape[3] != head_dim:
            raise ValueError(f"{name}: cache must be {expected}; its {part} have shape {shape}")
    return tuple(cache)


def rows_per_cache_row(query_rows, keys, name):
    """How many consecutive query rows of `query_rows` (an int or an int32 scalar tensor) share a
    row of the cache: a Python int when both are static, else an int32 scalar tensor. ValueError
    when it is not a whole number."""
    query_rows_static, cache_rows = concrete_int(query_rows), concrete_int(keys.shape[0])
    if query_rows_static is None or cache_rows is None:  # An empty batch counts as one row per cache row.
        return ops.maximum(ops.floor_divide(query_rows, ops.maximum(ops.shape(keys)[0], 1)), 1)
    if cache_rows == 0:
        return 1
    if query_rows_static % cache_rows:
        raise ValueError(
            f"{name}: {query_rows_static} query rows cannot share the keys/values of {cache_rows} cache "
            "rows: the query batch must be a multiple of the cache's"
        )
    return query_rows_static // cache_rows


def plan_write(keys, query_rows, length, cache_index, name):
    """The `PlannedWrite` of `query_rows` rows of `length` new positions from `cache_index` on into
    caches shaped as `keys` (`[batch, num_heads, cache_length, head_dim]`): with `n` slots per row,
    query row `r` writes row `r // n` from position `(r % n) * cache_length / n + cache_index`.
    Raises `ValueError` on positions that do not fit in a slot (names layer `name`)."""
    start = concrete_int(cache_index)
    slots = rows_per_cache_row(query_rows, keys, name)
    cache_length = keys.shape[2]
    length_static = concrete_int(length)
    slot_length = None if cache_length is None or not isinstance(slots, int) else cache_length // slots
    if isinstance(slots, int) and cache_length is not None and cache_length % slots:
        raise ValueError(f"{name}: a cache of length {cache_length} cannot hold {slots} equal slots, one per query row")
    # With unknown batch sizes (a TensorFlow graph) the slot count is known at run time only:
    # the positions are then checked against the whole cache.
    room = slot_length if slot_length is not None else cache_length
    if start is not None and room is not None and length_static is not None:
        if start < 0 or start + length_static > room:
            where = (
                f"a cache of length {room}"
                if room == cache_length
                else (
                    f"a slot of length {room} (a cache of {cache_length} positions in {slots} slots, one per query row)"
                )
            )
            raise ValueError(
                f"{name}: decoding positions [{start}, {start + length_static}) do not fit "
                f"in {where}; expected 0 <= cache_index <= {room - length_static}"
            )
    cache_shape = ops.shape(keys)
    if slot_length is None:
        slot_length = ops.floor_divide(cache_shape[2], slots)
    num_heads = keys.shape[1]
    shape = (query_rows, num_heads, length)
    rows = ops.arange(query_rows, dtype="int32")[:, None, None]
    coordinates = (
        ops.floor_divide(rows, slots),
        ops.arange(num_heads, dtype="int32")[None, :, None],
        ops.mod(rows, slots) * slot_length
        + ops.arange(length, dtype="int32")[None, None, :]
        + ops.cast(cache_index, "int32"),
    )
    coordinates = tuple(ops.reshape(ops.broadcast_to(c, shape), (-1,)) for c in coordinates)
    target = current_buffer_ops().target(coordinates, cache_shape)
    return PlannedWrite(ops.convert_to_tensor(cache_index, "int32"), target)


def shift_plan(plan, offset):
    """`plan` (a `PlannedWrite`) `offset` positions on: a search plans its first step's writes once
    and shifts that plan at every step, which costs a graph two ops instead of the whole plan."""
    offset = ops.convert_to_tensor(offset, "int32")
    return PlannedWrite(plan.cache_index + offset, current_buffer_ops().shift(plan.target, offset))


def position_of(cache_index):
    """The absolute position of a call's first position, from a position or a `PlannedWrite`."""
    return cache_index.cache_index if isinstance(cache_index, PlannedWrite) else cache_index


def write_cache(cache, new_keys, new_values, cache_index, name):
    """Writes `new_keys`/`new_values` (`[query_batch, num_heads, length, head_dim]`) into `cache`
    from `cache_index` on, a position or a `PlannedWrite` for caches of this shape (`plan_write`);
    returns the new `(keys, values)`. Raises `ValueError` as `plan_write` does (names layer
    `name`)."""
    keys, values = cache
    plan = cache_index
    if not isinstance(plan, PlannedWrite):
        plan = plan_write(keys, dimension(new_keys, 0), dimension(new_keys, 2), cache_index, name)
    head_dim = keys.shape[3]
    write_rows = current_buffer_ops().write_rows

    def write(buffer, new):
        return write_rows(buffer, plan.target, ops.reshape(ops.cast(new, buffer.dtype), (-1, head_dim)))

    return write(keys, new_keys), write(values, new_values)
