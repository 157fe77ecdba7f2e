"""`inference.segmentation`: the sentence rule on hand-made cases, the length cuts, bad input, and
the property that the pieces joined with their separators give back the input, on generated strings
and on the sample corpus (the graph twin equal to it: tests/export/test_graph_segmentation.py)."""

import csv
import os
import random
import re
import time

import pytest

from inference.segmentation import WHITESPACE, LengthBudgetError, Segments, segment
from tests.helpers import REPO_ROOT

SAMPLE = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")
# Characters that exercise every class of the rule.
ALPHABET = list("abcXYZ019 .,;:!?…-—\"'()«»“”「」。！？，、\t\n\r\x00\ufeff\u3000\u00a0éß我")


def generated(count, seed):
    """`count` random strings over ALPHABET, of 0 to 60 characters."""
    rng = random.Random(seed)
    return ["".join(rng.choices(ALPHABET, k=rng.randint(0, 60))) for _ in range(count)]


def corpus_lines():
    """Both columns of the checked-in sample."""
    with open(SAMPLE, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [row[1] for row in rows] + [row[2] for row in rows]


def assert_sound(text, segments, max_length=None, length=len):
    """The pieces rebuild `text`, none is empty or has whitespace at its ends, the separators are
    whitespace, and each piece is within `max_length`."""
    assert isinstance(segments, Segments) and len(segments.separators) == len(segments.pieces) + 1
    assert segments.join() == text
    space = re.compile(f"[{WHITESPACE}]*")
    assert all(space.fullmatch(separator) for separator in segments.separators)
    for piece in segments.pieces:
        assert piece and not space.fullmatch(piece[0]) and not space.fullmatch(piece[-1])
        assert max_length is None or length(piece) <= max_length


@pytest.mark.parametrize(
    "text, pieces",
    [
        ("Open the file. Then close it.", ["Open the file.", "Then close it."]),
        ("Is it? Yes! Good… Next", ["Is it?", "Yes!", "Good…", "Next"]),
        ('He said "Stop." Then left.', ['He said "Stop."', "Then left."]),
        ('"Stop." he said.', ['"Stop." he said.']),  # a lower-case word continues the sentence
        ("See (Fig. 3) and Dr. Who. Done.", ["See (Fig. 3) and Dr. Who.", "Done."]),
        ("J. R. R. Tolkien wrote it, e.g. The Hobbit.", ["J. R. R. Tolkien wrote it, e.g. The Hobbit."]),
        ("Am 3. Oktober. 1. Open it.", ["Am 3. Oktober.", "1. Open it."]),
        ("Version 2.0 is out.Next", ["Version 2.0 is out.Next"]),  # no space: no boundary
        ("End. «Quoted» start. $[officename] opens.", ["End.", "«Quoted» start.", "$[officename] opens."]),
        ("你好。我是学生！“对。”好 吗？ 是", ["你好。", "我是学生！", "“对。”", "好 吗？", "是"]),
    ],
)
def test_sentences_of_hand_made_documents(text, pieces):
    segments = segment(text)
    assert segments.pieces == pieces
    assert_sound(text, segments)


def test_separators_keep_the_whitespace_as_it_was():
    segments = segment("  One.\n\nTwo.\tThree.  ")
    assert segments == Segments(["One.", "Two.", "Three."], ["  ", "\n\n", "\t", "  "])
    assert segments.join(["Eins.", "Zwei.", "Drei."]) == "  Eins.\n\nZwei.\tDrei.  "
    with pytest.raises(ValueError, match="2 translations for 3 pieces"):
        segments.join(["a", "b"])


def test_a_long_sentence_is_cut_at_clauses_then_words_then_hard():
    text = "One two three, four five six; seven eight: nine — ten Elevenveryveryverylongword."
    pieces = segment(text, max_length=20).pieces
    assert pieces[:3] == ["One two three,", "four five six;", "seven eight: nine —"]
    assert pieces[3:] == ["ten", "Elevenveryveryverylo", "ngword."]
    assert segment(text, max_length=200).pieces == [text]
    assert_sound(text, segment(text, max_length=20), 20)


def test_clauses_are_packed_greedily_within_the_budget():
    assert segment("a b, c d, e f, g h", max_length=10).pieces == ["a b, c d,", "e f, g h"]


def test_a_length_function_sets_the_budget():
    words = lambda piece: len(piece.split())  # noqa: E731
    text = "One two three four five, six seven. Eight nine ten eleven twelve thirteen"
    segments = segment(text, max_length=3, length=words)
    assert segments.pieces == ["One two three", "four five,", "six seven.", "Eight nine ten", "eleven twelve thirteen"]
    assert_sound(text, segments, 3, words)
    for budget in (0, -3, 2.5):
        with pytest.raises(LengthBudgetError, match=f"positive whole number, got {budget}"):
            segment(text, max_length=budget)


def test_bad_input_has_a_defined_result():
    assert segment("") == Segments([], [""]) and segment("").join([]) == ""
    assert segment(" \t\n ") == Segments([], [" \t\n "])
    assert segment("One.\r\nTwo.\r\n") == Segments(["One.", "Two."], ["", "\r\n", "\r\n"])
    bom = "\ufeffOne. Two."  # kept as text (the tools strip it where they read a file), no boundary
    assert segment(bom).pieces == ["\ufeffOne.", "Two."]
    assert segment("a\x00b. C\x00.").pieces == ["a\x00b.", "C\x00."]
    assert segment("\ufeff").pieces == ["\ufeff"]


def test_a_line_of_100000_characters_is_cut_by_length_in_linear_time():
    for text in ("word " * 20000, "x" * 100000):
        segments = segment(text, max_length=200)
        assert_sound(text, segments, 200)
    segment("warm up. " * 100, max_length=100)
    timings = []
    for size in (10000, 100000):
        text = ("abc def " * size)[:size]
        best = float("inf")
        for _ in range(3):
            begin = time.perf_counter()
            segment(text, max_length=100)
            best = min(best, time.perf_counter() - begin)
        timings.append(best)
    assert timings[1] < 50 * timings[0], timings  # ten times the text: about ten times the time, not a hundred


@pytest.mark.parametrize("max_length", [None, 1, 7, 30])
def test_pieces_rebuild_generated_strings(max_length):
    for text in generated(400, seed=max_length or 0):
        assert_sound(text, segment(text, max_length), max_length)


def test_pieces_rebuild_the_corpus_and_its_documents():
    lines = corpus_lines()
    documents = [" ".join(lines[i : i + 2 + i % 5]) for i in range(0, len(lines), 4)]
    for text in lines + documents:
        for max_length in (None, 40):
            assert_sound(text, segment(text, max_length), max_length)
    joined = sum(len(segment(document).pieces) > 1 for document in documents)
    assert joined > len(documents) // 2  # the documents hold several sentences
