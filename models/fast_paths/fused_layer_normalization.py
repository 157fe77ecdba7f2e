"""Fast path: layer normalization with a hand-written float32 gradient under TensorFlow (instead of
some thirty op-by-op passes); it must equal `keras.layers.LayerNormalization` in outputs and
gradients (tests/models/fast_paths/test_fused_layer_normalization.py). With r = 1 / sqrt(var(x) +
epsilon) and g' = g * gamma: dL/dx = r * (g' - mean(g') - x_hat * mean(g' * x_hat))."""

import keras
from keras import ops

from models.fast_paths.fused_dense import sum_over_rows


@keras.saving.register_keras_serializable(package="transformer")
class LayerNormalization(keras.layers.LayerNormalization):
    """`keras.layers.LayerNormalization` with a hand-written TensorFlow gradient (see the module docstring)."""

    def call(self, inputs):
        if not self._uses_written_gradient(inputs):
            return super().call(inputs)
        return ops.cast(_normalize(inputs, self.gamma.value, self.beta.value, self.epsilon), self.compute_dtype)

    def _uses_written_gradient(self, inputs):
        axes = [self.axis] if isinstance(self.axis, int) else list(self.axis)
        return (
            keras.backend.backend() == "tensorflow"
            and self.center
            and self.scale
            and not self.rms_scaling
            and [axis % len(inputs.shape) for axis in axes] == [len(inputs.shape) - 1]
        )


def _normalize(inputs, gamma, beta, epsilon):
    """Layer norm over the last axis: float32 output, gradient in float32 (module docstring)."""

    @ops.custom_gradient
    def normalize(inputs, gamma, beta):
        x = ops.cast(inputs, "float32")
        centered = x - ops.mean(x, axis=-1, keepdims=True)
        reciprocal_std = ops.rsqrt(ops.mean(ops.square(centered), axis=-1, keepdims=True) + epsilon)
        normalized = centered * reciprocal_std

        def gradient(*args, upstream=None):
            upstream = ops.cast(args[0] if upstream is None else upstream, "float32")
            width = upstream.shape[-1]
            rows = ops.reshape(upstream, (-1, width))  # [positions, width]
            normalized_rows = ops.reshape(normalized, (-1, width))
            upstream_normalized = rows * normalized_rows
            # Sums over positions and means over the width as matmuls: one GEMM call each instead of a
            # reduction kernel, and g' = upstream * gamma enters the means through gamma alone.
            gamma_gradient = sum_over_rows(upstream_normalized)
            beta_gradient = sum_over_rows(rows)
            gamma_over_width = ops.reshape(gamma, (width, 1)) / width
            mean_scaled = ops.matmul(rows, gamma_over_width)  # mean(g'), [positions, 1]
            mean_scaled_normalized = ops.matmul(upstream_normalized, gamma_over_width)  # mean(g' * x_hat)
            inputs_gradient = ops.reshape(reciprocal_std, (-1, 1)) * (
                rows * gamma - mean_scaled - normalized_rows * mean_scaled_normalized
            )
            return (
                ops.cast(ops.reshape(inputs_gradient, ops.shape(upstream)), inputs.dtype),
                gamma_gradient,
                beta_gradient,
            )

        return normalized * gamma + beta, gradient

    return normalize(inputs, gamma, beta)
