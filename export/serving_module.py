"""The servable graph: raw sentences in, translations out, as one `tf.Module` for `tf.saved_model.save`.

`ServingModule` chains, inside TensorFlow functions traced without XLA:

    inputs string [batch]
      -> UTF-8 repair (invalid bytes become U+FFFD)
      -> SentencePiece tokenize (tensorflow-text op) -> cut to max_input_length - 1 tokens, append EOS
      -> pad with PAD to the smallest length bucket that holds the longest sentence
      -> tf.switch_case over the buckets: encoder + beam search (`models.translation.translate_ids`,
         a core `While` loop over a cache of bucket + max_extra_length positions)
      -> SentencePiece detokenize -> translations string [batch], scores float32 [batch]

Input policy (the same as `inference.translator.Translator` with `max_input_length`):

- A sentence with more than `max_input_length - 1` SentencePiece tokens is cut to its first
  `max_input_length - 1` tokens and EOS is appended: `max_input_length` counts the EOS.
- A sentence that tokenizes to nothing (empty, spaces only) translates to "" with score 0.0,
  without a search.
- Bytes that are not valid UTF-8 are replaced by U+FFFD (one per invalid sequence) before
  tokenization, so a bad request never fails; the replacement character is then encoded by
  SentencePiece's byte fallback like any other character outside the vocabulary.
- An empty batch returns empty outputs.

Why buckets: `translate_ids` needs a static cache length, and every decoding step attends over the
whole preallocated cache, so one cache of `max_input_length + max_extra_length` positions for every
request makes short sentences pay for the longest. One search per bucket is traced instead (the
graph holds one `While` loop per bucket). A sentence's translation does not depend on its bucket:
`translate_ids` masks the source padding and stops every sentence at its own
`source_length + max_extra_length`, whatever the cache size (tests/export checks a batch against
one-by-one calls).
"""

import tensorflow as tf

from data.special_ids import EOS_ID, PAD_ID
from inference.in_place_cache import traced_in_place
from models.search_config import DEFAULT_SEARCH, EXPORT_MAX_INPUT_LENGTH
from models.translation import score_ids, translate_ids

# The SentencePiece-length buckets used when none are given (clipped to max_input_length, which
# is always the last one). benchmarks/export_latency.py measured them against a single bucket.
DEFAULT_LENGTH_BUCKETS = (16, 32, 64)


def resolve_buckets(length_buckets, max_input_length):
    """Sorted unique bucket lengths `<= max_input_length`, ending with `max_input_length`.

    Raises:
        ValueError: a bucket that is not a positive int, or max_input_length < 2.
    """
    if not isinstance(max_input_length, int) or max_input_length < 2:
        raise ValueError(
            f"max_input_length must be an int >= 2 (at least one token and EOS), received {max_input_length!r}"
        )
    buckets = set()
    for bucket in length_buckets or ():
        if not isinstance(bucket, int) or isinstance(bucket, bool) or bucket < 1:
            raise ValueError(f"length buckets must be positive ints, received {bucket!r} in {length_buckets!r}")
        if bucket < max_input_length:
            buckets.add(bucket)
    return tuple(sorted(buckets)) + (max_input_length,)


class ServingModule(tf.Module):
    """A trained `Transformer` and its `Tokenizer` behind two serving functions.

    Args:
        model: a `models.transformer.Transformer` (built, weights loaded).
        tokenizer: the `data.tokenizer.Tokenizer` of the model's vocabulary.
        vocabulary_path: path of the `.model` file; saved as the SavedModel asset `spm.model`.
        search: the `SearchConfig` built into the graph (default
            `models.search_config.DEFAULT_SEARCH`); its `max_input_length` is the source tokens
            kept per sentence, EOS included (see the module docstring), None meaning
            `EXPORT_MAX_INPUT_LENGTH`; kept as `search_config` (`search` is the traced search).
        length_buckets: source lengths with one traced search each (see the module docstring).
        **settings: `SearchConfig` settings by name (`beam_size=2`), each replacing `search`'s.

    Functions (all `tf.function(jit_compile=False)` with an input signature; the three that
    search call one traced search, so the graph holds one `While` loop per bucket):
        `serve(inputs)`: string `[batch]` -> `{"translations": string [batch], "scores": float32 [batch]}`.
        `n_best(inputs)`: string `[batch]` -> `{"translations": string [batch, beam_size],
            "scores": float32 [batch, beam_size]}`, every hypothesis of the beam, best first.
        `score(inputs, targets)`: string `[batch]` twice -> `{"log_probs": float32 [batch],
            "lengths": int32 [batch]}`, forced decoding of each target (its pieces + EOS) given its
            source (cut as `serve` cuts it).
        `translate_ids(source_ids)`: int32 `[batch, length]` (tokens + EOS, PAD-padded) ->
            `{"ids": int32 [batch, max_input_length + max_extra_length] (EOS then PAD),
            "scores": float32 [batch]}`.
    """

    def __init__(
        self,
        model,
        tokenizer,
        vocabulary_path,
        search=DEFAULT_SEARCH,
        *,
        length_buckets=DEFAULT_LENGTH_BUCKETS,
        name=None,
        **settings,
    ):
        super().__init__(name=name)
        search = search.override(**settings)
        if search.max_input_length is None:
            search = search.override(max_input_length=EXPORT_MAX_INPUT_LENGTH)
        self.search_config = search
        self.model = model
        # The backend's tf.Variables themselves, tracked beside the Keras wrappers: without them
        # the SavedModel loads with tf.saved_model.load but not with the session-based loader of
        # TensorFlow Serving and `saved_model_cli run` ("Could not find variable ...").
        self.model_variables = [variable.value for variable in model.variables]
        self.tokenizer = tokenizer
        self.vocabulary = tf.saved_model.Asset(vocabulary_path)
        self.beam_size = search.beam_size
        self.max_input_length = search.max_input_length
        self.max_extra_length = search.max_extra_length
        self.length_buckets = resolve_buckets(tuple(length_buckets), self.max_input_length)
        self.output_length = self.max_input_length + self.max_extra_length
        self.serve = tf.function(
            self._serve,
            input_signature=[tf.TensorSpec([None], tf.string, name="inputs")],
            jit_compile=False,
            reduce_retracing=False,
        )
        self.search = tf.function(
            traced_in_place(self._search),
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
            jit_compile=False,
            reduce_retracing=False,
        )
        self.n_best = tf.function(
            self._n_best,
            input_signature=[tf.TensorSpec([None], tf.string, name="inputs")],
            jit_compile=False,
            reduce_retracing=False,
        )
        self.score = tf.function(
            self._score,
            input_signature=[
                tf.TensorSpec([None], tf.string, name="inputs"),
                tf.TensorSpec([None], tf.string, name="targets"),
            ],
            jit_compile=False,
            reduce_retracing=False,
        )
        self.translate_ids = tf.function(
            self._translate_ids,
            input_signature=[tf.TensorSpec([None, None], tf.int32, name="source_ids")],
            jit_compile=False,
            reduce_retracing=False,
        )

    def signatures(self):
        """The SavedModel signatures: `serving_default` (text), `n_best` and `score` (text), and
        `translate_ids` (token ids)."""
        return {
            "serving_default": self.serve.get_concrete_function(),
            "n_best": self.n_best.get_concrete_function(),
            "score": self.score.get_concrete_function(),
            "translate_ids": self.translate_ids.get_concrete_function(),
        }

    def _tokens(self, inputs, limit=None):
        """Ragged int32 pieces + EOS of UTF-8-repaired `inputs`, cut to `limit - 1` pieces, and
        bool `[batch]`, True where a text has no pieces."""
        texts = tf.strings.unicode_transcode(
            inputs, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace", replacement_char=0xFFFD
        )
        tokens = self.tokenizer.tokenize(texts)  # ragged int32 [batch, (tokens)]
        empty = tf.equal(tokens.row_lengths(), 0)  # [batch]
        if limit is not None:
            tokens = tokens[:, : limit - 1]
        eos = tf.RaggedTensor.from_tensor(tf.fill([tokens.nrows(), 1], tf.constant(EOS_ID, tf.int32)))
        return tf.concat([tokens, eos], axis=1), empty

    def _all_hypotheses(self, inputs):
        """Texts string `[batch, beam]`, scores float32 `[batch, beam]`; "" and 0.0 for no tokens."""
        tokens, empty = self._tokens(inputs, self.max_input_length)
        ids, scores = self.search(tokens.to_tensor(default_value=PAD_ID))
        beams = tf.shape(ids)[1]
        texts = tf.reshape(self.tokenizer.detokenize(tf.reshape(ids, [-1, self.output_length])), [-1, beams])
        empty = empty[:, None]
        return tf.where(empty, tf.constant("", tf.string), texts), tf.where(empty, tf.zeros_like(scores), scores)

    def _serve(self, inputs):
        translations, scores = self._all_hypotheses(inputs)
        return {"translations": translations[:, 0], "scores": scores[:, 0]}

    def _n_best(self, inputs):
        translations, scores = self._all_hypotheses(inputs)
        return {"translations": translations, "scores": scores}

    def _score(self, inputs, targets):
        tf.debugging.assert_equal(
            tf.shape(inputs), tf.shape(targets), message="score needs one target per input sentence"
        )
        sources, _ = self._tokens(inputs, self.max_input_length)
        target_tokens, _ = self._tokens(targets)

        def forced_decoding():
            return score_ids(
                self.model, sources.to_tensor(default_value=PAD_ID), target_tokens.to_tensor(default_value=PAD_ID)
            )

        def no_pairs():
            return tf.zeros([0], tf.float32), tf.zeros([0], tf.int32)

        log_probs, lengths = tf.cond(tf.size(inputs) > 0, forced_decoding, no_pairs)
        return {"log_probs": log_probs, "lengths": lengths}

    def _translate_ids(self, source_ids):
        ids, scores = self.search(self._truncate(source_ids))
        return {"ids": ids[:, 0], "scores": scores[:, 0]}

    def _truncate(self, source_ids):
        """Rows longer than max_input_length keep their first max_input_length - 1 tokens + EOS."""
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)  # [batch]
        kept = source_ids[:, : self.max_input_length]
        last = tf.equal(tf.range(tf.shape(kept)[1]), self.max_input_length - 1)[None, :]  # [1, length]
        too_long = (lengths > self.max_input_length)[:, None]
        return tf.where(last & too_long, tf.constant(EOS_ID, tf.int32), kept)

    def _search(self, source_ids):
        """Beam search in the smallest bucket holding `source_ids` `[batch, length <= max_input_length]`.

        Returns ids int32 `[batch, beam_size, output_length]` and scores float32 `[batch, beam_size]`,
        every hypothesis of the beam, best first.
        """
        batch_size = tf.shape(source_ids)[0]
        length = tf.shape(source_ids)[1]
        buckets = tf.constant(self.length_buckets, tf.int32)
        bucket_index = tf.reduce_sum(tf.cast(buckets < length, tf.int32))

        def bucket_search(bucket):
            def search():
                padded = tf.pad(source_ids, [[0, 0], [0, bucket - length]], constant_values=PAD_ID)
                padded = tf.ensure_shape(padded, [None, bucket])
                ids, scores = translate_ids(
                    self.model, padded, **self.search_config.search_arguments(), num_return=self.beam_size
                )
                ids = tf.pad(ids, [[0, 0], [0, 0], [0, self.output_length - (bucket + self.max_extra_length)]])
                return tf.ensure_shape(ids, [None, self.beam_size, self.output_length]), scores

            return search

        def no_sentences():
            return tf.zeros([0, self.beam_size, self.output_length], tf.int32), tf.zeros(
                [0, self.beam_size], tf.float32
            )

        def any_sentences():
            return tf.switch_case(bucket_index, [bucket_search(bucket) for bucket in self.length_buckets])

        return tf.cond(batch_size > 0, any_sentences, no_sentences)
