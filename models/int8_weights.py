"""Int8 weights for inference: the matmul weights stored as int8, one float scale per output channel.

`Transformer.quantize("int8")` quantizes, in place and for inference only, every attention and
feed-forward projection (Keras's own `Dense.quantize`: int8 `kernel` `[in, out]`, float
`kernel_scale` `[out]`) and the shared embedding (int8 `embeddings`, float `embeddings_scale`
`[vocabulary]`, one scale per row for both the lookup and the pre-softmax projection), with
Keras's symmetric absolute-maximum convention: `q = round(w * scale)`, `scale = 127 / max |w|`.
Weight-only: `x @ (q / scale)` in `PRODUCT_DTYPE`, the inputs not quantized; a search dequantizes
each matrix once for all its steps (`products_cast_once`). docs/serving.md, "int8 weights", says why.
"""

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
    """`id(int8 variable) -> product matrix` of the `products_cast_once` block active in this
    thread, or None outside one."""
    return getattr(_state, "matrices", None)


def quantize_channels(weights, channel_axis):
    """`(int8 weights, float32 scale)` of a float matrix, one scale per index of `channel_axis`.

    Args:
        weights: a float `[rows, columns]` matrix.
        channel_axis: 1 for one scale per column (a Dense kernel's output channels), 0 for one per
            row (the embedding's tokens).

    Returns:
        int8 weights of the same shape, and the scale (`[columns]` or `[rows]`), with
        `weights ~ quantized / scale` along `channel_axis`.
    """
    reduced = 1 - channel_axis
    quantized, scale = keras.quantizers.abs_max_quantize(weights, reduced, INT8_RANGE, "int8", to_numpy=True)
    return quantized, ops.squeeze(scale, axis=reduced)


def dequantized_matmul(inputs, quantized, scale, transpose=False, dtype="float32"):
    """`inputs @ (quantized / scale)`: the int8 weights dequantized to PRODUCT_DTYPE for the product.

    Args:
        inputs: float `[..., in]`.
        quantized: int8 `[in, out]`, or `[out, in]` with `transpose=True` (the embedding matrix as
            the pre-softmax projection).
        scale: float `[out]`, as `quantize_channels` returns it.
        dtype: the dtype of the result (the layer's compute dtype).

    Returns:
        `[..., out]` in `dtype`.
    """
    width = quantized.shape[1 if transpose else 0]
    units = quantized.shape[0 if transpose else 1]
    rows = ops.cast(ops.reshape(inputs, (-1, width)), PRODUCT_DTYPE)  # [positions, in]
    outputs = ops.cast(ops.matmul(rows, product_matrix_of(quantized, scale, transpose)), dtype)
    return ops.reshape(outputs, tuple(ops.shape(inputs)[:-1]) + (units,))


def product_matrix_of(quantized, scale, transpose=False):
    """`product_matrix(quantized, scale, transpose)`: the one `products_cast_once` made, inside its
    block, else made here."""
    matrices = block_matrices()
    matrix = matrices.get(id(quantized)) if matrices is not None else None
    return product_matrix(quantized, scale, transpose) if matrix is None else matrix


def product_matrix(quantized, scale, transpose=False):
    """`quantized / scale` in PRODUCT_DTYPE, `[in, out]` for `inputs @ matrix` (`quantized` taken
    as `dequantized_matmul` takes it). The quotient is rounded to bfloat16's 8 significant bits,
    finer than the int8 step it carries (at best 1 part in 127)."""
    if transpose:
        return ops.cast(
            ops.transpose(ops.cast(quantized, "float32") / ops.cast(scale, "float32")[:, None]), PRODUCT_DTYPE
        )
    return ops.cast(ops.cast(quantized, "float32") / ops.cast(scale, "float32")[None, :], PRODUCT_DTYPE)


@contextlib.contextmanager
def products_cast_once(variables):
    """Makes the product matrices of the int8 ones among `variables` here, once
    (`product_matrix`), and every product inside the block use them.

    A search enters it before its decoding loop (`models.translation.translate_ids`), so that the
    loop's steps share the matrices instead of dequantizing every matrix at every step. An int8
    matrix is found with its scale by name (`SCALE_LAYOUTS`). A float model has no int8 variable
    and nothing changes. A block inside another one uses the outer one's matrices.
    """
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
