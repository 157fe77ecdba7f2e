"""Markup inside the SavedModel's graph: `inference.markup.mask` and `restore` as TensorFlow ops
over a batch, with the same regular expressions; they must equal that plain version
(tests/export/test_graph_markup.py).
"""

import tensorflow as tf
import tensorflow_text as tf_text

from export.graph_segmentation import owners, ragged, shifted, tokens_of
from inference import markup
from inference.markup import CLOSING_TAG, ELEMENT, EMPTY_TAG, OPENING_TAG, VOID_ELEMENTS, WORD, WORD_SPACE

# Element kinds, as numbers in the graph.
TEXT, MASK, OPEN, CLOSE, EMPTY = 0, 1, 2, 3, 4
KIND_NAMES = ("text", "mask", "open", "close", "empty")
# The name of the pairing loop, which the graph's function names carry.
PAIRING = "tag_pairing"
# The name of the loop that keeps the restored tags nested, likewise.
CLAMPING = "tag_clamping"


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
    """`inference.markup.mask` of string `[batch]` lines: a dict of `text` (string `[batch]`) and
    the ragged `[batch, (tags)]` / `[batch, (masks)]` records `tags`, `kinds` (`KIND_NAMES`),
    `positions`, `partners` (index among the row's tags, -1 for none), `masked`, `mask_positions`."""
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
        source=lines,
        text=text,
        tags=record(tokens, taken_at),
        kinds=record(tf.gather(tf.constant(KIND_NAMES), kind), taken_at),
        positions=record(positions, taken_at),
        partners=record(partners, taken_at),
        masked=record(tokens, masks_at),
        mask_positions=record(positions, masks_at),
    )


def _offsets(counts):
    """int64 `[rows]`: where each row's elements start in a flat array of `counts` (`[rows]`)."""
    return tf.cumsum(tf.cast(counts, tf.int64), exclusive=True)


def _keyed(rows, values):
    """Sortable int64 keys of `(row, value)` pairs, `value` within [-2^31, 2^31)."""
    return tf.cast(rows, tf.int64) * 2**32 + tf.cast(values, tf.int64) + 2**31


def _below(sorted_keys, keys, side="left"):
    """How many of `sorted_keys` (ascending) are below each of `keys` (`side="right"`: at most)."""
    return tf.searchsorted(sorted_keys, keys, side=side, out_type=tf.int64)


def _padded(values, fill):
    """`values` with one `fill` after them, so that a gather at index 0 of an empty array works."""
    return tf.concat([values, tf.fill([1], tf.cast(fill, values.dtype))], axis=0)


def _quoted(texts):
    """`inference.markup.quoted` of each of `texts` (string `[n]`)."""
    codes = tf.strings.unicode_decode(texts, "UTF-8")
    flat = codes.flat_values  # dense from here: a ragged tf.where takes a thousand ops
    hexadecimal = tf.constant(list("0123456789abcdef"))
    escaped = "\\x" + tf.gather(hexadecimal, flat // 16) + tf.gather(hexadecimal, flat % 16)
    control = (flat < 0x20) | tf.equal(flat, 0x7F)
    shown = tf.where(control, escaped, tf.strings.unicode_encode(flat[:, None], "UTF-8"))
    return "'" + tf.strings.unsorted_segment_join(shown, codes.value_rowids(), codes.nrows()) + "'"


def _words(texts):
    """The words of each text, flat: `(words, rows, starts, ends, counts)`; and `(spaces, rows,
    gaps)`, the whitespace runs with the number of words before them."""
    tokens, rows = tokens_of(texts, WORD)
    nrows = tf.shape(texts, out_type=tf.int64)[0]
    sizes = tf.math.bincount(tf.cast(rows, tf.int32), minlength=tf.cast(nrows, tf.int32), dtype=tf.int64)
    row_firsts = tf.gather(tf.cumsum(sizes, exclusive=True), rows)
    is_word = tf.strings.regex_full_match(tokens, WORD)
    lengths = tf.strings.length(tokens, unit="UTF8_CHAR")
    starts = _in_row(lengths, row_firsts)
    before = _in_row(tf.cast(is_word, tf.int32), row_firsts)  # words before each token
    word_at, space_at = tf.where(is_word)[:, 0], tf.where(~is_word)[:, 0]
    word_rows = tf.gather(rows, word_at)
    counts = tf.math.bincount(tf.cast(word_rows, tf.int32), minlength=tf.cast(nrows, tf.int32), dtype=tf.int64)
    words = (tf.gather(tokens, word_at), word_rows, tf.gather(starts, word_at), tf.gather(starts + lengths, word_at))
    spaces = (tf.gather(tokens, space_at), tf.gather(rows, space_at), tf.gather(before, space_at))
    return words + (counts,), spaces


def _links(alignments, source_counts, target_counts):
    """The links of each Pharaoh string, flat int64 `(rows, sources, targets)`. A malformed link
    fails an assertion, as `inference.markup.links_of` raises."""
    readable = tf.strings.regex_replace(alignments, "\\x00", "\x01")  # regex_split stops at NUL
    split = tf_text.regex_split(readable, f"[{WORD_SPACE}]+")
    tokens, rows = split.flat_values, split.value_rowids()
    valid = tf.strings.regex_full_match(tokens, "[0-9]+-[0-9]+")
    bad = tf.where(~valid & (tf.gather(source_counts, rows) > 0))[:, 0]
    first_bad = tf.gather(_padded(tokens, ""), tf.concat([bad, [tf.size(tokens, out_type=tf.int64)]], 0)[0])
    check = tf.debugging.Assert(
        tf.equal(tf.size(bad), 0),
        ["alignment link", first_bad, "is malformed: expected source-target word indices, e.g. 0-1"],
    )
    with tf.control_dependencies([check]):
        parts = tf.strings.split(tf.where(valid, tokens, "0-0"), "-").to_tensor(shape=[None, 2])
    # A number too large for any word, of any length, reads as 10^9 - 1.
    digits = tf.strings.regex_replace(parts, "^0+([0-9])", "\\1")
    numbers = tf.strings.to_number(tf.where(tf.strings.length(digits) > 9, "999999999", digits), tf.int64)
    sources, targets = numbers[:, 0], numbers[:, 1]
    kept = tf.where(valid & (sources < tf.gather(source_counts, rows)) & (targets < tf.gather(target_counts, rows)))
    return tuple(tf.gather(values, kept[:, 0]) for values in (rows, sources, targets))


class _Alignment:
    """Per source word of the batch (flat): whether a link names it, and its first and last target
    word; `gap` and `span` read them as `inference.markup._gap` and `_tag_spans` do."""

    def __init__(self, links, source_offsets, source_counts, target_counts):
        rows, sources, targets = links
        total = tf.reduce_sum(source_counts) + 1  # one more, so that no gather is out of range
        index = tf.gather(source_offsets, rows) + sources
        self.first = tf.math.unsorted_segment_min(targets, index, total)
        self.last = tf.math.unsorted_segment_max(targets, index, total)
        linked = tf.math.unsorted_segment_sum(tf.ones_like(index), index, total) > 0
        self.linked = _padded(tf.where(linked)[:, 0], 2**62)  # ascending
        self.offsets, self.source_counts, self.target_counts = source_offsets, source_counts, target_counts

    def gap(self, rows, word):
        """`inference.markup._gap` of source position `word` (int64) of each row in `rows`."""
        offset, source_count = tf.gather(self.offsets, rows), tf.gather(self.source_counts, rows)
        target_count = tf.gather(self.target_counts, rows)
        at = offset + word
        after_index = _below(self.linked, at)
        before = tf.gather(self.linked, tf.maximum(after_index - 1, 0))
        after = tf.gather(self.linked, after_index)
        has_before = (after_index > 0) & (before >= offset)
        has_after = after < offset + source_count
        take_before = has_before & (~has_after | (at - 1 - before <= after - at))
        last_target = tf.gather(self.last, tf.minimum(before, tf.size(self.last, out_type=tf.int64) - 1))
        first_target = tf.gather(self.first, tf.minimum(after, tf.size(self.first, out_type=tf.int64) - 1))
        none = tf.where(word == 0, tf.zeros_like(target_count), target_count)
        position = tf.where(take_before, last_target + 1, tf.where(has_after, first_target, none))
        return tf.where(word >= source_count, target_count, tf.minimum(position, target_count))

    def span(self, rows, first, end):
        """`(start, end, aligned)`: the target words linked to source words `first` to `end`
        (excluded) of each row, and whether any is."""
        offset = tf.gather(self.offsets, rows)
        aligned = (end > first) & (_below(self.linked, offset + end) > _below(self.linked, offset + first))
        first, end = offset + first, offset + tf.maximum(end, first + 1)
        low = _range_reduce(self.first, first, end, tf.minimum)
        high = _range_reduce(self.last, first, end, tf.maximum)
        return low, high + 1, aligned


def _range_reduce(values, starts, ends, reduce):
    """`reduce` (tf.minimum or tf.maximum) over `values[starts:ends]` per nonempty range, by a
    sparse table (two overlapping power-of-two blocks per range). `values` is not empty."""
    values = tf.concat([values, values[:1]], axis=0)  # two or more, so that the scan has a step
    size = tf.size(values, out_type=tf.int64)
    powers = tf.constant([2**k for k in range(40)], tf.int64)
    levels = _below(powers, size[None], side="right")[0]  # 2^k <= size

    def step(level, shift):
        return reduce(level, tf.concat([level[shift:], level[size - shift :]], axis=0))

    table = tf.concat([values[None], tf.scan(step, powers[: levels - 1], initializer=values)], axis=0)
    level = _below(powers, ends - starts, side="right") - 1
    block = tf.gather(powers, level)
    return reduce(
        tf.gather_nd(table, tf.stack([level, starts], 1)), tf.gather_nd(table, tf.stack([level, ends - block], 1))
    )


def _mask_numbers(pieces, mask_counts):
    """The mask number each piece names (0 for none, as `inference.markup._unmask`) and its digit count."""
    is_match = tf.strings.regex_full_match(pieces, markup.MASK)
    digits = tf.strings.substr(pieces, 1, 2**30)
    longest = tf.minimum(tf.strings.length(digits), tf.strings.length(tf.strings.as_string(mask_counts)))

    def value(length):
        return tf.strings.to_number(
            tf.where(is_match, tf.strings.substr(digits, tf.zeros_like(length), tf.maximum(length, 1)), "0"), tf.int64
        )

    fits = value(longest) <= mask_counts  # else one digit fewer, which is below the count
    number = tf.where(fits, value(longest), tf.where(longest > 1, value(longest - 1), 0))
    number = tf.where(is_match, number, 0)
    return is_match, number, tf.where(fits, longest, longest - 1), digits


def _unmask(masked, words, source, alignment):
    """`inference.markup._unmask` per row: the restored target words flat `(words, rows, counts)`,
    and the report's `(rows, order, notes)`."""
    texts, word_rows, _, _, target_counts = words
    pieces, owner = tokens_of(texts, markup.MASK)
    rows = tf.gather(word_rows, owner)
    mask_counts = masked["masked"].row_lengths()
    is_match, number, length, digits = _mask_numbers(pieces, tf.gather(mask_counts, rows))
    index = tf.range(tf.size(pieces, out_type=tf.int64))
    named = number > 0
    groups = tf.unique(tf.where(named, _keyed(rows, number), -1)).idx
    placed = named & tf.equal(index, tf.gather(tf.math.unsorted_segment_min(index, groups, tf.size(index)), groups))
    mask_index = tf.gather(_offsets(mask_counts), rows) + tf.maximum(number - 1, 0)
    originals = masked["masked"].flat_values
    rest = tf.strings.substr(digits, length, tf.fill(tf.shape(length), 2**30))
    replaced = tf.where(named, rest, tf.where(is_match, "", pieces))
    replaced = tf.where(placed, tf.gather(_padded(originals, ""), mask_index) + rest, replaced)
    dropped = tf.where(is_match & ~placed)[:, 0]
    kind = tf.where(tf.gather(named, dropped), "a repeated", "no")
    dropped_notes = _quoted(tf.gather(pieces, dropped)) + " in the translation is " + kind + " mask: dropped"
    # The masks the translation lacks, each put back at its source word's aligned position.
    placed_masks = tf.boolean_mask(mask_index, placed)
    total = tf.size(originals, out_type=tf.int64)
    missing = tf.where(tf.scatter_nd(placed_masks[:, None], tf.ones_like(placed_masks), [total]) == 0)[:, 0]
    missing_rows = tf.gather(masked["masked"].value_rowids(), missing)
    at = tf.gather(masked["mask_positions"].flat_values, missing)
    source_word = _below(_keyed(source[1], source[2]), _keyed(missing_rows, at), "right") - 1
    position = alignment.gap(missing_rows, source_word - tf.gather(alignment.offsets, missing_rows))
    missing_notes = (
        _quoted(tf.gather(originals, missing))
        + " missing from the translation: put back at word "
        + tf.strings.as_string(position)
    )
    nrows = tf.size(target_counts)
    counts = target_counts + tf.cast(
        tf.equal(target_counts, 0) & (tf.math.unsorted_segment_sum(tf.ones_like(missing), missing_rows, nrows) > 0),
        tf.int64,
    )
    offsets, target_offsets = _offsets(counts), _offsets(target_counts)
    wordless = tf.equal(tf.gather(target_counts, missing_rows), 0)
    before = (position == 0) & ~wordless  # put back before the first word, the others after one
    original = tf.gather(originals, missing)
    items = [  # (word, part: 0 before it, 1 itself, 2 after it, order, text)
        (tf.gather(offsets, rows) + owner - tf.gather(target_offsets, rows), 1, index, replaced),
        (
            tf.gather(offsets, missing_rows) + tf.where(before | wordless, tf.zeros_like(position), position - 1),
            tf.where(before, 0, 2),
            missing,
            tf.where(before, original + " ", " " + original),
        ),
    ]
    restored = _ordered_join(items, tf.reduce_sum(counts), 3)
    new_rows = owners(counts)
    restored = tf.where(
        tf.gather(tf.equal(target_counts, 0), new_rows), tf.strings.regex_replace(restored, "^ ", ""), restored
    )
    notes = [(tf.gather(rows, dropped), 0, dropped, dropped_notes), (missing_rows, 1, missing, missing_notes)]
    return (restored, new_rows, counts), notes


def _ordered_join(items, count, parts):
    """The texts of `items`, each `(group, part, order, text)` (flat tensors, or numbers to
    broadcast), joined by group (`count` groups) in the order of part, then order."""
    groups, part, order, texts = (
        tf.concat([tf.broadcast_to(tf.cast(item[field], tf.int64 if field < 3 else tf.string), tf.shape(item[3]))
                   for item in items], axis=0)
        for field in range(4)
    )  # fmt: skip
    width = tf.reduce_max(_padded(order, 0)) + 1
    sorting = tf.argsort((groups * parts + part) * width + order, stable=True)
    return tf.strings.unsorted_segment_join(tf.gather(texts, sorting), tf.gather(groups, sorting), count)


def _tag_spans(masked, source, alignment):
    """`inference.markup._tag_spans` per row: `(kinds, starts, ends)` flat, and the report's notes."""
    tags = masked["tags"]
    rows = tags.value_rowids()
    kinds = tf.argmax(
        tf.equal(masked["kinds"].flat_values[:, None], tf.constant(KIND_NAMES)), axis=1, output_type=tf.int32
    )
    positions = tf.cast(masked["positions"].flat_values, tf.int64)
    partners = tf.gather(_offsets(tags.row_lengths()), rows) + tf.cast(masked["partners"].flat_values, tf.int64)
    closes = tf.where(kinds == OPEN, tf.gather(_padded(positions, 0), tf.maximum(partners, 0)), positions)
    _, source_rows, starts, ends, _ = source
    offsets = tf.gather(alignment.offsets, rows)
    first = _below(_keyed(source_rows, ends), _keyed(rows, positions), "right") - offsets  # ends <= position
    end = _below(_keyed(source_rows, starts), _keyed(rows, closes)) - offsets  # starts < close
    low, high, aligned = alignment.span(rows, first, end)
    position = alignment.gap(rows, _below(_keyed(source_rows, starts), _keyed(rows, positions)) - offsets)
    reported = tf.where(~aligned & (kinds != CLOSE) & ((end > first) | (kinds == OPEN)))[:, 0]
    notes = (
        tf.gather(rows, reported),
        2,
        reported,
        "tag "
        + _quoted(tf.gather(tags.flat_values, reported))
        + " has no aligned word: placed at word "
        + tf.strings.as_string(tf.gather(position, reported)),
    )
    return (kinds, tf.where(aligned, low, position), tf.where(aligned, high, position)), notes


def _clamped(spans, rows, nrows, counts):
    """`inference.markup._clamped` per row: `(starts, ends)` flat, by a `tf.scan` with a stack of
    the open pairs' spans."""
    by_row = [ragged(values, rows, nrows) for values in spans]
    width = tf.cast(tf.maximum(tf.reduce_max(_padded(by_row[0].row_lengths(), 0)), 1), tf.int32)
    # [width, rows]: one step at least (a scan of none fails), the padding's kind -1 a no-op
    padded = [
        tf.transpose(values.to_tensor(default_value=-1, shape=[nrows, tf.cast(width, tf.int64)])) for values in by_row
    ]
    columns = tf.range(width + 1)[None, :]

    def step(state, element):
        starts, ends, lasts, depth, _, _ = state  # [rows, width + 1] each, [rows]
        kind, start, end = element
        parent = (depth - 1)[:, None]
        low = tf.maximum(tf.gather(starts, parent, batch_dims=1), tf.gather(lasts, parent, batch_dims=1))[:, 0]
        high = tf.gather(ends, parent, batch_dims=1)[:, 0]
        start = tf.minimum(tf.maximum(start, low), high)
        end = tf.minimum(tf.maximum(end, start), high)
        placed = ((kind == OPEN) | (kind == EMPTY))[:, None]
        lasts = tf.where(placed & tf.equal(columns, parent), end[:, None], lasts)
        pushed = (kind == OPEN)[:, None] & tf.equal(columns, depth[:, None])
        starts, ends = tf.where(pushed, start[:, None], starts), tf.where(pushed, end[:, None], ends)
        lasts = tf.where(pushed, start[:, None], lasts)
        depth += tf.cast(kind == OPEN, tf.int32) - tf.cast(kind == CLOSE, tf.int32)
        return starts, ends, lasts, depth, start, end

    rows_count = tf.cast(nrows, tf.int32)
    zeros = tf.zeros([rows_count, width + 1], tf.int64)
    initial = (zeros, tf.where(tf.equal(columns, 0), counts[:, None], zeros), zeros,
               tf.ones([rows_count], tf.int32), zeros[:, 0], zeros[:, 0])  # fmt: skip
    placed = tf.scan(step, tuple(padded), initializer=initial, name=CLAMPING)[4:]  # [tags, rows] each
    lengths = by_row[0].row_lengths()
    return tuple(tf.RaggedTensor.from_tensor(tf.transpose(values), lengths=lengths).flat_values for values in placed)


def _render(masked, kinds, starts, ends, restored, spaces):
    """Each row's text (`inference.markup._render` and `_joined`): every item at its gap, tags in the
    record's order (an Euler tour of the pairs)."""
    words, word_rows, counts = restored
    nrows = tf.size(counts)
    gap_offsets = _offsets(counts + 1)
    tags = masked["tags"]
    rows = tags.value_rowids()
    order = tf.range(tf.size(rows, out_type=tf.int64)) - tf.gather(_offsets(tags.row_lengths()), rows)
    partners = tf.gather(_offsets(tags.row_lengths()), rows) + tf.cast(masked["partners"].flat_values, tf.int64)
    gaps = tf.where(kinds == CLOSE, tf.gather(_padded(ends, 0), tf.maximum(partners, 0)), starts)
    gaps += tf.gather(gap_offsets, rows)
    total = tf.reduce_sum(counts + 1)
    first_open = tf.math.unsorted_segment_min(tf.where(kinds == OPEN, order, 2**62), gaps, total)
    last_gap = tf.equal(gaps, tf.gather(gap_offsets + counts, rows))  # after the last word: all before the space
    before = (order < tf.gather(first_open, gaps)) | last_gap
    space_texts, space_rows, space_gaps = spaces
    word_gaps = tf.range(tf.size(words, out_type=tf.int64)) - tf.gather(_offsets(counts), word_rows)
    items = [  # (gap, part: 0 tags before the space, 1 space, 2 tags after, 3 word, order, text)
        (gaps, tf.where(before, 0, 2), order, tags.flat_values),
        (tf.gather(gap_offsets, space_rows) + tf.cast(space_gaps, tf.int64), 1, 0, space_texts),
        (tf.gather(gap_offsets, word_rows) + word_gaps, 3, 0, words),
    ]
    joined = _ordered_join(items, total, 4)
    return tf.strings.reduce_join(ragged(joined, owners(counts + 1), tf.cast(nrows, tf.int64)), axis=1)


def _report(notes, nrows, has_words):
    """The notes of each row with words, `[batch, (notes)]`, ordered by kind, then order."""
    rows, kind, order, texts = (
        tf.concat([tf.broadcast_to(tf.cast(note[field], tf.int64 if field < 3 else tf.string), tf.shape(note[3]))
                   for note in notes], axis=0)
        for field in range(4)
    )  # fmt: skip
    width = tf.reduce_max(_padded(order, 0)) + 1
    sorting = tf.argsort((rows * 3 + kind) * width + order, stable=True)
    rows, texts = tf.gather(rows, sorting), tf.gather(texts, sorting)
    kept = tf.where(tf.gather(has_words, rows))[:, 0]
    return ragged(tf.gather(texts, kept), tf.gather(rows, kept), nrows)


@tf.autograph.experimental.do_not_convert  # plain TensorFlow ops: nothing for autograph to convert
def restore(masked, translations, alignments):
    """`inference.markup.restore` per row: `(text, report)`, string `[batch]` and ragged string
    `[batch, (notes)]`, no note holding a newline.

    Args:
        masked: `mask`'s dict for the lines translated.
        translations: string `[batch]`, the translations of the masked `text`s.
        alignments: string `[batch]`, Pharaoh alignments from the `align` signature.
    """
    translations = tf.convert_to_tensor(translations, tf.string)
    nrows = tf.shape(translations, out_type=tf.int64)[0]
    source, _ = _words(masked["text"])
    target, spaces = _words(translations)
    links = _links(tf.convert_to_tensor(alignments, tf.string), source[4], target[4])
    alignment = _Alignment(links, _offsets(source[4]), source[4], target[4])
    restored, notes = _unmask(masked, target, source, alignment)
    (kinds, starts, ends), tag_notes = _tag_spans(masked, source, alignment)
    starts, ends = _clamped((kinds, starts, ends), masked["tags"].value_rowids(), nrows, restored[2])
    text = _render(masked, kinds, starts, ends, restored, spaces)
    has_words = source[4] > 0
    return tf.where(has_words, text, masked["source"]), _report(notes + [tag_notes], nrows, has_words)
