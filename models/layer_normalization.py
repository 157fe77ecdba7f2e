"""Layer normalization with a hand-written gradient under TensorFlow.

`keras.layers.LayerNormalization` computes in float32 from moments, and TensorFlow differentiates
that expression op by op: about 32 graph ops per layer norm and step, each a pass over the
`[batch, length, d_model]` activations (about 7 ms per layer norm of a ~470 ms CPU training step
at the CPU benchmark's sizes, 15 of them). This subclass, under TensorFlow and for the usual case
(normalised over the last axis, with scale and offset), computes the same forward pass and writes
the gradient by hand, in float32:

    y = x_hat * gamma + beta,   x_hat = (x - mean(x)) * r,   r = 1 / sqrt(var(x) + epsilon)
    dL/dbeta = sum over positions of g,   dL/dgamma = sum over positions of g * x_hat
    dL/dx = r * (g' - mean(g') - x_hat * mean(g' * x_hat)),   g' = g * gamma

(means over the normalised axis), about 20 ops per layer norm and step (benchmarks/README.md has
the measurements). Other backends, and other axes or options, use Keras's layer norm: under XLA
the ops fuse whatever their number. Weights, arguments and config are Keras's.
"""

import keras
from keras import ops


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
            position_axes = tuple(range(len(upstream.shape) - 1))
            gamma_gradient = ops.sum(upstream * normalized, axis=position_axes)
            beta_gradient = ops.sum(upstream, axis=position_axes)
            scaled = upstream * gamma
            inputs_gradient = reciprocal_std * (
                scaled
                - ops.mean(scaled, axis=-1, keepdims=True)
                - normalized * ops.mean(scaled * normalized, axis=-1, keepdims=True)
            )
            return ops.cast(inputs_gradient, inputs.dtype), gamma_gradient, beta_gradient

        return normalized * gamma + beta, gradient

    return normalize(inputs, gamma, beta)
