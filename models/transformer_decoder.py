"""Decoder layer and decoder stack (Vaswani et al., 2017, Section 3.1).

Masked self-attention, encoder-decoder attention and feed-forward, each with residual dropout and
layer normalization. For incremental decoding, `empty_self_caches` preallocates the self caches and
`cross_caches` projects the encoder output once."""

import keras
from keras import ops

from models import attention_cache
from models.attention_cache import concrete_int
from models.layer_stack import TransformerLayerBase, TransformerStackBase
from models.multi_head_attention import GroupedBias, grouped_bias
from models.shapes import dimension


def causal_attention_mask(query_length, key_length, start_position=0):
    """Boolean `[1, query_length, key_length]`: query t (at absolute position start + t) sees keys <= it."""
    query_positions = ops.arange(query_length) + ops.cast(start_position, "int32")
    key_positions = ops.arange(key_length)
    return (key_positions[None, :] <= query_positions[:, None])[None]


@keras.saving.register_keras_serializable(package="transformer")
class TransformerDecoderLayer(TransformerLayerBase):
    """One decoder layer (Section 3.1).

    Args: those of `TransformerLayerBase` (`models/layer_stack.py`).

    Call arguments:
        inputs: `[batch, target_length, hidden_dim]`, a whole prefix or the new positions.
        encoder_output: `[batch, source_length, hidden_dim]`; may be None with `cross_cache`.
        encoder_padding_mask: boolean `[batch, source_length]`, True on real tokens, or with
            `cross_cache` its `GroupedBias` (`models.multi_head_attention.grouped_bias`).
        self_cache: optional `(keys, values)`, each `[batch, num_heads, cache_length, head_dim]`,
            or `[batch / n, ...]` with `n` slots per row (beam search; needs `self_attention_mask`).
        cross_cache: optional encoder `(keys, values)`, each `[batch or batch / n, num_heads,
            source_length, head_dim]`.
        cache_index: absolute position of `inputs[:, 0]` with `self_cache`, or its
            `attention_cache.PlannedWrite`.
        self_attention_mask: optional boolean `[batch, target_length, key_length]` replacing the
            causal mask, or with `self_cache` its `GroupedBias`.

    Returns:
        `[batch, target_length, hidden_dim]`, plus the updated self cache when given.
    """

    def build(self, inputs_shape, encoder_output_shape=None):
        encoder_output_shape = inputs_shape if encoder_output_shape is None else encoder_output_shape
        self.self_attention = self._build_attention("self_attention", inputs_shape)
        self.self_attention_residual = self._build_residual("self_attention_residual", inputs_shape)
        self.cross_attention = self._build_attention("cross_attention", inputs_shape, encoder_output_shape)
        self.cross_attention_residual = self._build_residual("cross_attention_residual", inputs_shape)
        self.feed_forward = self._build_feed_forward(inputs_shape)
        self.feed_forward_residual = self._build_residual("feed_forward_residual", inputs_shape)
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
        self_attention_mask=None,
    ):
        if encoder_output is None and cross_cache is None:
            raise ValueError(f"{self.name}: needs `encoder_output` or a precomputed `cross_cache`, received neither")
        query_length = ops.shape(inputs)[1]
        if self_cache is not None and cache_index is None:
            raise ValueError(f"{self.name}: `self_cache` needs `cache_index`, the position of inputs[:, 0]")
        if self_attention_mask is not None:
            self_mask = self_attention_mask
        elif self_cache is not None and concrete_int(self_cache[0].shape[0]) not in (
            None,
            concrete_int(inputs.shape[0]),
        ):
            raise ValueError(
                f"{self.name}: a self cache of {self_cache[0].shape[0]} rows for {inputs.shape[0]} input rows "
                "holds one slot per row and needs `self_attention_mask` (the causal mask sees slot 0 only)"
            )
        elif self_cache is None:
            self_mask = causal_attention_mask(query_length, query_length)
        else:
            self_mask = causal_attention_mask(
                query_length, dimension(self_cache[0], 2), attention_cache.position_of(cache_index)
            )
        cross_mask = encoder_padding_mask
        if encoder_padding_mask is not None and not isinstance(encoder_padding_mask, GroupedBias):
            cross_mask = encoder_padding_mask[:, None, :]

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


@keras.saving.register_keras_serializable(package="transformer")
class TransformerDecoder(TransformerStackBase):
    """A stack of `num_layers` decoder layers (Section 3.1), final LayerNorm under pre-norm.

    Args:
        num_layers: N. Defaults to 6. The rest as `TransformerDecoderLayer`.

    Call arguments: as `TransformerDecoderLayer`, with per-layer lists `self_caches` and
    `cross_caches`; `return_attention_scores` also returns layer `attention_layer`'s (-1: the last)
    weights `[batch, num_heads, target_length, source_length]`.

    Returns:
        `[batch, target_length, hidden_dim]`, plus the updated self caches when given, plus the
        attention weights when asked for.
    """

    layer_class = TransformerDecoderLayer

    def build(self, inputs_shape, encoder_output_shape=None):
        self._build_layers("decoder_layers", inputs_shape, encoder_output_shape)

    def empty_self_caches(self, batch_size, cache_length):
        """Zero self caches, per layer `(keys, values)` of `[batch_size, heads, cache_length, head_dim]`."""
        return [layer.self_attention.empty_cache(batch_size, cache_length) for layer in self.decoder_layers]

    def cross_caches(self, encoder_output):
        """Each layer's encoder-decoder `(keys, values)`, each `[batch, heads, source_length, head_dim]`."""
        return [layer.cross_attention.project_key_value(encoder_output) for layer in self.decoder_layers]

    def self_cache_keys(self, self_caches):
        """The keys of the first layer's self cache, whose shape every layer's shares (else ValueError)."""
        return self._shared_keys(self_caches, "self")

    def _shared_keys(self, caches, kind):
        """The keys of the first of `caches`, or ValueError when the layers' caches differ in shape."""
        shapes = {tuple(keys.shape) for keys, _ in caches}
        if len(shapes) > 1:
            raise ValueError(f"{self.name}: the {kind} caches must share one shape, received {sorted(shapes, key=str)}")
        return caches[0][0]

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
        self_attention_mask=None,
        attention_layer=-1,
    ):
        for name, caches in (("self_caches", self_caches), ("cross_caches", cross_caches)):
            if caches is not None and len(caches) != self.num_layers:
                raise ValueError(f"{self.name}: expected {self.num_layers} {name}, received {len(caches)}")
        if not -self.num_layers <= attention_layer < self.num_layers:
            raise ValueError(
                f"{self.name}: attention_layer must be in [-{self.num_layers}, {self.num_layers - 1}], "
                f"received {attention_layer}"
            )
        scored = attention_layer % self.num_layers if return_attention_scores else None
        if self_caches is not None or cross_caches is not None:
            rows, length = dimension(inputs, 0), dimension(inputs, 1)
        # What is the same in every layer is made once for them all: where a decoding call writes
        # its keys and values, and the masks as the biases each layer adds to its logits.
        # A search may hand both in made (`attention_cache.shift_plan`, a `GroupedBias`).
        if self_caches is not None and cache_index is not None:
            keys = self.self_cache_keys(self_caches)
            if not isinstance(cache_index, attention_cache.PlannedWrite):
                cache_index = attention_cache.plan_write(keys, rows, length, cache_index, self.name)
            if self_attention_mask is not None and not isinstance(self_attention_mask, GroupedBias):
                self_attention_mask = grouped_bias(self_attention_mask, rows, length, keys, self.name)
        if (
            cross_caches is not None
            and encoder_padding_mask is not None
            and not isinstance(encoder_padding_mask, GroupedBias)
        ):
            keys = self._shared_keys(cross_caches, "cross")
            encoder_padding_mask = grouped_bias(encoder_padding_mask[:, None, :], rows, length, keys, self.name)
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
                return_attention_scores=index == scored,
                self_attention_mask=self_attention_mask,
            )
            if not isinstance(outputs, tuple):
                outputs = (outputs,)
            x = outputs[0]
            if self_caches is not None:
                new_self_caches.append(outputs[1])
            if index == scored:
                scores = outputs[-1]
        results = (self._final_norm(x),)
        if self_caches is not None:
            results += (new_self_caches,)
        if return_attention_scores:
            results += (scores,)
        return results[0] if len(results) == 1 else results
