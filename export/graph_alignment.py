"""Word alignments inside the SavedModel's graph, for the `align` signature: `inference.alignment`'s
pieces-to-words and Pharaoh strings as TensorFlow ops, under the same names; that plain version is
what these must equal (tests/export/test_graph_alignment.py, test_fresh_process.py). The graph holds
no piece strings: two flags per vocabulary id (`PieceFlags`), read when it is built.
"""

from typing import NamedTuple

import numpy as np
import tensorflow as tf

from common.special_ids import EOS_ID, PAD_ID, UNK_ID
from data import multilingual
from inference.alignment import NOT_WORDS, WORD_MARKER, pieces_of

# The name of the word numbering's loop, which the graph's function names carry.
WORD_NUMBERING = "word_numbering"


class PieceFlags(NamedTuple):
    """What `inference.alignment.word_indices` reads of each piece, bool `[vocabulary]` each:
    `starts_word` (begins with `WORD_MARKER`), `has_text` (a character besides it), `is_tag` (a
    target-language tag; None for none)."""

    starts_word: np.ndarray
    has_text: np.ndarray
    is_tag: np.ndarray | None = None


def piece_flags(pieces):
    """The `PieceFlags` of a list of pieces (str), in their order."""
    return PieceFlags(
        np.array([piece.startswith(WORD_MARKER) for piece in pieces], bool),
        np.array([bool(piece.lstrip(WORD_MARKER)) for piece in pieces], bool),
        np.array([bool(multilingual.tag_language(piece)) for piece in pieces], bool),
    )


def vocabulary_flags(tokenizer):
    """The `PieceFlags` of every id of a `data.tokenizer.Tokenizer`'s vocabulary (run eagerly)."""
    return piece_flags(pieces_of(tokenizer, list(range(tokenizer.vocabulary_size))))


def word_indices(ids, starts_word, has_text, is_tag=None):
    """`inference.alignment.word_indices` of each row: int32 `[rows, length]`.

    `ids`: int32 `[rows, length]`; `starts_word`, `has_text`, `is_tag` (or None): bool `[rows,
    length]`, each token's `PieceFlags`.
    """
    ids = tf.convert_to_tensor(ids, tf.int32)
    unknown = tf.equal(ids, UNK_ID)
    no_word = tf.reduce_any(tf.equal(ids[:, :, None], tf.constant(NOT_WORDS, tf.int32)), axis=2)
    if is_tag is not None:  # A tag, and the lone word marker before it, are no word.
        next_is_tag = tf.concat([is_tag[:, 1:], tf.zeros_like(is_tag[:, :1])], axis=1)
        no_word = no_word | is_tag | (starts_word & ~has_text & ~unknown & next_is_tag)
    text = tf.logical_or(has_text, unknown)  # what a token adds to its word's text
    rows = tf.shape(ids)[0]

    def step(state, token):
        closed, count, word_has_text, _ = state  # per row; `count` words so far, the last one's text
        starts, has, unk, skipped = token
        bare = (count > 0) & ~word_has_text & ~closed  # the word so far is markers alone
        new_word = (starts | unk | closed) & ~bare & ~skipped
        count += tf.cast(new_word, tf.int32)
        word_has_text = tf.where(skipped, word_has_text, tf.where(new_word, has, word_has_text | has))
        closed = tf.where(skipped, closed, unk)  # <unk> is a word of its own
        return closed, count, word_has_text, tf.where(skipped, -1, count - 1)

    false, zero = tf.zeros([rows], tf.bool), tf.zeros([rows], tf.int32)
    initial = (~false, zero, false, zero)  # closed: the first piece starts a word
    time_major = tuple(tf.transpose(flags) for flags in (starts_word, text, unknown, no_word))  # [length, rows]
    words = tf.transpose(tf.scan(step, time_major, initializer=initial, name=WORD_NUMBERING)[3])  # [rows, length]
    # A word with no text is no word; the others are renumbered from 0.
    length = tf.shape(ids)[1]
    member = tf.equal(words[:, :, None], tf.range(length)[None, None, :])  # [rows, tokens, words]
    word_text = tf.reduce_any(member & text[:, :, None], axis=1)  # [rows, words]
    renumbered = tf.cumsum(tf.cast(word_text, tf.int32), axis=1) - 1
    word = tf.maximum(words, 0)
    kept = (words >= 0) & tf.gather(word_text, word, batch_dims=1)
    return tf.where(kept, tf.gather(renumbered, word, batch_dims=1), -1)


def word_weights(weights, source_words, target_words):
    """`inference.alignment.word_weights` of each row: float32 `[batch, target tokens, source tokens]`,
    its words' weights first, zeros after them. `source_words`, `target_words`: int32 `[batch, tokens]`."""
    weights = tf.cast(weights, tf.float32)
    to_source = tf.cast(tf.equal(source_words[:, :, None], tf.range(tf.shape(source_words)[1])), tf.float32)
    to_target = tf.cast(tf.equal(target_words[:, :, None], tf.range(tf.shape(target_words)[1])), tf.float32)
    summed = tf.matmul(weights, to_source)  # [batch, target tokens, source words]
    totals = tf.matmul(to_target, summed, transpose_a=True)  # [batch, target words, source words]
    return totals / tf.maximum(tf.reduce_sum(to_target, axis=1), 1.0)[:, :, None]


def pharaoh(weights, source_counts, target_counts):
    """`inference.alignment.pharaoh` of each row: string `[batch]`. Row b's words are the first
    `target_counts[b]` rows and `source_counts[b]` columns (int32 `[batch]`) of its `weights`."""
    columns = tf.range(tf.shape(weights)[2])
    weights = tf.where(columns[None, None, :] < source_counts[:, None, None], weights, -np.inf)
    largest = tf.reduce_max(weights, axis=2, keepdims=True)
    # The first of equal weights, as NumPy's argmax (tf.argmax leaves ties unspecified).
    source = tf.reduce_min(tf.where(tf.equal(weights, largest), columns, tf.shape(weights)[2]), axis=2)
    targets = tf.range(tf.shape(weights)[1])
    links = tf.strings.as_string(source) + "-" + tf.strings.as_string(targets)[None, :]  # [batch, target words]
    linked = (targets[None, :] < target_counts[:, None]) & (source_counts[:, None] > 0)
    return tf.strings.reduce_join(tf.ragged.boolean_mask(links, linked), axis=1, separator=" ")


def forced_targets(translation_ids):
    """`inference.alignment.forced_target` of each row of int32 `[batch, length]` search output:
    int32 `[batch, longest target]`, PAD-padded."""
    ids = tf.convert_to_tensor(translation_ids, tf.int32)
    after_eos = tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=1, exclusive=True) > 0
    from_pad = tf.cumsum(tf.cast(tf.equal(ids, PAD_ID), tf.int32), axis=1) > 0
    kept = ~after_eos & ~from_pad
    lengths = tf.reduce_sum(tf.cast(kept, tf.int32), axis=1)  # [batch]
    positions = tf.range(tf.shape(ids)[1])
    # A row that keeps no token is EOS alone.
    targets = tf.where(kept, ids, PAD_ID)
    targets = tf.where((lengths[:, None] == 0) & (positions[None, :] == 0), EOS_ID, targets)
    width = tf.reduce_max(tf.concat([tf.maximum(lengths, 1), [1]], axis=0))
    return targets[:, :width]


def alignments(flags, source_ids, targets, weights, target_flags=None):
    """The Pharaoh word alignment of each translation, string `[batch]`, as
    `inference.alignment.AttentionMatrix.alignment` gives it.

    Args:
        flags: the source vocabulary's `PieceFlags`; `target_flags` the target's (None: `flags`).
        source_ids: int32 `[batch, length]`, tokens + EOS, PAD-padded.
        targets: int32 `[batch, target_length]`, the translations' `forced_targets`.
        weights: float32 `[batch, target_length, source columns]`, the attention `align` reads
            (`inference.alignment.attended`) of the targets forced through the decoder; the columns
            after the sources' `length` (an encoding padded further, a search's) are left out.
    """
    target_flags = flags if target_flags is None else target_flags
    batch, source_length, target_length = tf.shape(source_ids)[0], tf.shape(source_ids)[1], tf.shape(targets)[1]
    weights = weights[:, :, :source_length]  # An encoding's padding beyond the sources has no weight.
    # Both sides numbered in one scan: the sources' rows, then the targets', PAD-padded to one length.
    width = tf.maximum(source_length, target_length)
    sides = [
        tf.pad(source_ids, [[0, 0], [0, width - source_length]], constant_values=PAD_ID),
        tf.pad(targets, [[0, 0], [0, width - target_length]], constant_values=PAD_ID),
    ]
    both = tf.concat(sides, axis=0)  # [2 * batch, width]

    def gathered(name):
        """Each token's flag `name` from its side's vocabulary, None where neither has the flag."""
        tables = [getattr(side_flags, name) for side_flags in (flags, target_flags)]
        if all(table is None for table in tables):
            return None
        return tf.concat(
            [
                tf.zeros_like(ids, tf.bool) if table is None else tf.gather(table, ids)
                for table, ids in zip(tables, sides)
            ],
            axis=0,
        )

    words = word_indices(both, gathered("starts_word"), gathered("has_text"), gathered("is_tag"))
    source_words, target_words = words[:batch, :source_length], words[batch:, :target_length]
    return pharaoh(
        word_weights(tf.convert_to_tensor(weights), source_words, target_words),
        tf.reduce_max(source_words, axis=1) + 1,
        tf.reduce_max(target_words, axis=1) + 1,
    )
