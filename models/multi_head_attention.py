"""Multi-head scaled dot-product attention (Sections 3.2.1, 3.2.2) with a preallocated cache.

Keys and values share one fused projection; logits and softmax are float32. The cache layout is
`models/attention_cache.py`'s; docs/design.md says which attention kernel runs where."""

import math
from typing import Any, NamedTuple

import keras
from keras import ops

from models import attention_cache
from models.fast_paths.bit_mask_dropout import Dropout
from models.fast_paths.fused_dense import Dense
from models.shapes import dimension, leading

# The additive bias of a masked-out key: its weight underflows to 0 after the softmax.
MASKED_BIAS = -1e9


class GroupedBias(NamedTuple):
    """An attention mask made once for the cached attention of several layers (`grouped_bias`), so
    that each layer adds it to its logits as it is. Tensors only (a Keras call argument)."""

    bias: Any  # float32 [cache_rows, 1, group_rows, key_length]: 0 where a query may attend
    cache_rows: Any  # int32 scalar: rows of the caches it was made for (read where not static)
    group_rows: Any  # int32 scalar: query rows per cache row times the query length (the same)


def grouped_bias(attention_mask, query_rows, query_length, keys, name):
    """The `GroupedBias` of a boolean `attention_mask` `[query_rows, query_length, key_length]` (or
    broadcastable) over caches shaped as `keys` (`[cache_rows, heads, key_length, head_dim]`), whose
    row r serves query rows `r * n` to `r * n + n - 1` (`_attend_shared`); `query_rows` and
    `query_length` are ints or int32 scalars. Raises ValueError (naming layer `name`) when the query
    rows are not a multiple of the cache rows."""
    check_mask(attention_mask, name)
    groups = attention_cache.rows_per_cache_row(query_rows, keys, name)
    cache_rows, key_length = dimension(keys, 0), dimension(keys, 2)
    group_rows = groups * query_length
    mask = ops.broadcast_to(attention_mask, (query_rows, query_length, key_length))
    return rows_bias(ops.reshape(mask, (cache_rows, group_rows, key_length)), cache_rows, group_rows)


def rows_bias(grouped_mask, cache_rows, group_rows):
    """The `GroupedBias` of a boolean mask already grouped by cache row, `[cache_rows, group_rows,
    key_length]` (`group_rows`: query rows per cache row times the query length), row r's group the
    query rows `r * n` to `r * n + n - 1` (`grouped_bias` of the ungrouped mask); `cache_rows` and
    `group_rows` are ints or int32 scalars."""
    return GroupedBias(
        _additive(grouped_mask)[:, None, :, :],
        ops.convert_to_tensor(cache_rows, "int32"),
        ops.convert_to_tensor(group_rows, "int32"),
    )


def shared_key_bias(key_mask, group_rows):
    """The `GroupedBias` for caches with one row per row of `key_mask` (boolean `[cache_rows,
    key_length]`, True where a key may be attended), whose `group_rows` query rows (an int: query
    rows per cache row times the query length) all see those keys: the encoder padding mask of a
    search, made once for all its steps. Equal to `grouped_bias` of the mask repeated per query row."""
    cache_rows, key_length = dimension(key_mask, 0), dimension(key_mask, 1)
    mask = ops.broadcast_to(key_mask[:, None, :], (cache_rows, group_rows, key_length))
    return rows_bias(mask, cache_rows, group_rows)


def check_mask(attention_mask, name):
    """`attention_mask` itself, or ValueError (naming layer `name`) when it is not a boolean
    `[batch, query_length, key_length]`."""
    if len(attention_mask.shape) != 3:
        raise ValueError(
            f"{name}: attention_mask must have rank 3 [batch, query_length, key_length], "
            f"received shape {attention_mask.shape}"
        )
    if "bool" not in str(attention_mask.dtype):
        raise ValueError(
            f"{name}: attention_mask must be boolean, received dtype {keras.backend.standardize_dtype(attention_mask.dtype)}"
        )
    return attention_mask


def _over_batch(bias, logits):
    """`bias` `[1, ...]` (the causal mask of a full pass) broadcast over the batch of `logits`;
    any other bias as it is. TensorFlow's oneDNN rewrite fuses the add into the batched matmul, and
    that kernel adds a bias broadcast over the batch 20-60 times slower than one with the batch's
    rows (docs/design.md, "The model")."""
    if bias.shape[0] != 1 or logits.shape[0] == 1:
        return bias
    return ops.broadcast_to(bias, (dimension(logits, 0),) + tuple(dimension(bias, axis) for axis in (1, 2, 3)))


def _additive(mask):
    """float32 0 where boolean `mask` is True, `MASKED_BIAS` elsewhere."""
    return ops.where(mask, 0.0, MASKED_BIAS)


@keras.saving.register_keras_serializable(package="transformer")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention (Section 3.2.2) with boolean masks and a key/value cache.

    Args:
        hidden_dim: d_model. Defaults to 512.
        num_heads: h; must divide `hidden_dim`. Defaults to 8.
        attention_dropout: on the attention weights (the paper has none). Defaults to 0.0.
        use_bias: whether the projections have biases. Defaults to True.
        kernel_initializer: defaults to "glorot_uniform".

    Call arguments:
        query: `[batch, query_length, hidden_dim]`.
        key_value: `[batch, key_length, hidden_dim]`; None for self-attention.
        attention_mask: optional boolean `[batch, query_length, key_length]` (or broadcastable);
            True where a query may attend; with a cache, `key_length` is the cache length, and the
            mask may come as the `GroupedBias` of the caches' shape (`grouped_bias`).
        cache: optional `(keys, values)`, each `[batch, num_heads, cache_length, head_dim]`, possibly
            with one row per `n` query rows (beam search: `_attend_shared`).
        cache_index: where this call's keys/values are written; None: `cache` holds encoder
            keys/values.
        return_attention_scores: also return the float32 weights `[batch, num_heads,
            query_length, key_length]`.

    Returns:
        `[batch, query_length, hidden_dim]`, then the updated cache if given, then the weights if
        asked for.
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

    def _new_keys_and_values(self, query):
        """`project_key_value(query)`; a single position (a decoding step) without the transpose,
        since `[batch, 1, 2, heads, head_dim]` holds its values in the order of `[batch, 2, heads,
        1, head_dim]`."""
        if query.shape[1] != 1:
            return self.project_key_value(query)
        self._check_rank3(query, "query")
        projected = self.key_value_dense(query)
        heads = ops.reshape(projected, leading(projected, 1) + (2, self.num_heads, 1, self.head_dim))
        keys, values = ops.unstack(heads, 2, axis=1)
        return keys, values

    def _key_value_heads(self, key_value):
        """The fused key/value projection as `[batch, length, 2, heads, head_dim]`."""
        self._check_rank3(key_value, "key_value")
        projected = self.key_value_dense(key_value)
        return ops.reshape(projected, leading(projected, 2) + (2, self.num_heads, self.head_dim))

    def _key_and_value_heads(self, key_value):
        """Keys and values `[batch, length, heads, head_dim]`, each from its half of the fused
        kernel (slicing the kernel is cheaper under XLA than splitting the output)."""
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
        if attention_mask is None or isinstance(attention_mask, GroupedBias):
            return attention_mask
        return check_mask(attention_mask, self.name)[:, None, :, :]  # [batch, 1 (heads), query_length, key_length]

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
        queries = ops.reshape(self.query_dense(query), leading(query, 2) + (self.num_heads, self.head_dim))

        scale = 1.0 / math.sqrt(self.head_dim)
        scores = None
        if cache is not None:
            cache = attention_cache.check_cache(cache, self.num_heads, self.head_dim, self.name)
            if cache_index is not None:  # Self-attention decoding; else precomputed encoder keys/values.
                new_keys, new_values = self._new_keys_and_values(query)  # [batch, heads, length, head_dim]
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
                bias = None if mask is None else _additive(mask)
                attended, scores = self._attend(queries, keys, values, bias, scale, training)
            else:
                # XLA's fused softmax, not cuDNN flash attention: at bucket lengths (tens of tokens)
                # the cuDNN kernel, with the boolean mask turned into an additive bias, is slower.
                attended = ops.dot_product_attention(
                    queries, keys, values, mask=mask, scale=scale, flash_attention=False
                )
        attended = ops.reshape(attended, leading(query, 2) + (self.hidden_dim,))
        outputs = (self.output_dense(attended),)
        if cache is not None:
            outputs += (cache,)
        if return_attention_scores:
            outputs += (scores,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _attend(self, queries, keys, values, bias, scale, training):
        """`[batch, query_length, heads, head_dim]` queries over head-major `[batch, heads,
        key_length, head_dim]` keys/values, as two batched matmuls (no per-step cache transpose).
        Returns the values `[batch, query_length, heads, head_dim]` and float32 weights
        `[batch, heads, query_length, key_length]`."""
        queries = ops.transpose(queries, (0, 2, 1, 3))  # [batch, heads, query_length, head_dim]
        logits = ops.cast(ops.einsum("bnth,bnsh->bnts", queries, keys), "float32") * scale
        if bias is not None:
            # An additive bias, not a select on the logits: the sum's gradient is the upstream
            # itself, where a select's is another select over the [batch, heads, query, key] float32
            # gradient (TensorFlow runs each as a kernel of its own). A `GroupedBias` reaches a
            # mixed-precision layer autocast to its compute dtype: -1e9 masks there as well.
            logits = logits + _over_batch(ops.cast(bias, "float32"), logits)
        weights = ops.softmax(logits, axis=-1)
        dropped = ops.cast(self.dropout_layer(weights, training=training), values.dtype)
        attended = ops.einsum("bnts,bnsh->bnth", dropped, values)
        return ops.transpose(attended, (0, 2, 1, 3)), weights

    def _attend_shared(self, queries, keys, values, attention_mask, scale, training):
        """`_attend` over keys/values shared by `n` consecutive query rows (beam `k` of sentence `b`
        is row `b * beam + k`; caches have `batch` rows). Each sentence's beams' queries are stacked
        into one operand, so its keys and values are read once per step; the per-row mask
        `[query_batch, query_length, key_length]`, or its `GroupedBias` for these caches, selects
        each row's slots. Weights come back per query row."""
        query_rows, query_length = dimension(queries, 0), dimension(queries, 1)
        if isinstance(attention_mask, GroupedBias):
            bias, cache_rows, group_rows = attention_mask
            # Static sizes where the bias has them (JAX reshapes take no traced sizes).
            cache_rows = cache_rows if bias.shape[0] is None else bias.shape[0]
            group_rows = group_rows if bias.shape[2] is None else bias.shape[2]
        else:
            groups = attention_cache.rows_per_cache_row(query_rows, keys, self.name)
            if isinstance(groups, int) and groups == 1:
                mask = self._check_mask(attention_mask)
                bias = None if mask is None else _additive(mask)
                return self._attend(queries, keys, values, bias, scale, training)
            if attention_mask is None:
                bias, cache_rows, group_rows = None, dimension(keys, 0), groups * query_length
            else:
                bias, cache_rows, group_rows = grouped_bias(attention_mask, query_rows, query_length, keys, self.name)
        # -1 for the rows where the group is static: a traced size costs a graph shape ops per call.
        rows = -1 if isinstance(group_rows, int) else cache_rows
        grouped = ops.reshape(queries, (rows, group_rows, self.num_heads, self.head_dim))
        attended, weights = self._attend(grouped, keys, values, bias, scale, training)
        attended = ops.reshape(attended, leading(queries, 2) + (self.num_heads, self.head_dim))
        key_length = dimension(keys, 2)
        static = isinstance(group_rows, int) and isinstance(query_length, int)
        groups = group_rows // query_length if static else ops.floor_divide(group_rows, query_length)
        weights = ops.reshape(weights, (cache_rows, self.num_heads, groups, query_length, key_length))
        weights = ops.reshape(
            ops.transpose(weights, (0, 2, 1, 3, 4)), (query_rows, self.num_heads, query_length, key_length)
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
