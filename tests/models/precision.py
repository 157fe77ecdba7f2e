"""Float32 matrix products computed in float32 on every device, for the tests of `models/`.

The tests of `models/` check formulas (a NumPy reference of attention, of the feed-forward block, of
the tied embedding's product) and equivalences (cached against full decoding, shared against tiled
cross-attention, padding that changes nothing) to 1e-5 in float32. On a CPU a float32 product is
computed in float32. On a GPU with TensorFloat-32 (NVIDIA A100 and later) it is not by default:
XLA under JAX, and TensorFlow, round the factors to TF32's 10-bit mantissa, and results move by
about 1e-3 (7e-4 to 1.3e-3 on an H200 under JAX, where six of these tests failed). That error is the
device's setting, not the code's, and a tolerance wide enough for it would hide real errors of that
size in the formulas. So every test of `models/` runs inside `float32_matmuls()`
(tests/models/conftest.py), on the CPU too, so that this code path runs in every tier:

- JAX: `jax.default_matmul_precision("highest")`, float32 products (part of the jit cache key, so
  functions traced inside the block use it);
- TensorFlow: `tf.config.experimental.enable_tensor_float_32_execution(False)`;
- PyTorch: `torch.set_float32_matmul_precision("highest")`.

What the speed benchmarks measure is the default precision; only these tests pin it.
"""

import contextlib

import keras


@contextlib.contextmanager
def float32_matmuls():
    """Within the block, float32 matrix products of the current Keras backend are computed in float32
    (no TF32); the previous setting is restored after it."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        with jax.default_matmul_precision("highest"):
            yield
    elif backend == "tensorflow":
        import tensorflow as tf

        previous = tf.config.experimental.tensor_float_32_execution_enabled()
        tf.config.experimental.enable_tensor_float_32_execution(False)
        try:
            yield
        finally:
            tf.config.experimental.enable_tensor_float_32_execution(previous)
    elif backend == "torch":
        import torch

        previous = torch.get_float32_matmul_precision()
        torch.set_float32_matmul_precision("highest")
        try:
            yield
        finally:
            torch.set_float32_matmul_precision(previous)
    else:
        yield


def float32_matmuls_pinned():
    """Whether float32 products are pinned to float32 now (the state `float32_matmuls` sets)."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.config.jax_default_matmul_precision in ("highest", "float32")
    if backend == "tensorflow":
        import tensorflow as tf

        return not tf.config.experimental.tensor_float_32_execution_enabled()
    if backend == "torch":
        import torch

        return torch.get_float32_matmul_precision() == "highest"
    return True


def on_gpu():
    """Whether the current Keras backend computes on a GPU."""
    backend = keras.backend.backend()
    if backend == "jax":
        import jax

        return jax.devices()[0].platform == "gpu"
    if backend == "tensorflow":
        import tensorflow as tf

        return bool(tf.config.list_logical_devices("GPU"))
    if backend == "torch":
        import torch

        return torch.cuda.is_available()
    return False
