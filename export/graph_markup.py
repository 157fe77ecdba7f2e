"""Markup masking inside the SavedModel's graph: `inference.markup.mask` as TensorFlow ops, for a
batch of lines, with the same regular expressions (`inference.markup.ELEMENT` and its parts).

The plain version, which this must equal, is `inference.markup.mask`;
tests/export/test_graph_markup.py checks both give the same masked text and record. The tags pair
through a stack, a `tf.scan` over each row's elements (the stack a `[rows, elements]` tensor).
`restore` has no graph twin yet: placing tags by the alignments is a tree walk that the Python
`inference.markup.restore` does on the served outputs.
"""

import tensorflow as tf

from export.graph_segmentation import ragged, shifted, tokens_of
from inference.markup import CLOSING_TAG, ELEMENT, EMPTY_TAG, OPENING_TAG, VOID_ELEMENTS

# Element kinds, as numbers in the graph.
TEXT, MASK, OPEN, CLOSE, EMPTY = 0, 1, 2, 3, 4
KIND_NAMES = ("text", "mask", "open", "close", "empty")
# The name of the pairing loop, which the graph's function names carry.
PAIRING = "tag_pairing"


def _kinds(tokens, next_token):
    """Each token's kind (int32) and tag name (lower case, "" for no tag)."""

    def full(pattern, strings):
        return tf.strings.regex_full_match(strings, pattern)

    name = tf.strings.lower(tf.strings.regex_replace(tokens, "(?s)^</?([A-Za-z][A-Za-z0-9_:.-]*).*$", "\\1"))
    void = tf.reduce_any(tf.equal(name[:, None], tf.constant(VOID_ELEMENTS)), axis=1)
    element = full(ELEMENT, tokens)
    kind = tf.where(element & ~full("(?s)[0-9].*", next_token), MASK, TEXT)
    kind = tf.where(full(OPENING_TAG, tokens), tf.where(void, EMPTY, OPEN), kind)
    kind = tf.where(full(EMPTY_TAG, tokens), EMPTY, kind)
    kind = tf.where(full(CLOSING_TAG, tokens), CLOSE, kind)
    is_tag = (kind == OPEN) | (kind == CLOSE) | (kind == EMPTY)
    # An element before a digit that is no tag stays text, as `inference.markup.mask` keeps it.
    return tf.cast(kind, tf.int32), tf.where(is_tag, name, ""), element


def _partners(kind, name, rows, nrows):
    """`inference.markup.pairs` of each row: the flat index of each tag's partner, -1 for none."""
    index = tf.range(tf.shape(kind)[0])
    by_row = [ragged(values, rows, nrows) for values in (kind, name, index)]
    width = tf.cast(tf.maximum(tf.reduce_max(by_row[0].row_lengths()), 1), tf.int32)
    padded = [tf.transpose(tf.pad(values.to_tensor(), [[0, 0], [0, 1]])) for values in by_row]  # [width + 1, rows]
    width += 1

    def step(state, element):
        stack, stack_names, depth, _ = state  # [rows, width], [rows, width], [rows]
        element_kind, element_name, element_index = element
        top = tf.maximum(depth - 1, 0)[:, None]
        matched = (element_kind == CLOSE) & (depth > 0)
        matched &= tf.equal(tf.gather(stack_names, top, batch_dims=1)[:, 0], element_name)
        partner = tf.where(matched, tf.gather(stack, top, batch_dims=1)[:, 0], -1)
        pushed = (element_kind == OPEN)[:, None] & tf.equal(tf.range(width)[None, :], depth[:, None])
        stack = tf.where(pushed, element_index[:, None], stack)
        stack_names = tf.where(pushed, element_name[:, None], stack_names)
        depth += tf.cast(element_kind == OPEN, tf.int32) - tf.cast(matched, tf.int32)
        return stack, stack_names, depth, partner

    rows_count = tf.cast(nrows, tf.int32)
    initial = (
        tf.fill([rows_count, width], -1),
        tf.fill([rows_count, width], ""),
        tf.zeros([rows_count], tf.int32),
        tf.fill([rows_count], -1),
    )
    closes = tf.scan(step, tuple(padded), initializer=initial, name=PAIRING)[3]  # [width, rows]
    closes = tf.RaggedTensor.from_tensor(tf.transpose(closes), lengths=by_row[0].row_lengths()).flat_values
    # A close names its open; the open gets the close.
    paired = tf.where(closes >= 0)[:, 0]
    return tf.tensor_scatter_nd_update(closes, tf.gather(closes, paired)[:, None], tf.cast(paired, tf.int32))


def _in_row(values, row_firsts):
    """The exclusive cumulative sum of int32 `values` within each row (`row_firsts`: the flat index of
    each element's row's first element)."""
    before = tf.cumsum(values, exclusive=True)
    return before - tf.gather(before, row_firsts)


def _replacements(tokens, kind, partner, rows, row_firsts):
    """What each token becomes in the masked text, and whether it is a tag taken out."""
    previous = shifted(tokens, "")
    following = tf.concat([tokens[1:], [""]], axis=0)
    same_row_before = tf.equal(shifted(rows, -1), rows)
    same_row_after = tf.equal(tf.concat([rows[1:], [-1]], axis=0), rows)
    between_words = (
        same_row_before
        & same_row_after
        & tf.strings.regex_full_match(previous, "(?s).*[^ \t\r\n]")
        & tf.strings.regex_full_match(following, "(?s)[^ \t\r\n].*")
    )
    taken = (kind == EMPTY) | ((partner >= 0) & ((kind == OPEN) | (kind == CLOSE)))
    is_mask = kind == MASK
    number = _in_row(tf.cast(is_mask, tf.int32), row_firsts) + 1
    replaced = tf.where(is_mask, "%" + tf.strings.as_string(number), tokens)
    replaced = tf.where(taken, tf.where((kind == EMPTY) & between_words, " ", ""), replaced)
    return replaced, taken, is_mask


@tf.autograph.experimental.do_not_convert  # plain TensorFlow ops: nothing for autograph to convert
def mask(lines):
    """`inference.markup.mask` of each line: a dict of `text` (string `[batch]`), the record of the
    tags taken out, `tags`, `kinds` (their `KIND_NAMES`), `positions` and `partners` (an index
    among the row's tags, -1 for none), and of the masks, `masked` and `mask_positions`, each a
    RaggedTensor `[batch, (tags)]` or `[batch, (masks)]`.

    Args:
        lines: string `[batch]`, UTF-8.
    """
    lines = tf.convert_to_tensor(lines, tf.string)
    nrows = tf.shape(lines, out_type=tf.int64)[0]
    tokens, rows = tokens_of(lines, ELEMENT)
    following = tf.where(tf.equal(tf.concat([rows[1:], [-1]], axis=0), rows), tf.concat([tokens[1:], [""]], axis=0), "")
    kind, name, _ = _kinds(tokens, following)
    partner = _partners(kind, name, rows, nrows)
    sizes = tf.math.bincount(tf.cast(rows, tf.int32), minlength=tf.cast(nrows, tf.int32), dtype=tf.int64)
    row_firsts = tf.gather(tf.cumsum(sizes, exclusive=True), rows)
    replaced, taken, is_mask = _replacements(tokens, kind, partner, rows, row_firsts)
    text = tf.strings.unsorted_segment_join(replaced, rows, nrows)
    positions = _in_row(tf.strings.length(replaced, unit="UTF8_CHAR"), row_firsts)
    new_index = _in_row(tf.cast(taken, tf.int32), row_firsts)  # a kept tag's index in its row's record
    partners = tf.where(partner >= 0, tf.gather(new_index, tf.maximum(partner, 0)), -1)
    taken_at = tf.where(taken)[:, 0]
    masks_at = tf.where(is_mask)[:, 0]

    def record(values, at):
        return ragged(tf.gather(values, at), tf.gather(rows, at), nrows)

    return dict(
        text=text,
        tags=record(tokens, taken_at),
        kinds=record(tf.gather(tf.constant(KIND_NAMES), kind), taken_at),
        positions=record(positions, taken_at),
        partners=record(partners, taken_at),
        masked=record(tokens, masks_at),
        mask_positions=record(positions, masks_at),
    )
