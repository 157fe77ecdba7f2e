"""Sentence segmentation: a document (one input line) cut into sentences, and a sentence longer
than a budget cut further, losing nothing; `Segments` keeps the text between pieces, so that
translations join as the input was. Every test is a regular expression RE2 reads as Python does,
so `export.graph_segmentation` cuts the same. The rule and its limits: docs/translating.md.
"""

import functools
import numbers
import re
from typing import NamedTuple

from common.errors import UserError

# Whitespace that separates words: ASCII's and Unicode's, not the no-break spaces (U+00A0, U+202F).
WHITESPACE = "\t\n\v\f\r \x85\u1680\u2000-\u200a\u2028\u2029\u205f\u3000"
CLOSERS = "\"'”’»›)\\]}」』）］｝〕〉》】"
OPENERS = "\"'“‘„«‹(\\[{「『（［｛〔〈《【¿¡"
# CJK sentence and clause marks, which end a word even with no space after them.
CJK_SENTENCE_MARKS = "。！？｡"
CJK_CLAUSE_MARKS = "，；：、"
SENTENCE_MARKS = ".!?…‼⁇⁈⁉．" + CJK_SENTENCE_MARKS
LOWER_CASE = "a-zß-öø-ÿα-ωа-яё"
ABBREVIATIONS = (
    "Mr|Mrs|Ms|Dr|Prof|Sr|Jr|St|vs|cf|ca|approx|Fig|Figs|No|Nr|Nos|Vol|Abb|bzw|usw|Hr|Fr|Inc|Ltd|Co|Corp|Dept"
)

# One word: a run of non-space characters, ended after a CJK mark and its closing quotes.
WORD = f"[^{WHITESPACE}]*?[{CJK_SENTENCE_MARKS}{CJK_CLAUSE_MARKS}][{CLOSERS}]*|[^{WHITESPACE}]+"
# Full matches of one word (`(?s)`: `.` also matches a line separator, in RE2 as in Python).
SENTENCE_END = f"(?s).*[{SENTENCE_MARKS}][{CLOSERS}]*"
NO_SENTENCE_END = f"(?s)[{OPENERS}]*(?:(?:[A-Za-z]\\.)+|[0-9]+\\.|(?:{ABBREVIATIONS})\\.)[{CLOSERS}]*"
SENTENCE_START = f"(?s)[{OPENERS}]*[^{LOWER_CASE},;:.!?…{CLOSERS}].*"
CJK_SENTENCE_END = f"(?s).*[{CJK_SENTENCE_MARKS}][{CLOSERS}]*"
CLAUSE_END = f"(?s).*[,;:{CJK_CLAUSE_MARKS}–—][{CLOSERS}]*|[-–—]+"


class LengthBudgetError(UserError, ValueError):
    """A length budget that is not a positive number."""


class Segments(NamedTuple):
    """A text cut into pieces: `text == separators[0] + pieces[0] + separators[1] + ... +
    pieces[-1] + separators[-1]`.

    Attributes:
        pieces: list of str, none empty.
        separators: list of str, one more than `pieces` (empty inside a word cut hard or after a CJK
            mark); a text with no word has no piece and itself as its one separator.
    """

    pieces: list
    separators: list

    def join(self, translations=None):
        """The text with each piece replaced by its translation (`translations`, one str per piece;
        None: the pieces themselves, i.e. the text)."""
        parts = self.pieces if translations is None else list(translations)
        if len(parts) != len(self.pieces):
            raise ValueError(f"{len(parts)} translations for {len(self.pieces)} pieces")
        return "".join(sep + part for sep, part in zip(self.separators, parts)) + self.separators[-1]


def words_of(text):
    """`(begin, end)` character offsets of each word of `text` (`WORD`), in order."""
    return [match.span() for match in _compiled(WORD).finditer(text)]


def sentence_boundaries(words, gaps):
    """Whether each of the `len(words) - 1` gaps (the text between words) ends a sentence."""
    return [
        _full(CJK_SENTENCE_END, before)
        if not gap
        else _full(SENTENCE_END, before) and not _full(NO_SENTENCE_END, before) and _full(SENTENCE_START, after)
        for before, gap, after in zip(words, gaps, words[1:])
    ]


def clause_boundaries(words, gaps):
    """Whether each gap follows a clause end (`CLAUSE_END`): one bool per gap."""
    return [_full(CLAUSE_END, before) for before in words[: len(gaps)]]


def segment(text, max_length=None, length=None):
    """The `Segments` of `text`: its sentences, each cut further where longer than `max_length` (a
    positive int; None: sentences only), measured by `length(str)` (None: characters)."""
    if max_length is not None and not (isinstance(max_length, numbers.Integral) and max_length >= 1):
        raise LengthBudgetError(f"a sentence's length budget must be a positive whole number, got {max_length!r}")
    spans = words_of(text)
    if not spans:
        return Segments([], [text])
    words = [text[begin:end] for begin, end in spans]
    gaps = [text[end:begin] for (_, end), (begin, _) in zip(spans, spans[1:])]
    sentence = sentence_boundaries(words, gaps)
    starts = [True] + sentence
    if max_length is not None:
        measure = len if length is None else length
        clause = [a or b for a, b in zip(sentence, clause_boundaries(words, gaps))]
        starts = pack(text, spans, starts, [True] + clause, max_length, measure)
        starts = pack(text, spans, starts, [True] * len(spans), max_length, measure)
    return _assemble(text, spans, starts, max_length, len if length is None else length)


def pack(text, spans, starts, breakable, max_length, length):
    """Greedy packing: whether each word starts a piece. A unit (from one `breakable` word to the
    next) joins the piece before it unless `starts` marks it or the piece would exceed `max_length`."""
    unit_ends = [index for index in range(1, len(spans)) if breakable[index]] + [len(spans)]
    packed, piece_begin, unit = list(starts), 0, 0
    for index in range(len(spans)):
        if not breakable[index]:
            continue
        while unit_ends[unit] <= index:
            unit += 1
        unit_end = spans[unit_ends[unit] - 1][1]
        if starts[index] or length(text[piece_begin:unit_end]) > max_length:
            packed[index], piece_begin = True, spans[index][0]
    return packed


def hard_cuts(piece, max_length, length):
    """`piece` cut into parts of at most `max_length` (`length`), each the longest such prefix of
    what is left (at least one character)."""
    parts = []
    while piece:
        low, high = 1, len(piece)  # the longest prefix within the budget: binary search on its length
        while low < high:
            middle = (low + high + 1) // 2
            low, high = (middle, high) if length(piece[:middle]) <= max_length else (low, middle - 1)
        parts.append(piece[:low])
        piece = piece[low:]
    return parts


def _assemble(text, spans, starts, max_length, length):
    """The `Segments` of `text` whose pieces start at the words `starts` marks, each piece longer
    than `max_length` cut hard."""
    first = [index for index, start in enumerate(starts) if start]
    pieces, separators = [], []
    for number, index in enumerate(first):
        last = (first[number + 1] if number + 1 < len(first) else len(spans)) - 1
        begin, end = spans[index][0], spans[last][1]
        previous_end = spans[index - 1][1] if index else 0
        piece = text[begin:end]
        parts = [piece] if max_length is None or length(piece) <= max_length else hard_cuts(piece, max_length, length)
        pieces += parts
        separators += [text[previous_end:begin]] + [""] * (len(parts) - 1)
    return Segments(pieces, separators + [text[spans[-1][1] :]])


@functools.cache
def _compiled(pattern):
    return re.compile(pattern)


def _full(pattern, string):
    """Whether `pattern` matches the whole of `string`."""
    return _compiled(pattern).fullmatch(string) is not None
