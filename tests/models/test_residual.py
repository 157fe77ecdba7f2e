import keras
import numpy as np

from models.residual import ResidualNorm
from tests.models.layer_contract import run_layer_test


def _layer_norm(x, epsilon=1e-6):
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + epsilon)


def test_layer_contract():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(2, 5, 8)).astype("float32"), rng.normal(size=(2, 5, 8)).astype("float32")
    run_layer_test(
        ResidualNorm, {"dropout": 0.1, "normalize_first": False}, {"inputs": x, "sublayer_output": y}, (2, 5, 8)
    )


def test_post_norm_is_layer_norm_of_the_sum_and_pre_norm_is_the_plain_sum():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(2, 5, 8)).astype("float32"), rng.normal(size=(2, 5, 8)).astype("float32")
    post = ResidualNorm(dropout=0.5)
    assert np.max(np.abs(keras.ops.convert_to_numpy(post(x, y)) - _layer_norm(x + y))) < 1e-4
    assert np.array_equal(keras.ops.convert_to_numpy(post.normalize_input(x)), x)
    pre = ResidualNorm(dropout=0.5, normalize_first=True)
    assert np.max(np.abs(keras.ops.convert_to_numpy(pre(x, y)) - (x + y))) < 1e-6
    assert np.max(np.abs(keras.ops.convert_to_numpy(pre.normalize_input(x)) - _layer_norm(x))) < 1e-4


def test_dropout_hits_the_sublayer_output_only_in_training():
    x = np.ones((4, 16, 32), "float32")
    y = np.ones((4, 16, 32), "float32")
    layer = ResidualNorm(dropout=0.5, normalize_first=True)
    trained = keras.ops.convert_to_numpy(layer(x, y, training=True))
    # Dropout zeroes about half of y (the rest is scaled by 2): the sum is 1 or 3, never 2.
    assert set(np.unique(trained).round(4)) == {1.0, 3.0}
    assert np.all(keras.ops.convert_to_numpy(layer(x, y, training=False)) == 2.0)
