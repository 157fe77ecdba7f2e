"""Fast path: dropout whose TensorFlow masks come from 16 random bits per element; it must equal
`keras.layers.Dropout` in distribution (tests/models/fast_paths/test_bit_mask_dropout.py).

Keras's TensorFlow dropout under `mixed_bfloat16` draws 32 bits per element with a rate off the
requested one; this draws 32 bits per two elements, keeps where the 16 bits are >= round(rate *
65536) and scales by the realised keep probability. Rates 16 bits cannot express within 0.1%, odd
last dimensions and other backends use Keras's dropout."""

import keras
from keras import ops

MASK_BITS = 16
MASK_LEVELS = 2**MASK_BITS


def quantized_rate(rate):
    """The number of the 2**16 mask values that drop a unit, or None where 16 bits are too coarse."""
    dropped = min(round(rate * MASK_LEVELS), MASK_LEVELS - 1)
    return dropped if abs(dropped / MASK_LEVELS - rate) <= 1e-3 * rate else None


@keras.saving.register_keras_serializable(package="transformer")
class Dropout(keras.layers.Dropout):
    """`keras.layers.Dropout` with 16-bit masks under TensorFlow (see the module docstring)."""

    def call(self, inputs, training=False):
        if not training or self.rate == 0 or not self._uses_bit_masks(inputs):
            return super().call(inputs, training=training)
        return self._bit_mask_dropout(inputs)

    def _uses_bit_masks(self, inputs):
        width = inputs.shape[-1]
        return (
            keras.backend.backend() == "tensorflow"
            and self.noise_shape is None
            and isinstance(self.rate, (int, float))
            and quantized_rate(self.rate) is not None
            and width is not None
            and width % 2 == 0
        )

    def _bit_mask_dropout(self, inputs):
        halves = random_halves(ops.shape(inputs), self.seed_generator)
        dropped = quantized_rate(self.rate)
        # An int16 v is the unsigned 16-bit value v + 2**15: keep where unsigned >= dropped.
        keep = ops.greater_equal(halves, ops.cast(dropped - MASK_LEVELS // 2, "int16"))
        # 1 / the realised keep probability, rounded to the compute dtype as Keras's dropout does
        # (under bfloat16 the expected output is then slightly below the input, as with Keras's).
        kept_scale = MASK_LEVELS / (MASK_LEVELS - dropped)
        scale = ops.where(keep, ops.cast(kept_scale, inputs.dtype), ops.cast(0.0, inputs.dtype))
        return inputs * scale


def random_halves(shape, seed_generator):
    """16 random bits per element of `shape` (even last dimension), int16: an unbounded stateless
    int32 draw of `[..., width // 2]` bitcast to two halves each."""
    bits = keras.random.randint(
        tuple(shape[:-1]) + (shape[-1] // 2,), minval=None, maxval=None, dtype="int32", seed=seed_generator
    )
    return ops.view(bits, "int16")
