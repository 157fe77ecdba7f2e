import keras
import numpy as np
import pytest

from models.fast_paths.narrow_gather import MAX_WIDTH, take_along_last


@pytest.mark.parametrize("width", [1, 8, MAX_WIDTH, MAX_WIDTH + 1])
@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_equals_keras_take_along_axis(width, dtype):
    # Log-probabilities as the search holds them: -inf, its large negative fill, zeros of both signs.
    rng = np.random.default_rng(width)
    x = rng.normal(size=(3, 5, width)) * 30
    x.flat[:4] = [-np.inf, -1e30, -0.0, 0.0][: x.size]
    x = x > 0 if dtype == "bool" else x.astype(dtype)
    indices = rng.integers(0, width, size=(3, 5, 7)).astype("int32")
    got = take_along_last(keras.ops.convert_to_tensor(x), keras.ops.convert_to_tensor(indices))
    expected = keras.ops.take_along_axis(x, indices, axis=-1)
    assert keras.backend.standardize_dtype(got.dtype) == keras.backend.standardize_dtype(expected.dtype)
    assert np.array_equal(keras.ops.convert_to_numpy(got), keras.ops.convert_to_numpy(expected))


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a TensorFlow graph's unknown batch size")
def test_a_dynamic_leading_shape_gathers_under_a_traced_function():
    import tensorflow as tf

    gather = tf.function(
        take_along_last,
        input_signature=[tf.TensorSpec([None, 8], tf.float32), tf.TensorSpec([None, 4], tf.int32)],
        autograph=False,
    )
    x = np.arange(16, dtype="float32").reshape(2, 8)
    indices = np.array([[7, 0, 0, 3], [1, 1, 6, 2]], dtype="int32")
    assert np.array_equal(gather(x, indices).numpy(), np.take_along_axis(x, indices, axis=-1))
