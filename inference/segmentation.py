"""Sentence segmentation: a document (one input line of several sentences) cut into sentences, and
a sentence longer than a budget cut further, so that each piece fits the model's input and nothing
is ever cut off or lost. `segment` returns the pieces and the text between them (`Segments`), so
that translations are joined as the input was.

The rule. A document is a sequence of words (runs of non-space characters; a run is also ended
after a CJK full-width sentence or clause mark, `。！？｡，；：、`, and the closing quotes or brackets
after it) with the whitespace between them. A sentence ends at a gap between two words when
- the gap is whitespace, the word before it ends with sentence-final punctuation (`. ! ? …` or a
  full-width form), closing quotes and brackets kept with it, and is not an abbreviation of
  `ABBREVIATIONS`, initials (`J.`, `e.g.`, `U.S.`) or a number with a dot (`1.`: a list item, a
  German ordinal), and the word after it does not start, after opening quotes or brackets, with a
  lower-case letter or continuing punctuation; or
- the gap is empty and the word before it ends with a CJK full-width sentence mark.

Why this rule: each test is a regular expression over one word (`WORD`, `SENTENCE_END`,
`NO_SENTENCE_END`, `SENTENCE_START`, `CLAUSE_END`) that RE2, which TensorFlow's string ops and
TensorFlow Serving run, reads as Python's `re` does (no lookaround, no `\\d` or `\\s`, whose meaning
differs), so `export.graph_segmentation` gives the same sentences in the graph; it needs no model
or download, and on the corpus's own text (software help and dictionary entries) the sentences end
with punctuation and a capital. What it does not handle: abbreviations outside the list before a
capital ("approx. Fifty" is cut if "approx" were missing), a sentence ending with an abbreviation or
initial ("... in the U.S. Then"), sentences with no space after the mark in Latin scripts
("end.Next"), Thai and other scripts with no sentence punctuation, and quotes nested across a
boundary.

Length. With `max_length`, a piece longer than it is cut further: at clause punctuation (a word
ending with `, ; :` or a full-width form, or a dash word) followed by a gap, then at any gap, the
units packed greedily (a unit joins the piece before it while the piece stays within the budget);
a single word still too long is cut hard into pieces of at most `max_length`. The budget counts
characters (code points), as the graph does, or what a `length` function says (e.g. SentencePiece
tokens; Python only). Leading and trailing whitespace, and whitespace between pieces, are
separators (CR too, as in CRLF); NUL bytes and a BOM are ordinary characters, never a boundary.
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
        pieces: list of str, the sentences (or their parts), none empty.
        separators: list of str, one more than `pieces`: the whitespace before each piece (empty
            between the parts of a word cut hard, or after a CJK mark), then the text's trailing
            whitespace. A text with no word has no piece and itself as its one separator.
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
    """Whether each gap ends a sentence: one bool per gap (`len(words) - 1`), by the module's rule.

    Args:
        words: list of str, the words.
        gaps: list of str, the text between consecutive words.
    """
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
    """The `Segments` of `text`: its sentences, each cut further where longer than `max_length`.

    Args:
        text: str.
        max_length: the budget of a piece (a positive int), or None for sentences only.
        length: a function of a str giving its length in the budget's unit; None: characters.
    """
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
    """Greedy packing: the words that start a piece (a list of bool per word). A unit is a run of
    words from one `breakable` word to the next; it joins the piece before it unless that piece
    starts at it (`starts`) or the piece with it would be longer than `max_length` (`length` of the
    text from the piece's first word to the unit's last)."""
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
    """`pattern` compiled, once."""
    return re.compile(pattern)


def _full(pattern, string):
    """Whether `pattern` matches the whole of `string`."""
    return _compiled(pattern).fullmatch(string) is not None
