"""Confidence inside the SavedModel's graph: `inference.confidence.token_scores` as TensorFlow ops,
which it must equal (tests/export/test_graph_confidence.py).
"""

import tensorflow as tf

from export.graph_alignment import forced_targets
from inference.confidence import sentence_confidence
from models.token_scores import token_log_probs


def token_scores(model, source_ids, translation_ids, encoded=None):
    """`(log_probs, lengths, confidence)`: float32 `[batch, longest target]` (0 after a row's
    tokens), int32 `[batch]` (EOS included) and float32 `[batch]`, of int32 `[batch, length]`
    `source_ids` (tokens + EOS, PAD) and `translation_ids` (the search's best hypotheses);
    `encoded`: the sources' `model.encode` output where the search has it (`token_log_probs`)."""
    targets = forced_targets(translation_ids)
    log_probs, lengths = token_log_probs(model, source_ids, targets, encoded=encoded)
    log_probs = tf.convert_to_tensor(log_probs)
    return log_probs, tf.convert_to_tensor(lengths), tf.convert_to_tensor(sentence_confidence(log_probs, lengths))
