"""What the encoder and decoder layers and their stacks share: the eight options (`LAYER_DEFAULTS`),
the sublayers they build, and a stack of `num_layers` layers with a final LayerNorm under pre-norm.
"""

import keras

from models.fast_paths.fused_layer_normalization import LayerNormalization
from models.feed_forward import PositionwiseFeedForward
from models.multi_head_attention import MultiHeadAttention
from models.residual import ResidualNorm

# The options of one encoder or decoder layer and their defaults (the paper's base model).
LAYER_DEFAULTS = dict(
    hidden_dim=512,
    num_heads=8,
    intermediate_dim=2048,
    dropout=0.1,
    attention_dropout=0.0,
    activation_dropout=0.0,
    normalize_first=False,
    layer_norm_epsilon=1e-6,
)


def pop_layer_options(kwargs):
    """Removes `LAYER_DEFAULTS`'s options from the dict `kwargs`; returns them, defaults filled in."""
    return {name: kwargs.pop(name, default) for name, default in LAYER_DEFAULTS.items()}


class TransformerLayerBase(keras.layers.Layer):
    """Stores and validates `LAYER_DEFAULTS`'s options; builds the sublayers they describe.

    Args:
        hidden_dim: d_model. Defaults to 512.
        num_heads: h. Defaults to 8.
        intermediate_dim: d_ff. Defaults to 2048.
        dropout: P_drop, residual dropout. Defaults to 0.1.
        attention_dropout: on attention weights (not in the paper). Defaults to 0.0.
        activation_dropout: after the ReLU (not in the paper). Defaults to 0.0.
        normalize_first: pre-norm instead of the paper's post-norm. Defaults to False.
        layer_norm_epsilon: defaults to 1e-6.
    """

    def __init__(self, **kwargs):
        options = pop_layer_options(kwargs)
        super().__init__(**kwargs)
        hidden_dim, num_heads = options["hidden_dim"], options["num_heads"]
        if not isinstance(num_heads, int) or num_heads < 1 or not isinstance(hidden_dim, int) or hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim (d_model) must be divisible by num_heads, received hidden_dim={hidden_dim!r}, "
                f"num_heads={num_heads!r}"
            )
        for name, value in options.items():
            setattr(self, name, value)

    def options(self):
        """The layer's `LAYER_DEFAULTS` options as a dict."""
        return {name: getattr(self, name) for name in LAYER_DEFAULTS}

    def _build_attention(self, name, query_shape, key_value_shape=None):
        attention = MultiHeadAttention(
            self.hidden_dim, self.num_heads, self.attention_dropout, name=name, dtype=self.dtype_policy
        )
        attention.build(query_shape, key_value_shape)
        return attention

    def _build_residual(self, name, inputs_shape):
        residual = ResidualNorm(
            dropout=self.dropout,
            normalize_first=self.normalize_first,
            layer_norm_epsilon=self.layer_norm_epsilon,
            name=name,
            dtype=self.dtype_policy,
        )
        residual.build(inputs_shape)
        return residual

    def _build_feed_forward(self, inputs_shape):
        feed_forward = PositionwiseFeedForward(
            self.hidden_dim,
            self.intermediate_dim,
            activation_dropout=self.activation_dropout,
            name="feed_forward",
            dtype=self.dtype_policy,
        )
        feed_forward.build(inputs_shape)
        return feed_forward

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update(self.options())
        return config


class TransformerStackBase(keras.layers.Layer):
    """`num_layers` layers of `layer_class` sharing one set of options, final LayerNorm under
    pre-norm; subclasses call `_build_layers(attribute, *shapes)` from `build`."""

    layer_class = None

    def __init__(self, num_layers=6, **kwargs):
        layer_options = pop_layer_options(kwargs)
        super().__init__(**kwargs)
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be a positive int, received {num_layers!r}")
        self.num_layers = num_layers
        self.layer_options = layer_options
        self.layer_class(**layer_options)  # Validates the options now rather than at build time.

    def _build_layers(self, attribute, inputs_shape, *other_shapes):
        """Builds the layers into the list `self.<attribute>`, then the final LayerNorm (if any)."""
        setattr(self, attribute, [])  # Keras wraps the list in a tracked copy: append through it.
        for index in range(self.num_layers):
            layer = self.layer_class(**self.layer_options, name=f"layer_{index}", dtype=self.dtype_policy)
            layer.build(inputs_shape, *other_shapes)
            getattr(self, attribute).append(layer)
        self.final_layer_norm = None
        if self.layer_options["normalize_first"]:
            self.final_layer_norm = LayerNormalization(
                epsilon=self.layer_options["layer_norm_epsilon"], name="final_layer_norm", dtype=self.dtype_policy
            )
            self.final_layer_norm.build(inputs_shape)
        self.built = True

    def _final_norm(self, x):
        return x if self.final_layer_norm is None else self.final_layer_norm(x)

    def compute_output_shape(self, inputs_shape, *args, **kwargs):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self.layer_options})
        return config
