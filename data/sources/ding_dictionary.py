"""Example sentences from the Ding German-English dictionary (`trans-de-en`): lines of `German ::
English` sub-entries separated by ` | `, of which those that are whole sentences on both sides
become pairs."""

import re
from collections.abc import Iterator

DING_PATH = "usr/share/trans/de-en"

_ANNOTATION = re.compile(r"\s*(\{[^{}]*\}|\[[^\[\]]*\])")
_PLACEHOLDER = re.compile(r"\b(sth|sb|etw|jdm|jdn|jds|jd)\.|/")
_SENTENCE = re.compile(r"^[A-ZÄÖÜ\"„“‘'].*[.!?]$")
MIN_WORDS = 4


def _strip_annotations(text: str) -> str:
    return re.sub(r"\s+", " ", _ANNOTATION.sub("", text)).strip()


def is_sentence(text: str) -> bool:
    """True for a whole sentence: capital first, `.`/`!`/`?` last, 4+ words, and no placeholder
    (`sth.`, `jdm.`) or slash alternative, which mark dictionary patterns."""
    return bool(_SENTENCE.match(text)) and len(text.split()) >= MIN_WORDS and not _PLACEHOLDER.search(text)


def parse_line(line: str) -> list[tuple[str, str]]:
    """The `(english, german)` sentence pairs of one dictionary line: the first synonym of each
    corresponding sub-entry, annotations removed, where both sides are sentences."""
    line = line.strip()
    if not line or line.startswith("#") or " :: " not in line:
        return []
    german, english = line.split(" :: ", 1)
    german_parts = german.split(" | ")
    english_parts = english.split(" | ")
    if len(german_parts) != len(english_parts):
        return []
    pairs = []
    for de_part, en_part in zip(german_parts, english_parts):
        de_text = _strip_annotations(de_part.split("; ")[0])
        en_text = _strip_annotations(en_part.split("; ")[0])
        if is_sentence(de_text) and is_sentence(en_text):
            pairs.append((en_text, de_text))
    return pairs


def read_ding(text: str) -> Iterator[tuple[str, str]]:
    """Yields the `(english, german)` sentence pairs of the whole dictionary file."""
    for line in text.splitlines():
        yield from parse_line(line)
