"""Int8 weights for inference: matmul weights as int8 with one float scale per output channel (per
row for the embedding), Keras's symmetric convention `q = round(w * scale)`, `scale = 127 / max
|w|`. Weight-only; docs/serving.md, "int8 weights", says why."""

import contextlib
import threading

import keras
from keras import ops

# The dtype the int8 weights are dequantized to for the product. bfloat16 halves the bytes the
# matmul reads beside float32, and CPUs with AVX512-BF16 or AMX multiply it natively; the inputs
# are rounded to bfloat16 for the product and the result is cast back to the layer's compute dtype.
PRODUCT_DTYPE = "bfloat16"
# Keras's int8 range: symmetric, -128 unused.
INT8_RANGE = (-127, 127)

# The int8 matrices by the name of their scale variable, and whether their products use them
# transposed: a Dense kernel `[in, out]` with one `kernel_scale` per output column (Keras's int8
# `Dense`); the shared embedding `[vocabulary, d_model]` with one `embeddings_scale` per row, used
# transposed as the pre-softmax projection (`models.shared_embedding`).
SCALE_LAYOUTS = {"kernel_scale": False, "embeddings_scale": True}
# `matrices`: while `products_cast_once` is active in this thread, `id(int8 variable) -> its
# product_matrix`.
_state = threading.local()


def block_matrices():
    """`id(int8 variable) -> product matrix` of this thread's `products_cast_once` block, or None."""
    return getattr(_state, "matrices", None)


def quantize_channels(weights, channel_axis):
    """`(int8 weights, float32 scale)` of a float `[rows, columns]` matrix, one scale per index of
    `channel_axis` (1: per column, a Dense kernel; 0: per row, the embedding), with
    `weights ~ quantized / scale`."""
    reduced = 1 - channel_axis
    quantized, scale = keras.quantizers.abs_max_quantize(weights, reduced, INT8_RANGE, "int8", to_numpy=True)
    return quantized, ops.squeeze(scale, axis=reduced)


def dequantized_matmul(inputs, quantized, scale, transpose=False, dtype="float32"):
    """`inputs` float `[..., in]` @ `quantized / scale` -> `[..., out]` in `dtype`, the product
    in PRODUCT_DTYPE. `quantized` is int8 `[in, out]`, or `[out, in]` with `transpose=True` (the
    embedding as the pre-softmax projection); `scale` is `[out]`."""
    width = quantized.shape[1 if transpose else 0]
    units = quantized.shape[0 if transpose else 1]
    rows = ops.cast(ops.reshape(inputs, (-1, width)), PRODUCT_DTYPE)  # [positions, in]
    outputs = ops.cast(ops.matmul(rows, product_matrix_of(quantized, scale, transpose)), dtype)
    return ops.reshape(outputs, tuple(ops.shape(inputs)[:-1]) + (units,))


def product_matrix_of(quantized, scale, transpose=False):
    """`product_matrix(...)`: the one `products_cast_once` made, inside its block, else made here."""
    matrices = block_matrices()
    matrix = matrices.get(id(quantized)) if matrices is not None else None
    return product_matrix(quantized, scale, transpose) if matrix is None else matrix


def product_matrix(quantized, scale, transpose=False):
    """`quantized / scale` in PRODUCT_DTYPE, `[in, out]`, rounded to bfloat16 (finer than int8)."""
    if transpose:
        return ops.cast(
            ops.transpose(ops.cast(quantized, "float32") / ops.cast(scale, "float32")[:, None]), PRODUCT_DTYPE
        )
    return ops.cast(ops.cast(quantized, "float32") / ops.cast(scale, "float32")[None, :], PRODUCT_DTYPE)


@contextlib.contextmanager
def products_cast_once(variables):
    """A block in which every product uses `product_matrix` of the int8 `variables`, made once, so
    a search's steps do not dequantize at each step. Nested blocks use the outer one's matrices;
    a float model is unchanged."""
    if block_matrices() is not None:
        yield
        return
    by_path = {variable.path: variable for variable in variables}
    matrices = {}
    for path, variable in by_path.items():
        suffix = path.rsplit("/", 1)[-1]
        quantized = by_path.get(path[: -len("_scale")]) if suffix in SCALE_LAYOUTS else None
        if quantized is not None and keras.backend.standardize_dtype(quantized.dtype) == "int8":
            matrices[id(quantized)] = product_matrix(quantized, variable, transpose=SCALE_LAYOUTS[suffix])
    _state.matrices = matrices
    try:
        yield
    finally:
        _state.matrices = None
