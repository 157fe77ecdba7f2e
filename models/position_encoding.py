"""Sinusoidal positional encoding (Vaswani et al., 2017, Section 3.5), sines on even and cosines on
odd dimensions as in the paper, computed in float32 for any start position (so decoding step t gets
the row a full pass gives position t)."""

import keras
from keras import ops

from models.shapes import dimension


def sinusoidal_position_encoding(length, hidden_dim, start_position=0, max_wavelength=10000.0):
    """The `[length, hidden_dim]` float32 encoding of positions `start_position + [0, length)`;
    `length` and `start_position` may be scalar tensors, `hidden_dim` is an even int."""
    if hidden_dim % 2:
        raise ValueError(f"hidden_dim must be even for sin/cos pairs, received hidden_dim={hidden_dim}")
    positions = ops.cast(ops.arange(length), "float32") + ops.cast(start_position, "float32")
    # 2i / d_model for i in [0, d_model / 2).
    exponents = ops.cast(ops.arange(0, hidden_dim, 2), "float32") / float(hidden_dim)
    inverse_frequencies = ops.power(float(max_wavelength), -exponents)  # [hidden_dim / 2]
    angles = positions[:, None] * inverse_frequencies[None, :]  # [length, hidden_dim / 2]
    # Interleave: [sin a0, cos a0, sin a1, cos a1, ...].
    encoding = ops.stack([ops.sin(angles), ops.cos(angles)], axis=-1)
    return ops.reshape(encoding, (-1, hidden_dim))


@keras.saving.register_keras_serializable(package="transformer")
class SinusoidalPositionEncoding(keras.layers.Layer):
    """The Section 3.5 encoding for a sequence (adds nothing, learns nothing).

    Args:
        max_wavelength: the paper's 10000.

    Call arguments:
        inputs: `[batch, length, hidden_dim]`; only its shape is read.
        start_position: absolute position of `inputs[:, 0]`.

    Returns:
        `[length, hidden_dim]` in the compute dtype.
    """

    def __init__(self, max_wavelength=10000.0, **kwargs):
        super().__init__(**kwargs)
        self.max_wavelength = max_wavelength

    def call(self, inputs, start_position=0):
        if len(inputs.shape) != 3:
            raise ValueError(
                f"SinusoidalPositionEncoding expects inputs of rank 3 [batch, length, hidden_dim], "
                f"received shape {inputs.shape}"
            )
        length = dimension(inputs, 1)  # Static in a decoding step: the graph folds the rest to constants.
        encoding = sinusoidal_position_encoding(length, inputs.shape[-1], start_position, self.max_wavelength)
        return ops.cast(encoding, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[1:])

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
