"""tests/models/precision.py: the tests of `models/` run with float32 products pinned to float32, and
on a GPU the pinned products are float32's (a TF32 product misses this tolerance by about 1e-3)."""

import keras
import numpy as np
import pytest

from tests.models.precision import float32_matmuls, float32_matmuls_pinned, on_gpu


def test_every_models_test_runs_with_float32_products():
    assert float32_matmuls_pinned()  # tests/models/conftest.py's fixture, for this test as for every one


def test_the_block_restores_the_previous_setting():
    """From TF32 products (a GPU's default) to float32 ones and back."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        with jax.default_matmul_precision("tensorfloat32"):
            assert not float32_matmuls_pinned()
            with float32_matmuls():
                assert float32_matmuls_pinned()
            assert not float32_matmuls_pinned()
    elif backend == "tensorflow":
        import tensorflow as tf

        tf.config.experimental.enable_tensor_float_32_execution(True)
        try:
            assert not float32_matmuls_pinned()
            with float32_matmuls():
                assert float32_matmuls_pinned()
            assert not float32_matmuls_pinned()
        finally:
            tf.config.experimental.enable_tensor_float_32_execution(False)  # The fixture's setting.
    else:
        pytest.skip(f"no TF32 setting checked under {backend}")


def test_float32_products_are_float32_on_this_device():
    """A [256, 256] product against float64: float32's rounding stays under 1e-4 here, TF32's 10-bit
    mantissa about 1e-2. On a GPU this checks that the pinning takes effect."""
    rng = np.random.default_rng(0)
    left, right = (rng.uniform(-1, 1, size=(256, 256)).astype("float32") for _ in range(2))
    product = keras.ops.convert_to_numpy(keras.ops.matmul(left, right))
    exact = left.astype("float64") @ right.astype("float64")
    error = np.abs(product - exact).max()
    assert error < 1e-4, (error, "GPU" if on_gpu() else "CPU")
