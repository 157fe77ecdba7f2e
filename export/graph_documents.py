"""Documents inside the SavedModel's graph: each input cut into sentences by the length rule of
docs/translating.md ("Documents": `export.graph_segmentation` without a budget, then twice more,
with a per-sentence budget, for a sentence over `max_input_length` source ids), and the sentences'
translations put back together: joined with the input's separators, scores summed, confidence
token-weighted, token scores concatenated and word alignments offset to the whole input.
"""

import tensorflow as tf

from common.special_ids import PAD_ID
from export import graph_markup
from export.graph_segmentation import owners, ragged, segment, tokens_of
from inference.markup import WORD
from models.beam_search import length_penalty

# How many times a sentence still over `max_input_length` is cut again by its own budget.
LENGTH_PASSES = 2


def split(texts, token_counts, max_input_length, tag_lengths):
    """The sentences of string `[batch]` `texts`: `(pieces, separators)`, ragged `[batch, (pieces)]`
    and `[batch, (pieces + 1)]`, as `inference.segmentation.Segments` of each text.

    Args:
        token_counts: `(pieces, rows) -> int32 [pieces]`, each piece's source ids (its input's
            target-language tag, SentencePiece pieces, EOS) for the input `rows` (int64) it is of.
        max_input_length: the source ids a search takes (int), L of the length rule.
        tag_lengths: int32 `[batch]`, the tag ids before each input's pieces (T of the rule).
    """
    pieces, separators = segment(texts)
    for _ in range(LENGTH_PASSES):
        pieces, separators = _cut_long(pieces, separators, token_counts, max_input_length, tag_lengths)
    return pieces, separators


def _cut_long(pieces, separators, token_counts, limit, tag_lengths):
    """`pieces` and `separators` with each piece of n > `limit` source ids cut again by the budget
    max(1, C * (limit - 1 - T) * 9 // ((n - 1 - T) * 10)), C its characters."""
    flat, rows = pieces.flat_values, pieces.value_rowids()
    counts = tf.cast(token_counts(flat, rows), tf.int64)
    tags = tf.cast(tf.gather(tag_lengths, rows), tf.int64)
    characters = tf.cast(tf.strings.length(flat, unit="UTF8_CHAR"), tf.int64)
    over = counts > limit
    budget = (characters * (limit - 1 - tags) * 9) // (tf.maximum(counts - 1 - tags, 1) * 10)
    # A piece within the limit gets its own length as budget: it stays whole.
    budget = tf.cast(tf.where(over, tf.maximum(budget, 1), tf.maximum(characters, 1)), tf.int32)

    def cut():
        parts, inner = segment(flat, budget)  # [pieces, (parts)], [pieces, (parts + 1)]
        owner = parts.value_rowids()
        first = tf.equal(tf.ragged.range(parts.row_lengths()).flat_values, 0)
        # A piece starts and ends with a word: its own first and last separators are "".
        before = tf.where(first, tf.gather(separators[:, :-1].flat_values, owner), inner[:, :-1].flat_values)
        new_rows, nrows = tf.gather(rows, owner), pieces.nrows()
        return ragged(parts.flat_values, new_rows, nrows), tf.concat(
            [ragged(before, new_rows, nrows), separators[:, -1:]], axis=1
        )

    return tf.cond(tf.reduce_any(over), cut, lambda: (pieces, separators))


def whole(texts):
    """Each input as its one sentence, as `split` gives them: `(pieces, separators)`."""
    texts = tf.convert_to_tensor(texts, tf.string)
    return tf.RaggedTensor.from_tensor(texts[:, None]), tf.RaggedTensor.from_tensor(
        tf.fill([tf.shape(texts)[0], 2], "")
    )


def joined(separators, translations):
    """string `[batch]`: each input's separators with its sentences' translations (ragged `[batch,
    (pieces)]`) between them, `Segments.join`."""
    ends = tf.RaggedTensor.from_tensor(tf.fill([translations.nrows(), 1], ""))
    padded = tf.concat([translations, ends], axis=1)
    return tf.strings.reduce_join(separators.with_flat_values(separators.flat_values + padded.flat_values), axis=1)


def confidence(log_probs, lengths, rows, nrows):
    """float32 `[batch]`: exp(mean log p) over every token of an input's sentences (`log_probs`
    float32 `[sentences, length]`, 0 after a sentence's `lengths` int32 `[sentences]`), 1.0 for an
    input without tokens."""
    total = tf.math.unsorted_segment_sum(tf.reduce_sum(log_probs, axis=1), rows, nrows)
    count = tf.math.unsorted_segment_sum(lengths, rows, nrows)
    return tf.where(count > 0, tf.exp(total / tf.cast(tf.maximum(count, 1), tf.float32)), 1.0)


def concatenated(values, lengths, rows, nrows, fill):
    """Each input's sentences' first `lengths` values of `values` `[sentences, length]` one after
    the other: `[batch, longest]`, `fill` after an input's, and int32 `[batch]` their counts."""
    kept = tf.RaggedTensor.from_tensor(values, lengths=lengths).flat_values
    owner = tf.gather(rows, owners(tf.cast(lengths, tf.int64)))
    counts = tf.math.unsorted_segment_sum(lengths, rows, nrows)
    return ragged(kept, owner, nrows).to_tensor(default_value=fill), counts


def word_counts(texts):
    """int64 `[n]`: the whitespace-separated words of each of string `[n]` `texts` (`str.split`)."""
    tokens, rows = tokens_of(texts, WORD)
    is_word = tf.cast(tf.strings.regex_full_match(tokens, WORD), tf.int64)
    return tf.math.unsorted_segment_sum(is_word, rows, tf.shape(texts, out_type=tf.int64)[0])


def offset_alignments(alignments, sources, translations, pieces):
    """string `[batch]`: the Pharaoh alignments (string `[sentences]`) of the sentences `sources`
    and their `translations` as one per input, each link offset by the words of the input's
    sentences before its own, on both sides. `pieces`: the ragged `[batch, (pieces)]` sentences."""
    rows = pieces.value_rowids()
    firsts = tf.gather(pieces.row_splits[:-1], rows)  # each sentence's input's first sentence

    def offsets(counts):
        before = tf.cumsum(counts, exclusive=True)
        return before - tf.gather(before, firsts)

    links = tf.strings.split(alignments)  # ragged [sentences, (links)]
    pairs = tf.strings.to_number(tf.strings.split(links.flat_values, "-").to_tensor(shape=[None, 2]), tf.int64)
    sentence = links.value_rowids()
    shifts = tf.stack([tf.gather(offsets(word_counts(text)), sentence) for text in (sources, translations)], axis=1)
    pairs += shifts
    texts = tf.strings.as_string(pairs[:, 0]) + "-" + tf.strings.as_string(pairs[:, 1])
    return tf.strings.reduce_join(ragged(texts, tf.gather(rows, sentence), pieces.nrows()), axis=1, separator=" ")


class DocumentFunctions:
    """The `align` and `markup` signatures and the document step of `serve`, for
    `export.serving_module.ServingModule`, whose `search`, `search_config`, `lexical_table`,
    `splitter`, `token_scorer`, `aligner`, `_repaired`, `_tokens`, `_texts`, `_target_tags` and
    `split_sentences` they use."""

    def _align(self, inputs):
        return self._documents(inputs, aligned=True)

    def _markup(self, inputs):
        masked = graph_markup.mask(self._repaired(inputs))
        document = self._documents(masked["text"], aligned=True)
        translations, notes = graph_markup.restore(masked, document["translations"], document["alignments"])
        kept = ("scores", "confidence", "tokens", "token_scores", "token_counts")
        return {
            "translations": translations,
            **{name: document[name] for name in kept},
            "notes": tf.strings.reduce_join(notes, axis=1, separator="\n"),
        }

    def _documents(self, inputs, aligned=False):
        """The document step of `serve`, `align` and `markup`: each input UTF-8 repaired and cut
        into sentences (`splitter`, `split` traced once; without `split_sentences`, whole), the
        sentences translated together (`_sentence_translations`) and put back per input. A dict
        of "translations", "scores" (summed), "confidence" (token-weighted); with `aligned`, "alignments" (offset to
        the whole input), "token_scores" float32 `[batch, longest]` (0 after an input's),
        "token_counts" int32 `[batch]` and "tokens" string `[batch, longest]` ("" after)."""
        inputs = self._repaired(inputs)
        if self.split_sentences:
            tag_lengths = tf.zeros(tf.shape(inputs), tf.int32)
            if self._target_tags is not None:
                tag_lengths = tf.cast(self._target_tags.row_lengths(), tf.int32)
            pieces, separators = self.splitter(inputs, tag_lengths)
        else:
            pieces, separators = whole(inputs)
        rows, nrows = pieces.value_rowids(), pieces.nrows()
        sentences = self._sentence_translations(pieces.flat_values, rows, aligned)
        outputs = {
            "translations": joined(separators, pieces.with_flat_values(sentences["translations"])),
            "scores": tf.math.unsorted_segment_sum(sentences["scores"], rows, nrows),
            "confidence": confidence(sentences["log_probs"], sentences["lengths"], rows, nrows),
        }
        if aligned:
            outputs["alignments"] = offset_alignments(
                sentences["alignments"], pieces.flat_values, sentences["translations"], pieces
            )
            lengths = sentences["lengths"]
            outputs["token_scores"], outputs["token_counts"] = concatenated(
                sentences["log_probs"], lengths, rows, nrows, 0.0
            )
            outputs["tokens"], _ = concatenated(sentences["tokens"], lengths, rows, nrows, "")
        return outputs

    def _tags_of(self, rows):
        """The target-language tag ids of the inputs `rows` (int64 `[n]`), None without tags."""
        return None if self._target_tags is None else tf.gather(self._target_tags, rows)

    def _sentence_translations(self, sentences, rows, aligned):
        """The best translation of each of string `[n]` `sentences` of the inputs `rows`: a dict of
        "translations", "scores" and `_log_probs`', or with `aligned` `_scored`'s with its
        "alignments"."""
        tokens, empty = self._tokens(sentences, self.max_input_length, self._tags_of(rows), self.source_tokenizer)
        source_ids = tokens.to_tensor(default_value=PAD_ID)
        ids, searched, *encoded = self.search(source_ids)
        translations, scores = self._texts(ids[:, :1], searched[:, :1], empty)
        result = {"translations": translations[:, 0], "scores": scores[:, 0]}
        if aligned:
            result.update(self._scored(encoded, ids[:, 0], empty, source_ids))
        else:
            result.update(self._log_probs(lambda: encoded, ids[:, 0], searched[:, 0], empty))
        return result

    def _scored(self, encoded, translation_ids, empty, source_ids=None):
        """The token scores of the search's best hypotheses `translation_ids` `[n, length]` of the
        sources `encoded` (`model.encode`'s output and padding mask, the search's): "log_probs"
        float32 `[n, longest]`, "lengths" int32 `[n]` and "tokens" string `[n, longest]` (the
        pieces, EOS included), no token where bool `empty` `[n]`. Given the search's `source_ids`,
        also their word "alignments", string `[n]` ("" where `empty`), of the same forced pass."""

        def forced_pass():
            if source_ids is None:
                return self.token_scorer(*encoded, translation_ids)
            return self.aligner(source_ids, *encoded, translation_ids)

        def no_sentences():
            nothing = (tf.zeros([0, 1], tf.float32), tf.zeros([0], tf.int32), tf.zeros([0, 1], tf.string))
            return nothing if source_ids is None else (*nothing, tf.zeros([0], tf.string))

        log_probs, lengths, tokens, *links = tf.cond(tf.shape(translation_ids)[0] > 0, forced_pass, no_sentences)
        scored = {
            "log_probs": tf.where(empty[:, None], 0.0, log_probs),
            "lengths": tf.where(empty, 0, lengths),
            "tokens": tokens,
        }
        if links:
            scored["alignments"] = tf.where(empty, tf.constant("", tf.string), links[0])
        return scored

    def _searched_log_probs(self, translation_ids, scores, empty):
        """`_scored`'s "log_probs" (each row's total, `[n, 1]`) and "lengths" without a forced pass:
        the search's score of each best hypothesis times its length penalty is its log-probability
        under the model (the search normalises over the whole vocabulary whatever it bars; not so
        over a shortlist's columns, which `_scored` is for)."""
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(translation_ids, PAD_ID), tf.int32), axis=1)  # EOS included
        totals = scores * length_penalty(lengths, self.search_config.alpha)
        return {"log_probs": tf.where(empty, 0.0, totals)[:, None], "lengths": tf.where(empty, 0, lengths)}

    def _sentence_confidence(self, scored):
        """float32 `[n]`: the confidence of each row of `_scored`'s or `_searched_log_probs`' result."""
        rows = tf.range(tf.shape(scored["lengths"], out_type=tf.int64)[0])
        return confidence(scored["log_probs"], scored["lengths"], rows, tf.size(rows, tf.int64))

    def _log_probs(self, encoded, translation_ids, scores, empty):
        """The "log_probs" and "lengths" of the search's hypotheses `translation_ids` `[n, length]`
        scored `scores` `[n]` (none where `empty`): from those scores (`_searched_log_probs`); with a
        shortlist, whose scores are over its columns only, by a forced pass (`_scored`) from
        `encoded()`, the sources' `model.encode` output and padding mask (called only then)."""
        if self.lexical_table is None:
            return self._searched_log_probs(translation_ids, scores, empty)
        return self._scored(encoded(), translation_ids, empty)
