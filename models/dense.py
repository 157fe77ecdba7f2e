"""Dense layer whose TensorFlow bias gradient is a matmul.

The gradient of a bias is the sum of the upstream gradient over all positions. TensorFlow computes
it with `BiasAddGrad`, which under `mixed_bfloat16` sums bfloat16 values into a bfloat16 result
with a loss of precision that grows with the number of positions: over 2048 positions of N(0, 1)
gradients (one CPU benchmark batch), entries off by up to ~18 against sums of magnitude up to ~150
(measured), where one rounding of the exact sum to bfloat16 is off by at most ~0.5. It is also one
of the slower small kernels of a CPU step (25-30 ms of op time per step for 39 biases at the CPU
benchmark's sizes).

This subclass, under TensorFlow, computes the bias gradient as `ones[1, positions] @
upstream[positions, units]`: the GEMM accumulates in float32 and rounds once (benchmarks/README.md
has the measurements). Other backends (XLA accumulates bfloat16 reductions in float32), LoRA and
quantized layers use Keras's `Dense`. Weights, arguments and config are Keras's.
"""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="transformer")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` with a matmul bias gradient under TensorFlow (see the module docstring)."""

    def call(self, inputs, training=None):
        if not self._sums_bias_gradient_by_matmul():
            return super().call(inputs, training=training)
        outputs = _add_bias(ops.matmul(inputs, self.kernel), self.bias.value)
        return outputs if self.activation is None else self.activation(outputs)

    def _sums_bias_gradient_by_matmul(self):
        return (
            keras.backend.backend() == "tensorflow"
            and self.bias is not None
            and not self.lora_enabled
            and not self.quantization_mode
        )


def _add_bias(outputs, bias):
    """`outputs + bias`, whose bias gradient is a ones-row matmul over all positions."""

    @ops.custom_gradient
    def add(outputs, bias):
        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            rows = ops.reshape(upstream, (-1, upstream.shape[-1]))
            ones = ops.ones((1, ops.shape(rows)[0]), dtype=rows.dtype)
            return upstream, ops.reshape(ops.matmul(ones, rows), (-1,))

        return outputs + bias, gradient

    return add(outputs, bias)
