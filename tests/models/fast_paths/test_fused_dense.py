import keras
import numpy as np
import pytest

from models.fast_paths.fused_dense import Dense
from tests.models.layer_contract import run_layer_test, values_and_gradients


def _pair(units=24, **kwargs):
    """Ours and Keras's Dense with the same weights, built for 16 input features."""
    rng = np.random.default_rng(0)
    ours, reference = Dense(units, **kwargs), keras.layers.Dense(units, **kwargs)
    for layer in (ours, reference):
        layer.build((None, 16))
    for ours_weight, reference_weight in zip(ours.weights, reference.weights):
        value = rng.normal(size=ours_weight.shape).astype("float32")
        ours_weight.assign(value)
        reference_weight.assign(value)
    return ours, reference


@pytest.mark.parametrize("kwargs", [{}, {"activation": "relu"}, {"use_bias": False}])
def test_output_and_gradients_match_keras_dense(kwargs):
    rng = np.random.default_rng(1)
    inputs = rng.normal(size=(3, 5, 16)).astype("float32")
    upstream = rng.normal(size=(3, 5, 24)).astype("float32")
    ours, reference = _pair(**kwargs)
    for got, expected in zip(
        values_and_gradients(ours, inputs, upstream), values_and_gradients(reference, inputs, upstream)
    ):
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() < 1e-5 * max(1.0, np.abs(expected).max())


def test_relu_gradient_is_zero_where_the_pre_activation_is_zero_as_in_keras():
    # Pre-activations of exactly 0 (zero kernel columns and biases): Keras's ReLU passes no gradient
    # there, and neither does the select on the output in the fused path.
    rng = np.random.default_rng(5)
    inputs = rng.normal(size=(3, 5, 16)).astype("float32")
    upstream = rng.normal(size=(3, 5, 24)).astype("float32")
    ours, reference = _pair(activation="relu")
    for layer in (ours, reference):
        kernel = keras.ops.convert_to_numpy(layer.kernel).copy()
        kernel[:, :8] = 0.0
        layer.kernel.assign(kernel)
        layer.bias.assign(np.where(np.arange(24) < 8, 0.0, 0.5).astype("float32"))
    got = values_and_gradients(ours, inputs, upstream)
    expected = values_and_gradients(reference, inputs, upstream)
    assert np.all(got[3][:8] == 0.0) and np.all(got[2][:, :8] == 0.0)
    for got_value, expected_value in zip(got, expected):
        assert np.abs(got_value - expected_value).max() < 1e-5 * max(1.0, np.abs(expected_value).max())


def test_bfloat16_bias_gradient_is_one_rounding_of_the_exact_sum_under_tensorflow():
    # 4096 positions of N(0, 1) gradients: sums up to ~200. Summed in bfloat16 (TensorFlow's
    # BiasAddGrad, and XLA:CPU's reduction under JAX) entries come out off by ~10; the
    # float32-accumulating matmul of TensorFlow's path rounds once. Other backends are Keras's Dense.
    rng = np.random.default_rng(2)
    inputs = keras.ops.cast(rng.normal(size=(64, 64, 16)), "bfloat16")
    upstream = rng.normal(size=(64, 64, 24)).astype("float32")
    ours, reference = _pair(dtype="mixed_bfloat16")
    got = values_and_gradients(ours, inputs, upstream)
    if keras.backend.backend() != "tensorflow":
        for got_value, expected in zip(got, values_and_gradients(reference, inputs, upstream)):
            assert np.array_equal(got_value, expected)
        return
    # The upstream gradient reaches the bias add as bfloat16 (the output's dtype).
    exact = keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(upstream, "bfloat16"), "float32"))
    exact = exact.astype("float64").reshape(-1, 24).sum(0)
    assert np.all(np.abs(got[3] - exact) <= 2**-8 * np.abs(exact) + 1e-6)


def test_lora_layers_take_keras_path_and_still_match():
    rng = np.random.default_rng(3)
    inputs = rng.normal(size=(2, 16)).astype("float32")
    ours, reference = _pair()
    lora_a, lora_b = rng.normal(size=(16, 2)).astype("float32"), rng.normal(size=(2, 24)).astype("float32")
    for layer in (ours, reference):
        layer.enable_lora(2)
        layer.lora_kernel_a.assign(lora_a)
        layer.lora_kernel_b.assign(lora_b)
    assert not ours._runs_fused()
    got = keras.ops.convert_to_numpy(ours(inputs))
    assert np.allclose(got, keras.ops.convert_to_numpy(reference(inputs)), atol=1e-5)


def test_layer_contract_and_registration():
    inputs = np.random.default_rng(4).normal(size=(2, 5, 16)).astype("float32")
    run_layer_test(Dense, {"units": 8, "activation": "relu"}, {"inputs": inputs}, (2, 5, 8))
    assert keras.saving.get_registered_object("transformer>Dense") is Dense
