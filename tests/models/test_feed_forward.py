import keras
import numpy as np

from models.feed_forward import PositionwiseFeedForward
from tests.models.layer_contract import run_layer_test


def test_layer_contract():
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(
        PositionwiseFeedForward,
        {"hidden_dim": 8, "intermediate_dim": 32, "activation_dropout": 0.0},
        {"inputs": x},
        (2, 5, 8),
    )


def test_matches_relu_formula():
    layer = PositionwiseFeedForward(8, 32)
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    outputs = keras.ops.convert_to_numpy(layer(x))
    w1, b1 = (keras.ops.convert_to_numpy(w) for w in layer.inner_dense.weights)
    w2, b2 = (keras.ops.convert_to_numpy(w) for w in layer.output_dense.weights)
    expected = np.maximum(0.0, x @ w1 + b1) @ w2 + b2
    assert np.max(np.abs(outputs - expected)) < 1e-5
