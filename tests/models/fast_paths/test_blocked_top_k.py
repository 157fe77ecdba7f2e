import itertools

import keras
import numpy as np
import pytest

from models.fast_paths.blocked_top_k import BLOCK, MIN_BLOCKS, top_k


def _rows(kind, width, rng):
    """Rows of logits as a search meets them: distinct values, many ties, or mostly barred (-inf)."""
    if kind == "normal":
        return rng.normal(size=(6, width)).astype("float32")
    if kind == "ties":
        return rng.integers(0, 4, size=(6, width)).astype("float32")
    barred = rng.random((6, width)) < 0.995
    return np.where(barred, -np.inf, rng.normal(size=(6, width))).astype("float32")


@pytest.mark.parametrize("kind", ["normal", "ties", "barred"])
@pytest.mark.parametrize("width", [MIN_BLOCKS * 8 * BLOCK, 4000, 4001, 37000])
def test_equals_keras_top_k_ties_included(kind, width):
    rng = np.random.default_rng(width)
    x = _rows(kind, width, rng)
    for k in (1, 8):
        got = top_k(keras.ops.convert_to_tensor(x), k)
        expected = keras.ops.top_k(x, k)
        for got_part, expected_part in zip(got, expected):
            assert keras.backend.standardize_dtype(got_part.dtype) == keras.backend.standardize_dtype(
                expected_part.dtype
            )
            np.testing.assert_array_equal(
                keras.ops.convert_to_numpy(got_part), keras.ops.convert_to_numpy(expected_part)
            )


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a TensorFlow graph's unknown batch size")
def test_an_unknown_number_of_rows_under_a_traced_function():
    import tensorflow as tf

    searched = tf.function(
        lambda x: top_k(x, 8), input_signature=[tf.TensorSpec([None, 4000], tf.float32)], autograph=False
    )
    for rows in (1, 5):
        x = np.random.default_rng(rows).integers(0, 50, size=(rows, 4000)).astype("float32")
        for got, expected in zip(searched(x), tf.math.top_k(x, 8)):
            np.testing.assert_array_equal(got.numpy(), expected.numpy())


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="a TensorFlow graph's unknown width")
@pytest.mark.parametrize("kind", ["normal", "ties", "barred"])
def test_a_width_known_at_run_time_only(kind):
    """A shortlist's columns: any width from k up, fewer entries than k blocks hold included."""
    import tensorflow as tf

    for rows, k in itertools.product((None, 1, 6), (1, 8)):  # Static rows stay static, as a search's loop needs.
        signature = [tf.TensorSpec([rows, None], tf.float32)]
        searched = tf.function(lambda x, k=k: top_k(x, k), input_signature=signature, autograph=False)
        assert [tensor.shape.as_list() for tensor in searched.get_concrete_function().outputs] == [[rows, k]] * 2
        for width in (8, 100, 8 * BLOCK, 2537, 4001):
            x = _rows(kind, width, np.random.default_rng(width))[: rows or 6]
            for got, expected in zip(searched(x), tf.math.top_k(x, k)):
                np.testing.assert_array_equal(got.numpy(), expected.numpy(), err_msg=f"width {width}, k {k}")
