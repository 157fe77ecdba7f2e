import keras
import numpy as np
import pytest

from models.fast_paths.bit_mask_dropout import MASK_LEVELS, Dropout, quantized_rate, random_halves
from tests.models.layer_contract import run_layer_test


def _dropped_fraction(outputs):
    return float(np.mean(keras.ops.convert_to_numpy(keras.ops.cast(outputs, "float32")) == 0.0))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_realised_rate_is_the_requested_one_in_every_dtype(dtype):
    # 2**22 units: the dropped fraction's standard deviation is 1.5e-4. Keras's TensorFlow dropout,
    # a bfloat16 uniform compared with 0.1, drops 0.1013 of them (measured), 8 deviations off.
    inputs = keras.ops.ones((64, 256, 256), dtype=dtype)
    policy = "mixed_bfloat16" if dtype == "bfloat16" else "float32"
    outputs = Dropout(0.1, seed=1, dtype=policy)(inputs, training=True)
    assert keras.backend.standardize_dtype(outputs.dtype) == dtype
    assert abs(_dropped_fraction(outputs) - 0.1) < 6e-4


def test_kept_units_are_scaled_so_the_expectation_is_the_input():
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(32, 64, 128)).astype("float32")
    outputs = keras.ops.convert_to_numpy(Dropout(0.25, seed=3)(inputs, training=True))
    kept = outputs != 0.0
    assert np.allclose(outputs[kept] / inputs[kept], 1.0 / (1.0 - 0.25), rtol=1e-4)
    assert abs(kept.mean() - 0.75) < 0.005


def test_inference_and_rate_zero_are_the_identity():
    inputs = np.random.default_rng(0).normal(size=(4, 8, 16)).astype("float32")
    assert np.array_equal(keras.ops.convert_to_numpy(Dropout(0.5)(inputs, training=False)), inputs)
    assert np.array_equal(keras.ops.convert_to_numpy(Dropout(0.0)(inputs, training=True)), inputs)


def test_every_call_draws_a_new_mask_and_a_seed_repeats_them():
    inputs = keras.ops.ones((8, 16, 32))
    first, second = Dropout(0.5, seed=7), Dropout(0.5, seed=7)
    a, b = (keras.ops.convert_to_numpy(first(inputs, training=True)) for _ in range(2))
    assert not np.array_equal(a, b)
    assert np.array_equal(a, keras.ops.convert_to_numpy(second(inputs, training=True)))


def test_gradient_passes_the_kept_units_scaled_and_nothing_else():
    inputs = np.ones((4, 8, 64), "float32")
    layer = Dropout(0.5, seed=2)
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        variable = tf.Variable(inputs)
        with tf.GradientTape() as tape:
            outputs = layer(variable, training=True)
            total = tf.reduce_sum(outputs)
        gradient = tape.gradient(total, variable)
    elif backend == "jax":
        import jax

        layer.build(inputs.shape)
        state = [v.value for v in layer.non_trainable_variables]

        def total(x):
            outputs, _ = layer.stateless_call([], state, x, training=True)
            return outputs.sum(), outputs

        gradient, outputs = jax.grad(total, has_aux=True)(inputs)
    else:
        pytest.skip(f"no gradient helper for the {backend} backend")
    gradient, outputs = np.asarray(gradient), keras.ops.convert_to_numpy(outputs)
    assert np.array_equal(gradient, outputs)  # inputs are ones: output = gradient = mask * scale
    assert set(np.unique(gradient).round(4)) == {0.0, 2.0}


def test_sixteen_bits_express_the_usual_rates_and_coarser_ones_fall_back():
    assert quantized_rate(0.1) == 6554
    assert abs(quantized_rate(0.3) / MASK_LEVELS - 0.3) < 2**-17
    # 0.001 is 65.5 of 65536 mask values: 66 would drop 0.7% too many, so Keras's dropout runs.
    assert quantized_rate(0.001) is None
    inputs = keras.ops.ones((64, 128, 128))
    assert abs(_dropped_fraction(Dropout(0.001, seed=4)(inputs, training=True)) - 0.001) < 3e-4
    # An odd last dimension cannot be split into int16 halves of int32 draws: Keras's dropout.
    odd = keras.ops.ones((64, 64, 129))
    assert abs(_dropped_fraction(Dropout(0.1, seed=5)(odd, training=True)) - 0.1) < 3e-3


def test_layer_contract_and_config_round_trip():
    inputs = np.random.default_rng(4).normal(size=(2, 6, 16)).astype("float32")
    run_layer_test(Dropout, {"rate": 0.2, "seed": 9}, {"inputs": inputs}, (2, 6, 16), {"training": True})
    layer = Dropout(0.2, seed=9, name="drop")
    restored = Dropout.from_config(layer.get_config())
    assert (restored.rate, restored.seed, restored.name) == (0.2, 9, "drop")
    assert keras.saving.get_registered_object("transformer>Dropout") is Dropout


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the 16-bit masks are TensorFlow's path")
def test_mask_bits_are_full_range_and_uniform():
    # All 2**16 values of a half, each as likely, in the low and in the high halves of the draws:
    # a chi-square over the 2**16 bins of each, 2**22 halves, is 65535 +- 362 for uniform bits. A
    # bounded draw that never sets a bit, or a modulo folding part of the range onto the rest,
    # moves it by thousands of deviations.
    halves = random_halves((64, 512, 256), keras.random.SeedGenerator(5))
    assert keras.backend.standardize_dtype(halves.dtype) == "int16"
    values = keras.ops.convert_to_numpy(halves).astype(np.int64).reshape(-1, 2) + 2**15
    for half in (values[:, 0], values[:, 1]):
        counts = np.bincount(half, minlength=MASK_LEVELS)
        expected = half.size / MASK_LEVELS
        chi_square = float(np.sum((counts - expected) ** 2 / expected))
        assert abs(chi_square - (MASK_LEVELS - 1)) < 6 * np.sqrt(2 * (MASK_LEVELS - 1))
