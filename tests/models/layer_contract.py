"""The contract every layer in models/ keeps, run by each layer's test (after keras-hub's run_layer_test).

config round trip, build from shapes, eager and symbolic calls, one `fit` step that changes the
weights, and mixed-precision calls that stay finite in the compute dtype.
"""

import inspect

import keras
import numpy as np
import pytest


def _call_args(inputs):
    return {name: keras.ops.convert_to_tensor(value) for name, value in inputs.items()}


def run_layer_test(layer_cls, init_kwargs, inputs, expected_output_shape, call_kwargs=None, fit=True):
    """Checks `layer_cls(**init_kwargs)` on `inputs`, a dict of call-argument name -> NumPy array;
    `fit=False` leaves out the fit step (for a layer whose weights another test's fit step moves)."""
    call_kwargs = call_kwargs or {}

    # Config round trip: every constructor argument comes back with the same value.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    for key, value in init_kwargs.items():
        assert key in config, f"get_config() lacks constructor argument {key!r}"
        if not isinstance(value, (keras.initializers.Initializer, dict)):
            assert config[key] == value, f"get_config()[{key!r}] = {config[key]!r}, expected {value!r}"
    revived = layer_cls.from_config(config)
    assert revived.get_config() == config
    serialized = keras.saving.serialize_keras_object(layer)
    assert keras.saving.deserialize_keras_object(serialized).get_config() == config

    # Build from shapes, before any call.
    build_parameters = inspect.signature(layer.build).parameters
    shapes = {f"{name}_shape": value.shape for name, value in inputs.items() if f"{name}_shape" in build_parameters}
    if shapes:
        layer.build(**shapes)
    else:  # Keras's default `build(input_shape)`.
        layer.build(next(iter(inputs.values())).shape)
    assert layer.built
    weight_count = len(layer.weights)

    # Eager call.
    outputs = layer(**_call_args(inputs), **call_kwargs)
    assert tuple(outputs.shape) == tuple(expected_output_shape)
    assert len(layer.weights) == weight_count, "the call created weights that build() did not"

    # Symbolic call.
    symbolic_inputs = {
        name: keras.Input(batch_shape=value.shape, dtype=str(value.dtype), name=name) for name, value in inputs.items()
    }
    symbolic_layer = layer_cls.from_config(config)
    symbolic_outputs = symbolic_layer(**symbolic_inputs, **call_kwargs)
    assert tuple(symbolic_outputs.shape) == tuple(expected_output_shape)

    # One fit step moves every trainable weight.
    if fit and symbolic_layer.trainable_weights:
        model = keras.Model(symbolic_inputs, symbolic_outputs)
        model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="mse")
        before = [np.array(weight) for weight in model.trainable_weights]
        target = np.random.default_rng(0).normal(size=expected_output_shape).astype("float32")
        model.fit(dict(inputs), target, batch_size=expected_output_shape[0], epochs=1, verbose=0)
        for weight, old in zip(model.trainable_weights, before):
            assert not np.allclose(np.array(weight), old), f"fit did not update {weight.path}"

    # Mixed precision: compute dtype outputs, float32 variables, no overflow.
    for policy, compute_dtype in (("mixed_float16", "float16"), ("mixed_bfloat16", "bfloat16")):
        mixed = layer_cls(**init_kwargs, dtype=policy)
        mixed_outputs = mixed(**_call_args(inputs), **call_kwargs)
        assert keras.backend.standardize_dtype(mixed_outputs.dtype) == compute_dtype, policy
        assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in mixed.weights)
        assert np.all(np.isfinite(keras.ops.convert_to_numpy(keras.ops.cast(mixed_outputs, "float32")))), policy
    return layer


def values_and_gradients(layer, inputs, upstream):
    """`[output, d/d inputs, d/d each trainable weight]` of sum(output * upstream), float64 NumPy.

    The gradient is taken by the backend's own autodiff (TensorFlow's tape, `jax.grad`), so that a
    layer's hand-written gradient is checked as training would use it.
    """
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
    return [keras.ops.convert_to_numpy(keras.ops.cast(v, "float32")).astype("float64") for v in [outputs] + gradients]
