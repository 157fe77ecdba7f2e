"""Fast path: a Dense layer whose TensorFlow forward pass is one fused kernel and whose bias gradient is a matmul.

It must equal `keras.layers.Dense` (tests/models/fast_paths/test_fused_dense.py checks outputs and
gradients). Under TensorFlow, with a bias, one `keras.ops.custom_gradient`: the forward pass on the
2-D `[positions, in]` form, where Grappler fuses matmul, bias add and ReLU into one oneDNN kernel
(Keras's 3-D matmul leaves the bias add and ReLU as slow bfloat16 passes of their own); the bias
gradient as `ones[1, positions] @ upstream`, which accumulates in float32 where TensorFlow's
`BiasAddGrad` sums in bfloat16. LoRA and quantized layers, layers without a bias and other backends
use Keras's `Dense`, except that an int8 layer multiplies as `models.int8_weights` does. Weights,
arguments and config are Keras's; benchmarks/README.md has the measurements.
"""

import keras
from keras import ops

from models import int8_weights


@keras.saving.register_keras_serializable(package="transformer")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` as one fused kernel with a matmul bias gradient under TensorFlow (see the module docstring)."""

    def call(self, inputs, training=None):
        if not self._runs_fused():
            return super().call(inputs, training=training)
        relu = self.activation is keras.activations.relu
        outputs = _fused_dense(
            inputs, ops.cast(self.kernel, self.compute_dtype), ops.cast(self.bias, self.compute_dtype), relu
        )
        return outputs if relu or self.activation is None else self.activation(outputs)

    def quantized_call(self, inputs, training=None):
        """An int8 layer's call: `models.int8_weights.dequantized_matmul` (weight-only int8), then
        the bias and the activation; other modes are Keras's."""
        if self.quantization_mode != "int8":
            return super().quantized_call(inputs, training=training)
        outputs = int8_weights.dequantized_matmul(inputs, self.kernel, self.kernel_scale, dtype=self.compute_dtype)
        if self.bias is not None:
            outputs = outputs + ops.cast(self.bias, self.compute_dtype)
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

    def _runs_fused(self):
        """Whether `call` takes the fused TensorFlow path (module docstring)."""
        return keras.backend.backend() == "tensorflow" and self.bias is not None and self.plain


def _fused_dense(inputs, kernel, bias, relu):
    """`inputs @ kernel + bias` (then ReLU if `relu`) as 2-D ops TensorFlow fuses into one kernel,
    with the gradient written out (module docstring)."""

    @ops.custom_gradient
    def dense(inputs, kernel, bias):
        units = kernel.shape[1]
        rows = ops.reshape(inputs, (-1, kernel.shape[0]))  # [positions, in]
        outputs = ops.matmul(rows, kernel) + bias
        if relu:
            outputs = ops.relu(outputs)

        def gradient(*args, upstream=None):
            upstream = ops.reshape(args[0] if upstream is None else upstream, (-1, units))
            if relu:  # ReLU's gradient: zero where the output is (ReLU's input <= 0).
                upstream = ops.where(outputs > 0, upstream, ops.zeros_like(upstream))
            inputs_gradient = ops.reshape(ops.matmul(upstream, ops.transpose(kernel)), ops.shape(inputs))
            return inputs_gradient, ops.matmul(ops.transpose(rows), upstream), sum_over_rows(upstream)

        return ops.reshape(outputs, tuple(ops.shape(inputs)[:-1]) + (units,)), gradient

    return dense(inputs, kernel, bias)


def sum_over_rows(rows):
    """The column sums of a `[rows, columns]` tensor as `ones[1, rows] @ rows`.

    A GEMM accumulates in float32 and rounds once (TensorFlow's `BiasAddGrad` sums bfloat16 in
    bfloat16), and on CPUs it is one GEMM call where TensorFlow runs a slower column reduction.
    Equals `ops.sum(rows, axis=0)`. Used for bias and layer-norm weight gradients.
    """
    ones = ops.ones((1, ops.shape(rows)[0]), dtype=rows.dtype)
    return ops.matmul(ones, rows)[0]
