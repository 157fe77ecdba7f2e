"""Decoding caches written in place in TensorFlow graphs of the search (a fast path; why it is
safe: docs/design.md, "The model"). It must equal the plain scatter
(tests/inference/test_in_place_cache.py); the ops it uses are in `common.compat`.
"""

import functools

import tensorflow as tf

from common import compat
from models import attention_cache


def _target(coordinates, shape):
    """The rows at (row, head, position) `coordinates` of buffers of `shape`, as flat row indices."""
    row, head, position = coordinates
    return (row * shape[1] + head) * shape[2] + position  # [n] rows of [batch * heads * length, head_dim]


def _write_rows(buffer, flat_index, rows):
    """`rows` written into `buffer` at the flat rows `flat_index` (`_target`), in place."""
    flat = tf.reshape(buffer, [-1, buffer.shape[3]])
    return tf.reshape(compat.write_rows_in_place(flat, flat_index, rows), tf.shape(buffer))


IN_PLACE = attention_cache.BufferOps(
    allocate=compat.fresh_buffer, target=_target, write_rows=_write_rows, shift=lambda target, offset: target + offset
)


def traced_in_place(function):
    """`function` tracing with `IN_PLACE` cache buffers (wraps the function given to `tf.function`)."""

    @functools.wraps(function)
    def traced(*args, **kwargs):
        with attention_cache.using_buffer_ops(IN_PLACE):
            return function(*args, **kwargs)

    return traced
