"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017) as a `keras.Model`.

Shared embedding (Section 3.4) -> encoder stack -> decoder stack -> the embedding matrix transposed
as the pre-softmax projection. Symbols: `num_layers` N, `hidden_dim` d_model, `num_heads` h,
`intermediate_dim` d_ff, `dropout` P_drop; defaults are Table 3's base model. Not in the paper:
`num_decoder_layers`, a decoder of another depth than the encoder (a distilled student's deep
encoder and shallow decoder, Kasai et al. 2021)."""

import keras
from keras import ops

from common import compat
from common.special_ids import PAD_ID
from models import attention_cache
from models.fast_paths.fused_dense import Dense
from models.layer_stack import LAYER_DEFAULTS, pop_layer_options
from models.shared_embedding import SharedEmbedding
from models.transformer_decoder import TransformerDecoder
from models.transformer_encoder import TransformerEncoder


@keras.saving.register_keras_serializable(package="transformer")
class Transformer(keras.Model):
    """Encoder-decoder Transformer with tied embeddings.

    Args:
        vocabulary_size: the shared vocabulary's size (the target's with `source_vocabulary_size`).
        num_layers: N, in each stack (in the encoder only, with `num_decoder_layers`). Defaults to 6.
        num_decoder_layers: the decoder's layers; None (the default) is `num_layers`.
        hidden_dim, num_heads, intermediate_dim, dropout, attention_dropout, activation_dropout,
            normalize_first, layer_norm_epsilon: the layers' options, with the paper's symbols and
            defaults in `TransformerLayerBase` (`models/layer_stack.py`); dropout also applies to
            embeddings + positions.
        pad_id: source positions holding it are masked.
        source_vocabulary_size: None shares one matrix; else the encoder's own vocabulary size.

    Call arguments:
        inputs: `(source_ids, target_input_ids)`, int `[batch, source_length]` and
            `[batch, target_length]` (BOS-prefixed).

    Returns:
        float32 logits `[batch, target_length, vocabulary_size]`. Decoding uses `encode`,
        `initial_cache` and `decode`.
    """

    def __init__(
        self,
        vocabulary_size,
        num_layers=6,
        *,
        num_decoder_layers=None,
        pad_id=PAD_ID,
        source_vocabulary_size=None,
        **kwargs,
    ):
        # The layer options (hidden_dim ... layer_norm_epsilon) are models.layer_stack.LAYER_DEFAULTS's.
        layer_options = pop_layer_options(kwargs)
        super().__init__(**kwargs)
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        if num_decoder_layers is not None and (not isinstance(num_decoder_layers, int) or num_decoder_layers < 1):
            raise ValueError(f"num_decoder_layers must be a positive int or None, received {num_decoder_layers!r}")
        self.num_decoder_layers = num_layers if num_decoder_layers is None else num_decoder_layers
        self.pad_id = pad_id
        self.source_vocabulary_size = source_vocabulary_size
        for name, value in layer_options.items():
            setattr(self, name, value)
        stack_options = dict(**layer_options, dtype=self.dtype_policy)
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
        self.encoder = TransformerEncoder(num_layers, **stack_options, name="encoder")
        self.decoder = TransformerDecoder(self.num_decoder_layers, **stack_options, name="decoder")

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
        """Preallocated self caches and precomputed cross caches for `encoder_output`: "self" and
        "cross" map each layer to `(keys, values)` of `[batch, heads, cache_length or
        source_length, head_dim]`; `cache_length` may be an int32 scalar where shapes need not be
        static (TensorFlow)."""
        if not (isinstance(cache_length, int) and cache_length >= 1 or ops.is_tensor(cache_length)):
            raise ValueError(f"cache_length must be a positive int, received {cache_length!r}")
        batch_size = ops.shape(encoder_output)[0]
        return {
            "self": self.decoder.empty_self_caches(batch_size, cache_length),
            "cross": self.decoder.cross_caches(encoder_output),
        }

    def plan_decoding(self, self_caches, rows):
        """Where `decode` writes one position of `rows` target rows into `self_caches`
        (`initial_cache`'s "self") at position 0: a search shifts it to each step's position
        (`attention_cache.shift_plan`) instead of planning every step."""
        keys = self.decoder.self_cache_keys(self_caches)
        return attention_cache.plan_write(keys, rows, 1, 0, self.decoder.name)

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
        projection=None,
    ):
        """Logits for target positions, from a whole prefix or incrementally with a cache.

        Args:
            target_ids: int `[batch, length]`: the whole shifted target (no cache), or positions
                `[cache_index, cache_index + length)`.
            encoder_output: `[batch, source_length, hidden_dim]`; not needed with a cache.
            encoder_padding_mask: boolean `[batch, source_length]`, or with a cache its
                `GroupedBias` (`models.multi_head_attention.shared_key_bias`).
            cache: None, or `initial_cache`'s dict; it may hold one row per `n` rows of
                `target_ids` (beam search, `models/translation.py`).
            cache_index: absolute position of `target_ids[:, 0]` (int or scalar tensor), or with a
                cache its `attention_cache.PlannedWrite` (`plan_decoding`, shifted to the position).
            return_attention_scores: also return layer `attention_layer`'s (-1: the last)
                cross-attention weights `[batch, heads, length, source_length]`.
            self_attention_mask: optional boolean `[batch, length, key_length]` replacing the
                causal mask, or with a cache its `GroupedBias`.
            projection: optional `output_projection(columns)`: the logits of its columns.

        Returns:
            float32 logits `[batch, length, vocabulary_size or S]`, then the updated cache if given,
            then the attention weights if asked for.
        """
        self._check_ids(target_ids, "target_ids")
        start_position = attention_cache.position_of(cache_index) if cache is not None else 0
        embedded = self.embedding(target_ids, start_position=start_position, training=training)
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
        results = (self.embedding.logits(outputs[0], projection),)
        if cache is not None:
            results += ({"self": outputs[1], "cross": cache["cross"]},)
        if return_attention_scores:
            results += (outputs[-1],)
        return results[0] if len(results) == 1 else results

    def output_projection(self, columns=None):
        """The output projection of the target ids `columns` int32 `[S]` (None: every id), made
        once for `decode`'s steps (`SharedEmbedding.output_projection`)."""
        return self.embedding.output_projection(columns)

    def quantize(self, mode=None, config=None, **kwargs):
        """Int8 weights for inference (`models.int8_weights`). Raises `ValueError` on a mode other
        than "int8", a model already quantized or in float16."""
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
        # Written only for a decoder of its own depth, so the config of a model with equal stacks
        # (every .keras file written before the option) is what it was.
        if self.num_decoder_layers != self.num_layers:
            config["num_decoder_layers"] = self.num_decoder_layers
        return config
