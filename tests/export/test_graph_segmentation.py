"""`export.graph_segmentation`, the TensorFlow twin of `inference.segmentation`: the same pieces and
separators on every line of the sample corpus, on documents of 2 to 6 of its consecutive lines, on
generated strings and on bad input, run as the SavedModel runs it (a `tf.function` over a string
batch), and through a SavedModel saved and loaded in this process."""

import csv
import functools
import os
import random

import pytest
import tensorflow as tf

from export import graph_segmentation
from inference.segmentation import segment
from tests.helpers import REPO_ROOT

SAMPLE = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")
ALPHABET = list("abcXYZ019 .,;:!?…-—\"'()«»“”「」。！？，、\t\n\r\x00\ufeff\u3000\u00a0éß我")
BAD_INPUT = [
    "",
    "   ",
    "\t\n",
    "One.\r\nTwo.\r\n",
    "\ufeffOne. Two.",
    "a\x00b. C\x00. \x00",
    "word " * 20000,  # 100,000 characters, no punctuation
    "x" * 100000,
]


def corpus_texts():
    """Both columns of the sample, and documents made by joining 2 to 6 consecutive lines."""
    with open(SAMPLE, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    texts = []
    for column in (1, 2):
        lines = [row[column] for row in rows]
        texts += lines
        texts += [" ".join(lines[i : i + 2 + i % 5]) for i in range(0, len(lines), 3)]
    return texts


@functools.cache
def graph_function(budgeted):
    """`graph_segmentation.segment` traced once over a string batch (and an int32 budget), as a
    signature runs it."""
    if budgeted:
        return tf.function(
            graph_segmentation.segment,
            input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([], tf.int32)],
            autograph=False,
        )
    return tf.function(
        lambda texts: graph_segmentation.segment(texts),
        input_signature=[tf.TensorSpec([None], tf.string)],
        autograph=False,
    )


def run_graph(texts, max_length):
    if max_length is None:
        return graph_function(False)(tf.constant(texts))
    return graph_function(True)(tf.constant(texts), tf.constant(max_length))


def decoded(pieces, separators):
    return [
        ([piece.decode("utf-8") for piece in row_pieces], [sep.decode("utf-8") for sep in row_separators])
        for row_pieces, row_separators in zip(pieces.to_list(), separators.to_list())
    ]


def assert_equal_to_python(texts, max_length):
    got = decoded(*run_graph(texts, max_length))
    expected = [tuple(segment(text, max_length)) for text in texts]
    different = [(text, g, e) for text, g, e in zip(texts, got, expected) if tuple(g) != e]
    assert not different, f"{len(different)} differ, the first: {different[0]}"


@pytest.mark.parametrize("max_length", [None, 40, 9])
def test_the_graph_segments_the_corpus_as_python_does(max_length):
    assert_equal_to_python(corpus_texts(), max_length)


@pytest.mark.parametrize("max_length", [None, 1, 6, 25])
def test_the_graph_segments_generated_strings_as_python_does(max_length):
    rng = random.Random(max_length)
    assert_equal_to_python(["".join(rng.choices(ALPHABET, k=rng.randint(0, 60))) for _ in range(300)], max_length)


@pytest.mark.parametrize("max_length", [None, 200])
def test_the_graph_treats_bad_input_as_python_does(max_length):
    assert_equal_to_python(BAD_INPUT, max_length)
    assert_equal_to_python([""], max_length)  # a batch with no word at all


def test_the_budget_can_be_a_python_number():
    texts = ["One two three, four five. Six", "a b"]
    pieces, _ = graph_segmentation.segment(tf.constant(texts), 5)
    assert [row.decode() for row in pieces[0].numpy()] == segment(texts[0], 5).pieces


def test_a_budget_per_row_segments_each_text_as_python_does_with_its_own():
    rng = random.Random(7)
    texts = corpus_texts()[:150] + ["".join(rng.choices(ALPHABET, k=rng.randint(0, 60))) for _ in range(150)]
    budgets = [rng.choice([1, 3, 9, 25, 40, 500]) for _ in texts]
    function = tf.function(
        graph_segmentation.segment,
        input_signature=[tf.TensorSpec([None], tf.string), tf.TensorSpec([None], tf.int32)],
        autograph=False,
    )
    got = decoded(*function(tf.constant(texts), tf.constant(budgets)))
    expected = [tuple(segment(text, budget)) for text, budget in zip(texts, budgets)]
    different = [(text, budget, g, e) for text, budget, g, e in zip(texts, budgets, got, expected) if tuple(g) != e]
    assert not different, f"{len(different)} differ, the first: {different[0]}"
    with pytest.raises(tf.errors.InvalidArgumentError, match="length budget must be positive"):
        function(tf.constant(["a b", "c"]), tf.constant([4, 0]))


def test_a_budget_below_one_is_refused():
    with pytest.raises(tf.errors.InvalidArgumentError, match="length budget must be positive"):
        run_graph(["a b"], 0)


def test_a_saved_model_runs_the_segmentation(tmp_path):
    module = tf.Module()
    module.segment = graph_function(True)
    tf.saved_model.save(module, str(tmp_path))
    loaded = tf.saved_model.load(str(tmp_path))
    texts = ["Open the file. Then close it, and save the result.", "", "你好。我是"]
    result = decoded(*loaded.segment(tf.constant(texts), tf.constant(12)))
    assert result == [tuple(segment(text, 12)) for text in texts]
    assert len(result[0][0]) > 2  # cut by the budget
