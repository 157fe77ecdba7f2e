"""Decoder layer and decoder stack (Vaswani et al., 2017, section 3.1).

Each of the N layers has masked multi-head self-attention (a position attends to itself and to
earlier positions only), encoder-decoder attention over the encoder output, and a position-wise
feed-forward sublayer, each wrapped in residual dropout and layer normalization.

Incremental decoding: `empty_self_caches(batch, cache_length)` preallocates every layer's
self-attention keys/values and `cross_caches(encoder_output)` projects the encoder output to each
layer's keys/values once; a call with `cache_index=i` then computes positions `[i, i + length)`
only, writes their keys/values into the self caches and reads the cross caches.
"""

import keras
from keras import ops

from models.feed_forward import PositionwiseFeedForward
from models.multi_head_attention import MultiHeadAttention
from models.residual import ResidualNorm


def causal_attention_mask(query_length, key_length, start_position=0):
    """Boolean `[1, query_length, key_length]`: query t (at absolute position start + t) sees keys <= it."""
    query_positions = ops.arange(query_length) + ops.cast(start_position, "int32")
    key_positions = ops.arange(key_length)
    return (key_positions[None, :] <= query_positions[:, None])[None]


@keras.saving.register_keras_serializable(package="transformer")
class TransformerDecoderLayer(keras.layers.Layer):
    """One decoder layer: masked self-attention, encoder-decoder attention, feed-forward.

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
        inputs: `[batch, target_length, hidden_dim]`, the embedded target (a whole prefix, or the
            new positions when decoding with a cache).
        encoder_output: `[batch, source_length, hidden_dim]`; may be None when `cross_cache` is given.
        encoder_padding_mask: boolean `[batch, source_length]`, True on real source tokens.
        self_cache: optional `[batch, 2, cache_length, num_heads, head_dim]` self-attention cache.
        cross_cache: optional `[batch, 2, source_length, num_heads, head_dim]` encoder keys/values.
        cache_index: absolute position of `inputs[:, 0]` when `self_cache` is given.
        training: whether dropout is active.

    Returns:
        `[batch, target_length, hidden_dim]`, plus the updated self cache when one was given.
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

    def _residual(self, name):
        return ResidualNorm(
            dropout=self.dropout,
            normalize_first=self.normalize_first,
            layer_norm_epsilon=self.layer_norm_epsilon,
            name=name,
            dtype=self.dtype_policy,
        )

    def build(self, inputs_shape, encoder_output_shape=None):
        encoder_output_shape = inputs_shape if encoder_output_shape is None else encoder_output_shape
        self.self_attention = MultiHeadAttention(
            self.hidden_dim, self.num_heads, self.attention_dropout, name="self_attention", dtype=self.dtype_policy
        )
        self.self_attention.build(inputs_shape)
        self.self_attention_residual = self._residual("self_attention_residual")
        self.self_attention_residual.build(inputs_shape)
        self.cross_attention = MultiHeadAttention(
            self.hidden_dim, self.num_heads, self.attention_dropout, name="cross_attention", dtype=self.dtype_policy
        )
        self.cross_attention.build(inputs_shape, encoder_output_shape)
        self.cross_attention_residual = self._residual("cross_attention_residual")
        self.cross_attention_residual.build(inputs_shape)
        self.feed_forward = PositionwiseFeedForward(
            self.hidden_dim,
            self.intermediate_dim,
            activation_dropout=self.activation_dropout,
            name="feed_forward",
            dtype=self.dtype_policy,
        )
        self.feed_forward.build(inputs_shape)
        self.feed_forward_residual = self._residual("feed_forward_residual")
        self.feed_forward_residual.build(inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        encoder_output=None,
        encoder_padding_mask=None,
        self_cache=None,
        cross_cache=None,
        cache_index=None,
        training=None,
        return_attention_scores=False,
    ):
        if encoder_output is None and cross_cache is None:
            raise ValueError(f"{self.name}: needs `encoder_output` or a precomputed `cross_cache`, received neither")
        query_length = ops.shape(inputs)[1]
        if self_cache is None:
            self_mask = causal_attention_mask(query_length, query_length)
        else:
            if cache_index is None:
                raise ValueError(f"{self.name}: `self_cache` needs `cache_index`, the position of inputs[:, 0]")
            self_mask = causal_attention_mask(query_length, self_cache.shape[2], cache_index)
        cross_mask = None if encoder_padding_mask is None else encoder_padding_mask[:, None, :]

        x = self.self_attention_residual.normalize_input(inputs)
        if self_cache is None:
            x = self.self_attention(x, attention_mask=self_mask, training=training)
        else:
            x, self_cache = self.self_attention(
                x, attention_mask=self_mask, cache=self_cache, cache_index=cache_index, training=training
            )
        x = self.self_attention_residual(inputs, x, training=training)

        y = self.cross_attention_residual.normalize_input(x)
        cross_outputs = self.cross_attention(
            y,
            encoder_output,
            attention_mask=cross_mask,
            cache=cross_cache,
            training=training,
            return_attention_scores=return_attention_scores,
        )
        # (output[, unchanged cross cache][, attention weights])
        cross_outputs = cross_outputs if isinstance(cross_outputs, tuple) else (cross_outputs,)
        y = cross_outputs[0]
        scores = cross_outputs[-1] if return_attention_scores else None
        y = self.cross_attention_residual(x, y, training=training)

        z = self.feed_forward(self.feed_forward_residual.normalize_input(y), training=training)
        outputs = (self.feed_forward_residual(y, z, training=training),)
        if self_cache is not None:
            outputs += (self_cache,)
        if return_attention_scores:
            outputs += (scores,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_shape(self, inputs_shape, encoder_output_shape=None):
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
class TransformerDecoder(keras.layers.Layer):
    """A stack of `num_layers` decoder layers (N = 6 in the paper), final LayerNorm under pre-norm.

    Args:
        num_layers: N. Defaults to 6.
        Every other argument as in `TransformerDecoderLayer`.

    Call arguments:
        inputs: embedded target `[batch, target_length, hidden_dim]`.
        encoder_output: `[batch, source_length, hidden_dim]`, or None with `cross_caches`.
        encoder_padding_mask: boolean `[batch, source_length]`, True on real source tokens.
        self_caches: optional list of `num_layers` self-attention caches (`empty_self_caches`).
        cross_caches: optional list of `num_layers` encoder keys/values (`cross_caches`).
        cache_index: absolute position of `inputs[:, 0]` when decoding with `self_caches`.
        training: whether dropout is active.
        return_attention_scores: also return the last layer's encoder-decoder attention weights
            `[batch, num_heads, target_length, source_length]`.

    Returns:
        `[batch, target_length, hidden_dim]`, plus the updated self caches when given, plus the
        attention weights when asked for.
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
        TransformerDecoderLayer(**self.layer_options)  # Validates the options now.

    def build(self, inputs_shape, encoder_output_shape=None):
        self.decoder_layers = []
        for index in range(self.num_layers):
            layer = TransformerDecoderLayer(**self.layer_options, name=f"layer_{index}", dtype=self.dtype_policy)
            layer.build(inputs_shape, encoder_output_shape)
            self.decoder_layers.append(layer)
        self.final_layer_norm = None
        if self.layer_options["normalize_first"]:
            self.final_layer_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_options["layer_norm_epsilon"], name="final_layer_norm", dtype=self.dtype_policy
            )
            self.final_layer_norm.build(inputs_shape)
        self.built = True

    def empty_self_caches(self, batch_size, cache_length):
        """Zero self-attention caches, one `[batch_size, 2, cache_length, heads, head_dim]` per layer."""
        return [layer.self_attention.empty_cache(batch_size, cache_length) for layer in self.decoder_layers]

    def cross_caches(self, encoder_output):
        """Each layer's encoder-decoder keys/values, `[batch, 2, source_length, heads, head_dim]`."""
        return [layer.cross_attention.project_key_value(encoder_output) for layer in self.decoder_layers]

    def call(
        self,
        inputs,
        encoder_output=None,
        encoder_padding_mask=None,
        self_caches=None,
        cross_caches=None,
        cache_index=None,
        training=None,
        return_attention_scores=False,
    ):
        for name, caches in (("self_caches", self_caches), ("cross_caches", cross_caches)):
            if caches is not None and len(caches) != self.num_layers:
                raise ValueError(f"{self.name}: expected {self.num_layers} {name}, received {len(caches)}")
        x = inputs
        new_self_caches = []
        scores = None
        for index, layer in enumerate(self.decoder_layers):
            outputs = layer(
                x,
                encoder_output,
                encoder_padding_mask,
                self_cache=None if self_caches is None else self_caches[index],
                cross_cache=None if cross_caches is None else cross_caches[index],
                cache_index=cache_index,
                training=training,
                return_attention_scores=return_attention_scores and index == self.num_layers - 1,
            )
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            x = outputs[0]
            if self_caches is not None:
                new_self_caches.append(outputs[1])
            if return_attention_scores and index == self.num_layers - 1:
                scores = outputs[-1]
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        results = (x,)
        if self_caches is not None:
            results += (new_self_caches,)
        if return_attention_scores:
            results += (scores,)
        return results[0] if len(results) == 1 else results

    def compute_output_shape(self, inputs_shape, encoder_output_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        config = super().get_config()
        config.update({"num_layers": self.num_layers, **self.layer_options})
        return config
