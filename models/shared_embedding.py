"""One embedding matrix for source tokens, target tokens and the pre-softmax projection (Vaswani et
al., 2017, Section 3.4: shared weights, multiplied by sqrt(d_model); Section 5.4: dropout on
embeddings plus positions)."""

import math

import keras
from keras import ops

from models import int8_weights
from models.fast_paths.bit_mask_dropout import Dropout
from models.fast_paths.tied_projection import tied_projection
from models.position_encoding import SinusoidalPositionEncoding


@keras.saving.register_keras_serializable(package="transformer")
class SharedEmbedding(keras.layers.Layer):
    """Token embedding scaled by sqrt(d_model) plus sinusoidal positions, tied to the output logits.

    Args:
        vocabulary_size: the shared vocabulary's size.
        hidden_dim: d_model. Defaults to 512.
        dropout: P_drop on embedding + position sums. Defaults to 0.1.
        embeddings_initializer: defaults to normal with stddev d_model^-0.5 (unit variance once
            scaled, as tensor2tensor).

    Call arguments:
        token_ids: int `[batch, length]`.
        start_position: absolute position of `token_ids[:, 0]` (int or scalar tensor).

    Returns:
        `[batch, length, hidden_dim]` in the compute dtype. `logits(hidden_states)` gives float32
        `[batch, length, vocabulary_size]`, the product in the compute dtype.
    """

    def __init__(self, vocabulary_size, hidden_dim=512, dropout=0.1, embeddings_initializer=None, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(vocabulary_size, int) or vocabulary_size < 1:
            raise ValueError(f"vocabulary_size must be a positive int, received {vocabulary_size!r}")
        if not isinstance(hidden_dim, int) or hidden_dim < 2 or hidden_dim % 2:
            raise ValueError(f"hidden_dim must be a positive even int, received {hidden_dim!r}")
        self.vocabulary_size = vocabulary_size
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        if embeddings_initializer is None:
            embeddings_initializer = keras.initializers.RandomNormal(stddev=hidden_dim**-0.5)
        self.embeddings_initializer = keras.initializers.get(embeddings_initializer)
        self.scale = math.sqrt(hidden_dim)

    def build(self, token_ids_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings",
            shape=(self.vocabulary_size, self.hidden_dim),
            initializer=self.embeddings_initializer,
            # Read as float32 even under a mixed policy; `call` and `logits` cast where they need to.
            autocast=False,
        )
        self.position_encoding = SinusoidalPositionEncoding(name="position_encoding", dtype=self.dtype_policy)
        self.dropout_layer = Dropout(self.dropout, name="dropout", dtype=self.dtype_policy)
        self.built = True

    def call(self, token_ids, start_position=0, training=None):
        if len(token_ids.shape) != 2:
            raise ValueError(
                f"SharedEmbedding expects token ids of rank 2 [batch, length], received shape {token_ids.shape}"
            )
        if "int" not in str(token_ids.dtype):
            raise ValueError(
                f"SharedEmbedding expects integer token ids, received dtype {keras.backend.standardize_dtype(token_ids.dtype)}"
            )
        # Gather float32 rows, then cast: the gradient is a float32 scatter-add into the table, not
        # a bfloat16 one (slower on a GPU, and inexact accumulation).
        embedded = ops.cast(ops.take(self.embeddings, token_ids, axis=0), self.compute_dtype)
        if self.quantized:
            scale = ops.take(self.embeddings_scale, token_ids, axis=0)[..., None]  # [batch, length, 1]
            embedded = embedded / ops.cast(scale, self.compute_dtype)
        embedded = embedded * ops.cast(self.scale, self.compute_dtype)
        embedded = embedded + self.position_encoding(embedded, start_position=start_position)[None]
        return self.dropout_layer(embedded, training=training)

    def logits(self, hidden_states, projection=None):
        """Pre-softmax projection with the shared matrix; returns float32 logits. With a
        `projection` (`output_projection`'s `[hidden_dim, S]`), the logits of its columns, `[..., S]`."""
        if projection is not None:
            rows = ops.cast(ops.reshape(hidden_states, (-1, self.hidden_dim)), projection.dtype)
            logits = ops.cast(ops.matmul(rows, projection), "float32")
            return ops.reshape(logits, tuple(ops.shape(hidden_states)[:-1]) + (ops.shape(projection)[1],))
        if self.quantized:
            return ops.cast(
                int8_weights.dequantized_matmul(
                    hidden_states, self.embeddings, self.embeddings_scale, transpose=True, dtype=self.compute_dtype
                ),
                "float32",
            )
        kernel = ops.cast(self.embeddings, self.compute_dtype)
        if keras.backend.backend() == "tensorflow":
            return ops.cast(tied_projection(hidden_states, kernel), "float32")
        return ops.cast(ops.matmul(hidden_states, ops.transpose(kernel)), "float32")

    def output_projection(self, columns=None):
        """The pre-softmax projection of the token ids `columns` int32 `[S]` (a shortlist), or of
        the whole vocabulary (None): the shared matrix's rows transposed to `[hidden_dim, S]`, in
        the product's dtype (the compute dtype; int8's `PRODUCT_DTYPE`). Made once per search: a
        step's product then reads S columns, not the vocabulary, and needs no transpose (which a
        CPU's product reads more slowly, benchmarks/README.md)."""
        if self.quantized:
            if columns is None:
                return int8_weights.product_matrix_of(self.embeddings, self.embeddings_scale, transpose=True)
            scale = ops.take(self.embeddings_scale, columns, axis=0)
            return int8_weights.product_matrix(ops.take(self.embeddings, columns, axis=0), scale, transpose=True)
        rows = self.embeddings if columns is None else ops.take(self.embeddings, columns, axis=0)
        return ops.transpose(ops.cast(rows, self.compute_dtype))

    @property
    def quantized(self):
        """Whether `quantize("int8")` has made the matrix int8."""
        return self.built and keras.backend.standardize_dtype(self.embeddings.dtype) == "int8"

    def quantize(self, mode=None, type_check=True, config=None):
        """Makes the matrix int8 with one float32 scale per token, for inference. Raises
        `ValueError` on a mode other than "int8", or a matrix already quantized."""
        if mode != "int8":
            raise ValueError(f"{self.name}: only int8 quantization is implemented, received mode={mode!r}")
        if self.quantized:
            raise ValueError(f"{self.name}: the embedding matrix is already int8")
        quantized, scale = int8_weights.quantize_channels(self.embeddings, channel_axis=0)
        shape = tuple(self.embeddings.shape)
        del self.embeddings
        self.embeddings = self.add_weight(
            name="embeddings", shape=shape, initializer="zeros", dtype="int8", trainable=False, autocast=False
        )
        self.embeddings_scale = self.add_weight(
            name="embeddings_scale", shape=shape[:1], initializer="ones", trainable=False, autocast=False
        )
        self.embeddings.assign(quantized)
        self.embeddings_scale.assign(scale)

    def compute_output_shape(self, token_ids_shape):
        return tuple(token_ids_shape) + (self.hidden_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "hidden_dim": self.hidden_dim,
                "dropout": self.dropout,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config
