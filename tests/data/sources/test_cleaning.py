import re
import unicodedata

from data.sources import cleaning


def test_normalize_text():
    assert cleaning.normalize_text("  a\tb \n c\u00a0d\u200b ") == "a b c d"
    assert cleaning.normalize_text("Mu\u0308nchen") == "München"  # NFC


def test_rejection_reasons():
    assert cleaning.rejection_reason("", "x") == "empty"
    assert cleaning.rejection_reason("OK", "OK") == "identical"
    assert cleaning.rejection_reason("a" * 31, "b" * 10) == "length_ratio"
    assert cleaning.rejection_reason("a" * 10, "b" * 31) == "length_ratio"
    assert cleaning.rejection_reason("a" * 30, "b" * 10) is None


def test_wide_characters_count_twice_in_the_length_ratio():
    """A Chinese interface string (LibreOffice's zh-CN "Save Document") is about a third as many
    characters as its English; counted as one each, the pair would be dropped as misaligned."""
    assert cleaning.display_length("保存文档") == 8
    assert cleaning.display_length("ページスタイル") == 14  # kana
    assert cleaning.display_length("파일 열기") == 9  # Hangul syllables and a space
    assert cleaning.display_length("ＡＢ") == 4  # fullwidth forms
    assert cleaning.display_length("Größe ändern") == len("Größe ändern")
    assert cleaning.rejection_reason("Save Document", "保存文档") is None
    assert len("Save Document") / len("保存文档") > cleaning.MAX_LENGTH_RATIO
    assert cleaning.rejection_reason("Save the current document under a new name", "保存") == "length_ratio"
    for code in (0x4E00, 0x9FFF, 0x3042, 0x30A2, 0xAC00, 0xFF21, 0x20000):  # the wide blocks agree with Unicode
        assert unicodedata.east_asian_width(chr(code)) in "WF"
        assert cleaning.display_length(chr(code)) == 2


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
