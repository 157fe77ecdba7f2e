"""`export.graph_documents`: the length rule's sentences, the join, the summed confidence and the
alignments offset to the whole input, against their Python composition from
`inference.segmentation` (the export's signatures are checked in test_serving_module.py)."""

import csv
import os
import random

import numpy as np
import tensorflow as tf

from export import graph_documents
from inference.segmentation import segment
from tests.export.helpers import length_rule
from tests.helpers import REPO_ROOT

LIMIT = 20  # max_input_length of the length rule
SAMPLE = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")
ALPHABET = list("abcXYZ019 .,;:!?…-—\"'()«»“”「」。！？，、\t\n\r\x00\u3000\u00a0éß我")


def documents():
    """The sample's English lines joined 2 to 6 at a time."""
    with open(SAMPLE, encoding="utf-8", newline="") as handle:
        lines = [row[1] for row in csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)]
    return [" ".join(lines[i : i + 2 + i % 5]) for i in range(0, len(lines), 3)]


def count_ids(texts, tags):
    """A stand-in for the tokenizer: a piece's source ids are its characters // 3, + tags + EOS."""
    return [(len(text) // 3 + tags if len(text) >= 3 else 0) + 1 for text in texts]


def test_the_length_rule_cuts_as_python_does():
    rng = random.Random(3)
    texts = documents()[:200] + ["".join(rng.choices(ALPHABET, k=rng.randint(0, 200))) for _ in range(100)]
    texts += ["word " * 2000, "x" * 300, "", "  "]
    tags = [rng.choice([0, 2]) for _ in texts]

    def token_counts(pieces, rows):
        characters = tf.strings.length(pieces, unit="UTF8_CHAR")
        row_tags = tf.gather(tf.constant(tags, tf.int32), rows)
        return tf.where(characters >= 3, characters // 3 + row_tags, 0) + 1

    split = tf.function(
        lambda texts: graph_documents.split(texts, token_counts, LIMIT, tf.constant(tags, tf.int32)), autograph=False
    )
    pieces, separators = split(tf.constant(texts))
    got = [
        ([piece.decode() for piece in row], [separator.decode() for separator in between])
        for row, between in zip(pieces.to_list(), separators.to_list())
    ]
    expected = [
        tuple(length_rule(text, lambda pieces, tag=tag: count_ids(pieces, tag), LIMIT, tag))
        for text, tag in zip(texts, tags)
    ]
    different = [(text, g, e) for text, g, e in zip(texts, got, expected) if tuple(g) != e]
    assert not different, f"{len(different)} differ, the first: {different[0]}"
    assert max(len(row[0]) for row in got) > 100  # the long lines were cut, not truncated


def test_translations_join_as_the_input_was_with_alignments_offset():
    texts = ["One. Two three.  Four!", "", "  ", "Alone here"]
    segmented = [segment(text) for text in texts]
    translations = [["Eins.", "Zwei drei.", "Vier!"], [], [], ["Allein hier"]]
    alignments = [["0-0", "0-0 1-1", ""], [], [], ["1-0 0-1"]]
    pieces = tf.ragged.constant([row.pieces for row in segmented], dtype=tf.string)
    separators = tf.ragged.constant([row.separators for row in segmented], dtype=tf.string)
    joined = graph_documents.joined(separators, tf.ragged.constant(translations, dtype=tf.string))
    assert [text.decode() for text in joined.numpy()] == [
        row.join(translated) for row, translated in zip(segmented, translations)
    ]
    offset = graph_documents.offset_alignments(
        tf.constant(sum(alignments, [])), pieces.flat_values, tf.constant(sum(translations, [])), pieces
    )
    # "Two three." follows one source and one target word; "Vier!" aligns to nothing.
    assert [text.decode() for text in offset.numpy()] == ["0-0 1-1 2-2", "", "", "1-0 0-1"]


def test_confidence_is_token_weighted_and_token_scores_follow_one_another():
    log_probs = tf.constant([[-1.0, -2.0, 0.0], [-0.5, 0.0, 0.0], [0.0, 0.0, 0.0]])
    lengths = tf.constant([2, 1, 0])
    rows = tf.constant([0, 0, 2], tf.int64)
    confidence = graph_documents.confidence(log_probs, lengths, rows, 3).numpy()
    np.testing.assert_allclose(confidence, [np.exp(-3.5 / 3), 1.0, 1.0], rtol=1e-6)
    scores, counts = graph_documents.concatenated(log_probs, lengths, rows, 3, 0.0)
    np.testing.assert_array_equal(scores.numpy(), [[-1.0, -2.0, -0.5], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_array_equal(counts.numpy(), [3, 0, 0])
