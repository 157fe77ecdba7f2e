import math

import keras
import numpy as np
import pytest

from models.position_encoding import sinusoidal_position_encoding
from models.shared_embedding import SharedEmbedding
from tests.models.layer_contract import run_layer_test, values_and_gradients


def test_layer_contract():
    ids = np.array([[4, 5, 6, 0], [7, 8, 0, 0]], "int32")
    run_layer_test(
        SharedEmbedding, {"vocabulary_size": 10, "hidden_dim": 8, "dropout": 0.1}, {"token_ids": ids}, (2, 4, 8)
    )


def test_scaled_embedding_plus_positions():
    layer = SharedEmbedding(10, 8, dropout=0.5)
    ids = np.array([[4, 5, 6]], "int32")
    outputs = keras.ops.convert_to_numpy(layer(ids, training=False))
    table = keras.ops.convert_to_numpy(layer.embeddings)
    expected = table[ids[0]] * math.sqrt(8) + keras.ops.convert_to_numpy(sinusoidal_position_encoding(3, 8))
    assert np.max(np.abs(outputs[0] - expected)) < 1e-5
    shifted = keras.ops.convert_to_numpy(layer(ids[:, 2:], start_position=2))
    assert np.max(np.abs(shifted[0, 0] - expected[2])) < 1e-5


def test_logits_use_the_same_matrix_in_float32():
    layer = SharedEmbedding(10, 8, dtype="mixed_bfloat16")
    layer.build()
    assert len(layer.weights) == 1
    hidden = np.random.default_rng(0).normal(size=(2, 3, 8)).astype("float32")
    logits = layer.logits(keras.ops.cast(hidden, "bfloat16"))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    expected = hidden @ keras.ops.convert_to_numpy(layer.embeddings).T
    assert np.max(np.abs(keras.ops.convert_to_numpy(logits) - expected)) < 0.1


def test_the_output_projection_is_the_matrix_transposed_in_the_products_layout():
    # A search's projection, made once: every id's logits or a shortlist's columns, in float32 and
    # int8 (the quantized matrix's bfloat16 product), equal to the plain logits' columns.
    hidden = np.random.default_rng(2).normal(size=(2, 3, 8)).astype("float32")
    columns = np.array([7, 0, 3], "int32")
    for quantize in (False, True):
        layer = SharedEmbedding(10, 8)
        layer.build()
        if quantize:
            layer.quantize("int8")
        plain = keras.ops.convert_to_numpy(layer.logits(hidden))
        projection = layer.output_projection()
        assert tuple(projection.shape) == (8, 10)
        whole = keras.ops.convert_to_numpy(layer.logits(hidden, projection))
        picked = keras.ops.convert_to_numpy(layer.logits(hidden, layer.output_projection(columns)))
        tolerance = 1e-2 if quantize else 1e-5  # bfloat16 products
        assert whole.shape == plain.shape and np.max(np.abs(whole - plain)) < tolerance
        assert picked.shape == (2, 3, 3) and np.max(np.abs(picked - plain[..., columns])) < tolerance


class _Logits(keras.layers.Layer):
    """`SharedEmbedding.logits` as a layer, so that its gradients can be taken like a layer's."""

    def __init__(self, shared, **kwargs):
        super().__init__(**kwargs)
        self.shared = shared

    def call(self, hidden_states):
        return self.shared.logits(hidden_states)


def test_logits_gradients_are_those_of_the_product_with_the_transposed_matrix():
    # Under TensorFlow the product has a written gradient (the matrix's in its own [V, d_model]
    # layout); it must equal d/dh = upstream @ E and d/dE = upstream^T @ h.
    rng = np.random.default_rng(1)
    shared = SharedEmbedding(10, 8, dropout=0.0)  # no seed state: JAX's stateless call gets weights only
    shared.build()
    hidden = rng.normal(size=(2, 3, 8)).astype("float32")
    upstream = rng.normal(size=(2, 3, 10)).astype("float32")
    layer = _Logits(shared)
    layer(hidden)  # built (JAX's stateless call needs it)
    logits, hidden_gradient, table_gradient = values_and_gradients(layer, hidden, upstream)
    table = keras.ops.convert_to_numpy(shared.embeddings).astype("float64")
    rows, upstream_rows = hidden.reshape(-1, 8).astype("float64"), upstream.reshape(-1, 10).astype("float64")
    assert np.max(np.abs(logits - hidden @ table.T)) < 1e-5
    assert np.max(np.abs(hidden_gradient - upstream @ table)) < 1e-5
    assert table_gradient.shape == (10, 8)
    assert np.max(np.abs(table_gradient - upstream_rows.T @ rows)) < 1e-5


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="vocabulary_size must be a positive int, received 0"):
        SharedEmbedding(0, 8)
    with pytest.raises(ValueError, match="hidden_dim must be a positive even int, received 7"):
        SharedEmbedding(10, 7)
    layer = SharedEmbedding(10, 8)
    with pytest.raises(ValueError, match="rank 2.*received shape"):
        layer(np.zeros((3,), "int32"))
    with pytest.raises(ValueError, match="integer token ids, received dtype float32"):
        layer(np.zeros((2, 3), "float32"))
