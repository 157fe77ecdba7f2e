import re
import unicodedata

from data import cleaning


def test_normalize_text():
    assert cleaning.normalize_text("  a\tb \n c\u00a0d\u200b ") == "a b c d"
    assert cleaning.normalize_text("Mu\u0308nchen") == "München"  # NFC


def test_rejection_reasons():
    assert cleaning.rejection_reason("", "x") == "empty"
    assert cleaning.rejection_reason("OK", "OK") == "identical"
    assert cleaning.rejection_reason("a" * 31, "b" * 10) == "length_ratio"
    assert cleaning.rejection_reason("a" * 10, "b" * 31) == "length_ratio"
    assert cleaning.rejection_reason("a" * 30, "b" * 10) is None


def test_split_is_stable_and_near_three_percent():
    sentences = [f"Sentence number {i}." for i in range(20000)]
    splits = [cleaning.split_of(s) for s in sentences]
    assert splits == [cleaning.split_of(s) for s in sentences]
    for name in ("dev", "test"):
        assert 0.025 < splits.count(name) / len(splits) < 0.035


def test_normalize_text_removes_invisible_characters_and_collapses_every_unicode_space():
    """Against the rule written as two regular expressions, for every character of the BMP."""
    invisible = re.compile(r"[\u0000-\u0008\u000e-\u001f\u007f\u200b-\u200f\u2060\ufeff]")
    for code in range(0x10000):
        if 0xD800 <= code < 0xE000:
            continue
        text = f" a{chr(code)}b  {chr(code)}c\t"
        expected = re.sub(r"\s+", " ", invisible.sub("", unicodedata.normalize("NFC", text))).strip()
        assert cleaning.normalize_text(text) == expected, hex(code)
