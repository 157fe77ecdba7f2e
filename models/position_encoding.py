"""Sinusoidal positional encoding (Vaswani et al., 2017, section 3.5).

    PE(pos, 2i)     = sin(pos / 10000^(2i / d_model))
    PE(pos, 2i + 1) = cos(pos / 10000^(2i / d_model))

Sines sit on the even dimensions and cosines on the odd ones, interleaved as in the paper (not the
"all sines then all cosines" layout of tensor2tensor). Values are computed on the fly in float32,
for any length and any start position, so decoding step t gets exactly the row a full pass gives
position t.
"""

import keras
from keras import ops


def sinusoidal_position_encoding(length, hidden_dim, start_position=0, max_wavelength=10000.0):
    """Returns the `[length, hidden_dim]` float32 encoding of positions `start_position + [0, length)`.

    Args:
        length: number of positions (Python int or scalar tensor).
        hidden_dim: d_model, an even Python int.
        start_position: position of the first row (Python int or scalar int tensor).
        max_wavelength: the paper's 10000.
    """
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
    """Adds nothing and learns nothing: returns the section 3.5 encoding for a sequence.

    Args:
        max_wavelength: base of the geometric progression of wavelengths (10000 in the paper).

    Call arguments:
        inputs: a `[batch, length, hidden_dim]` tensor; only its shape is read.
        start_position: absolute position of `inputs[:, 0]` (0 for a full pass, the step index when
            decoding incrementally).

    Returns:
        `[length, hidden_dim]` tensor in the layer's compute dtype, broadcastable over the batch.
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
        length = ops.shape(inputs)[1]
        encoding = sinusoidal_position_encoding(length, inputs.shape[-1], start_position, self.max_wavelength)
        return ops.cast(encoding, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[1:])

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
