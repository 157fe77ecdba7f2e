"""Multi-head scaled dot-product attention with a preallocated decoding cache.

Vaswani et al. (2017), sections 3.2.1 and 3.2.2:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

with h = `num_heads` heads of d_k = d_v = d_model / h (`hidden_dim / num_heads`). The key and value
projections are one fused matmul (`key_value`, d_model -> 2 d_model); the attention itself goes
through `keras.ops.dot_product_attention`, which runs a fused kernel where the backend has one and
always takes its softmax in float32.

Caches. Keys and values are kept as one tensor `[batch, 2, cache_length, num_heads, head_dim]`
(index 0 keys, 1 values):
- self-attention while decoding: the caller preallocates `cache_length` positions
  (`empty_cache`); each call writes the keys/values of its new query positions at `cache_index`
  and attends over the whole buffer under the caller's mask (fixed shapes: XLA compiles one
  program for every step);
- encoder-decoder attention: `project_key_value(encoder_output)` is computed once per sentence
  and passed as `cache` with `cache_index=None`; it is read, never written.
"""

import math

import keras
from keras import ops


def concrete_int(value):
    """Returns `value` as a Python int when it is known outside a trace, else None."""
    if isinstance(value, int):
        return value
    try:
        return int(value)
    except Exception:  # A symbolic TF tensor or a JAX tracer: known only at run time.
        return None


@keras.saving.register_keras_serializable(package="transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention (section 3.2.2) with boolean masks and a key/value cache.

    Args:
        hidden_dim: d_model, the width of queries, keys, values and output. Defaults to 512.
        num_heads: h. Must divide `hidden_dim`. Defaults to 8.
        attention_dropout: dropout on the attention weights. The paper has none (0.0, the default);
            tensor2tensor's later recipes use 0.1. A non-zero value computes attention without the
            fused kernel.
        use_bias: whether the four projections have biases. Defaults to True.
        kernel_initializer: initializer of the projection kernels. Defaults to "glorot_uniform".

    Call arguments:
        query: `[batch, query_length, hidden_dim]`.
        key_value: `[batch, key_length, hidden_dim]`; None for self-attention (keys and values
            come from `query`). Ignored when `cache` holds encoder keys/values.
        attention_mask: optional boolean `[batch, query_length, key_length]` (or broadcastable to
            it, e.g. `[1, query_length, key_length]`); True where a query may attend to a key.
            With a cache, `key_length` is the cache length.
        cache: optional `[batch, 2, cache_length, num_heads, head_dim]` keys/values.
        cache_index: with `cache`: the position at which this call's keys/values are written
            (self-attention decoding). None means `cache` holds precomputed encoder keys/values.
        training: whether dropout is active.
        return_attention_scores: also return the `[batch, num_heads, query_length, key_length]`
            float32 attention weights (computed without the fused kernel).

    Returns:
        `[batch, query_length, hidden_dim]`, then the updated cache if `cache` was given, then the
        attention weights if asked for.
    """

    def __init__(
        self,
        hidden_dim=512,
        num_heads=8,
        attention_dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        if not isinstance(num_heads, int) or num_heads < 1:
            raise ValueError(f"num_heads must be a positive int, received {num_heads!r}")
        if not isinstance(hidden_dim, int) or hidden_dim < 1 or hidden_dim % num_heads:
            raise ValueError(
                f"hidden_dim (d_model) must be a positive multiple of num_heads={num_heads}, "
                f"received hidden_dim={hidden_dim!r}"
            )
        self.hidden_dim = hidden_dim
        self.num_heads = num_heads
        self.head_dim = hidden_dim // num_heads
        self.attention_dropout = attention_dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _dense(self, units, name):
        return keras.layers.Dense(
            units,
            use_bias=self.use_bias,
            kernel_initializer=keras.initializers.get(keras.initializers.serialize(self.kernel_initializer)),
            name=name,
            dtype=self.dtype_policy,
        )

    def build(self, query_shape, key_value_shape=None):
        key_value_shape = query_shape if key_value_shape is None else key_value_shape
        self.query_dense = self._dense(self.hidden_dim, "query")
        self.query_dense.build(query_shape)
        self.key_value_dense = self._dense(2 * self.hidden_dim, "key_value")
        self.key_value_dense.build(key_value_shape)
        self.output_dense = self._dense(self.hidden_dim, "output")
        self.output_dense.build(tuple(query_shape[:-1]) + (self.hidden_dim,))
        self.dropout_layer = keras.layers.Dropout(self.attention_dropout, name="attention_dropout", dtype=self.dtype_policy)
        self.built = True

    def empty_cache(self, batch_size, cache_length):
        """A zero self-attention cache `[batch_size, 2, cache_length, num_heads, head_dim]`."""
        return ops.zeros((batch_size, 2, cache_length, self.num_heads, self.head_dim), dtype=self.compute_dtype)

    def project_key_value(self, key_value):
        """Keys and values of `[batch, length, hidden_dim]` as `[batch, 2, length, heads, head_dim]`."""
        return ops.transpose(self._key_value_heads(key_value), (0, 2, 1, 3, 4))

    def _key_value_heads(self, key_value):
        """The fused key/value projection as `[batch, length, 2, heads, head_dim]`."""
        self._check_rank3(key_value, "key_value")
        projected = self.key_value_dense(key_value)
        batch, length = ops.shape(projected)[0], ops.shape(projected)[1]
        return ops.reshape(projected, (batch, length, 2, self.num_heads, self.head_dim))

    def _check_rank3(self, tensor, name):
        if len(tensor.shape) != 3:
            raise ValueError(
                f"{self.name}: `{name}` must have rank 3 [batch, length, hidden_dim], received shape {tensor.shape}"
            )
        if tensor.shape[-1] is not None and tensor.shape[-1] != self.hidden_dim:
            raise ValueError(
                f"{self.name}: `{name}` must have last dimension hidden_dim={self.hidden_dim}, "
                f"received shape {tensor.shape}"
            )

    def _check_mask(self, attention_mask):
        if attention_mask is None:
            return None
        if len(attention_mask.shape) != 3:
            raise ValueError(
                f"{self.name}: attention_mask must have rank 3 [batch, query_length, key_length], "
                f"received shape {attention_mask.shape}"
            )
        if "bool" not in str(attention_mask.dtype):
            raise ValueError(f"{self.name}: attention_mask must be boolean, received dtype {keras.backend.standardize_dtype(attention_mask.dtype)}")
        return attention_mask[:, None, :, :]  # [batch, 1 (heads), query_length, key_length]

    def call(
        self,
        query,
        key_value=None,
        attention_mask=None,
        cache=None,
        cache_index=None,
        training=None,
        return_attention_scores=False,
    ):
        self._check_rank3(query, "query")
        mask = self._check_mask(attention_mask)
        batch, query_length = ops.shape(query)[0], ops.shape(query)[1]
        queries = ops.reshape(self.query_dense(query), (batch, query_length, self.num_heads, self.head_dim))

        if cache is not None and cache_index is None:
            keys, values = ops.unstack(cache, 2, axis=1)  # Precomputed encoder keys/values.
        elif cache is not None:
            if len(cache.shape) != 5 or cache.shape[1] != 2:
                raise ValueError(
                    f"{self.name}: cache must have shape [batch, 2, cache_length, {self.num_heads}, "
                    f"{self.head_dim}], received {cache.shape}"
                )
            start = concrete_int(cache_index)
            cache_length = cache.shape[2]
            if start is not None and cache_length is not None and query.shape[1] is not None:
                if start < 0 or start + query.shape[1] > cache_length:
                    raise ValueError(
                        f"{self.name}: decoding positions [{start}, {start + query.shape[1]}) do not fit "
                        f"in a cache of length {cache_length}; expected 0 <= cache_index <= "
                        f"{cache_length - query.shape[1]}"
                    )
            new_key_values = ops.cast(self.project_key_value(query), cache.dtype)
            # A gather and a select rather than ops.slice_update, which TensorFlow runs as
            # XlaDynamicUpdateSlice, an XLA op that the SavedModel for TensorFlow Serving must not
            # hold (export/). Same values; O(cache_length) per step, like the attention itself.
            offsets = ops.arange(ops.shape(cache)[2], dtype="int32") - ops.cast(cache_index, "int32")
            in_window = ops.logical_and(offsets >= 0, offsets < query_length)  # [cache_length]
            if query.shape[1] == 1:  # One decoding step: the new position broadcasts over the cache.
                window = new_key_values
            else:
                window = ops.take(new_key_values, ops.clip(offsets, 0, query_length - 1), axis=2)
            cache = ops.where(in_window[None, None, :, None, None], window, cache)
            keys, values = ops.unstack(cache, 2, axis=1)  # [batch, cache_length, heads, head_dim]
        else:
            # Training and full passes: unstack [batch, length, 2, heads, head_dim], whose gradient
            # is one stack; strided slices cost TensorFlow a zero-filled StridedSliceGrad per slice
            # (a fifth of a CPU training step, benchmarks/README.md).
            source = query if key_value is None else key_value
            keys, values = ops.unstack(self._key_value_heads(source), 2, axis=2)
        scale = 1.0 / math.sqrt(self.head_dim)
        scores = None
        if return_attention_scores or (self.attention_dropout > 0 and training):
            logits = ops.einsum("btnh,bsnh->bnts", ops.cast(queries, "float32"), ops.cast(keys, "float32")) * scale
            if mask is not None:
                logits = ops.where(mask, logits, ops.full_like(logits, -1e9))
            scores = ops.softmax(logits, axis=-1)
            weights = ops.cast(self.dropout_layer(scores, training=training), self.compute_dtype)
            attended = ops.einsum("bnts,bsnh->btnh", weights, values)
        else:
            # XLA's fused softmax, not cuDNN flash attention: at bucket lengths (tens of tokens)
            # the cuDNN kernel, with the boolean mask turned into an additive bias, measured slower
            # on an H100 (benchmarks/README.md).
            attended = ops.dot_product_attention(queries, keys, values, mask=mask, scale=scale, flash_attention=False)
        attended = ops.reshape(attended, (batch, query_length, self.hidden_dim))
        outputs = (self.output_dense(attended),)
        if cache is not None:
            outputs += (cache,)
        if return_attention_scores:
            outputs += (scores,)
        return outputs[0] if len(outputs) == 1 else outputs

    def compute_output_shape(self, query_shape, key_value_shape=None):
        return tuple(query_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "hidden_dim": self.hidden_dim,
                "num_heads": self.num_heads,
                "attention_dropout": self.attention_dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
