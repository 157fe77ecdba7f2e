"""Decoding caches written in place in TensorFlow graphs of the search (a fast path; why it is
safe: docs/design.md, "The model"). It must equal the plain scatter
(tests/inference/test_in_place_cache.py); the ops it uses are in `common.compat`.
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
    """`function` tracing with `IN_PLACE` cache buffers (wraps the function given to `tf.function`)."""

    @functools.wraps(function)
    def traced(*args, **kwargs):
        with attention_cache.using_buffer_ops(IN_PLACE):
            return function(*args, **kwargs)

    return traced
