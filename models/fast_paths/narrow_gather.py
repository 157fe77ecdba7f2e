"""Fast path: `ops.take_along_axis(x, indices, axis=-1)` over a narrow last axis under TensorFlow; it
must equal it (tests/models/fast_paths/test_narrow_gather.py).

Keras's TensorFlow `take_along_axis` reads both shapes, broadcasts both operands, fixes negative
indices, transposes and reshapes around its gather: about 24 graph ops. The search loop gathers
this way a few times at every step, over rows of a few candidates, where the graph's per-op cost is
the whole cost. Over a last axis of at most `MAX_WIDTH` entries a one-hot select and a sum are five
ops, with the same values: exactly one term of each sum is not zero. Wider axes, boolean `x` and
other backends use Keras's op."""

import keras
from keras import ops

# The widest last axis gathered by the one-hot select: the select's operand is `width` times the output.
MAX_WIDTH = 64


def take_along_last(x, indices):
    """`ops.take_along_axis(x, indices, axis=-1)` for int `indices` in `[0, x.shape[-1])` whose
    leading shape is `x`'s (no broadcasting)."""
    width = x.shape[-1]
    narrow = width is not None and width <= MAX_WIDTH
    if keras.backend.backend() != "tensorflow" or not narrow or keras.backend.standardize_dtype(x.dtype) == "bool":
        return ops.take_along_axis(x, indices, axis=-1)
    picked = ops.expand_dims(indices, -1) == ops.arange(width, dtype=indices.dtype)
    return ops.sum(ops.where(picked, ops.expand_dims(x, -2), ops.zeros((), x.dtype)), axis=-1)
