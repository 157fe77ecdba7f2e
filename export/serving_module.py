"""The servable graph: raw sentences in, translations out, as one `tf.Module` for `tf.saved_model.save`.

`ServingModule` cuts each input into sentences (`export.graph_documents`), repairs UTF-8, tokenizes with SentencePiece, cuts to `max_input_length`, pads to the
smallest length bucket, runs one traced search per bucket (`models.translation.translate_ids`) and
detokenizes, with core TensorFlow and tensorflow-text ops only, no XLA. Its signatures (`prefix`,
`constrain`, `align`, multilingual `target_language`) and input policy are the translators' and are
described in docs/serving.md; a sentence's translation does not depend on its bucket or batch."""

import tensorflow as tf

from common.special_ids import EOS_ID, PAD_ID
from data import multilingual
from export import graph_alignment, graph_confidence, graph_documents
from inference.alignment import attended
from inference.in_place_cache import traced_in_place
from inference.protocol import DEFAULT_ALIGNMENT
from models import int8_weights
from models.beam_search import UNMET_SCORE
from models.search_config import DEFAULT_SEARCH, EXPORT_MAX_INPUT_LENGTH
from models.token_scores import token_log_probs
from models.translation import score_ids, translate_ids
from models.vocabulary_shortlist import LexicalTable

# The SentencePiece-length buckets used when none are given (clipped to max_input_length, which
# is always the last one). benchmarks/export_latency.py measured them against a single bucket.
DEFAULT_LENGTH_BUCKETS = (16, 32, 64)
# The message of the `prefix` signature's check (`inference.translator.Translator` raises PrefixError);
# without quotes, which the Assert op would print escaped.
PREFIX_TOO_LONG = (
    "prefix: a target prefix has more SentencePiece pieces than the maximum output length of its sentence "
    "(its source tokens, EOS included, + max_extra_length={max_extra_length})"
)
# The message of a multilingual export's check of `target_language` (`data.multilingual` raises
# TargetLanguageError).
UNKNOWN_LANGUAGE = "target_language: not a language the model was trained for ({languages})"
# What the `constrain` signature takes per sentence: phrases, and pieces per phrase (static sizes of
# the constrained search; a line's phrases are tokenized one by one).
MAX_PHRASES = 8
MAX_PHRASE_PIECES = 16
# The messages of the `constrain` signature's checks (`Translator` raises ConstraintError).
CONSTRAINT_REFUSALS = {
    "empty": "constrain: a phrase is empty (it has no SentencePiece pieces)",
    "phrases": f"constrain: a line has more than {MAX_PHRASES} phrases",
    "pieces": f"constrain: a phrase has more than {MAX_PHRASE_PIECES} SentencePiece pieces",
    "long": "constrain: a phrase is longer than the maximum output length of its sentence "
    "(its source tokens, EOS included, + max_extra_length={max_extra_length})",
}
# The sentences a failed check names, at most.
MAX_REPORTED = 20
# Each signature and the module's functions it calls (its own first): an export of some signatures
# traces and saves only theirs. `token_scorer` gives the searches' token scores with a shortlist.
SIGNATURE_FUNCTIONS = {
    "serving_default": ("serve", "search", "splitter", "token_scorer"),
    "n_best": ("n_best", "n_best_search", "token_scorer"),
    "score": ("score",),
    "translate_ids": ("translate_ids", "search"),
    "prefix": ("prefix", "prefix_search", "token_scorer"),
    "constrain": ("constrain", "constrained_search", "search", "token_scorer"),
    "align": ("align", "search", "splitter", "aligner"),
    "markup": ("markup", "search", "splitter", "aligner"),
}
SIGNATURES = tuple(SIGNATURE_FUNCTIONS)


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


def check_signatures(signatures):
    """`signatures` (names) as a tuple in `SIGNATURES`' order; ValueError for an unknown or repeated
    name, or a list without `serving_default` (the signature of a request that names none)."""
    names = list(signatures)
    unknown = [name for name in names if name not in SIGNATURE_FUNCTIONS]
    if unknown:
        raise ValueError(f"signatures: {', '.join(unknown)} not among {', '.join(SIGNATURES)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"signatures: {', '.join(repeated)} given twice")
    if "serving_default" not in names:
        raise ValueError(
            "signatures must include serving_default, the signature TensorFlow Serving answers when a "
            f"request names none (received {', '.join(names) or 'none'})"
        )
    return tuple(name for name in SIGNATURES if name in names)


def _export_search(search):
    """`search` as an export builds it in (`EXPORT_MAX_INPUT_LENGTH` for no input limit); ValueError
    for one that samples."""
    if search.sampling is not None:
        raise ValueError("an export searches: sampling needs a run directory (inference.translator.Translator)")
    if search.max_input_length is None:
        search = search.override(max_input_length=EXPORT_MAX_INPUT_LENGTH)
    return search


def _table_variables(search, lexical_table):
    """The shortlist's `LexicalTable` as variables (saved once, whatever the number of traced
    searches), or None without a shortlist; ValueError for a shortlist without its table."""
    if not search.shortlist:
        return None
    if lexical_table is None:
        raise ValueError(f"shortlist={search.shortlist} needs the run's lexical table: pass lexical_table")
    return LexicalTable(
        candidates=tf.Variable(lexical_table.candidates, trainable=False, name="shortlist_candidates"),
        frequent=tf.Variable(lexical_table.frequent, trainable=False, name="shortlist_frequent"),
    )


def _graph_function(function, input_signature, **options):
    """`function` as a `tf.function` of `input_signature`: no XLA (TensorFlow Serving runs core ops),
    no AutoGraph (the traced code's control flow is explicit, `ops.while_loop` and `ops.cond`, so
    converting its Python source would only add tracing time)."""
    return tf.function(function, input_signature=input_signature, jit_compile=False, autograph=False, **options)


class ServingModule(graph_documents.DocumentFunctions, tf.Module):
    """A trained `Transformer` and its `Tokenizer` behind the serving functions.

    Args:
        model: a `models.transformer.Transformer` (built, weights loaded).
        tokenizer: the `data.tokenizer.Tokenizer` of the model's vocabulary.
        vocabulary_path: path of the `.model` file; saved as the SavedModel asset `spm.model`.
        search: the `SearchConfig` built into the graph (default
            `models.search_config.DEFAULT_SEARCH`); its `max_input_length` is the source tokens
            kept per sentence, EOS included (see the module docstring), None meaning
            `EXPORT_MAX_INPUT_LENGTH`; kept as `search_config` (`search` is the traced search).
            Not one that samples.
        length_buckets: source lengths with one traced search each (see the module docstring).
        alignment: the `inference.protocol.AlignmentConfig` whose attention `align` reads
            (default `DEFAULT_ALIGNMENT`: the penultimate decoder layer, the mean over heads).
        languages: a multilingual model's target languages (the text functions then take a
            `target_language` input), or None.
        source_tokenizer, source_vocabulary_path: with separate vocabularies, the source side's
            `Tokenizer` and `.model` file (the asset `spm.source.model`); `tokenizer` and
            `vocabulary_path` are then the target's. None: one vocabulary for both sides.
        split_sentences: `serve`, `align` and `markup` translate each input sentence by sentence
            and join the translations as the input was (`export.graph_documents`); False: each
            input whole, cut to `max_input_length`. `n_best`, `prefix`, `constrain`, `score` and
            `translate_ids` take each input whole either way.
        signatures: the signatures to export (`check_signatures`; default all of `SIGNATURES`):
            the module has only their functions (`SIGNATURE_FUNCTIONS`), so that an export of
            fewer traces, writes and loads less.

    Functions (all `_graph_function`s: `tf.function`s with an input signature). Those that search
    call one of four traced searches, `search` (plain), `prefix_search` (`prefix_ids` forced),
    `constrained_search` (`constraint_ids` placed), which return each sentence's best hypothesis and
    so end as soon as it is final, or `n_best_search` (plain, the whole beam, for `n_best`), so the
    graph holds four search loops per bucket (`StatelessWhile`: a search reads its weights before
    its loop); `align` adds one for its word numbering. A search
    also returns its encoder output, which the forced pass of the token scores (`token_scorer`),
    or of the token scores and the alignments at once (`aligner`), decodes from instead of encoding
    the sources again. The functions:
        Every text function also outputs "confidence", float32 shaped as its "scores":
        exp(mean log p) of the output's tokens (`inference.confidence`), 1.0 for no tokens.
        `serve(inputs)`: string `[batch]` -> `{"translations": string [batch], "scores": float32 [batch]}`
            (a line's score the sum of its sentences').
        `n_best(inputs)`: string `[batch]` -> `{"translations": string [batch, beam_size],
            "scores": float32 [batch, beam_size]}`, every hypothesis of the beam, best first.
        `score(inputs, targets)`: string `[batch]` twice -> `{"log_probs": float32 [batch],
            "lengths": int32 [batch]}`, forced decoding of each target (its pieces + EOS) given its
            source (cut as `serve` cuts it).
        `translate_ids(source_ids)`: int32 `[batch, length]` (tokens + EOS, PAD-padded) ->
            `{"ids": int32 [batch, max_input_length + max_extra_length] (EOS then PAD),
            "scores": float32 [batch]}`.
        `prefix(inputs, prefixes)`: string `[batch]` twice -> `{"translations": string [batch],
            "scores": float32 [batch]}`, each translation starting with its prefix's pieces ("":
            no prefix, the translation `serve` gives); InvalidArgumentError for a prefix longer
            than its sentence's maximum output length (see the module docstring).
        `constrain(inputs, constraints)`: string `[batch]` twice, each constraint a line of
            tab-separated target phrases ("": none) -> `{"translations": string [batch], "scores":
            float32 [batch], "constraints_met": bool [batch]}`, each translation holding its
            phrases where `constraints_met` (True too for a line without phrases), else the plain
            search's; InvalidArgumentError for a line it cannot take (see the module docstring).
        `align(inputs)`: string `[batch]` -> `{"translations", "scores"` as `serve`'s, and
            `"alignments": string [batch]}`, each translation's Pharaoh word alignment ("0-0 1-2
            2-1", "" for an empty one) over the whole input and output, as
            `Translator.translate(alignments=alignment)` gives it, and the output's "tokens" string
            `[batch, longest]` ("" after a line's), their "token_scores" float32 `[batch,
            longest]` (0 after) and "token_counts" int32 `[batch]`.
        `markup(inputs)`: string `[batch]` -> `{"translations", "scores", "confidence"}`, inline
            tags and placeholders masked before the search and put back by the alignment
            (`export.graph_markup`), the "tokens", "token_scores" and "token_counts" of the
            masked text's translation, and "notes" string `[batch]`, what restoring them
            reported, one note a line ("" for none).
    """

    def __init__(
        self,
        model,
        tokenizer,
        vocabulary_path,
        search=DEFAULT_SEARCH,
        *,
        length_buckets=DEFAULT_LENGTH_BUCKETS,
        alignment=DEFAULT_ALIGNMENT,
        languages=None,
        source_tokenizer=None,
        source_vocabulary_path=None,
        split_sentences=True,
        lexical_table=None,
        signatures=SIGNATURES,
        name=None,
    ):
        super().__init__(name=name)
        self.signature_names = check_signatures(signatures)
        if (source_tokenizer is None) != (source_vocabulary_path is None):
            raise ValueError("source_tokenizer and source_vocabulary_path go together (separate vocabularies)")
        self.source_tokenizer = source_tokenizer or tokenizer
        # A multilingual model's target languages and the ids of each one's tag
        # (`data.multilingual.tag_ids`), or () for a bilingual model.
        self.languages = tuple(languages or ())
        self.language_tags = [
            multilingual.tag_ids(self.source_tokenizer, multilingual.tag(code)) for code in self.languages
        ]
        self._target_tags = None  # While a text function is traced: int32 ragged [batch, (tag ids)].
        self.search_config = search = _export_search(search)
        self.lexical_table = _table_variables(search, lexical_table)
        self.model = model
        # The backend's tf.Variables themselves, tracked beside the Keras wrappers: without them
        # the SavedModel loads with tf.saved_model.load but not with the session-based loader of
        # TensorFlow Serving and `saved_model_cli run` ("Could not find variable ...").
        self.model_variables = [variable.value for variable in model.variables]
        self.tokenizer = tokenizer
        self.vocabulary = tf.saved_model.Asset(vocabulary_path)
        if source_vocabulary_path is not None:
            self.source_vocabulary = tf.saved_model.Asset(source_vocabulary_path)
        self.beam_size = search.beam_size
        self.max_input_length = search.max_input_length
        self.max_extra_length = search.max_extra_length
        self.length_buckets = resolve_buckets(tuple(length_buckets), self.max_input_length)
        self.output_length = self.max_input_length + self.max_extra_length
        self.alignment = alignment
        self.split_sentences = split_sentences
        self.piece_flags = graph_alignment.vocabulary_flags(tokenizer)
        self.source_piece_flags = (
            self.piece_flags if source_tokenizer is None else graph_alignment.vocabulary_flags(source_tokenizer)
        )
        wanted = {function for name in self.signature_names for function in SIGNATURE_FUNCTIONS[name]}
        for function, build in self._function_builders().items():
            if function in wanted:
                setattr(self, function, build())

    def _function_builders(self):
        """Each module function's name and what makes it (`SIGNATURE_FUNCTIONS` names them)."""
        pair = [tf.TensorSpec([None, None], tf.int32, name=name) for name in ("source_ids", "translation_ids")]
        encoded = [
            tf.TensorSpec([None, None, self.model.hidden_dim], self.model.compute_dtype, name="encoder_output"),
            tf.TensorSpec([None, None], tf.bool, name="padding_mask"),
        ]
        prefix_ids = tf.TensorSpec([None, self.output_length], tf.int32, name="prefix_ids")
        constraint_ids = tf.TensorSpec([None, MAX_PHRASES, MAX_PHRASE_PIECES], tf.int32, name="constraint_ids")
        texts = [tf.TensorSpec([None], tf.string, name="texts"), tf.TensorSpec([None], tf.int32)]
        source_ids = [tf.TensorSpec([None, None], tf.int32, name="source_ids")]
        return {
            "serve": lambda: self._text_function(self._serve, "inputs"),
            "search": self._steered_search,
            "n_best_search": lambda: self._steered_search(num_return=self.beam_size),
            "token_scorer": lambda: _graph_function(self._token_scores, [*encoded, pair[1]]),
            "aligner": lambda: _graph_function(self._aligned_token_scores, [pair[0], *encoded, pair[1]]),
            "splitter": lambda: _graph_function(self._split, texts),
            "prefix_search": lambda: self._steered_search(prefix_ids=prefix_ids),
            "constrained_search": lambda: self._steered_search(constraint_ids=constraint_ids),
            "n_best": lambda: self._text_function(self._n_best, "inputs"),
            "score": lambda: self._text_function(self._score, "inputs", "targets"),
            "translate_ids": lambda: _graph_function(self._translate_ids, source_ids, reduce_retracing=False),
            "prefix": lambda: self._text_function(self._prefix, "inputs", "prefixes"),
            "constrain": lambda: self._text_function(self._constrain, "inputs", "constraints"),
            "align": lambda: self._text_function(self._align, "inputs"),
            "markup": lambda: self._text_function(self._markup, "inputs"),
        }

    def _text_function(self, method, *names):
        """`method` as a `tf.function` (no XLA) of string `[batch]` inputs with these names; a
        multilingual model's takes one more, `target_language` (`_with_target_language`)."""
        if self.languages:
            method, names = self._with_target_language(method), (*names, "target_language")
        return _graph_function(
            method, [tf.TensorSpec([None], tf.string, name=name) for name in names], reduce_retracing=False
        )

    def _with_target_language(self, method):
        """`method` with a last input, string `[batch]`, the language to translate each sentence
        into: its tag's ids go before the sentence's tokens (`_tokens`). A language the model was
        not trained for fails the call with a `tf.debugging` assertion naming the known ones."""

        def tagged(*tensors):
            *texts, languages = tensors
            tf.debugging.assert_equal(
                tf.shape(languages), tf.shape(texts[0]), message="target_language: one language per input sentence"
            )
            match = tf.equal(languages[:, None], tf.constant(self.languages)[None, :])  # [batch, languages]
            known = tf.reduce_any(match, axis=1)
            check = tf.debugging.Assert(
                tf.reduce_all(known),
                [
                    UNKNOWN_LANGUAGE.format(languages=", ".join(self.languages)),
                    "sentences (from 0):",
                    tf.where(~known)[:, 0],
                    "target_language:",
                    tf.boolean_mask(languages, ~known),
                ],
                summarize=MAX_REPORTED,
            )
            with tf.control_dependencies([check]):
                index = tf.argmax(tf.cast(match, tf.int32), axis=1, output_type=tf.int32)
            self._target_tags = tf.gather(tf.ragged.constant(self.language_tags, dtype=tf.int32), index)
            try:
                return method(*texts)
            finally:
                self._target_tags = None

        return tagged

    def signatures(self):
        """The SavedModel signatures of `signature_names`: of `serving_default`, `n_best`, `score`,
        `prefix`, `constrain`, `align` and `markup` (text), and `translate_ids` (token ids).

        They are the module's `tf.function`s, which `tf.saved_model.save` traces in its save
        context, where it also traces them as the module's functions: concrete functions traced
        before the save would be a second copy of every search in the graph."""
        return {name: getattr(self, SIGNATURE_FUNCTIONS[name][0]) for name in self.signature_names}

    def alignment_attention(self):
        """`(layer, head)`: the encoder-decoder attention `align` reads, the layer from 0 and the
        head or None for the mean over heads (`AlignmentConfig.resolve`).

        Raises:
            AlignmentError: a layer or head the model does not have.
        """
        return self.alignment.resolve(self.model.num_decoder_layers, self.model.num_heads)

    def _pieces(self, texts, tokenizer=None):
        """Ragged int32 `[batch, (pieces)]`: the SentencePiece ids of UTF-8-repaired `texts`, by
        `tokenizer` (default the target's, or the shared one)."""
        return (tokenizer or self.tokenizer).tokenize(self._repaired(texts))

    def _repaired(self, texts):
        """`texts` with each byte that is not valid UTF-8 replaced by U+FFFD."""
        return tf.strings.unicode_transcode(
            texts, input_encoding="UTF-8", output_encoding="UTF-8", errors="replace", replacement_char=0xFFFD
        )

    def _source_tokens(self, inputs):
        """`_tokens` of source sentences: cut to `max_input_length`, after their target-language
        tag (a multilingual model's)."""
        return self._tokens(inputs, self.max_input_length, self._target_tags, self.source_tokenizer)

    def _tokens(self, inputs, limit=None, tags=None, tokenizer=None):
        """Ragged int32 pieces + EOS of UTF-8-repaired `inputs` (`_pieces` by `tokenizer`), after
        `tags` (ragged int32 `[batch, (ids)]`, put before the texts that have pieces), cut to
        `limit - 1` pieces, and bool `[batch]`, True where a text has no pieces."""
        tokens = self._pieces(inputs, tokenizer)  # ragged int32 [batch, (tokens)]
        empty = tf.equal(tokens.row_lengths(), 0)  # [batch]
        if tags is not None:
            kept = tags.with_flat_values(tf.repeat(~empty, tags.row_lengths()))
            tokens = tf.concat([tf.ragged.boolean_mask(tags, kept), tokens], axis=1)
        if limit is not None:
            tokens = tokens[:, : limit - 1]
        eos = tf.RaggedTensor.from_tensor(tf.fill([tokens.nrows(), 1], tf.constant(EOS_ID, tf.int32)))
        return tf.concat([tokens, eos], axis=1), empty

    def _texts(self, ids, scores, empty):
        """Texts string `[batch, hypotheses]` of the search's ids `[batch, hypotheses,
        output_length]` and their scores `[batch, hypotheses]`; "" and 0.0 where `empty` `[batch]`."""
        hypotheses = tf.shape(ids)[1]
        texts = tf.reshape(self.tokenizer.detokenize(tf.reshape(ids, [-1, self.output_length])), [-1, hypotheses])
        empty = empty[:, None]
        return tf.where(empty, tf.constant("", tf.string), texts), tf.where(empty, tf.zeros_like(scores), scores)

    def _serve(self, inputs):
        document = self._documents(inputs)
        return {name: document[name] for name in ("translations", "scores", "confidence")}

    def _n_best(self, inputs):
        tokens, empty = self._source_tokens(inputs)
        source_ids = tokens.to_tensor(default_value=PAD_ID)
        ids, searched, *encoded = self.n_best_search(source_ids)
        translations, scores = self._texts(ids, searched, empty)
        beam = self.beam_size
        log_probs = self._log_probs(
            lambda: [tf.repeat(part, beam, axis=0) for part in encoded],
            tf.reshape(ids, [-1, self.output_length]),
            tf.reshape(searched, [-1]),
            tf.repeat(empty, beam),
        )
        confidence = self._sentence_confidence(log_probs)
        return {"translations": translations, "scores": scores, "confidence": tf.reshape(confidence, [-1, beam])}

    def _score(self, inputs, targets):
        tf.debugging.assert_equal(
            tf.shape(inputs), tf.shape(targets), message="score needs one target per input sentence"
        )
        sources, _ = self._source_tokens(inputs)
        target_tokens, _ = self._tokens(targets)

        def forced_decoding():
            return score_ids(
                self.model, sources.to_tensor(default_value=PAD_ID), target_tokens.to_tensor(default_value=PAD_ID)
            )

        def no_pairs():
            return tf.zeros([0], tf.float32), tf.zeros([0], tf.int32)

        log_probs, lengths = tf.cond(tf.size(inputs) > 0, forced_decoding, no_pairs)
        confidence = tf.where(lengths > 0, tf.exp(log_probs / tf.cast(tf.maximum(lengths, 1), tf.float32)), 1.0)
        return {"log_probs": log_probs, "lengths": lengths, "confidence": confidence}

    def _translate_ids(self, source_ids):
        ids, scores, *_ = self.search(self._truncate(source_ids))
        return {"ids": ids[:, 0], "scores": scores[:, 0]}

    def _prefix(self, inputs, prefixes):
        tf.debugging.assert_equal(
            tf.shape(inputs), tf.shape(prefixes), message='prefix needs one prefix (or "") per input sentence'
        )
        tokens, empty = self._source_tokens(inputs)
        prefix_pieces = self._pieces(prefixes)  # ragged int32 [batch, (pieces)]
        prefix_lengths = tf.cast(prefix_pieces.row_lengths(), tf.int32)  # [batch]
        limits = tf.cast(tokens.row_lengths(), tf.int32) + self.max_extra_length  # the maximum output lengths
        too_long = prefix_lengths > limits
        check = tf.debugging.Assert(
            tf.logical_not(tf.reduce_any(too_long)),
            [
                PREFIX_TOO_LONG.format(max_extra_length=self.max_extra_length),
                "sentences (from 0):",
                tf.where(too_long)[:, 0],
                "prefix pieces:",
                tf.boolean_mask(prefix_lengths, too_long),
                "maximum output lengths:",
                tf.boolean_mask(limits, too_long),
            ],
            summarize=MAX_REPORTED,
        )
        with tf.control_dependencies([check]):
            # A static length for the search: no prefix that passed the check is longer.
            prefix_ids = prefix_pieces.to_tensor(default_value=PAD_ID, shape=[None, self.output_length])
        source_ids = tokens.to_tensor(default_value=PAD_ID)
        ids, scores, *encoded = self.prefix_search(source_ids, prefix_ids)
        # With a prefix, a sentence without tokens is searched from EOS alone, as Translator does.
        empty &= tf.equal(prefix_lengths, 0)
        translations, scores = self._texts(ids[:, :1], scores[:, :1], empty)
        confidence = self._sentence_confidence(self._log_probs(lambda: encoded, ids[:, 0], scores[:, 0], empty))
        return {"translations": translations[:, 0], "scores": scores[:, 0], "confidence": confidence}

    def _constrain(self, inputs, constraints):
        tf.debugging.assert_equal(
            tf.shape(inputs), tf.shape(constraints), message='constrain needs one line of phrases (or "") per input'
        )
        tokens, empty = self._source_tokens(inputs)
        source_ids = tokens.to_tensor(default_value=PAD_ID)
        lines = tf.strings.split(constraints, sep="\t")  # ragged [batch, (phrases)]; "" splits into [""]
        given = tf.repeat(tf.not_equal(constraints, ""), lines.row_lengths())
        phrases = tf.RaggedTensor.from_value_rowids(
            tf.boolean_mask(lines.values, given), tf.boolean_mask(lines.value_rowids(), given), lines.nrows()
        )
        pieces = self._pieces(phrases.values)  # ragged [phrases, (pieces)]
        counts = tf.cast(phrases.row_lengths(), tf.int32)  # [batch]
        piece_counts = tf.cast(pieces.row_lengths(), tf.int32)  # [phrases]
        limits = tf.repeat(tf.cast(tokens.row_lengths(), tf.int32) + self.max_extra_length, counts)
        sentence = tf.cast(phrases.value_rowids(), tf.int32)  # of each phrase
        checks = [
            self._refusal(tf.equal(piece_counts, 0), CONSTRAINT_REFUSALS["empty"], sentence),
            self._refusal(counts > MAX_PHRASES, CONSTRAINT_REFUSALS["phrases"], tf.range(tf.size(counts))),
            self._refusal(piece_counts > MAX_PHRASE_PIECES, CONSTRAINT_REFUSALS["pieces"], sentence),
            self._refusal(
                piece_counts > limits,
                CONSTRAINT_REFUSALS["long"].format(max_extra_length=self.max_extra_length),
                sentence,
            ),
        ]
        with tf.control_dependencies(checks):
            # Static sizes for the search: no line that passed the checks is larger.
            constraint_ids = tf.RaggedTensor.from_row_lengths(pieces, phrases.row_lengths()).to_tensor(
                default_value=PAD_ID, shape=[None, MAX_PHRASES, MAX_PHRASE_PIECES]
            )
        has_phrases = counts > 0
        ids, scores = self._searched_where(
            has_phrases, lambda: self.constrained_search(source_ids, constraint_ids)[:2], tf.shape(inputs)[0]
        )
        met = has_phrases & (scores[:, 0] > UNMET_SCORE / 2)
        # The plain search's translation where there are no phrases or they were not placed.
        plain_ids, plain_scores = self._searched_where(~met, lambda: self.search(source_ids)[:2], tf.shape(inputs)[0])
        ids = tf.where(met[:, None, None], ids, plain_ids)
        scores = tf.where(met[:, None], scores, plain_scores)
        # A sentence without tokens is "" unless its phrases were placed (as Translator gives it).
        translations, scores = self._texts(ids[:, :1], scores[:, :1], empty & ~met)
        # Each row comes from one of two searches, so a forced pass encodes the sources itself.
        log_probs = self._log_probs(
            lambda: self.model.encode(source_ids, training=False), ids[:, 0], scores[:, 0], empty & ~met
        )
        confidence = self._sentence_confidence(log_probs)
        return {
            "translations": translations[:, 0],
            "scores": scores[:, 0],
            "confidence": confidence,
            "constraints_met": met | ~has_phrases,
        }

    def _searched_where(self, wanted, search, batch_size):
        """`search()`'s `(ids, scores)` if any of bool `wanted` `[batch]` is True, else zeros of
        their shapes (the search is not run)."""

        def nothing():
            return (
                tf.zeros([batch_size, 1, self.output_length], tf.int32),
                tf.zeros([batch_size, 1], tf.float32),
            )

        return tf.cond(tf.reduce_any(wanted), search, nothing)

    def _refusal(self, bad, message, sentences):
        """A `tf.debugging.Assert` that fails, with `message` and the positions (from 0) of the
        `sentences` `[n]` where bool `bad` `[n]` is True, if any is."""
        return tf.debugging.Assert(
            tf.logical_not(tf.reduce_any(bad)),
            [message, "sentences (from 0):", tf.boolean_mask(sentences, bad)],
            summarize=MAX_REPORTED,
        )

    def _split(self, texts, tag_lengths):
        """`graph_documents.split` of `texts` whose inputs have `tag_lengths` tag ids before their
        pieces: the traced segmentation that `serve`, `align` and `markup` share."""

        def source_counts(pieces, rows):
            lengths = tf.cast(self._pieces(pieces, self.source_tokenizer).row_lengths(), tf.int32)
            return lengths + 1 + tf.where(lengths > 0, tf.gather(tag_lengths, rows), 0)

        return graph_documents.split(texts, source_counts, self.max_input_length, tag_lengths)

    def _token_scores(self, encoder_output, padding_mask, translation_ids):
        log_probs, lengths, _ = graph_confidence.token_scores(
            self.model, None, translation_ids, encoded=(encoder_output, padding_mask)
        )
        return log_probs, lengths, self.tokenizer.id_to_piece(graph_alignment.forced_targets(translation_ids))

    def _aligned_token_scores(self, source_ids, encoder_output, padding_mask, translation_ids):
        """`_token_scores`' outputs and the translations' word alignments, string `[batch]`
        (`graph_alignment.alignments`), of one forced pass."""
        layer, head = self.alignment_attention()
        targets = graph_alignment.forced_targets(translation_ids)
        log_probs, lengths, weights = token_log_probs(
            self.model, None, targets, encoded=(encoder_output, padding_mask), attention_layer=layer
        )
        links = graph_alignment.alignments(
            self.source_piece_flags, source_ids, targets, attended(weights, head), self.piece_flags
        )
        return log_probs, lengths, self.tokenizer.id_to_piece(targets), links

    def _truncate(self, source_ids):
        """Rows longer than max_input_length keep their first max_input_length - 1 tokens + EOS."""
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(source_ids, PAD_ID), tf.int32), axis=1)  # [batch]
        kept = source_ids[:, : self.max_input_length]
        last = tf.equal(tf.range(tf.shape(kept)[1]), self.max_input_length - 1)[None, :]  # [1, length]
        too_long = (lengths > self.max_input_length)[:, None]
        return tf.where(last & too_long, tf.constant(EOS_ID, tf.int32), kept)

    def _steered_search(self, num_return=1, **steering):
        """The traced search `(source_ids, *steering_tensors) -> (ids, scores, encoder_output,
        padding_mask)` (`_bucketed_search`) of each sentence's `num_return` best hypotheses, with
        extra `translate_ids` arguments as inputs: `steering` maps each argument's name to its
        `tf.TensorSpec`, with static shapes but the batch (`prefix_ids=TensorSpec([None,
        output_length], tf.int32)`). Each call of this traces one more search per bucket."""
        names = tuple(steering)

        def search(source_ids, *tensors):
            return self._bucketed_search(source_ids, dict(zip(names, tensors)), num_return)

        return _graph_function(
            traced_in_place(search),
            [tf.TensorSpec([None, None], tf.int32, name="source_ids"), *steering.values()],
            reduce_retracing=False,
        )

    def _bucketed_search(self, source_ids, steering, num_return):
        """Beam search in the smallest bucket holding `source_ids` `[batch, length <= max_input_length]`.

        `steering`: extra `translate_ids` arguments by name (e.g. `prefix_ids`), tensors `[batch,
        ...]` of static shapes, passed unchanged to every bucket's search; a `prefix_ids` of
        `output_length` columns is cut by the search to the bucket's `bucket + max_extra_length`,
        which no sentence's prefix may exceed (`_prefix` checks).

        Returns ids int32 `[batch, num_return, output_length]` and scores float32 `[batch,
        num_return]`, the best hypotheses first (`num_return` at most the beam size), and the
        search's `model.encode` of the sources padded to the bucket: `[batch, bucket, hidden_dim]`
        and bool `[batch, bucket]`.
        """
        batch_size = tf.shape(source_ids)[0]
        length = tf.shape(source_ids)[1]
        buckets = tf.constant(self.length_buckets, tf.int32)
        bucket_index = tf.reduce_sum(tf.cast(buckets < length, tf.int32))

        def bucket_search(bucket):
            def search():
                padded = tf.pad(source_ids, [[0, 0], [0, bucket - length]], constant_values=PAD_ID)
                padded = tf.ensure_shape(padded, [None, bucket])
                # An int8 model's matrices cast once for both the encoder and the search.
                with int8_weights.products_cast_once(self.model.variables):
                    encoded = self.model.encode(padded, training=False)
                    ids, scores = translate_ids(
                        self.model,
                        padded,
                        self.search_config,
                        num_return=num_return,
                        lexical_table=self.lexical_table,
                        encoded=encoded,
                        **steering,
                    )
                ids = tf.pad(ids, [[0, 0], [0, 0], [0, self.output_length - (bucket + self.max_extra_length)]])
                return tf.ensure_shape(ids, [None, num_return, self.output_length]), scores, *encoded

            return search

        def no_sentences():
            return (
                tf.zeros([0, num_return, self.output_length], tf.int32),
                tf.zeros([0, num_return], tf.float32),
                tf.zeros([0, 1, self.model.hidden_dim], self.model.compute_dtype),
                tf.zeros([0, 1], tf.bool),
            )

        def any_sentences():
            return tf.switch_case(bucket_index, [bucket_search(bucket) for bucket in self.length_buckets])

        return tf.cond(batch_size > 0, any_sentences, no_sentences)
