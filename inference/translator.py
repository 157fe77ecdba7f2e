"""Translating lists of sentences with a trained model: tokenize, sort by length, batch at a few
fixed shapes, beam search (compiled once per shape), detokenize, restore the input order.
"""

import math

import keras
import numpy as np

from common.progress import ProgressLine
from common.special_ids import EOS_ID, PAD_ID
from data import multilingual
from inference import documents, steering
from inference.alignment import AttentionMatrix, attention_weights, decoder_input, forced_target
from inference.batching import translate_in_order
from inference.lexical_table import ShortlistError
from inference.protocol import (
    DEFAULT_ALIGNMENT,
    AlignmentConfig,
    ConstraintError,
    PairScore,
    PrefixError,
    Sampling,
    TextTranslator,
)
from models.beam_search import UNMET_SCORE
from models.search_config import DEFAULT_SEARCH, SearchConfig
from models.token_scores import token_log_probs
from models.translation import translate_ids

LENGTH_MULTIPLE = 8

__all__ = ["ConstraintError", "PairScore", "PrefixError", "Sampling", "Translator", "compile_search"]


def compile_search(function, variables=(), any_shape=False):
    """`function(*arrays)` compiled for the current backend, reading `variables` at every call.

    TensorFlow: a `tf.function` without XLA (per-shape compilation costs more than it saves on
    CPUs) or AutoGraph (the models' control flow is explicit Keras ops, so converting their source
    would only slow tracing), caches written in place (`inference.in_place_cache`). JAX: `jax.jit`
    of a stateless version taking the variables' values as an argument; jitting `function` itself
    would freeze the weights of the first call as constants. Other backends: `function` as it is.

    `variables`: the Keras variables `function` reads (e.g. `model.variables`). `any_shape`: under
    TensorFlow, trace once for any input shape (a search needs static lengths; a forward pass not).
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":  # Each backend imports only its own library.
        import tensorflow as tf

        from inference.in_place_cache import traced_in_place

        return tf.function(traced_in_place(function), jit_compile=False, autograph=False, reduce_retracing=any_shape)
    if backend == "jax":  # Each backend imports only its own library.
        import jax

        variables = list(variables)

        def stateless(values, *arrays):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return function(*arrays)

        jitted = jax.jit(stateless)
        return lambda *arrays: jitted([variable.value for variable in variables], *arrays)
    return function


def length_batches(rows, batch_size, pad_id, order=None):
    """`(indices, batch)` for each `batch_size` rows (token id lists) taken in `order` (default: by
    length): `batch` int32 `[batch_size, length]`, the longest row rounded up to `LENGTH_MULTIPLE`,
    padded with `pad_id`; filler rows (a lone EOS, their results to drop) keep one batch shape, so a
    compiled search traces once per length."""
    order = sorted(range(len(rows)), key=lambda i: len(rows[i])) if order is None else order
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        length = LENGTH_MULTIPLE * math.ceil(max(len(rows[i]) for i in indices) / LENGTH_MULTIPLE)
        batch = np.full((batch_size, length), pad_id, "int32")
        batch[:, 0] = EOS_ID
        for row, index in enumerate(indices):
            batch[row, : len(rows[index])] = rows[index]
        yield indices, batch


class Translator(TextTranslator):
    """Translates sentences with `models.translation.translate_ids`, and scores given translations.

    Args:
        model: a trained `Transformer`.
        tokenizer: a `data.tokenizer.Tokenizer` (the target's with separate vocabularies).
        search: the default `SearchConfig` (`models.search_config.DEFAULT_SEARCH`). Its
            `max_input_length` is the source tokens (EOS included) kept per sentence; longer inputs
            are cut and listed in `truncated_indices`; None keeps everything.
        batch_size: sentences per search call; batches are padded to it and to a multiple of 8
            source tokens, so that the search compiles for a handful of shapes.
        target_tag: a multilingual model's target-language tag (e.g. "<2fr>"), put before each
            sentence's tokens as training does (`data.multilingual.tag_ids`).
        source_tokenizer: the source's tokenizer with separate vocabularies; None: `tokenizer`.
        shortlist: the lexical table a search with `shortlist` reads: a
            `models.vocabulary_shortlist.LexicalTable`, or a function returning one (called when a
            search first needs it); None: such a search is refused.

    Sentences with no tokens translate to "" with score 0.0, without a search, as in the exported
    graph. A sentence's translation does not depend on the rest of its batch (padding is masked,
    output lengths are per sentence, a sample depends on the seed and its key only).
    """

    def __init__(
        self,
        model,
        tokenizer,
        search=DEFAULT_SEARCH,
        *,
        batch_size=32,
        target_tag=None,
        source_tokenizer=None,
        shortlist=None,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, received {batch_size}")
        self.source_tokenizer = source_tokenizer or tokenizer
        self.tag_ids = [] if target_tag is None else multilingual.tag_ids(self.source_tokenizer, target_tag)
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.search = search
        self.truncated_indices = []
        self.empty_indices = []
        self.unmet_indices = []
        self._shortlist = shortlist
        self._searches = {}
        self._scorer = None
        self._aligners = {}

    @property
    def max_input_length(self):
        """Source tokens kept per sentence, EOS included (`search.max_input_length`); None: all."""
        return self.search.max_input_length

    @property
    def truncated(self):
        """How many inputs were cut to `max_input_length` so far."""
        return len(self.truncated_indices)

    def encode(self, sentences, max_input_length=None):
        """Token ids (target tag first, EOS last) of each sentence, cut to `max_input_length`
        (default: the translator's)."""
        if not sentences:
            return []
        limit = max_input_length or self.max_input_length
        ragged = self.source_tokenizer.tokenize(list(sentences))
        rows = [(self.tag_ids + list(row) if row else []) + [EOS_ID] for row in ragged.to_list()]
        if limit:
            for index, row in enumerate(rows):
                if len(row) > limit:
                    rows[index] = row[: limit - 1] + [EOS_ID]
                    self.truncated_indices.append(index)
        return rows

    def _search_function(self, search, n_best, prefixed=False, constrained=False):
        """The compiled `(source_ids, keys[, prefix_ids][, constraint_ids]) -> (ids, scores)`,
        kept for reuse."""
        settings = (search, n_best, prefixed, constrained)
        if settings not in self._searches:
            model = self.model
            table = self.shortlist_table(search.shortlist) if search.shortlist else None

            def search_ids(source_ids, keys, *steering):
                steering = list(steering)
                prefix_ids = steering.pop(0) if prefixed else None
                constraint_ids = steering.pop(0) if constrained else None
                return translate_ids(
                    model,
                    source_ids,
                    search,
                    num_return=n_best,
                    keys=keys if search.sampling is not None else None,
                    prefix_ids=prefix_ids,
                    constraint_ids=constraint_ids,
                    lexical_table=table,
                )

            self._searches[settings] = compile_search(search_ids, model.variables)
        return self._searches[settings]

    def shortlist_table(self, candidates):
        """The lexical table, for a search of `candidates` per source piece; ShortlistError when
        the translator has none or it holds fewer candidates."""
        if callable(self._shortlist):
            self._shortlist = self._shortlist()
        if self._shortlist is None:
            raise ShortlistError(f"shortlist={candidates}: this translator has no lexical table (pass shortlist=)")
        held = self._shortlist.candidates.shape[1]
        if candidates > held:
            raise ShortlistError(
                f"shortlist={candidates}: the lexical table holds {held} candidates per source piece; ask for at most "
                f"{held}, or build it with more (python -m training.shortlist --candidates=N)"
            )
        return self._shortlist

    def translate(
        self,
        sentences,
        progress=False,
        *,
        search=None,
        n_best=None,
        keys=None,
        prefixes=None,
        constraints=None,
        alignments=False,
        split_sentences=True,
        markup=False,
    ):
        """`TextTranslator.translate`; a caller translating a stream in pieces passes line numbers
        as `keys`. Sentences are split and markup handled by `inference.documents`; each sentence
        is searched by `translate_sentences`.

        Raises:
            AlignmentError, PrefixError, ConstraintError, DocumentError: as
                `TextTranslator.translate`, before any search.
        """
        settings = dict(search=search, n_best=n_best, keys=keys, prefixes=prefixes, constraints=constraints)
        if split_sentences or markup:
            return documents.translate(
                self,
                sentences,
                progress,
                alignments=alignments,
                split_sentences=split_sentences,
                markup=markup,
                **settings,
            )
        return self.translate_sentences(sentences, progress, alignments=alignments, **settings)

    def translate_lines(
        self,
        lines,
        progress=False,
        *,
        search=None,
        keys=None,
        prefixes=None,
        alignments=False,
        split_sentences=True,
        markup=False,
    ):
        """`TextTranslator.translate_lines`: a `Translation` per line (`inference.documents`)."""
        return documents.translate_lines(
            self,
            lines,
            progress,
            search=search,
            keys=keys,
            prefixes=prefixes,
            alignments=alignments,
            split_sentences=split_sentences,
            markup=markup,
        )

    def translate_sentences(
        self,
        sentences,
        progress=False,
        *,
        search=None,
        n_best=None,
        keys=None,
        prefixes=None,
        constraints=None,
        alignments=False,
        searched=None,
    ):
        """`translate` of each input whole, cut to `max_input_length`: the search itself. Inputs
        cut are aligned over the words they kept. `searched`: a dict filled with each searched
        position's `(source ids, best hypothesis's output ids)`, for token scores.

        Raises:
            AlignmentError, PrefixError, ConstraintError: as `TextTranslator.translate`, before
                any search.
        """
        sentences = list(sentences)
        search, keys = self._call_settings(search, n_best, constraints, len(sentences), keys)
        self.truncated_indices, self.unmet_indices = [], []
        rows = self.encode(sentences, search.max_input_length)
        source_lengths = [len(row) for row in rows]
        prefix_rows = steering.prefix_pieces(self.tokenizer, prefixes, source_lengths, search.max_extra_length)
        phrase_rows = steering.constraint_pieces(self.tokenizer, constraints, source_lengths, search.max_extra_length)
        # Input without tokens (EOS alone), prefix or constraints translates to empty output without
        # a search; the rest is sorted by length so that each batch pads little.
        self.empty_indices = [i for i, row in enumerate(rows) if len(row) == 1 and not prefix_rows[i] + phrase_rows[i]]
        empty = set(self.empty_indices)
        # Sentences with constraints first: a batch mixes them with the others only at the boundary.
        to_search = (i for i in range(len(rows)) if i not in empty)
        order = sorted(to_search, key=lambda i: (not phrase_rows[i], len(rows[i])))
        unmet = []
        aligner = self._alignment_function(alignments) if alignments else None
        aligned = {}  # position -> its alignment (n_best: the list of them)

        def translate_group(indices):
            batch_keys = np.zeros((self.batch_size,), "int64")
            batch_keys[: len(indices)] = [keys[i] for i in indices]
            arrays = [self._pad([rows[i] for i in indices]), batch_keys]
            prefixed = any(prefix_rows[i] for i in indices)
            if prefixed:
                arrays.append(self._pad_prefixes([prefix_rows[i] for i in indices]))
            constrained = any(phrase_rows[i] for i in indices)
            if constrained:
                arrays.append(self._pad_constraints([phrase_rows[i] for i in indices]))
            compiled = self._search_function(search, n_best or 1, prefixed, constrained)
            ids, batch_scores = compiled(*(keras.ops.convert_to_tensor(array) for array in arrays))
            ids = keras.ops.convert_to_numpy(ids)[: len(indices)]
            batch_scores = keras.ops.convert_to_numpy(batch_scores)[: len(indices)]
            if constrained:
                unmet.extend(i for i, row in zip(indices, batch_scores) if row[: n_best or 1].min() <= UNMET_SCORE / 2)
            if searched is not None:
                searched.update((i, (rows[i], ids[row, 0])) for row, i in enumerate(indices))
            if aligner is not None:
                batch_alignments = self._align([rows[i] for i in indices], ids[:, : n_best or 1], aligner)
                aligned.update((i, a if n_best else a[0]) for i, a in zip(indices, batch_alignments))
            if n_best is None:
                return self.tokenizer.detokenize(ids[:, 0]).numpy(), batch_scores[:, 0]
            texts = self.tokenizer.detokenize(ids.reshape((-1, ids.shape[-1]))).numpy()
            return texts.reshape((len(indices), n_best)), batch_scores[:, :n_best]

        def translate_batch(indices):
            # Sentences with constraints and those without are searched apart (the constrained
            # search is another algorithm), so that no sentence's translation depends on its batch.
            return _apart(indices, lambda i: bool(phrase_rows[i]), translate_group)

        translations, scores = translate_in_order(
            len(sentences), order, self.batch_size, translate_batch, progress, n_best
        )
        if unmet:
            settings = dict(search=search, n_best=n_best, alignments=alignments, searched=searched)
            self._translate_unconstrained(
                sorted(unmet), sentences, keys, prefixes, (translations, scores, aligned), settings
            )
        if aligner is None:
            return translations, scores
        unaligned = "" if n_best is None else [""] * n_best
        return translations, scores, [aligned.get(i, unaligned) for i in range(len(sentences))]

    def _call_settings(self, search, n_best, constraints, count, keys):
        """`(search, keys)` of a call of `count` sentences: the call's search (input limit
        defaulting to the translator's), one beam when sampling, `keys` defaulting to positions.
        ValueError: sampling with n-best or constraints, `n_best` out of range, not `count` keys."""
        if search is None:
            search = self.search
        elif not isinstance(search, SearchConfig):
            raise TypeError(f"search must be a SearchConfig, received {search!r}")
        search = search.override(max_input_length=search.max_input_length or self.max_input_length)
        if search.sampling is not None:
            if constraints is not None and any(constraints):
                raise ValueError("sampling draws translations without a search; constraints need the beam search")
            if n_best not in (None, 1):
                raise ValueError(f"sampling draws one translation per sentence; n_best must be 1, received {n_best}")
            search = search.override(beam_size=1)
        if n_best is not None and not 1 <= n_best <= search.beam_size:
            raise ValueError(f"n_best must be in [1, beam_size={search.beam_size}], received {n_best}")
        keys = list(range(count)) if keys is None else [int(key) for key in keys]
        if len(keys) != count:
            raise ValueError(f"keys must have one int per sentence: {len(keys)} keys for {count} sentences")
        return search, keys

    def _translate_unconstrained(self, unmet, sentences, keys, prefixes, results, settings):
        """Replaces the results at positions `unmet` by their translations without constraints,
        and records those positions in `unmet_indices`."""
        translations, scores, aligned = results
        recorded = self.truncated_indices, self.empty_indices
        searched = settings.pop("searched")
        searched_again = None if searched is None else {}
        again = self.translate_sentences(
            [sentences[i] for i in unmet],
            keys=[keys[i] for i in unmet],
            prefixes=None if prefixes is None else [prefixes[i] for i in unmet],
            searched=searched_again,
            **settings,
        )
        if searched is not None:
            searched.update((unmet[k], value) for k, value in searched_again.items())
        self.truncated_indices, self.empty_indices = recorded
        for k, index in enumerate(unmet):
            translations[index], scores[index] = again[0][k], again[1][k]
            if settings["alignments"]:
                aligned[index] = again[2][k]
        self.unmet_indices = unmet

    def _alignment_function(self, alignments):
        """The compiled `(source_ids, target_input_ids) -> attention [batch, target, source]`;
        AlignmentError for a layer or head the model does not have."""
        if alignments is not True and not isinstance(alignments, AlignmentConfig):
            raise ValueError(f"alignments must be True or an AlignmentConfig, received {alignments!r}")
        config = DEFAULT_ALIGNMENT if alignments is True else alignments
        layer, head = config.resolve(self.model.num_decoder_layers, self.model.num_heads)
        if (layer, head) not in self._aligners:
            self._aligners[layer, head] = compile_search(
                lambda source, target: attention_weights(self.model, source, target, layer, head),
                self.model.variables,
                any_shape=True,
            )
        return self._aligners[layer, head]

    def _align(self, rows, ids, aligner):
        """Pharaoh alignments per sentence, one per hypothesis. `rows`: the source ids (EOS
        included); `ids`: int `[sentences, hypotheses, length]` from the search."""
        hypotheses = ids.shape[1]
        targets = [forced_target(hypothesis) for row in ids for hypothesis in row]
        sources = [rows[index // hypotheses] for index in range(len(targets))]
        rows_padded = self.batch_size * hypotheses  # a fixed batch, as the search's
        weights = aligner(
            keras.ops.convert_to_tensor(self._pad(sources, rows_padded)),
            keras.ops.convert_to_tensor(self._pad([decoder_input(target) for target in targets], rows_padded)),
        )
        weights = keras.ops.convert_to_numpy(weights)  # [rows_padded, target length, source length]
        alignments = [
            AttentionMatrix.of(
                self.tokenizer, weights[k, : len(target), : len(source)], source, target, self.source_tokenizer
            ).alignment()
            for k, (source, target) in enumerate(zip(sources, targets))
        ]
        return [alignments[start : start + hypotheses] for start in range(0, len(alignments), hypotheses)]

    def _pad_constraints(self, phrase_rows):
        """int32 `[batch_size, phrases, length]`, PAD-filled; phrases a power of 2 and length a
        multiple of 8, so that few shapes compile."""
        count = 1 << (max(len(sentence) for sentence in phrase_rows) - 1).bit_length()
        longest = max((len(phrase) for sentence in phrase_rows for phrase in sentence), default=1)
        padded = np.full(
            (self.batch_size, count, LENGTH_MULTIPLE * math.ceil(longest / LENGTH_MULTIPLE)), PAD_ID, "int32"
        )
        for index, sentence in enumerate(phrase_rows):
            for number, phrase in enumerate(sentence):
                padded[index, number, : len(phrase)] = phrase
        return padded

    def _pad_prefixes(self, prefix_rows):
        """int32 `[batch_size, multiple of 8]`: the prefixes, then PAD; filler rows are PAD alone."""
        length = LENGTH_MULTIPLE * max(1, math.ceil(max(len(row) for row in prefix_rows) / LENGTH_MULTIPLE))
        padded = np.full((self.batch_size, length), PAD_ID, dtype="int32")
        for index, row in enumerate(prefix_rows):
            padded[index, : len(row)] = row
        return padded

    def token_scorer(self):
        """`models.token_scores.token_log_probs` of the model, compiled once for any shape
        (`compile_search`): `score`'s forced decoding and `translate_lines`' token scores."""
        if self._scorer is None:
            model = self.model

            def scorer(source, target):  # A def, not a lambda: autograph reads its source.
                return token_log_probs(model, source, target)

            self._scorer = compile_search(scorer, model.variables, any_shape=True)
        return self._scorer

    def _pad(self, rows, row_count=None):
        """int32 `[row_count (default batch_size), multiple of 8]`: `rows` padded with PAD; filler
        rows are EOS alone."""
        length = LENGTH_MULTIPLE * math.ceil(max(len(row) for row in rows) / LENGTH_MULTIPLE)
        padded = np.full((row_count or self.batch_size, length), PAD_ID, dtype="int32")
        padded[:, 0] = EOS_ID
        for index, row in enumerate(rows):
            padded[index, : len(row)] = row
        return padded

    def score(self, sources, targets, progress=False):
        """`TextTranslator.score`. Sources are cut to `max_input_length` (`truncated_indices`);
        targets are scored whole with EOS, an empty one scoring the EOS alone."""
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(f"score needs one target per source: {len(sources)} sources, {len(targets)} targets")
        self.truncated_indices = []
        source_rows = self.encode(sources)
        target_rows = [list(row) + [EOS_ID] for row in self.tokenizer.tokenize(targets).to_list()] if targets else []
        order = sorted(range(len(sources)), key=lambda i: (len(source_rows[i]), len(target_rows[i])))
        results = [None] * len(sources)
        done, line = 0, ProgressLine() if progress else None
        for start in range(0, len(order), self.batch_size):
            indices = order[start : start + self.batch_size]
            source = self._pad([source_rows[i] for i in indices])
            target = self._pad([target_rows[i] for i in indices])
            log_probs, lengths = self.token_scorer()(
                keras.ops.convert_to_tensor(source), keras.ops.convert_to_tensor(target)
            )
            # `score_ids`' sums, of the per-token pass that `translate_lines`' token scores share.
            log_probs, lengths = keras.ops.convert_to_numpy(log_probs).sum(axis=1), keras.ops.convert_to_numpy(lengths)
            for row, index in enumerate(indices):
                results[index] = PairScore(float(log_probs[row]), int(lengths[row]))
            done += len(indices)
            if line is not None:
                line.update(f"scored {done}/{len(order)} pairs", final=done == len(order))
        return results


def _apart(indices, grouped, translate):
    """`translate(indices)`'s `(texts, scores)`, with the positions where `grouped(i)` is True and
    the others translated in two calls when both are there."""
    groups = [group for group in ([i for i in indices if grouped(i)], [i for i in indices if not grouped(i)]) if group]
    if len(groups) == 1:
        return translate(indices)
    results = {}
    for group in groups:
        results.update(zip(group, zip(*translate(group))))
    return [results[i][0] for i in indices], [results[i][1] for i in indices]
