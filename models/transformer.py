"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a `keras.Model`.

Shared embedding (section 3.4) -> encoder stack -> decoder stack -> the same embedding matrix,
transposed, as the pre-softmax projection. With separate source and target vocabularies
(`source_vocabulary_size`), the encoder has an embedding of its own and the decoder's stays tied to
the projection. Symbols: `vocabulary_size` the shared (or target) vocabulary, `num_layers` N, `hidden_dim` d_model, `num_heads` h, `intermediate_dim` d_ff, `dropout`
P_drop. Defaults are the base model of Table 3.
"""

import keras
from keras import ops

from common import compat
from common.special_ids import PAD_ID
from models.fast_paths.fused_dense import Dense
from models.layer_stack import LAYER_DEFAULTS, pop_layer_options
from models.shared_embedding import SharedEmbedding
from models.transformer_decoder import TransformerDecoder
from models.transformer_encoder import TransformerEncoder


@keras.saving.register_keras_serializable(package="transformer")
class Transformer(keras.Model):
    """Encoder-decoder Transformer with tied embeddings.

    Args:
        vocabulary_size: size of the shared vocabulary (from the tokenizer, not the preset), or of
            the target one when `source_vocabulary_size` is given.
        num_layers: N, layers in each of the encoder and decoder stacks. Defaults to 6.
        hidden_dim: d_model. Defaults to 512.
        num_heads: h. Defaults to 8.
        intermediate_dim: d_ff. Defaults to 2048.
        dropout: P_drop on embeddings + positions and on every sublayer output. Defaults to 0.1.
        attention_dropout: dropout on attention weights (not in the paper). Defaults to 0.0.
        activation_dropout: dropout after the ReLU (not in the paper). Defaults to 0.0.
        normalize_first: pre-norm instead of the paper's post-norm. Defaults to False.
        layer_norm_epsilon: defaults to 1e-6.
        pad_id: the tokenizer's padding id; source positions holding it are masked.
        source_vocabulary_size: None (the default) for one vocabulary and one matrix shared by
            both embeddings and the projection; the source vocabulary's size for separate
            vocabularies, which gives the encoder its own embedding matrix.

    Call arguments (teacher forcing):
        inputs: a pair `(source_ids, target_input_ids)`, int `[batch, source_length]` and
            `[batch, target_length]` (the target shifted right, starting with BOS).
        training: whether dropout is active.

    Returns:
        float32 logits `[batch, target_length, vocabulary_size]`.

    Decoding goes through `encode`, `initial_cache` and `decode` (one step or a whole prefix).

    `quantize("int8")` makes the matmul weights int8, in place, for inference (`models.int8_weights`).
    """

    def __init__(self, vocabulary_size, num_layers=6, *, pad_id=PAD_ID, source_vocabulary_size=None, **kwargs):
        # The layer options (hidden_dim ... layer_norm_epsilon) are models.layer_stack.LAYER_DEFAULTS's.
        layer_options = pop_layer_options(kwargs)
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.pad_id = pad_id
        self.source_vocabulary_size = source_vocabulary_size
        for name, value in layer_options.items():
            setattr(self, name, value)
        stack_options = dict(num_layers=num_layers, **layer_options, dtype=self.dtype_policy)
        # `embedding` is the target one, tied to the pre-softmax projection.
        self.embedding = SharedEmbedding(
            vocabulary_size,
            self.hidden_dim,
            self.dropout,
            name="shared_embedding" if source_vocabulary_size is None else "target_embedding",
            dtype=self.dtype_policy,
        )
        if source_vocabulary_size is not None:
            self.separate_source_embedding = SharedEmbedding(
                source_vocabulary_size, self.hidden_dim, self.dropout, name="source_embedding", dtype=self.dtype_policy
            )
        self.encoder = TransformerEncoder(**stack_options, name="encoder")
        self.decoder = TransformerDecoder(**stack_options, name="decoder")

    def build(self, input_shape=None):
        hidden_shape = (None, None, self.hidden_dim)
        for embedding in self.embeddings:
            embedding.build((None, None))
        self.encoder.build(hidden_shape)
        self.decoder.build(hidden_shape, hidden_shape)
        self.built = True

    @property
    def source_embedding(self):
        """The encoder's embedding: the shared one, or the source vocabulary's own."""
        return self.embedding if self.source_vocabulary_size is None else self.separate_source_embedding

    @property
    def embeddings(self):
        """The model's embedding layers: one shared, or the target's then the source's."""
        if self.source_vocabulary_size is None:
            return (self.embedding,)
        return (self.embedding, self.separate_source_embedding)

    @staticmethod
    def _check_ids(ids, name):
        if len(ids.shape) != 2:
            raise ValueError(f"`{name}` must have rank 2 [batch, length], received shape {ids.shape}")
        if "int" not in str(ids.dtype):
            raise ValueError(
                f"`{name}` must hold integer token ids, received dtype {keras.backend.standardize_dtype(ids.dtype)}"
            )

    @staticmethod
    def _integer_ids(ids):
        # Keras builds a model under tf.distribute with the replicas' batches averaged, which turns
        # integer ids into floats; accept those in `call` (the entry point of fit) only.
        if "float" in str(keras.backend.standardize_dtype(getattr(ids, "dtype", "int32"))):
            return ops.cast(ids, "int32")
        return ids

    def padding_mask(self, source_ids):
        """Boolean `[batch, source_length]`, True where the token is not padding."""
        return ops.not_equal(source_ids, self.pad_id)

    def encode(self, source_ids, training=False):
        """Returns `(encoder_output [batch, source_length, hidden_dim], padding_mask [batch, source_length])`."""
        self._check_ids(source_ids, "source_ids")
        padding_mask = self.padding_mask(source_ids)
        embedded = self.source_embedding(source_ids, training=training)
        return self.encoder(embedded, padding_mask=padding_mask, training=training), padding_mask

    def initial_cache(self, encoder_output, cache_length):
        """Decoding state for `encoder_output`: preallocated self caches and precomputed cross caches.

        Returns a dict with "self" (per layer a `(keys, values)` pair of `[batch, heads,
        cache_length, head_dim]`, written as decoding advances) and "cross" (per layer `(keys,
        values)` of `[batch, heads, source_length, head_dim]`, read only).
        """
        if not isinstance(cache_length, int) or cache_length < 1:
            raise ValueError(f"cache_length must be a positive int, received {cache_length!r}")
        batch_size = ops.shape(encoder_output)[0]
        return {
            "self": self.decoder.empty_self_caches(batch_size, cache_length),
            "cross": self.decoder.cross_caches(encoder_output),
        }

    def decode(
        self,
        target_ids,
        encoder_output=None,
        encoder_padding_mask=None,
        cache=None,
        cache_index=0,
        training=False,
        return_attention_scores=False,
        self_attention_mask=None,
        attention_layer=-1,
    ):
        """Logits for target positions, from a whole prefix or incrementally with a cache.

        Args:
            target_ids: int `[batch, length]`: the whole shifted target (no cache), or the tokens at
                positions `[cache_index, cache_index + length)` (with a cache; length 1 for one step).
            encoder_output: `[batch, source_length, hidden_dim]`; not needed with a cache.
            encoder_padding_mask: boolean `[batch, source_length]`.
            cache: None, or the dict from `initial_cache` (or returned by the previous call). Its
                "cross" entries may have one row per `n` consecutive rows of `target_ids` (beam
                search keeps them per sentence), and its "self" entries `n` slots per row, read under
                `self_attention_mask` (`models/translation.py`).
            cache_index: absolute position of `target_ids[:, 0]` (int or scalar int tensor).
            training: whether dropout is active.
            return_attention_scores: also return one decoder layer's encoder-decoder attention
                weights `[batch, heads, length, source_length]`.
            attention_layer: that layer's index, from 0 to `num_layers - 1` or negative from the
                end; -1 (the default) is the last.
            self_attention_mask: optional boolean `[batch, length, key_length]` in place of the
                causal mask (key_length: the self caches' length, or `length` without a cache).

        Returns:
            float32 logits `[batch, length, vocabulary_size]`, then the updated cache if one was
            given, then the attention weights if asked for.
        """
        self._check_ids(target_ids, "target_ids")
        embedded = self.embedding(target_ids, start_position=cache_index if cache is not None else 0, training=training)
        outputs = self.decoder(
            embedded,
            encoder_output,
            encoder_padding_mask,
            self_caches=None if cache is None else cache["self"],
            cross_caches=None if cache is None else cache["cross"],
            cache_index=cache_index if cache is not None else None,
            training=training,
            return_attention_scores=return_attention_scores,
            self_attention_mask=self_attention_mask,
            attention_layer=attention_layer,
        )
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        results = (self.embedding.logits(outputs[0]),)
        if cache is not None:
            results += ({"self": outputs[1], "cross": cache["cross"]},)
        if return_attention_scores:
            results += (outputs[-1],)
        return results[0] if len(results) == 1 else results

    def quantize(self, mode=None, config=None, **kwargs):
        """Int8 weights for inference (`models.int8_weights`): every attention and feed-forward
        projection through Keras's `Dense.quantize`, and the embedding matrices.

        Raises:
            ValueError: a mode other than "int8" (Keras refuses a model already quantized, or one
                computing in float16).
        """
        if mode != "int8":
            raise ValueError(f"Transformer.quantize supports mode='int8' only, received mode={mode!r}")
        if self.embedding.quantized:
            raise ValueError("the Transformer's weights are already int8")
        # The project's Dense is a subclass, which Keras quantizes only with type_check=False. Keras
        # collects garbage after each kernel it replaces: once for the whole model is enough.
        with compat.one_garbage_collection():
            super().quantize(mode, config=config, filters=lambda layer: isinstance(layer, Dense), type_check=False)
            for embedding in self.embeddings:
                embedding.quantize(mode)

    def call(self, inputs, training=None):
        if not isinstance(inputs, (tuple, list)) or len(inputs) != 2:
            raise ValueError(
                "Transformer expects inputs (source_ids, target_input_ids), received "
                f"{type(inputs).__name__}{'' if not isinstance(inputs, (tuple, list)) else f' of length {len(inputs)}'}"
            )
        source_ids, target_ids = (self._integer_ids(ids) for ids in inputs)
        encoder_output, padding_mask = self.encode(source_ids, training=training)
        return self.decode(target_ids, encoder_output, padding_mask, training=training)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "vocabulary_size": self.vocabulary_size,
                "num_layers": self.num_layers,
                **{name: getattr(self, name) for name in LAYER_DEFAULTS},
                "pad_id": self.pad_id,
                "source_vocabulary_size": self.source_vocabulary_size,
            }
        )
        return config
