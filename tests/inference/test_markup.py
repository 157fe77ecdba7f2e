"""`inference.markup`: what `mask` takes out and replaces, and `restore` on hand-made translations
with given word alignments (the graph twins of both: tests/export/test_graph_markup.py)."""

import random
import re

import pytest

from inference.markup import CLOSE, OPEN, AlignmentFormatError, Tag, mask, restore


def test_mask_takes_tags_out_and_numbers_placeholders_urls_and_mails():
    masked = mask('See <a href="x.html">the <b>file</b></a> of %PRODUCTNAME at https://x.org/a?b=1. Mail a.b@x.org')
    assert masked.text == "See the file of %1 at %2. Mail %3"
    assert masked.masked == ["%PRODUCTNAME", "https://x.org/a?b=1", "a.b@x.org"]
    assert masked.positions == [16, 22, 31]
    assert masked.tags == [
        Tag('<a href="x.html">', OPEN, 4, 3),
        Tag("<b>", OPEN, 8, 2),
        Tag("</b>", CLOSE, 12, 1),
        Tag("</a>", CLOSE, 12, 0),
    ]


@pytest.mark.parametrize(
    "line, expected",
    [
        ("%1 %s %d {0} {name} $[officename] %APPDATA%", "%1 %2 %3 %4 %5 %6 %7"),
        ("Line one<br/>Line two<br>three", "Line one Line two three"),  # a standalone tag between words: a space
        ("<b>Datei</b>name", "Dateiname"),
        ("a <b>b", "a <b>b"),  # unbalanced: text
        ("a </b> c", "a </b> c"),
        ("<b>x <i>y</b> z</i>", "<b>x y</b> z"),  # crossed: the inner pair kept, the other as text
        ("a < b > c, <3, <b class=>x</b>", "a < b > c, <3, <b class=>x</b>"),  # malformed: text
        ("x\x00<b>y</b>\r\n", "x\x00y\r\n"),
    ],
)
def test_mask_keeps_what_it_does_not_recognise_as_text(line, expected):
    assert mask(line).text == expected


def test_a_pair_goes_around_the_words_its_words_align_to():
    masked = mask("Open <b>the file</b> now")
    restored = restore(masked, "Öffnen Sie jetzt die Datei", "0-0 0-1 3-2 1-3 2-4")
    assert restored.text == "Öffnen Sie jetzt <b>die Datei</b>" and restored.report == []


def test_nesting_stays_well_formed_when_the_alignment_crosses():
    masked = mask("<a>one <b>two</b> three</a> <i>four</i>")
    # two -> outside of one..three's translation; four -> between them
    restored = restore(masked, "eins drei vier zwei", "0-0 2-1 3-2 1-3")
    # <b> kept inside <a>; <i> kept after </a>, left empty there
    assert restored.text == "<a>eins drei vier <b>zwei</b></a><i></i>"
    assert _well_formed(restored.text)


def test_a_standalone_tag_sits_after_the_translation_of_the_word_before_it():
    masked = mask("First line<br/>second line")
    assert restore(masked, "zweite Zeile erste Zeile", "2-0 3-1 0-2 1-3").text == "zweite Zeile erste Zeile<br/>"
    assert restore(masked, "erste Zeile zweite Zeile", "0-0 1-1 2-2 3-3").text == "erste Zeile<br/> zweite Zeile"


def test_placeholders_come_back_and_a_missing_one_is_reported():
    masked = mask("The file {0} is in $[officename].")
    assert masked.text == "The file %1 is in %2."
    restored = restore(masked, "Die Datei %1 ist in %2.", "0-0 1-1 2-2 3-3 4-4 5-5")
    assert restored == ("Die Datei {0} ist in $[officename].", [])
    dropped = restore(masked, "Die Datei ist in %2.", "0-0 1-1 3-2 4-3 5-4")
    assert dropped.text == "Die Datei {0} ist in $[officename]."
    assert dropped.report == ["'{0}' missing from the translation: put back at word 2"]


def test_repeated_and_invented_masks_are_dropped_and_reported():
    masked = mask("Open %1 now")
    restored = restore(masked, "Öffne %1 %1 %7 jetzt", "0-0 1-1 1-2 1-3 2-4")
    assert restored.text == "Öffne %1   jetzt"
    assert len(restored.report) == 2 and all("dropped" in line for line in restored.report)
    ten = mask("Use {0}0 and " + " ".join(f"{{{i}}}" for i in range(1, 11)))
    assert ten.text == "Use {0}0 and %1 %2 %3 %4 %5 %6 %7 %8 %9 %10"  # a digit after it: not masked
    assert restore(ten, ten.text, " ".join(f"{i}-{i}" for i in range(13))).text == ten.source


def test_a_pair_without_aligned_words_is_placed_by_its_neighbour():
    masked = mask("Click <b>here</b> please")
    restored = restore(masked, "Bitte klicken", "2-0 0-1")
    assert restored.text == "Bitte klicken<b></b>"
    assert restored.report == ["tag '<b>' has no aligned word: placed at word 2"]


def test_lines_of_only_tags_and_empty_lines_translate_to_themselves():
    for line in ("<b></b>", "<br/>", "  <a href='x'> </a> ", ""):
        assert restore(mask(line), "", "") == (line, [])


def test_several_missing_placeholders_come_back_in_their_order():
    masked = mask("%1 and {0} then $[x]")
    assert restore(masked, "und dann", "1-0 3-1").text == "%1 und {0} dann $[x]"
    assert restore(masked, "", "").text == "%1 {0} $[x]"


def test_an_empty_translation_keeps_every_tag_and_placeholder():
    masked = mask("<b>Open %1</b>")
    restored = restore(masked, "", "")
    assert restored.text == "<b></b>%1"
    assert "missing" in restored.report[0]


def test_a_malformed_alignment_is_refused():
    for alignment in ("0:1", "0-x", "²-0"):
        with pytest.raises(AlignmentFormatError, match=f"'{alignment}'.*expected source-target"):
            restore(mask("<b>a</b>"), "a", alignment)


def test_every_tag_and_placeholder_survives_any_alignment():
    rng = random.Random(0)
    line = 'Press <b>Shift</b> and <a href="h.html">click <i>%1</i></a> in {name}, see www.x.org<br/>or me@x.org.'
    masked = mask(line)
    count = len(masked.text.split())
    for _ in range(200):
        words = [f"w{i}" for i in range(rng.randint(0, 12))]
        if rng.random() < 0.5:
            words += rng.sample([f"%{i}" for i in range(1, 5)], rng.randint(0, 4))
        rng.shuffle(words)
        links = " ".join(f"{rng.randrange(count)}-{j}" for j in range(len(words)) if rng.random() < 0.8)
        text = restore(masked, " ".join(words), links).text
        for tag in masked.tags:
            assert text.count(tag.text) == line.count(tag.text)
        for original in masked.masked:
            assert text.count(original) == 1
        assert _well_formed(text), text


def _well_formed(text):
    """Whether the paired tags of `text` nest (standalone tags left out)."""
    stack = []
    for closing, name in re.findall(r"<(/?)([a-z]+)[^>]*?(?<!/)>", text):
        if not closing:
            stack.append(name)
        elif not stack or stack.pop() != name:
            return False
    return not stack


def test_links_beyond_the_words_are_ignored_and_notes_escape_control_characters():
    masked = mask("Click <b>here</b> please")
    assert restore(masked, "Bitte klicken", "2-0 0-1 1-7 9-0") == restore(masked, "Bitte klicken", "2-0 0-1")
    restored = restore(mask("<a title='x\ty'>a</a> b"), "b", "1-0")
    assert restored.report == ["tag '<a title='x\\x09y'>' has no aligned word: placed at word 0"]
