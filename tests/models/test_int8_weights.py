"""Int8 weights: the quantizer's bound, the dequantized product against NumPy, and a quantized
Transformer's variables and logits beside the float model's."""

import contextlib

import keras
import numpy as np
import pytest

from models import int8_weights
from models.search_config import SearchConfig
from tests.models.small_model import SMALL, VOCAB, small_batch, small_transformer


def test_quantize_channels_is_symmetric_per_channel_within_half_a_step():
    rng = np.random.default_rng(0)
    weights = rng.normal(size=(24, 10)).astype("float32") * np.linspace(0.1, 3.0, 10, dtype="float32")
    for channel_axis in (0, 1):
        quantized, scale = int8_weights.quantize_channels(weights, channel_axis)
        quantized, scale = keras.ops.convert_to_numpy(quantized), keras.ops.convert_to_numpy(scale)
        assert quantized.dtype == np.int8 and scale.shape == (weights.shape[channel_axis],)
        step = 1.0 / np.expand_dims(scale, 1 - channel_axis)
        # The channel's largest magnitude maps to 127; every weight is within half a step.
        assert np.abs(quantized).max(axis=1 - channel_axis).tolist() == [127] * weights.shape[channel_axis]
        assert np.abs(quantized * step - weights).max() <= 0.5 * step.max() + 1e-6
        assert np.all(np.abs(quantized * step - weights) <= 0.5 * step + 1e-6)


def test_dequantized_matmul_matches_numpy_in_both_layouts():
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(2, 3, 16)).astype("float32")
    kernel = rng.normal(size=(16, 12)).astype("float32")
    quantized, scale = (keras.ops.convert_to_numpy(x) for x in int8_weights.quantize_channels(kernel, 1))
    expected = inputs @ (quantized.astype("float32") / scale)
    outputs = keras.ops.convert_to_numpy(int8_weights.dequantized_matmul(inputs, quantized, scale))
    assert outputs.shape == (2, 3, 12) and outputs.dtype == np.float32
    # The product runs in bfloat16 (PRODUCT_DTYPE): inputs rounded to 8 significant bits.
    tolerance = 2.0**-7 * np.abs(inputs).sum(axis=-1, keepdims=True) * np.abs(quantized / scale).max()
    assert np.all(np.abs(outputs - expected) <= tolerance)
    transposed = int8_weights.dequantized_matmul(inputs, quantized.T, scale, transpose=True)
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(transposed), outputs)


def test_quantized_transformer_has_int8_matmul_weights_and_close_logits():
    model = small_transformer()
    rng = np.random.default_rng(2)
    source = rng.integers(4, VOCAB, size=(2, 7)).astype("int32")
    target = rng.integers(4, VOCAB, size=(2, 5)).astype("int32")
    float_logits = keras.ops.convert_to_numpy(model((source, target)))
    float_matmul_weights = sum(
        int(np.prod(v.shape)) for v in model.variables if v.path.endswith(("/kernel", "/embeddings"))
    )
    model.quantize("int8")
    dtypes = {v.path: keras.backend.standardize_dtype(v.dtype) for v in model.variables}
    kernels = [path for path in dtypes if path.endswith(("/kernel", "/embeddings"))]
    # Every projection (query, fused key/value, output; feed-forward inner and output): 3 + 2 per
    # encoder layer, 3 + 3 + 2 per decoder layer (one layer of each stack: every kind of projection
    # once), and the shared embedding.
    assert len(kernels) == SMALL["num_layers"] * (5 + 8) + 1
    assert {dtypes[path] for path in kernels} == {"int8"}
    assert sum(int(np.prod(v.shape)) for v in model.variables if dtypes[v.path] == "int8") == float_matmul_weights
    quantized_logits = keras.ops.convert_to_numpy(model((source, target)))
    difference = np.abs(quantized_logits - float_logits).max()
    print(f"max |logit difference| {difference:.4f} of logits up to {np.abs(float_logits).max():.2f}")
    assert difference < 0.05 * np.abs(float_logits).max()
    assert np.array_equal(quantized_logits.argmax(-1), float_logits.argmax(-1))


def test_quantize_refuses_other_modes_and_a_second_quantization():
    model = small_transformer()
    with pytest.raises(ValueError, match="int8"):
        model.quantize("int4")
    model.quantize("int8")
    with pytest.raises(ValueError, match="already"):
        model.quantize("int8")


def test_a_search_casts_each_int8_matrix_once_and_translates_as_with_a_cast_per_product(monkeypatch):
    from models.translation import translate_ids

    model = small_transformer()
    model.quantize("int8")
    int8_variables = [v for v in model.weights if keras.backend.standardize_dtype(v.dtype) == "int8"]
    with int8_weights.products_cast_once(model.weights):
        matrices = dict(int8_weights.block_matrices())
        assert sorted(matrices) == sorted(id(v) for v in int8_variables)
        # Each in the layout of its products: [in, out] kernels, the embedding transposed.
        for variable in int8_variables:
            rows, columns = variable.shape
            transposed = variable.path.endswith("/embeddings")
            assert tuple(matrices[id(variable)].shape) == ((columns, rows) if transposed else (rows, columns))
        with int8_weights.products_cast_once(model.weights):  # A nested block keeps the outer matrices.
            assert int8_weights.block_matrices().keys() == matrices.keys()
    assert int8_weights.block_matrices() is None

    source, _ = small_batch()
    made = []
    product_matrix = int8_weights.product_matrix
    monkeypatch.setattr(
        int8_weights, "product_matrix", lambda *args, **kw: made.append(1) or product_matrix(*args, **kw)
    )
    once = translate_ids(model, source, search=SearchConfig(beam_size=3, max_extra_length=5), num_return=3)
    assert len(made) == len(int8_variables)  # Each matrix dequantized once, before the search.
    monkeypatch.setattr(int8_weights, "products_cast_once", lambda variables: contextlib.nullcontext())
    every_product = translate_ids(model, source, search=SearchConfig(beam_size=3, max_extra_length=5), num_return=3)
    for got, want in zip(once, every_product):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(want))
