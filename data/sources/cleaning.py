"""Cleaning parallel text and splitting it into train/dev/test by a hash of the English side, so a
sentence never straddles splits. docs/data.md, "Cleaning and splits", says what is dropped and why.
"""

import collections
import dataclasses
import hashlib
import re
import unicodedata

MAX_LENGTH_RATIO = 3.0
# Per mille of the hash space: [0, 30) test, [30, 60) dev, the rest train (about 3% / 3% / 94%).
TEST_PER_MILLE = 30
DEV_PER_MILLE = 30
SPLITS = ("train", "dev", "test")

# Control and format characters (other than whitespace, handled above) carry no text.
_INVISIBLE = re.compile(r"[\u0000-\u0008\u000e-\u001f\u007f\u200b-\u200f\u2060\ufeff]")


def normalize_text(text: str) -> str:
    """NFC, invisible characters removed, whitespace runs collapsed to one space, ends stripped."""
    text = unicodedata.normalize("NFC", text)
    if _INVISIBLE.search(text):  # Rare: searching is cheaper than substituting nothing.
        text = _INVISIBLE.sub("", text)
    # str.split() splits on exactly the characters `\s` matches (str.isspace).
    return " ".join(text.split())


# The blocks of East Asian Wide and Fullwidth characters in text: CJK, kana, Hangul, Yi, fullwidth forms.
_WIDE = re.compile(
    "[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\ua960-\ua97f"
    "\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\U00020000-\U0003fffd]"
)


def display_length(text: str) -> int:
    """Characters, a wide one (CJK, kana, Hangul, fullwidth) counted twice."""
    return len(text) if text.isascii() else len(text) + len(_WIDE.findall(text))


def split_of(english: str) -> str:
    """Returns "train", "dev" or "test" from the sha256 of the (normalised) English text."""
    bucket = int.from_bytes(hashlib.sha256(english.encode("utf-8")).digest()[:8], "big") % 1000
    if bucket < TEST_PER_MILLE:
        return "test"
    if bucket < TEST_PER_MILLE + DEV_PER_MILLE:
        return "dev"
    return "train"


@dataclasses.dataclass
class CleaningStats:
    """How many pairs came in and why those that did not come out were dropped."""

    raw: int = 0
    kept: int = 0
    dropped: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def as_dict(self) -> dict:
        return {"raw": self.raw, "kept": self.kept, "dropped": dict(sorted(self.dropped.items()))}


def rejection_reason(english: str, foreign: str) -> str | None:
    """Why a normalised pair is dropped ("empty", "identical", "length_ratio"), or None."""
    if not english or not foreign:
        return "empty"
    if english == foreign:
        return "identical"
    ratio = display_length(english) / display_length(foreign)
    if ratio > MAX_LENGTH_RATIO or ratio < 1.0 / MAX_LENGTH_RATIO:
        return "length_ratio"
    return None
