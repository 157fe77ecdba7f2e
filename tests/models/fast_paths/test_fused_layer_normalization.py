import keras
import numpy as np
import pytest

from models.fast_paths.fused_layer_normalization import LayerNormalization
from tests.models.layer_contract import run_layer_test, values_and_gradients


def _pair(**kwargs):
    """Ours and Keras's layer norm with the same non-trivial gamma and beta."""
    rng = np.random.default_rng(0)
    ours, reference = LayerNormalization(**kwargs), keras.layers.LayerNormalization(**kwargs)
    for layer in (ours, reference):
        layer.build((2, 6, 16))
    for ours_weight, reference_weight in zip(ours.weights, reference.weights):
        value = rng.normal(size=ours_weight.shape).astype("float32") * 0.5 + 1.0
        ours_weight.assign(value)
        reference_weight.assign(value)
    return ours, reference


@pytest.mark.parametrize("kwargs", [{}, {"epsilon": 1e-3}, {"axis": 1}, {"rms_scaling": True}])
def test_output_and_gradients_match_keras_layer_norm(kwargs):
    rng = np.random.default_rng(1)
    inputs = (rng.normal(size=(2, 6, 16)) * 3 + 2).astype("float32")
    upstream = rng.normal(size=(2, 6, 16)).astype("float32")
    ours, reference = _pair(**kwargs)
    for got, expected in zip(
        values_and_gradients(ours, inputs, upstream), values_and_gradients(reference, inputs, upstream)
    ):
        assert np.abs(got - expected).max() < 1e-4 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("shape", [(12, 16), (2, 3, 2, 16)])
def test_gradients_match_keras_layer_norm_at_other_ranks(shape):
    """The written gradient folds all leading axes into rows and back (rank 3 is tested above)."""
    rng = np.random.default_rng(3)
    inputs = (rng.normal(size=shape) * 3 + 2).astype("float32")
    upstream = rng.normal(size=shape).astype("float32")
    ours, reference = _pair()
    for got, expected in zip(
        values_and_gradients(ours, inputs, upstream), values_and_gradients(reference, inputs, upstream)
    ):
        assert got.shape == expected.shape
        assert np.abs(got - expected).max() < 1e-4 * max(1.0, np.abs(expected).max())


def test_bfloat16_inputs_give_bfloat16_outputs_and_float32_weight_gradients():
    rng = np.random.default_rng(2)
    inputs = keras.ops.cast(rng.normal(size=(2, 6, 16)) * 3, "bfloat16")
    upstream = rng.normal(size=(2, 6, 16)).astype("float32")
    ours, reference = _pair(dtype="mixed_bfloat16")
    assert keras.backend.standardize_dtype(ours(inputs).dtype) == "bfloat16"
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in ours.trainable_weights)
    for got, expected in zip(
        values_and_gradients(ours, inputs, upstream), values_and_gradients(reference, inputs, upstream)
    ):
        assert np.abs(got - expected).max() < 2e-2 * max(1.0, np.abs(expected).max())


def test_layer_contract_and_weights_are_keras_layer_norms():
    inputs = np.random.default_rng(4).normal(size=(2, 6, 16)).astype("float32")
    run_layer_test(LayerNormalization, {"epsilon": 1e-6}, {"inputs": inputs}, (2, 6, 16))
    ours, reference = _pair(epsilon=1e-6, name="norm")
    assert [w.path.split("/")[-1] for w in ours.weights] == [w.path.split("/")[-1] for w in reference.weights]
    assert keras.saving.get_registered_object("transformer>LayerNormalization") is LayerNormalization
