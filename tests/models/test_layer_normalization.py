import keras
import numpy as np
import pytest

from models.layer_normalization import LayerNormalization


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


def _values_and_gradients(layer, inputs, upstream):
    """Output, d(sum(output * upstream))/d(inputs, gamma, beta) as float32 numpy arrays."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        inputs = tf.Variable(inputs)
        with tf.GradientTape() as tape:
            outputs = layer(inputs)
            total = tf.reduce_sum(tf.cast(outputs, "float32") * upstream)
        gradients = tape.gradient(total, [inputs] + layer.trainable_weights)
    elif backend == "jax":
        import jax

        def total(inputs, weights):
            outputs, _ = layer.stateless_call(weights, [], inputs)
            return (outputs.astype("float32") * upstream).sum(), outputs

        (_, outputs), gradients = jax.value_and_grad(total, argnums=(0, 1), has_aux=True)(
            inputs, [w.value for w in layer.trainable_weights]
        )
        gradients = [gradients[0]] + list(gradients[1])
    else:
        pytest.skip(f"no gradient helper for the {backend} backend")
    return [np.asarray(keras.ops.convert_to_numpy(keras.ops.cast(v, "float32"))) for v in [outputs] + gradients]


@pytest.mark.parametrize("kwargs", [{}, {"epsilon": 1e-3}, {"axis": 1}, {"rms_scaling": True}])
def test_output_and_gradients_match_keras_layer_norm(kwargs):
    rng = np.random.default_rng(1)
    inputs = (rng.normal(size=(2, 6, 16)) * 3 + 2).astype("float32")
    upstream = rng.normal(size=(2, 6, 16)).astype("float32")
    ours, reference = _pair(**kwargs)
    for got, expected in zip(_values_and_gradients(ours, inputs, upstream), _values_and_gradients(reference, inputs, upstream)):
        assert np.abs(got - expected).max() < 1e-4 * max(1.0, np.abs(expected).max())


def test_bfloat16_inputs_give_bfloat16_outputs_and_float32_weight_gradients():
    rng = np.random.default_rng(2)
    inputs = keras.ops.cast(rng.normal(size=(2, 6, 16)) * 3, "bfloat16")
    upstream = rng.normal(size=(2, 6, 16)).astype("float32")
    ours, reference = _pair(dtype="mixed_bfloat16")
    assert keras.backend.standardize_dtype(ours(inputs).dtype) == "bfloat16"
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in ours.trainable_weights)
    for got, expected in zip(_values_and_gradients(ours, inputs, upstream), _values_and_gradients(reference, inputs, upstream)):
        assert np.abs(got - expected).max() < 2e-2 * max(1.0, np.abs(expected).max())


def test_config_and_weights_are_keras_layer_norms():
    ours, reference = _pair(epsilon=1e-6, name="norm")
    restored = LayerNormalization.from_config(ours.get_config())
    assert restored.get_config() == ours.get_config()
    assert [w.path.split("/")[-1] for w in ours.weights] == [w.path.split("/")[-1] for w in reference.weights]
    assert keras.saving.get_registered_object("transformer>LayerNormalization") is LayerNormalization
