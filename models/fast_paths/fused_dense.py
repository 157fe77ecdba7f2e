"""Fast path: `keras.layers.Dense` whose TensorFlow forward pass is one fused kernel and whose bias
gradient is a matmul; it must equal `keras.layers.Dense` (tests/models/fast_paths/test_fused_dense.py).

With a bias under TensorFlow, the forward runs on the 2-D `[positions, in]` form, which Grappler
fuses with the bias add and ReLU into one oneDNN kernel; other cases use Keras's `Dense`."""

import keras
from keras import ops

from models import int8_weights
from models.shapes import with_last


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
        """An int8 layer's call through `int8_weights.dequantized_matmul`; other modes are Keras's."""
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
        """Outputs `start:stop` of a `plain` layer (no activation), from those kernel columns only."""
        outputs = ops.matmul(inputs, ops.cast(self.kernel[:, start:stop], self.compute_dtype))
        if self.bias is not None:
            outputs = outputs + ops.cast(self.bias[start:stop], self.compute_dtype)
        return outputs

    def _runs_fused(self):
        """Whether `call` takes the fused TensorFlow path (module docstring)."""
        return keras.backend.backend() == "tensorflow" and self.bias is not None and self.plain


def _fused_dense(inputs, kernel, bias, relu):
    """`inputs @ kernel + bias` (then ReLU if `relu`) as fusable 2-D ops, gradient written out."""

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

        return ops.reshape(outputs, with_last(inputs, units)), gradient

    return dense(inputs, kernel, bias)


def sum_over_rows(rows):
    """Column sums of `[rows, columns]` as `ones[1, rows] @ rows`, equal to `ops.sum(rows, axis=0)`:
    one GEMM accumulating in float32 (TensorFlow's `BiasAddGrad` sums bfloat16 in bfloat16)."""
    ones = ops.ones((1, ops.shape(rows)[0]), dtype=rows.dtype)
    return ops.matmul(ones, rows)[0]
