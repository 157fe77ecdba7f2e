"""`export.graph_confidence.token_scores`, traced as a signature traces it, equals the Python
`inference.confidence.token_scores` on the shared tiny run: search outputs of every shape (cut,
tokens after EOS, nothing) and the sample corpus's references as translations, from the sources or
from their encoding padded further, as a search hands it over."""

import csv
import os

import numpy as np
import tensorflow as tf

from common.special_ids import EOS_ID, PAD_ID
from export import graph_confidence
from inference.confidence import token_scores
from tests.helpers import REPO_ROOT

SAMPLE = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")


def test_the_graph_scores_translations_as_python_does(tiny_model_and_tokenizer):
    model, tokenizer = tiny_model_and_tokenizer
    with open(SAMPLE, encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))[::150]
    sources = [row + [EOS_ID] for row in tokenizer.tokenize([row[1] for row in rows]).to_list()]
    translations = [row + [EOS_ID] for row in tokenizer.tokenize([row[2] for row in rows]).to_list()]
    translations[:4] = [[5, 6, 7, 8], [5, EOS_ID, 7], [], [EOS_ID]]  # cut, after EOS, nothing, EOS alone
    width = max(len(row) for row in sources + translations)
    batch = [
        np.array([row + [PAD_ID] * (width - len(row)) for row in rows], "int32") for rows in (sources, translations)
    ]
    spec = tf.TensorSpec([None, None], tf.int32)
    graph = tf.function(
        lambda s, t: graph_confidence.token_scores(model, s, t), input_signature=[spec, spec], autograph=False
    )
    log_probs, lengths, confidence = (x.numpy() for x in graph(*batch))
    expected, confidences = token_scores(model, sources, translations)
    assert lengths.tolist() == [len(scores) for scores in expected]
    for row, scores in enumerate(expected):
        assert np.max(np.abs(log_probs[row, : len(scores)] - scores)) < 1e-5
        assert (log_probs[row, len(scores) :] == 0).all()
    assert np.max(np.abs(confidence - confidences)) < 1e-6
    assert 0 < confidence.min() <= confidence.max() < 1
    # From the encoding a search hands over: the sources padded to a longer bucket.
    wider = np.pad(batch[0], [[0, 0], [0, 7]], constant_values=PAD_ID)
    encoded_graph = tf.function(
        lambda s, t: graph_confidence.token_scores(model, None, t, encoded=model.encode(s)),
        input_signature=[spec, spec],
        autograph=False,
    )
    decoded, decoded_lengths, decoded_confidence = (x.numpy() for x in encoded_graph(wider, batch[1]))
    assert decoded_lengths.tolist() == lengths.tolist()
    assert np.max(np.abs(decoded - log_probs)) < 1e-5 and np.max(np.abs(decoded_confidence - confidence)) < 1e-6
