"""The key/value cache of `models.multi_head_attention.MultiHeadAttention`: its layout and its writes.

A cache is a pair `(keys, values)`, each `[batch, num_heads, cache_length, head_dim]`, head-major
so that a decoding step attends with two batched matmuls over the buffers as they lie:
- self-attention while decoding: `empty_cache` preallocates `cache_length` positions; each call
  writes its new positions at `cache_index` and attends over the whole buffer under the caller's
  mask (fixed shapes: one compiled program for every step). A cache with `n` times fewer rows than
  the queries holds `n` slots per row, one per query row (a sentence's beams; `write_cache`);
- encoder-decoder attention: `MultiHeadAttention.project_key_value(encoder_output)`, computed once
  per sentence, passed with `cache_index=None` and only read; a sentence's beams on consecutive
  rows share one read of it (`rows_per_cache_row`).

How a buffer is allocated and written is a `BufferOps`: by default `keras.ops.zeros` and
`keras.ops.scatter_update`, which XLA runs in place; a TensorFlow graph without XLA would copy the
buffer at every write, so `inference/in_place_cache.py` sets other primitives for its trace
(`using_buffer_ops`), `models/` itself holding no TensorFlow code.
"""

import contextlib
import threading
from collections.abc import Callable
from typing import NamedTuple

from keras import ops


class BufferOps(NamedTuple):
    """How cache buffers are made and written.

    Attributes:
        allocate: `(shape, dtype) -> buffer`, a zero buffer of that shape (a fresh one at every
            run: `write_rows` may write into it).
        write_rows: `(buffer, coordinates, rows) -> buffer`: `buffer` `[batch, heads,
            cache_length, head_dim]` with `rows` (`[n, head_dim]`) written at `coordinates`, a
            triple of int32 `[n]` tensors (batch row, head, position), no two rows at the same
            place. It may write into `buffer` itself when nothing reads `buffer` afterwards.
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
    """Makes `empty_cache` and `write_cache` use `buffer_ops` inside the `with` block, in this
    thread (while a search is traced: what the trace records stays after the block)."""
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
    """Writes `new_keys`/`new_values` (`[query_batch, num_heads, length, head_dim]`, one row per
    query row) into `cache` at position `cache_index` onwards; returns the new `(keys, values)`.

    A cache with `n` times fewer rows than the queries holds `n` slots of `cache_length / n`
    positions per row, one per query row: query row `r` writes into row `r // n` at positions
    `(r % n) * cache_length / n + cache_index` onwards. ValueError (naming layer `name`) when the
    positions do not fit in a slot.

    A scatter of those positions only, through the current `BufferOps` (the module docstring):
    `ops.scatter_update` is TensorScatterUpdate under TensorFlow, a plain TF op allowed in the
    SavedModel for TensorFlow Serving, unlike the XlaDynamicUpdateSlice of `ops.slice_update`.
    """
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
