"""Sentence segmentation inside the SavedModel's graph: `inference.segmentation.segment` as
TensorFlow ops over a batch, with its regular expressions; that plain version is what this must
equal (tests/export/test_graph_segmentation.py). tensorflow-text's regex split stops at a NUL byte,
so it reads a copy with NULs replaced and the words are cut from the text itself.
"""

import tensorflow as tf
import tensorflow_text as tf_text

from inference.segmentation import (
    CJK_SENTENCE_END,
    CLAUSE_END,
    NO_SENTENCE_END,
    SENTENCE_END,
    SENTENCE_START,
    WHITESPACE,
    WORD,
)

# The name of the packing loop, which the graph's function names carry.
PACKING = "segment_packing"


def tokens_of(texts, pattern):
    """`(tokens, rows)`, flat: the matches of `pattern` in each text and the text between them
    (none empty); joined by row they give back the texts."""
    readable = tf.strings.regex_replace(texts, "\\x00", "\x01")  # the same byte offsets
    _, begins, ends = tf_text.regex_split_with_offsets(readable, pattern, pattern)
    # The tokens cover their text; each is joined from the text's bytes, not cut from a copy of
    # the whole text per token, which would grow with the square of a long line.
    sizes = tf.cast(ends.flat_values - begins.flat_values, tf.int64)
    text_bytes = tf.strings.bytes_split(texts).flat_values
    tokens = tf.strings.unsorted_segment_join(text_bytes, owners(sizes), tf.size(sizes, out_type=tf.int64))
    return tokens, owners(begins.row_lengths())


def owners(sizes):
    """int64 `[sum(sizes)]`: for each element of consecutive groups of `sizes` (int64 `[groups]`),
    its group. (`tf.repeat` and a ragged tensor's `value_rowids` pad every group to the largest.)"""
    ends = tf.cumsum(sizes)
    total = tf.reduce_sum(sizes)
    return tf.searchsorted(ends, tf.range(total, dtype=tf.int64), side="right", out_type=tf.int64)


def ragged(values, rows, nrows):
    """A RaggedTensor `[nrows, (...)]` of flat `values` and their (sorted) `rows`."""
    return tf.RaggedTensor.from_value_rowids(values, rows, nrows, validate=False)


def shifted(values, fill):
    """Each element's predecessor in the flat order, `fill` for the first."""
    return tf.concat([tf.fill([1], tf.cast(fill, values.dtype)), values[:-1]], axis=0)


def _previous(values, first, fill):
    """Each element's predecessor in the flat order, `fill` where `first`."""
    return tf.where(first, tf.cast(fill, values.dtype), shifted(values, fill))


def _pack(starts, breakable, lengths, gap_lengths, max_length):
    """`inference.segmentation.pack` over flat words: bool `[words]`, the words that start a piece.

    Each start jumps to the next (the first unit over the budget, or the next forced start); the
    starts reachable from the forced ones are found by pointer doubling, log2(units) rounds.

    Args:
        starts, breakable: bool `[words]`: the forced starts (each row's first word among them), and
            the words a unit may start at.
        lengths, gap_lengths: int32 `[words]`, a word's characters and the gap's before it.
        max_length: int32 `[words]`, each word's row's budget.
    """
    # Only the pieces over the budget are packed (the others would stay whole).
    pieces = tf.cumsum(tf.cast(starts, tf.int32)) - 1
    piece_lengths = tf.math.unsorted_segment_sum(
        lengths + tf.where(starts, 0, gap_lengths), pieces, tf.maximum(tf.reduce_max(pieces) + 1, 0)
    )
    piece_budgets = tf.gather(max_length, tf.where(starts)[:, 0])  # a piece's words share one row
    breakable = starts | (breakable & tf.gather(piece_lengths > piece_budgets, pieces))
    first = tf.where(breakable)[:, 0]  # each unit's first word
    units = tf.cumsum(tf.cast(breakable, tf.int32)) - 1
    count = tf.shape(first)[0]
    sizes = tf.math.unsorted_segment_sum(lengths + tf.where(breakable, 0, gap_lengths), units, count)
    gaps, forced = tf.gather(gap_lengths, first), tf.gather(starts, first)
    ends = tf.cumsum(gaps + sizes)  # the running length up to each unit's end
    # From unit u starting a piece: the first unit v whose end passes ends[u - 1] + gaps[u] + budget.
    threshold = ends - sizes + tf.gather(max_length, first)  # ends[u - 1] + gaps[u] + max_length
    over = tf.searchsorted(ends, threshold, side="right", out_type=tf.int32)
    forced_at = tf.cast(tf.where(forced)[:, 0], tf.int32)
    following = tf.searchsorted(forced_at, tf.range(count), side="right", out_type=tf.int32)
    next_forced = tf.gather(tf.concat([forced_at, [count]], axis=0), following)
    jump = tf.minimum(tf.maximum(over, tf.range(count) + 1), next_forced)
    jump = tf.concat([jump, [count]], axis=0)  # [units + 1], the last the end of all
    rounds = tf.cast(tf.math.ceil(tf.math.log(tf.cast(count + 2, tf.float32)) / tf.math.log(2.0)), tf.int32)

    def double(reached, jump, done):
        """After round k, every unit within 2^(k+1) jumps of a forced start is reached."""
        targets = tf.boolean_mask(jump, reached)[:, None]
        reached |= tf.scatter_nd(targets, tf.ones_like(targets[:, 0]), tf.shape(jump)) > 0
        return reached, tf.gather(jump, jump), done + 1

    reached = tf.concat([forced, [False]], axis=0)
    reached, _, _ = tf.while_loop(lambda *state: state[2] < rounds, double, (reached, jump, 0), name=PACKING)
    return tf.tensor_scatter_nd_update(tf.zeros_like(starts), first[:, None], reached[:-1])


def _boundaries(words, empty_gap, first):
    """`(sentence, clause)`, bool `[words]`: whether the gap before each word ends a sentence, or a
    clause (`inference.segmentation.sentence_boundaries` and `clause_boundaries`)."""
    before = _previous(words, first, "")

    def full(pattern, strings):
        return tf.strings.regex_full_match(strings, pattern)

    spaced = full(SENTENCE_END, before) & ~full(NO_SENTENCE_END, before) & full(SENTENCE_START, words)
    sentence = ~first & tf.where(empty_gap, full(CJK_SENTENCE_END, before), spaced)
    return sentence, ~first & (sentence | full(CLAUSE_END, before))


def _hard_cuts(pieces, max_length):
    """Pieces longer than their `max_length` (int32 `[pieces]`) characters cut into parts: `(parts,
    numbers, owners)`, flat."""
    lengths = tf.strings.length(pieces, unit="UTF8_CHAR")
    counts = tf.where(lengths > max_length, (lengths + max_length - 1) // max_length, 1)
    characters = tf.strings.unicode_split(pieces, "UTF-8")
    character_owners = characters.value_rowids()
    part_of = tf.ragged.range(tf.cast(characters.row_lengths(), tf.int32)).flat_values // tf.gather(
        max_length, character_owners
    )
    base = tf.cumsum(counts, exclusive=True)
    parts = tf.strings.unsorted_segment_join(
        characters.flat_values,
        tf.cast(part_of + tf.gather(base, character_owners), tf.int64),
        tf.cast(tf.reduce_sum(counts), tf.int64),
    )
    owner = owners(tf.cast(counts, tf.int64))
    numbers = tf.ragged.range(counts).flat_values
    cut = tf.gather(lengths > max_length, owner)
    return tf.where(cut, parts, tf.gather(pieces, owner)), numbers, owner


@tf.autograph.experimental.do_not_convert  # plain TensorFlow ops: nothing for autograph to convert
def segment(texts, max_length=None):
    """`inference.segmentation.segment` of string `[batch]` UTF-8 texts: `(pieces, separators)`,
    ragged `[batch, (pieces)]` and `[batch, (pieces + 1)]`. `max_length`: characters, one budget
    for every text (an int or int32 scalar) or one per text (int32 `[batch]`); None for sentences
    only. An invalid byte in a word cut hard becomes U+FFFD."""
    texts = tf.convert_to_tensor(texts, tf.string)
    nrows = tf.shape(texts, out_type=tf.int64)[0]
    tokens, token_rows = tokens_of(texts, WORD)
    is_word = ~tf.strings.regex_full_match(tokens, f"[{WHITESPACE}]+")
    at = tf.where(is_word)[:, 0]  # each word's token
    words, rows = tf.gather(tokens, at), tf.gather(token_rows, at)
    first = tf.not_equal(rows, shifted(rows, -1))
    empty_gap = tf.equal(at - shifted(at, -2), 1)
    sentence, clause = _boundaries(words, empty_gap, first)
    starts = first | sentence
    if max_length is not None:
        max_length = tf.convert_to_tensor(max_length, tf.int32)
        positive = tf.debugging.assert_positive(max_length, message="a sentence's length budget must be positive")
        with tf.control_dependencies([positive]):  # checked before any use, whose error would come first
            max_length = tf.broadcast_to(max_length, tf.shape(texts))  # [batch]
        word_budgets = tf.gather(max_length, rows)
        lengths = tf.strings.length(words, unit="UTF8_CHAR")
        gap_lengths = tf.where(
            first | empty_gap, 0, tf.strings.length(tf.gather(tokens, tf.maximum(at - 1, 0)), unit="UTF8_CHAR")
        )
        for breakable in (first | clause, tf.ones_like(first)):
            starts = _pack(starts, breakable, lengths, gap_lengths, word_budgets)
    starts = tf.scatter_nd(at[:, None], starts, tf.shape(tokens, out_type=tf.int64))  # per token
    pieces, separators = _assemble(tokens, token_rows, is_word, starts, nrows)
    if max_length is not None:
        pieces, separators = _cut(pieces, separators, max_length)
    return pieces, separators


def _assemble(tokens, rows, is_word, starts, nrows):
    """The pieces and separators of each row, tokens numbered by segment (separator 0, piece 0, ...)."""
    counts = tf.math.unsorted_segment_sum(tf.cast(starts, tf.int64), rows, nrows)  # pieces per row
    started = tf.cumsum(tf.cast(starts, tf.int64)) - tf.gather(tf.cumsum(counts, exclusive=True), rows)
    next_same_row = tf.equal(tf.concat([rows[1:], [-1]], axis=0), rows)
    next_starts = tf.concat([starts[1:], [True]], axis=0)
    inside = is_word | (next_same_row & ~next_starts & (started > 0))
    local = tf.where(inside, 2 * started - 1, 2 * started)
    sizes = 2 * counts + 1
    joined = tf.strings.unsorted_segment_join(
        tokens, tf.gather(tf.cumsum(sizes, exclusive=True), rows) + local, tf.reduce_sum(sizes)
    )
    is_piece = tf.ragged.range(sizes).flat_values % 2 == 1
    segment_rows = owners(sizes)
    pieces = ragged(tf.boolean_mask(joined, is_piece), tf.boolean_mask(segment_rows, is_piece), nrows)
    separators = ragged(tf.boolean_mask(joined, ~is_piece), tf.boolean_mask(segment_rows, ~is_piece), nrows)
    return pieces, separators


def _cut(pieces, separators, max_length):
    """`pieces` and `separators` with each piece longer than its row's `max_length` (int32
    `[batch]`) cut hard (`_hard_cuts`), an empty separator between its parts."""
    parts, numbers, owner = _hard_cuts(pieces.flat_values, tf.gather(max_length, pieces.value_rowids()))
    rows = tf.gather(owners(pieces.row_lengths()), owner)
    nrows = pieces.nrows()
    before = tf.where(numbers == 0, tf.gather(separators[:, :-1].flat_values, owner), "")
    return (
        ragged(parts, rows, nrows),
        tf.concat([ragged(before, rows, nrows), separators[:, -1:]], axis=1),
    )
