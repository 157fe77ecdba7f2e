"""Markup and placeholders through translation: `mask` takes a line's inline tags out and replaces
its placeholders, URLs and e-mail addresses by numbered masks `%1`, `%2`, ... (a form the model has
learnt to copy from LibreOffice's strings); `restore` puts them back by the word alignments.
Behaviour in docs/translating.md; `export.graph_markup` is the graph twin.
"""

import functools
import re
from typing import NamedTuple

from common.errors import UserError

_SPACE = "[ \\t\\r\\n]"
_NAME = "[A-Za-z][A-Za-z0-9_:.-]*"
_ATTRIBUTE = f"{_SPACE}+[A-Za-z_:][A-Za-z0-9_:.-]*(?:{_SPACE}*={_SPACE}*(?:\"[^\"<>]*\"|'[^'<>]*'))?"
OPENING_TAG = f"<({_NAME})(?:{_ATTRIBUTE})*{_SPACE}*>"
CLOSING_TAG = f"</({_NAME}){_SPACE}*>"
EMPTY_TAG = f"<({_NAME})(?:{_ATTRIBUTE})*{_SPACE}*/>"
# A run of percent-encoded bytes (`%D0%B0`) is one mask, not a placeholder per `%XX`.
PERCENT_ENCODED = "(?:%[0-9A-Fa-f]{2}){2,}"
PLACEHOLDER = PERCENT_ENCODED + (
    "|%[0-9]+|%[sdifuxc]|%[A-Z][A-Z0-9_]*%?|\\{[0-9]+\\}|\\{[A-Za-z_][A-Za-z0-9_]*\\}|\\$\\[[A-Za-z_][A-Za-z0-9_]*\\]"
)
_URL_END = "[^ \\t\\r\\n<>\".,;:!?)\\]'’”]"
URL = f'(?:https?|ftp)://[^ \\t\\r\\n<>"]*{_URL_END}|www\\.[^ \\t\\r\\n<>"]*{_URL_END}'
EMAIL = "[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)*\\.[A-Za-z][A-Za-z]+"
# What `mask` finds, the leftmost first (a URL before the placeholder-like text inside it).
ELEMENT = f"{URL}|{EMAIL}|{CLOSING_TAG}|{EMPTY_TAG}|{OPENING_TAG}|{PLACEHOLDER}"
VOID_ELEMENTS = ("br", "hr", "img", "wbr", "input")
# A mask in the translation: `%` and a number (the longest number that names a mask is read).
MASK = "%[1-9][0-9]*"
# What separates the words of the masked text and of the translation: Python's whitespace
# (`str.isspace`), written out so that RE2 reads the same class (`export.graph_markup.restore`).
WORD_SPACE = "\t\n\v\f\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
WORD = f"[^{WORD_SPACE}]+"

OPEN, CLOSE, EMPTY = "open", "close", "empty"


class AlignmentFormatError(UserError, ValueError):
    """An alignment that is not Pharaoh links `source-target`."""


class Tag(NamedTuple):
    """A tag taken out of the text: `text` as written, `kind` OPEN, CLOSE or EMPTY, `position` in
    the masked text (characters), `partner` the index in `Masked.tags` of its pair (-1 for EMPTY)."""

    text: str
    kind: str
    position: int
    partner: int


class Masked(NamedTuple):
    """A line prepared for translation.

    Attributes:
        source: the line.
        text: what the model translates: no paired tags, masks `%1`, `%2`, ... in place.
        tags: the `Tag`s taken out, in order.
        masked: the originals of the masks (`%1` is `masked[0]`).
        positions: where each mask starts in `text`, in characters.
    """

    source: str
    text: str
    tags: list
    masked: list
    positions: list


class Restored(NamedTuple):
    """A translation with the markup back: `text`, and `report`, a list of str saying what was put
    back without the translation's help or dropped."""

    text: str
    report: list


@functools.cache
def _compiled(pattern):
    return re.compile(pattern)


def elements(text):
    """`(kind, start, end, name)` of each tag or placeholder in `text`, in order: kind OPEN, CLOSE,
    EMPTY (a tag; `name` lower-cased), or "mask" (a placeholder, URL or e-mail; `name` None)."""
    found = []
    for match in _compiled(ELEMENT).finditer(text):
        string = match.group()
        for kind, pattern in ((CLOSE, CLOSING_TAG), (EMPTY, EMPTY_TAG), (OPEN, OPENING_TAG)):
            tag = _compiled(pattern).fullmatch(string)
            if tag:
                name = tag.group(1).lower()
                found.append((EMPTY if kind == OPEN and name in VOID_ELEMENTS else kind, *match.span(), name))
                break
        else:
            found.append(("mask", *match.span(), None))
    return found


def pairs(kinds, names):
    """The partner index of each element, or -1: an OPEN pairs with the innermost open CLOSE of its
    name; EMPTY and unpaired tags pair with nothing."""
    partners, stack = [-1] * len(kinds), []
    for index, (kind, name) in enumerate(zip(kinds, names)):
        if kind == OPEN:
            stack.append(index)
        elif kind == CLOSE and stack and names[stack[-1]] == name:
            partners[index], partners[stack[-1]] = stack[-1], index
            stack.pop()
    return partners


def mask(line):
    """The `Masked` form of `line` (str)."""
    found = elements(line)
    partners = pairs([kind for kind, *_ in found], [name for *_, name in found])
    parts, tags, masked, positions, new_index, cursor, length = [], [], [], [], {}, 0, 0
    for index, ((kind, start, end, _), partner) in enumerate(zip(found, partners)):
        before = line[cursor:start]
        parts.append(before)
        length += len(before)
        cursor = end
        if kind == "mask" and not "0" <= line[end : end + 1] <= "9":
            masked.append(line[start:end])
            positions.append(length)
            replacement = f"%{len(masked)}"
        elif kind == EMPTY or partner >= 0:
            new_index[index] = len(tags)
            tags.append(Tag(line[start:end], kind, length, partner))
            between_words = kind == EMPTY and _word_character(line, start - 1) and _word_character(line, end)
            replacement = " " if between_words else ""
        else:
            replacement = line[start:end]  # an unpaired tag stays text, as does a mask before a digit
        parts.append(replacement)
        length += len(replacement)
    parts.append(line[cursor:])
    tags = [Tag(text, kind, position, new_index.get(partner, -1)) for text, kind, position, partner in tags]
    return Masked(line, "".join(parts), tags, masked, positions)


def _word_character(line, index):
    """Whether `line[index]` exists and is not whitespace (of a tag's, `_SPACE`)."""
    return 0 <= index < len(line) and line[index] not in " \t\r\n"


def links_of(alignment):
    """The `(source, target)` word index pairs of a Pharaoh string (`"0-0 2-1"`);
    AlignmentFormatError for a link that is not two numbers joined by `-`."""
    links = []
    for link in alignment.split():
        if not _compiled("[0-9]+-[0-9]+").fullmatch(link):
            raise AlignmentFormatError(
                f"alignment link {link!r} in {alignment!r}: expected source-target word indices, e.g. 0-1"
            )
        source, _, target = link.partition("-")
        links.append((int(source), int(target)))
    return links


def quoted(text):
    """`text` in single quotes for a report, each ASCII control character as `\\xNN` (so that a
    report's notes joined by newlines stay one a line)."""
    return "'" + _compiled("[\x00-\x1f\x7f]").sub(lambda match: f"\\x{ord(match.group()):02x}", text) + "'"


def restore(masked, translation, alignment):
    """The `Restored` translation of a `Masked` line, with `alignment` a Pharaoh string or
    `links_of` pairs."""
    source_starts = [match.start() for match in _compiled(WORD).finditer(masked.text)]
    if not source_starts:
        return Restored(masked.source, [])
    links = links_of(alignment) if isinstance(alignment, str) else list(alignment)
    words, spaces = _compiled(WORD).findall(translation), _compiled(WORD).split(translation)  # spaces: one more
    links = [(source, target) for source, target in links if source < len(source_starts) and target < len(words)]
    gap = functools.partial(_gap, _targets_by_source(links), len(source_starts), len(words))
    report = []
    words = _unmask(masked, words, source_starts, gap, report)
    spaces += [""] * (len(words) + 1 - len(spaces))  # a word of put-back placeholders alone
    spans = _tag_spans(masked, source_starts, links, gap, report)
    sequence = _render(masked.tags, _clamped(masked.tags, spans, len(words)), len(words))
    return Restored(_joined(sequence, words, spaces), report)


def _targets_by_source(links):
    """`{source word: sorted target words}` of the links."""
    by_source = {}
    for source, target in links:
        by_source.setdefault(source, []).append(target)
    return {source: sorted(targets) for source, targets in by_source.items()}


def _gap(by_source, source_count, target_count, word):
    """The target gap (0 to `target_count`) just before source word `word`: after the translation
    of the nearest earlier source word, else before that of the nearest later one."""
    if word >= source_count:
        return target_count
    for distance in range(max(word, source_count - word) + 1):
        before, after = by_source.get(word - 1 - distance), by_source.get(word + distance)
        if word - 1 - distance >= 0 and before:
            return min(before[-1] + 1, target_count)
        if after:
            return min(after[0], target_count)
    return 0 if word == 0 else target_count


def _unmask(masked, words, source_starts, gap, report):
    """The target words with masks replaced by originals: repeated or invented ones dropped, missing
    ones added at their aligned `gap`."""
    placed, restored = set(), []
    for word in words:
        parts, cursor = [], 0
        for match in _compiled(MASK).finditer(word):
            digits, number = match.group()[1:], None
            for cut in range(len(digits), 0, -1):  # the longest number that names a mask
                if 1 <= int(digits[:cut]) <= len(masked.masked):
                    number = int(digits[:cut])
                    break
            parts.append(word[cursor : match.start()])
            cursor = match.end()
            if number is None or number in placed:
                report.append(
                    f"{quoted(match.group())} in the translation is {'a repeated' if number else 'no'} mask: dropped"
                )
                parts.append(digits[len(str(number)) :] if number else "")
                continue
            placed.add(number)
            parts.append(masked.masked[number - 1] + digits[len(str(number)) :])
        restored.append("".join(parts) + word[cursor:])
    missing = {}  # target position: the originals put back there, in order
    for number, original in enumerate(masked.masked, start=1):
        if number not in placed:
            position = gap(sum(start <= masked.positions[number - 1] for start in source_starts) - 1)
            report.append(f"{quoted(original)} missing from the translation: put back at word {position}")
            missing.setdefault(position, []).append(original)
    for position, originals in sorted(missing.items(), reverse=True):
        if not restored:
            restored.append(" ".join(originals))
        elif position == 0:
            restored[0] = " ".join(originals + [restored[0]])
        else:
            restored[position - 1] = " ".join([restored[position - 1]] + originals)
    return restored


def _tag_spans(masked, source_starts, links, gap, report):
    """`{tag index: (start, end)}` in target words of each OPEN and EMPTY tag: around the words
    aligned to what it encloses, else empty at the `gap` of the next source word."""
    spans = {}
    ends = [match.end() for match in _compiled(WORD).finditer(masked.text)]
    for index, tag in enumerate(masked.tags):
        if tag.kind == CLOSE:
            continue
        close = masked.tags[tag.partner].position if tag.kind == OPEN else tag.position
        enclosed = {
            word for word, (start, end) in enumerate(zip(source_starts, ends)) if start < close and end > tag.position
        }
        targets = [target for source, target in links if source in enclosed]
        if targets:
            spans[index] = (min(targets), max(targets) + 1)
            continue
        position = gap(sum(start < tag.position for start in source_starts))
        spans[index] = (position, position)
        if enclosed or tag.kind == OPEN:
            report.append(f"tag {quoted(tag.text)} has no aligned word: placed at word {position}")
    return spans


def _clamped(tags, spans, target_count):
    """The spans made well-formed, in source order: each inside its parent pair's span, and starting
    where its previous sibling ends or later. `{index: (start, end)}`, `-1` the whole line."""
    clamped, last_end, parents = {-1: (0, target_count)}, {-1: 0}, [-1]
    for index, tag in enumerate(tags):
        if tag.kind == CLOSE:
            if parents[-1] == tag.partner:
                parents.pop()
            continue
        parent = parents[-1]
        low, high = max(clamped[parent][0], last_end[parent]), clamped[parent][1]
        start = min(max(spans[index][0], low), high)
        end = min(max(spans[index][1], start), high)
        clamped[index], last_end[parent] = (start, end), end
        if tag.kind == OPEN:
            parents.append(index)
            last_end[index] = start
    return clamped


def _render(tags, spans, target_count):
    """The translation as a sequence of target word indices and `(tag text, kind)` items."""
    children = {}
    parents = [-1]
    for index, tag in enumerate(tags):
        if tag.kind == CLOSE:
            if parents[-1] == tag.partner:
                parents.pop()
            continue
        children.setdefault(parents[-1], []).append(index)
        if tag.kind == OPEN:
            parents.append(index)
    sequence = []

    def emit(node):
        position, end = spans[node]
        for child in children.get(node, []):
            start, child_end = spans[child]
            sequence.extend(range(position, start))
            sequence.append((tags[child].text, tags[child].kind))
            if tags[child].kind == OPEN:
                emit(child)
                sequence.append((tags[tags[child].partner].text, CLOSE))
            position = child_end
        sequence.extend(range(position, end))

    emit(-1)
    return sequence


def _joined(sequence, words, spaces):
    """The text of a `_render` sequence: the words with the translation's whitespace between them,
    an opening tag against the word after it, other tags against the word before them."""
    out, run = [], []
    for item in sequence:
        if isinstance(item, int):
            opening = next((i for i, (_, kind) in enumerate(run) if kind == OPEN), len(run))
            out += [text for text, _ in run[:opening]] + [spaces[item]] + [text for text, _ in run[opening:]]
            out.append(words[item])
            run = []
        else:
            run.append(item)
    return "".join(out + [text for text, _ in run] + [spaces[len(words)]])
