"""Dense layer whose TensorFlow bias gradient is a matmul.

The gradient of a bias is the sum of the upstream gradient over all positions. TensorFlow computes
it with `BiasAddGrad`, which under `mixed_bfloat16` returns a bfloat16 sum with a loss of precision that grows with the number of positions: over 2048 positions of ReLU-masked
N(0, 1) gradients (one CPU benchmark batch, `[64, 32, 1024]`), entries off by up to 11.7 on sums
of magnitude up to 180, where the matmul below is off by at most 0.41 (measured against float64
sums). It is also one of the slower small kernels of a CPU step (25-37 ms of op time per step for
39 biases at the CPU benchmark's sizes, in eight profiles).

This subclass, under TensorFlow, computes the bias gradient as `ones[1, positions] @
upstream[positions, units]`: the GEMM accumulates in float32 and rounds once (benchmarks/README.md
has the measurements). LoRA and quantized layers, and other backends, use Keras's `Dense` (under
JAX, XLA:CPU's bfloat16 bias gradient also missed one rounding when the precision test of
tests/models/test_dense.py was run on it; left as it is, since the matmul form was not measured on
a GPU). Weights, arguments and config are Keras's.
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

    @property
    def plain(self):
        """Whether the layer is `inputs @ kernel + bias` on its own weights (no LoRA, not quantized)."""
        return not self.lora_enabled and not self.quantization_mode

    def project_columns(self, inputs, start, stop):
        """Outputs `start:stop` of the layer (no activation): a matmul over those kernel columns only.

        Only for `plain` layers, called inside a layer's `call` (where the kernel reads autocast).
        """
        outputs = ops.matmul(inputs, ops.cast(self.kernel[:, start:stop], self.compute_dtype))
        if self.bias is not None:
            outputs = outputs + ops.cast(self.bias[start:stop], self.compute_dtype)
        return outputs

    def _sums_bias_gradient_by_matmul(self):
        return keras.backend.backend() == "tensorflow" and self.bias is not None and self.plain


def _add_bias(outputs, bias):
    """`outputs + bias`, whose bias gradient is a ones-row matmul over all positions."""

    @ops.custom_gradient
    def add(outputs, bias):
        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            return upstream, sum_over_rows(ops.reshape(upstream, (-1, upstream.shape[-1])))

        return outputs + bias, gradient

    return add(outputs, bias)


def sum_over_rows(rows):
    """The column sums of a `[rows, columns]` tensor as `ones[1, rows] @ rows`.

    A GEMM accumulates in float32 and rounds once (TensorFlow's `BiasAddGrad` sums bfloat16 in
    bfloat16), and on CPUs it is one fast kernel where TensorFlow's column reduction is slower
    (benchmarks/README.md, changes 13 and 16). Used for bias and layer-norm weight gradients.
    """
    ones = ops.ones((1, ops.shape(rows)[0]), dtype=rows.dtype)
    return ops.matmul(ones, rows)[0]
