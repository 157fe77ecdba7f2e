"""Decoding caches written in place in TensorFlow graphs of the search (a fast path).

In a TensorFlow graph without XLA, `keras.ops.scatter_update` (TensorScatterUpdate) copies its whole
input whenever the input is still referenced, which the search's while loop always does: every
decoding step then copies every layer's key and value cache, `[batch, heads, beam * max_length,
head_dim]` each, to write one position per hypothesis. `IN_PLACE` writes the rows into the buffer
itself instead (`InplaceUpdate` on a flattened view) and allocates each buffer fresh at every run
(`Empty`, a stateful op that the graph optimizer never folds into a shared constant), both core
TensorFlow ops that TensorFlow Serving runs, used for behaviour their documentation does not state
(`common.compat.write_rows_in_place`, `common.compat.fresh_buffer`).

Writing into the buffer is safe because in the search nothing reads a cache after the step that
replaces it: every read of step t's caches feeds step t's logits, and step t + 1's writes depend on
the tokens chosen from them. It must equal the plain scatter: tests/inference/test_in_place_cache.py
checks translations and scores against it.
"""

import functools

import tensorflow as tf

from common import compat
from models import attention_cache


def _write_rows(buffer, coordinates, rows):
    """`rows` written into `buffer` at (row, head, position) `coordinates`, in place."""
    shape = tf.shape(buffer)
    row, head, position = coordinates
    flat_index = (row * shape[1] + head) * shape[2] + position  # [n] rows of [batch * heads * length, head_dim]
    flat = tf.reshape(buffer, [-1, shape[3]])
    written = compat.write_rows_in_place(flat, flat_index, rows)
    return tf.reshape(written, shape)


IN_PLACE = attention_cache.BufferOps(allocate=compat.fresh_buffer, write_rows=_write_rows)


def traced_in_place(function):
    """`function` tracing with `IN_PLACE` cache buffers: wrap the Python function given to
    `tf.function`, so that each of its traces records in-place writes."""

    @functools.wraps(function)
    def traced(*args, **kwargs):
        with attention_cache.using_buffer_ops(IN_PLACE):
            return function(*args, **kwargs)

    return traced
