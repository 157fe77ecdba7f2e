"""The key/value cache of `MultiHeadAttention`: its layout and its writes.

`(keys, values)`, each `[batch, num_heads, cache_length, head_dim]`: self caches preallocated by
`empty_cache` and written at `cache_index`; cross caches computed once and only read. A cache with
`n` times fewer rows than the queries holds `n` slots per row (a sentence's beams). docs/design.md,
"The model", says how writes run per backend (`BufferOps`)."""

import contextlib
import threading
from collections.abc import Callable
from typing import NamedTuple

from keras import ops


class BufferOps(NamedTuple):
    """How cache buffers are made and written.

    Attributes:
        allocate: `(shape, dtype) -> buffer` of zeros, fresh at every run.
        write_rows: `(buffer, coordinates, rows) -> buffer` with `rows` `[n, head_dim]` written at
            `coordinates`, three int32 `[n]` tensors (batch row, head, position), all distinct; it
            may write into `buffer` itself.
    """

    allocate: Callable
    write_rows: Callable


def _scatter_rows(buffer, coordinates, rows):
    return ops.scatter_update(buffer, ops.stack(coordinates, axis=-1), rows)


KERAS_BUFFER_OPS = BufferOps(allocate=lambda shape, dtype: ops.zeros(shape, dtype=dtype), write_rows=_scatter_rows)
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


def rows_per_cache_row(queries, keys, name):
    """How many consecutive query rows share a row of the cache: a Python int when both batch
    sizes are static, else an int32 scalar tensor. ValueError when it is not a whole number."""
    query_rows, cache_rows = concrete_int(queries.shape[0]), concrete_int(keys.shape[0])
    if query_rows is None or cache_rows is None:  # An empty batch counts as one row per cache row.
        return ops.maximum(ops.floor_divide(ops.shape(queries)[0], ops.maximum(ops.shape(keys)[0], 1)), 1)
    if cache_rows == 0:
        return 1
    if query_rows % cache_rows:
        raise ValueError(
            f"{name}: {query_rows} query rows cannot share the keys/values of {cache_rows} cache "
            "rows: the query batch must be a multiple of the cache's"
        )
    return query_rows // cache_rows


def write_cache(cache, new_keys, new_values, cache_index, name):
    """Writes `new_keys`/`new_values` (`[query_batch, num_heads, length, head_dim]`) into `cache`
    from `cache_index` on; returns the new `(keys, values)`. With `n` slots per row, query row `r`
    writes row `r // n` from position `(r % n) * cache_length / n + cache_index`. Raises
    `ValueError` on positions that do not fit in a slot (names layer `name`)."""
    keys, values = cache
    start = concrete_int(cache_index)
    slots = rows_per_cache_row(new_keys, keys, name)
    cache_length = keys.shape[2]
    length = new_keys.shape[2]
    slot_length = None if cache_length is None or not isinstance(slots, int) else cache_length // slots
    if isinstance(slots, int) and cache_length is not None and cache_length % slots:
        raise ValueError(f"{name}: a cache of length {cache_length} cannot hold {slots} equal slots, one per query row")
    # With unknown batch sizes (a TensorFlow graph) the slot count is known at run time only:
    # the positions are then checked against the whole cache.
    room = slot_length if slot_length is not None else cache_length
    if start is not None and room is not None and length is not None:
        if start < 0 or start + length > room:
            where = (
                f"a cache of length {room}"
                if room == cache_length
                else (
                    f"a slot of length {room} (a cache of {cache_length} positions in {slots} slots, one per query row)"
                )
            )
            raise ValueError(
                f"{name}: decoding positions [{start}, {start + length}) do not fit "
                f"in {where}; expected 0 <= cache_index <= {room - length}"
            )
    if slot_length is None:
        slot_length = ops.floor_divide(ops.shape(keys)[2], slots)
    shape = ops.shape(new_keys)[:3]
    head_dim = keys.shape[3]
    rows = ops.arange(shape[0], dtype="int32")[:, None, None]
    coordinates = (
        ops.floor_divide(rows, slots),
        ops.arange(shape[1], dtype="int32")[None, :, None],
        ops.mod(rows, slots) * slot_length
        + ops.arange(shape[2], dtype="int32")[None, None, :]
        + ops.cast(cache_index, "int32"),
    )
    coordinates = tuple(ops.reshape(ops.broadcast_to(c, shape), (-1,)) for c in coordinates)

    write_rows = current_buffer_ops().write_rows

    def write(buffer, new):
        return write_rows(buffer, coordinates, ops.reshape(ops.cast(new, buffer.dtype), (-1, head_dim)))

    return write(keys, new_keys), write(values, new_values)
