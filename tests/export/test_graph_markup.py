"""`export.graph_markup`, the TensorFlow twin of `inference.markup`: `mask` gives the same masked
text and record, `restore` the same text and report, on hand-made marked-up lines, on lines
generated from tag and placeholder fragments with random translations and alignments, and on the
sample corpus, run as a signature runs them (a `tf.function` over string batches); `restore` also
through a SavedModel saved and loaded in this process."""

import csv
import functools
import os
import random

import pytest
import tensorflow as tf

from export import graph_markup
from inference.markup import mask, restore
from tests.helpers import REPO_ROOT

SAMPLE = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")
LINES = [
    'See <a href="x.html">the <b>file</b></a> of %PRODUCTNAME at https://x.org/a?b=1. Mail a.b@x.org',
    "Line one<br/>Line two<br>three <IMG src='a.png'>",
    "<b>x <i>y</b> z</i>",
    "a </b> c <b",
    "Use {0}0 and {1} {name} $[officename] %s %d %APPDATA%\\x",
    "x\x00<b>y</b>\r\n",
    "<b></b>",
    "  <a href='x'> </a> ",
    "",
    "plain text only",
    '<span class="emph">Ä <b>é</b></span> 我<br/>们 %1',
    "a < b > c, <3, <b class=>x</b> www.example.org.",
]
FRAGMENTS = ["<b>", "</b>", "<i>", "</i>", "<br/>", "<a href=\"u\">", "</a>", "%1", "{0}", "$[x]", "0", " ", "a", "é", ".",
             "<", ">", "/", "me@x.org", "http://x.y/z", "\n", "\x00"]  # fmt: skip


@functools.cache
def graph_function():
    """`graph_markup.mask` traced once over a string batch."""
    return tf.function(graph_markup.mask, input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)


def python_record(line):
    masked = mask(line)
    return dict(
        source=masked.source,
        text=masked.text,
        tags=[tag.text for tag in masked.tags],
        kinds=[tag.kind for tag in masked.tags],
        positions=[tag.position for tag in masked.tags],
        partners=[tag.partner for tag in masked.tags],
        masked=masked.masked,
        mask_positions=masked.positions,
    )


def graph_records(lines):
    out = {key: value.to_list() if hasattr(value, "to_list") else value.numpy().tolist()
           for key, value in graph_function()(tf.constant(lines)).items()}  # fmt: skip

    def text(value):
        return value.decode("utf-8") if isinstance(value, bytes) else value

    return [
        {
            key: text(values[row]) if key in ("source", "text") else [text(v) for v in values[row]]
            for key, values in out.items()
        }
        for row in range(len(lines))
    ]


def assert_equal_to_python(lines):
    different = [
        (line, g, python_record(line)) for line, g in zip(lines, graph_records(lines)) if g != python_record(line)
    ]
    assert not different, f"{len(different)} differ, the first: {different[0]}"


def test_the_graph_masks_hand_made_lines_as_python_does():
    assert_equal_to_python(LINES)
    assert graph_records(["<b>a</b> %1"])[0]["partners"] == [1, 0]


def test_the_graph_masks_generated_lines_as_python_does():
    rng = random.Random(0)
    assert_equal_to_python(["".join(rng.choices(FRAGMENTS, k=rng.randint(0, 25))) for _ in range(400)])


def test_the_graph_masks_the_corpus_as_python_does():
    with open(SAMPLE, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    lines = [row[1] for row in rows] + [row[2] for row in rows]
    assert_equal_to_python(lines)
    assert sum("%1" in python_record(line)["text"] for line in lines) > 10  # the corpus's placeholders


def test_a_batch_without_any_element_or_text():
    assert_equal_to_python(["", ""])
    assert_equal_to_python(["no markup here"])


# (line, translation, alignment): tests/inference/test_markup.py's cases of `restore`.
RESTORED = [
    ("Open <b>the file</b> now", "Öffnen Sie jetzt die Datei", "0-0 0-1 3-2 1-3 2-4"),
    ("<a>one <b>two</b> three</a> <i>four</i>", "eins drei vier zwei", "0-0 2-1 3-2 1-3"),
    ("First line<br/>second line", "zweite Zeile erste Zeile", "2-0 3-1 0-2 1-3"),
    ("First line<br/>second line", "erste Zeile zweite Zeile", "0-0 1-1 2-2 3-3"),
    ("The file {0} is in $[officename].", "Die Datei %1 ist in %2.", "0-0 1-1 2-2 3-3 4-4 5-5"),
    ("The file {0} is in $[officename].", "Die Datei ist in %2.", "0-0 1-1 3-2 4-3 5-4"),
    ("Open %1 now", "Öffne %1 %1 %7 jetzt", "0-0 1-1 1-2 1-3 2-4"),
    ("Use {0}0 and " + " ".join(f"{{{i}}}" for i in range(1, 11)), "Use {0}0 and %1 %2 %3 %4 %5 %6 %7 %8 %9 %10",
     " ".join(f"{i}-{i}" for i in range(13))),
    ("Click <b>here</b> please", "Bitte klicken", "2-0 0-1"),
    ("<b></b>", "", ""), ("<br/>", "", ""), ("  <a href='x'> </a> ", "", ""), ("", "", ""),
    ("%1 and {0} then $[x]", "und dann", "1-0 3-1"),
    ("%1 and {0} then $[x]", "", ""),
    ("<b>Open %1</b>", "", ""),
    ("<b>a</b>", "a", "0-0 7-0 0-9"),  # links beyond the words: ignored
    ("<b>a</b> b", "x y", "00000000000000000001-1 99999999999999999999-0 0-000000000000000000000"),
    ("<b\tid='\x01'>a</b> http://x.y/\x00z", " \u3000a%12%1%0 %2\xa0b ", "0-0 1-1 0-2"),
]  # fmt: skip
WORDS = ["w", "%1", "%2", "%3", "%12", "%0", "x%1y", "%1%1", "é", "<b>", "我"]
SPACES = [" ", " ", " ", "  ", "\t", "\xa0", "\u3000", "\n"]


@functools.cache
def restore_function():
    """`graph_markup.mask`, then `graph_markup.restore`, traced once over string batches."""
    spec = tf.TensorSpec([None], tf.string)

    def masked_and_restored(lines, translations, alignments):
        return graph_markup.restore(graph_markup.mask(lines), translations, alignments)

    return tf.function(masked_and_restored, input_signature=[spec, spec, spec], autograph=False)


def assert_restored_as_python(cases):
    text, report = restore_function()(*(tf.constant([case[field] for case in cases]) for field in range(3)))
    graph = [(t.decode("utf-8"), [note.decode("utf-8") for note in notes])
             for t, notes in zip(text.numpy(), report.to_list())]  # fmt: skip
    python = [tuple(restore(mask(line), translation, alignment)) for line, translation, alignment in cases]
    different = [(case, g, p) for case, g, p in zip(cases, graph, python) if g != p]
    assert not different, f"{len(different)} of {len(cases)} differ, the first: {different[0]}"


def test_the_graph_restores_the_hand_made_cases_as_python_does():
    assert_restored_as_python(RESTORED)


def random_translation(rng):
    words = rng.choices(WORDS, k=rng.randint(0, 10))
    return "".join(rng.choice(SPACES) + word for word in words) + rng.choice(["", " "])


def test_the_graph_restores_generated_lines_as_python_does():
    rng = random.Random(1)
    cases = []
    for _ in range(300):
        line = "".join(rng.choices(FRAGMENTS, k=rng.randint(0, 25)))
        translation = random_translation(rng)
        sources, targets = len(mask(line).text.split()), len(translation.split())
        links = [f"{rng.randrange(sources + 2)}-{j}" for j in range(targets + 1) if rng.random() < 0.7]
        links += [f"{rng.randrange(sources + 1)}-{rng.randrange(targets + 1)}" for _ in range(rng.randint(0, 3))]
        cases.append((line, translation, " ".join(links)))
    assert_restored_as_python(cases)


def test_the_graph_restores_the_corpus_with_synthetic_alignments_as_python_does():
    with open(SAMPLE, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    rng = random.Random(2)
    cases = []
    for _, english, german in rows[:600]:
        words = english.split(" ")
        if len(words) > 2 and rng.random() < 0.6:  # a pair of tags around some words
            first = rng.randrange(len(words) - 1)
            last = rng.randrange(first, len(words))
            words[first], words[last] = "<b>" + words[first], words[last] + "</b>"
        line = " ".join(words) + rng.choice(["", "<br/>", " <i>%1</i>"])
        translation = mask(german).text
        sources, targets = len(mask(line).text.split()), len(translation.split())
        # Each target word to the source word at its relative place, now and then shifted by one.
        links = [f"{max(0, min(sources - 1, j * sources // max(targets, 1) + rng.choice([-1, 0, 0, 1])))}-{j}"
                 for j in range(targets)]  # fmt: skip
        cases.append((line, translation, " ".join(links)))
    assert_restored_as_python(cases)


def test_a_batch_without_any_tag_or_placeholder():
    assert_restored_as_python([("plain words", "schlichte Wörter", "0-0 1-1")])
    assert_restored_as_python([("", "", ""), ("a", "", "")])


def test_a_malformed_alignment_fails_in_the_graph_as_python_refuses_it():
    with pytest.raises(tf.errors.InvalidArgumentError, match="0:1.*expected source-target"):
        restore_function()(tf.constant(["<b>a</b>"]), tf.constant(["a"]), tf.constant(["0-0 0:1"]))
    # A row with no word is the line itself, whatever its alignment, as in Python.
    assert_restored_as_python([("<b></b>", "x", "0:1")])


@pytest.mark.slow  # A SavedModel written and loaded; the shared export's markup signature runs it in both tiers.
def test_restore_runs_in_a_saved_model(tmp_path):
    module = tf.Module()
    module.restore = restore_function()  # traced already: saved as it is
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    cases = RESTORED[:8]
    texts, report = loaded.restore(*(tf.constant([case[field] for case in cases]) for field in range(3)))
    for case, text, notes in zip(cases, texts.numpy(), report.to_list()):
        python = restore(mask(case[0]), case[1], case[2])
        assert (text.decode("utf-8"), [note.decode("utf-8") for note in notes]) == tuple(python)
