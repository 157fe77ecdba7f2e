"""`export.graph_alignment`, the TensorFlow port of `inference.alignment` that the `align`
signature runs: each part equals the plain version on hand-built pieces and matrices (the whole
signature against the Python translator: tests/export/test_fresh_process.py)."""

import numpy as np
import tensorflow as tf

from common.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from export import graph_alignment
from inference import alignment
from tests.export.helpers import padded

M = "\u2581"  # SentencePiece's word marker
# Piece sequences with the special cases of `alignment.word_indices`: a bare marker joining the next
# piece (or, last, no word), <unk> a word of its own, a first piece without the marker, pieces with
# no text but markers, BOS/EOS/PAD anywhere, rows with no word at all, and a multilingual model's
# target-language tags (with the lone marker before them: no word).
ROWS = [
    [M + "Open", M + "the", M + "fi", "le", ".", "</s>"],
    [M + "a", M, M + "x", "<unk>", "y", M, "</s>"],
    ["(", M + "a", "<unk>", "<unk>", M, M, "b", "</s>", "<pad>", "<pad>"],
    ["<s>", M, "<pad>", M + "c", "<unk>", M, "</s>"],
    [M, M, M, "</s>"],
    ["</s>"],
    ["<unk>", M, "<unk>", "d", M + M + "e", "</s>"],
    ["", "f", M, "", "g", M + "h", "</s>"],
    [M, "<2fr>", M + "Open", "file", "</s>"],
    ["<2zh_cn>", "x", M, M, "<2de>", M + "y", "</s>"],
]
SPECIAL = {"<pad>": PAD_ID, "<s>": BOS_ID, "</s>": EOS_ID, "<unk>": UNK_ID}


def ids_of(pieces):
    return [SPECIAL.get(piece, 100) for piece in pieces]


def test_word_indices_equal_the_plain_version_on_every_special_case():
    expected = [alignment.word_indices(ids_of(row), row) for row in ROWS]
    assert expected[1] == [0, 1, 1, 2, 3, -1, -1]  # the cases hold what their comment says
    assert expected[8] == [-1, -1, 0, 0, -1] and expected[9] == [-1, 0, 1, -1, -1, 1, -1]
    pieces = padded(ROWS, "<pad>")
    flags = [graph_alignment.piece_flags(row) for row in pieces]
    words = graph_alignment.word_indices(
        tf.constant([ids_of(row) for row in pieces], tf.int32),
        tf.constant([f.starts_word for f in flags]),
        tf.constant([f.has_text for f in flags]),
        tf.constant([f.is_tag for f in flags]),
    ).numpy()
    assert [row[: len(pieces)].tolist() for row, pieces in zip(words, ROWS)] == expected
    assert all((row[len(pieces) :] == -1).all() for row, pieces in zip(words, ROWS))


def test_word_weights_and_pharaoh_equal_the_plain_version():
    rng = np.random.default_rng(0)
    cases = []
    for source_length, target_length in [(6, 4), (9, 7), (3, 1), (5, 5)]:
        source_words = rng.integers(-1, source_length // 2 + 1, source_length)
        target_words = rng.integers(-1, target_length // 2 + 1, target_length)
        weights = rng.random((target_length, source_length)).astype("float32")
        cases.append((weights, source_words, target_words))
    cases.append((np.ones((2, 3), "float32"), np.array([0, 1, 2]), np.array([0, 1])))  # ties: the first
    cases.append((np.ones((2, 3), "float32"), np.array([-1, -1, -1]), np.array([0, 1])))  # no source word
    cases.append((np.ones((2, 3), "float32"), np.array([0, 1, -1]), np.array([-1, -1])))  # no target word
    sources, targets = max(len(c[1]) for c in cases), max(len(c[2]) for c in cases)
    batch = np.zeros((len(cases), targets, sources), "float32")
    for index, (weights, _, _) in enumerate(cases):
        batch[index, : weights.shape[0], : weights.shape[1]] = weights
    source_words = tf.constant(padded([c[1] for c in cases], -1), tf.int32)
    target_words = tf.constant(padded([c[2] for c in cases], -1), tf.int32)
    words = graph_alignment.word_weights(tf.constant(batch), source_words, target_words).numpy()
    links = graph_alignment.pharaoh(
        tf.constant(words),
        tf.reduce_max(source_words, axis=1) + 1,
        tf.reduce_max(target_words, axis=1) + 1,
    ).numpy()
    for index, (weights, source, target) in enumerate(cases):
        expected = alignment.word_weights(weights, source, target)
        found = words[index, : expected.shape[0], : expected.shape[1]]
        assert np.max(np.abs(found - expected), initial=0.0) < 1e-6
        assert links[index].decode() == alignment.pharaoh(expected)
    assert [link.decode() for link in links[-3:]] == ["0-0 0-1", "", ""]


def test_forced_targets_equal_the_plain_version():
    searched = [
        [5, 6, EOS_ID, PAD_ID, PAD_ID],
        [EOS_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],
        [5, 6, 7, 8, 9],  # cut at the length limit, no EOS
        [5, EOS_ID, 7, PAD_ID, PAD_ID],  # tokens after EOS are left out
        [PAD_ID, PAD_ID, PAD_ID, PAD_ID, PAD_ID],  # nothing: EOS alone
    ]
    targets = graph_alignment.forced_targets(tf.constant(searched, tf.int32))
    expected = [alignment.forced_target(row) for row in searched]
    assert targets.numpy().tolist() == padded(expected, PAD_ID)
