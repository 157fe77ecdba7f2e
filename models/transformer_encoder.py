"""Encoder layer and encoder stack (Vaswani et al., 2017, section 3.1).

Each of the N layers has a multi-head self-attention sublayer and a position-wise feed-forward
sublayer, each wrapped in residual dropout and layer normalization (`models/residual.py`).
Symbols: `num_layers` N, `hidden_dim` d_model, `num_heads` h, `intermediate_dim` d_ff, `dropout`
P_drop.
"""

import keras

from models.layer_stack import TransformerLayerBase, TransformerStackBase


@keras.saving.register_keras_serializable(package="transformer")
class TransformerEncoderLayer(TransformerLayerBase):
    """One encoder layer: self-attention then feed-forward, each as `LayerNorm(x + Dropout(f(x)))`.

    Args: the options of `TransformerLayerBase` (`models/layer_stack.py`): hidden_dim (d_model),
        num_heads (h), intermediate_dim (d_ff), dropout (P_drop), attention_dropout,
        activation_dropout, normalize_first, layer_norm_epsilon.

    Call arguments:
        inputs: `[batch, source_length, hidden_dim]`.
        padding_mask: optional boolean `[batch, source_length]`, True on real tokens. Padded keys get
            zero attention weight; padded positions still produce (ignored) outputs.
        training: whether dropout is active.

    Returns:
        `[batch, source_length, hidden_dim]`.
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
    """A stack of `num_layers` encoder layers (N = 6 in the paper).

    With `normalize_first=True` a final LayerNorm follows the stack (pre-norm needs it; post-norm
    layers already end normalized).

    Args:
        num_layers: N. Defaults to 6.
        Every other argument as in `TransformerEncoderLayer`.

    Call arguments:
        inputs: embedded source `[batch, source_length, hidden_dim]`.
        padding_mask: boolean `[batch, source_length]`, True on real tokens.
        training: whether dropout is active.

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
