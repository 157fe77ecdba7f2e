"""Encoder layer and encoder stack (Vaswani et al., 2017, section 3.1).

Each of the N layers has a multi-head self-attention sublayer and a position-wise feed-forward
sublayer, each wrapped in residual dropout and layer normalization (`models/residual.py`).
Symbols: `num_layers` N, `hidden_dim` d_model, `num_heads` h, `intermediate_dim` d_ff, `dropout`
P_drop.
"""

import keras

from models.feed_forward import PositionwiseFeedForward
from models.multi_head_attention import MultiHeadAttention
from models.residual import ResidualNorm


def _sublayer_options(layer):
    return dict(dropout=layer.dropout, normalize_first=layer.normalize_first, layer_norm_epsilon=layer.layer_norm_epsilon)


@keras.saving.register_keras_serializable(package="transformer")
class TransformerEncoderLayer(keras.layers.Layer):
    """One encoder layer: self-attention then feed-forward, each as `LayerNorm(x + Dropout(f(x)))`.

    Args:
        hidden_dim: d_model. Defaults to 512.
        num_heads: h. Defaults to 8.
        intermediate_dim: d_ff. Defaults to 2048.
        dropout: P_drop, residual dropout. Defaults to 0.1.
        attention_dropout: dropout on attention weights (not in the paper). Defaults to 0.0.
        activation_dropout: dropout after the ReLU (not in the paper). Defaults to 0.0.
        normalize_first: pre-norm instead of the paper's post-norm. Defaults to False.
        layer_norm_epsilon: defaults to 1e-6.

    Call arguments:
        inputs: `[batch, source_length, hidden_dim]`.
        padding_mask: optional boolean `[batch, source_length]`, True on real tokens. Padded keys get
            zero attention weight; padded positions still produce (ignored) outputs.
        training: whether dropout is active.

    Returns:
        `[batch, source_length, hidden_dim]`.
    """

    def __init__(
        self,
        hidden_dim=512,
        num_heads=8,
        intermediate_dim=2048,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        normalize_first=False,
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or num_heads < 1 or not isinstance(hidden_dim, int) or hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim (d_model) must be divisible by num_heads, received hidden_dim={hidden_dim!r}, "
                f"num_heads={num_heads!r}"
            )
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.normalize_first = normalize_first
        self.layer_norm_epsilon = layer_norm_epsilon

    def build(self, inputs_shape):
        self.self_attention = MultiHeadAttention(
            self.hidden_dim, self.num_heads, self.attention_dropout, name="self_attention", dtype=self.dtype_policy
        )
        self.self_attention.build(inputs_shape)
        self.self_attention_residual = ResidualNorm(
            **_sublayer_options(self), name="self_attention_residual", dtype=self.dtype_policy
        )
        self.self_attention_residual.build(inputs_shape)
        self.feed_forward = PositionwiseFeedForward(
            self.hidden_dim,
            self.intermediate_dim,
            activation_dropout=self.activation_dropout,
            name="feed_forward",
            dtype=self.dtype_policy,
        )
        self.feed_forward.build(inputs_shape)
        self.feed_forward_residual = ResidualNorm(
            **_sublayer_options(self), name="feed_forward_residual", dtype=self.dtype_policy
        )
        self.feed_forward_residual.build(inputs_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        attention_mask = None if padding_mask is None else padding_mask[:, None, :]
        x = self.self_attention_residual.normalize_input(inputs)
        x = self.self_attention(x, attention_mask=attention_mask, training=training)
        x = self.self_attention_residual(inputs, x, training=training)
        y = self.feed_forward(self.feed_forward_residual.normalize_input(x), training=training)
        return self.feed_forward_residual(x, y, training=training)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "attention_dropout": self.attention_dropout,
                "activation_dropout": self.activation_dropout,
                "normalize_first": self.normalize_first,
                "layer_norm_epsilon": self.layer_norm_epsilon,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="transformer")
class TransformerEncoder(keras.layers.Layer):
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

    def __init__(
        self,
        num_layers=6,
        hidden_dim=512,
        num_heads=8,
        intermediate_dim=2048,
        dropout=0.1,
        attention_dropout=0.0,
        activation_dropout=0.0,
        normalize_first=False,
        layer_norm_epsilon=1e-6,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be a positive int, received {num_layers!r}")
        self.num_layers = num_layers
        self.layer_options = dict(
            hidden_dim=hidden_dim,
            num_heads=num_heads,
            intermediate_dim=intermediate_dim,
            dropout=dropout,
            attention_dropout=attention_dropout,
            activation_dropout=activation_dropout,
            normalize_first=normalize_first,
            layer_norm_epsilon=layer_norm_epsilon,
        )
        # Validates hidden_dim / num_heads now rather than at build time.
        TransformerEncoderLayer(**self.layer_options)

    def build(self, inputs_shape):
        self.encoder_layers = []
        for index in range(self.num_layers):
            layer = TransformerEncoderLayer(**self.layer_options, name=f"layer_{index}", dtype=self.dtype_policy)
            layer.build(inputs_shape)
            self.encoder_layers.append(layer)
        self.final_layer_norm = None
        if self.layer_options["normalize_first"]:
            self.final_layer_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_options["layer_norm_epsilon"], name="final_layer_norm", dtype=self.dtype_policy
            )
            self.final_layer_norm.build(inputs_shape)
        self.built = True

    def call(self, inputs, padding_mask=None, training=None):
        x = inputs
        for layer in self.encoder_layers:
            x = layer(x, padding_mask=padding_mask, training=training)
        return x if self.final_layer_norm is None else self.final_layer_norm(x)

    def compute_output_shape(self, inputs_shape):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self.layer_options})
        return config
