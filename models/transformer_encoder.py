"""Encoder layer and encoder stack (Vaswani et al., 2017, Section 3.1): self-attention and
feed-forward, each with residual dropout and layer normalization (`models/residual.py`)."""

import keras

from models.layer_stack import TransformerLayerBase, TransformerStackBase


@keras.saving.register_keras_serializable(package="transformer")
class TransformerEncoderLayer(TransformerLayerBase):
    """One encoder layer (Section 3.1): self-attention then feed-forward.

    Args: those of `TransformerLayerBase` (`models/layer_stack.py`).

    Call arguments:
        inputs: `[batch, source_length, hidden_dim]`.
        padding_mask: optional boolean `[batch, source_length]`, True on real tokens.

    Returns:
        `[batch, source_length, hidden_dim]` (padded positions hold ignored values).
    """

    def build(self, inputs_shape):
        self.self_attention = self._build_attention("self_attention", inputs_shape)
        self.self_attention_residual = self._build_residual("self_attention_residual", inputs_shape)
        self.feed_forward = self._build_feed_forward(inputs_shape)
        self.feed_forward_residual = self._build_residual("feed_forward_residual", inputs_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        attention_mask = None if padding_mask is None else padding_mask[:, None, :]
        x = self.self_attention_residual.normalize_input(inputs)
        x = self.self_attention(x, attention_mask=attention_mask, training=training)
        x = self.self_attention_residual(inputs, x, training=training)
        y = self.feed_forward(self.feed_forward_residual.normalize_input(x), training=training)
        return self.feed_forward_residual(x, y, training=training)


@keras.saving.register_keras_serializable(package="transformer")
class TransformerEncoder(TransformerStackBase):
    """A stack of `num_layers` encoder layers (Section 3.1), final LayerNorm under pre-norm.

    Args:
        num_layers: N. Defaults to 6. The rest as `TransformerEncoderLayer`.

    Call arguments: as `TransformerEncoderLayer`.

    Returns:
        `[batch, source_length, hidden_dim]`.
    """

    layer_class = TransformerEncoderLayer

    def build(self, inputs_shape):
        self._build_layers("encoder_layers", inputs_shape)

    def call(self, inputs, padding_mask=None, training=None):
        x = inputs
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=padding_mask, training=training)
        return self._final_norm(x)
