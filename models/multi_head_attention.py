"""Multi-head scaled dot-product attention with a preallocated decoding cache.

Vaswani et al. (2017), sections 3.2.1 and 3.2.2:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

with h = `num_heads` heads of d_k = d_v = d_model / h. Keys and values share one fused projection
(`key_value`). Logits and softmax are always float32: under JAX in training and full passes through
`keras.ops.dot_product_attention` (XLA's fused softmax), otherwise as two batched matmuls over
head-major keys and values (`_attend`), which TensorFlow runs faster than the einsums of its
`dot_product_attention`. The caches' layout and writes are `models/attention_cache.py`'s.
"""

import math

import keras
from keras import ops

from models import attention_cache
from models.fast_paths.bit_mask_dropout import Dropout
from models.fast_paths.fused_dense import Dense


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
        cache: optional `(keys, values)`, each `[batch, num_heads, cache_length, head_dim]`. It may
            have `batch / n` rows, each shared by `n` consecutive query rows: encoder keys/values
            (`cache_index=None`) read by all `n`, or a self cache of `n` slots of `cache_length / n`
            positions, query row `r` writing slot `r % n` (the mask then says which slots' positions
            each row reads).
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
        return Dense(
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
        self.dropout_layer = Dropout(self.attention_dropout, name="attention_dropout", dtype=self.dtype_policy)
        self.built = True

    def empty_cache(self, batch_size, cache_length):
        """A zero self-attention cache: `(keys, values)`, each `[batch_size, heads, cache_length, head_dim]`."""
        return attention_cache.empty_cache(batch_size, self.num_heads, cache_length, self.head_dim, self.compute_dtype)

    def project_key_value(self, key_value):
        """`(keys, values)` of `[batch, length, hidden_dim]`, each `[batch, heads, length, head_dim]`."""
        keys, values = ops.unstack(ops.transpose(self._key_value_heads(key_value), (2, 0, 3, 1, 4)), 2, axis=0)
        return keys, values

    def _key_value_heads(self, key_value):
        """The fused key/value projection as `[batch, length, 2, heads, head_dim]`."""
        self._check_rank3(key_value, "key_value")
        projected = self.key_value_dense(key_value)
        batch, length = ops.shape(projected)[0], ops.shape(projected)[1]
        return ops.reshape(projected, (batch, length, 2, self.num_heads, self.head_dim))

    def _key_and_value_heads(self, key_value):
        """Keys and values `[batch, length, heads, head_dim]`, each from its half of the fused kernel.

        The same weights and result as splitting `key_value_dense`'s output, with two matmuls over
        contiguous kernel halves: under XLA the split of the fused output is a strided copy of every
        key/value projection and of its gradient; slicing the `[hidden, 2 * hidden]` kernel instead
        costs next to nothing.
        """
        self._check_rank3(key_value, "key_value")
        batch, length = ops.shape(key_value)[0], ops.shape(key_value)[1]
        return tuple(
            ops.reshape(
                self.key_value_dense.project_columns(key_value, start, start + self.hidden_dim),
                (batch, length, self.num_heads, self.head_dim),
            )
            for start in (0, self.hidden_dim)
        )

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
            raise ValueError(
                f"{self.name}: attention_mask must be boolean, received dtype {keras.backend.standardize_dtype(attention_mask.dtype)}"
            )
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

        scale = 1.0 / math.sqrt(self.head_dim)
        scores = None
        if cache is not None:
            cache = attention_cache.check_cache(cache, self.num_heads, self.head_dim, self.name)
            if cache_index is not None:  # Self-attention decoding; else precomputed encoder keys/values.
                new_keys, new_values = self.project_key_value(query)  # [batch, heads, length, head_dim]
                cache = attention_cache.write_cache(cache, new_keys, new_values, cache_index, self.name)
            attended, scores = self._attend_shared(queries, *cache, attention_mask, scale, training)
        else:
            # Training and full passes. TensorFlow (and LoRA or quantized projections): one matmul,
            # its output [batch, length, 2, heads, head_dim] unstacked, whose gradient is one stack
            # (strided slices cost TensorFlow a zero-filled StridedSliceGrad per slice). Other
            # backends: a matmul per half of the kernel, no copy of the output under XLA.
            source = query if key_value is None else key_value
            # TensorFlow: head-major keys and values and two batched matmuls, which its graph runs
            # faster than the einsums of ops.dot_product_attention over [batch, length, heads,
            # head_dim] operands, the keys and values made head-major by one transpose of the fused
            # projection before the unstack, which then splits contiguous halves.
            explicit = return_attention_scores or (self.attention_dropout > 0 and training)
            on_tensorflow = keras.backend.backend() == "tensorflow"
            head_major = explicit or on_tensorflow
            if on_tensorflow or not self.key_value_dense.plain:
                if head_major:
                    keys, values = self.project_key_value(source)
                else:
                    keys, values = ops.unstack(self._key_value_heads(source), 2, axis=2)
            else:
                keys, values = self._key_and_value_heads(source)
                if head_major:
                    keys, values = (ops.transpose(x, (0, 2, 1, 3)) for x in (keys, values))
            if head_major:
                attended, scores = self._attend(queries, keys, values, mask, scale, training)
            else:
                # XLA's fused softmax, not cuDNN flash attention: at bucket lengths (tens of tokens)
                # the cuDNN kernel, with the boolean mask turned into an additive bias, is slower.
                attended = ops.dot_product_attention(
                    queries, keys, values, mask=mask, scale=scale, flash_attention=False
                )
        attended = ops.reshape(attended, (batch, query_length, self.hidden_dim))
        outputs = (self.output_dense(attended),)
        if cache is not None:
            outputs += (cache,)
        if return_attention_scores:
            outputs += (scores,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _attend(self, queries, keys, values, mask, scale, training):
        """Attention of `[batch, query_length, heads, head_dim]` queries over head-major keys/values
        `[batch, heads, key_length, head_dim]`: two batched matmuls with no transpose of the keys or
        values (TensorFlow's einsum would copy a `[batch, length, heads, head_dim]` cache into this
        layout at every decoding step). Logits and softmax in float32, as in
        `ops.dot_product_attention`. Returns the attended values `[batch, query_length, heads,
        head_dim]` and the float32 weights `[batch, heads, query_length, key_length]`.
        """
        queries = ops.transpose(queries, (0, 2, 1, 3))  # [batch, heads, query_length, head_dim]
        logits = ops.cast(ops.einsum("bnth,bnsh->bnts", queries, keys), "float32") * scale
        if mask is not None:
            # An additive bias, not a select on the logits: the sum's gradient is the upstream
            # itself, where a select's is another select over the [batch, heads, query, key] float32
            # gradient (TensorFlow runs each as a kernel of its own).
            logits = logits + ops.where(mask, 0.0, -1e9)
        weights = ops.softmax(logits, axis=-1)
        dropped = ops.cast(self.dropout_layer(weights, training=training), values.dtype)
        attended = ops.einsum("bnts,bnsh->bnth", dropped, values)
        return ops.transpose(attended, (0, 2, 1, 3)), weights

    def _attend_shared(self, queries, keys, values, attention_mask, scale, training):
        """`_attend` over keys/values that several consecutive query rows share.

        Beam search decodes `batch * beam` hypotheses (rows `b * beam + k`) with caches of `batch`
        rows (`models/translation.py`): the encoder keys/values of each sentence, and self caches
        of `beam` slots per sentence (`models.attention_cache.write_cache`). The beams' queries of
        a sentence are stacked into one `[beam * query_length, head_dim]` operand per head, so each
        sentence's keys and values are read once per step for all its beams, and the mask (`[query_batch,
        query_length, key_length]`, per query row) says which keys each row sees: for self
        caches, the positions of its ancestors' slots. With as many key rows as query rows it is
        `_attend`. The weights come back per query row, `[query_batch, heads, query_length,
        key_length]`.
        """
        query_batch, query_length = ops.shape(queries)[0], ops.shape(queries)[1]
        key_batch, key_length = ops.shape(keys)[0], ops.shape(keys)[2]
        groups = attention_cache.rows_per_cache_row(queries, keys, self.name)
        if isinstance(groups, int) and groups == 1:
            return self._attend(queries, keys, values, self._check_mask(attention_mask), scale, training)
        grouped = ops.reshape(queries, (key_batch, groups * query_length, self.num_heads, self.head_dim))
        mask = None
        if attention_mask is not None:
            self._check_mask(attention_mask)
            mask = ops.broadcast_to(attention_mask, (query_batch, query_length, key_length))
            mask = ops.reshape(mask, (key_batch, groups * query_length, key_length))[:, None, :, :]
        attended, weights = self._attend(grouped, keys, values, mask, scale, training)
        attended = ops.reshape(attended, (query_batch, query_length, self.num_heads, self.head_dim))
        weights = ops.reshape(weights, (key_batch, self.num_heads, groups, query_length, key_length))
        weights = ops.reshape(
            ops.transpose(weights, (0, 2, 1, 3, 4)), (query_batch, self.num_heads, query_length, key_length)
        )
        return attended, weights

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
