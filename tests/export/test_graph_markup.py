"""`export.graph_markup.mask`, the TensorFlow twin of `inference.markup.mask`: the same masked text
and record on hand-made marked-up lines, on lines generated from tag and placeholder fragments, and
on the sample corpus, run as a signature runs it (a `tf.function` over a string batch)."""

import csv
import functools
import os
import random

import tensorflow as tf

from export import graph_markup
from inference.markup import mask
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
        {key: text(values[row]) if key == "text" else [text(v) for v in values[row]] for key, values in out.items()}
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
