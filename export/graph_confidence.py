"""Confidence inside the SavedModel's graph: `inference.confidence.token_scores` for a search's
output ids, as TensorFlow ops (the tokens forced as `export.graph_alignment.forced_targets` gives
them, scored by `models.token_scores`, the confidence by `inference.confidence.sentence_confidence`).

The plain version, which this must equal, is `inference.confidence.token_scores`;
tests/export/test_graph_confidence.py checks both on the shared tiny run.
"""

import tensorflow as tf

from export.graph_alignment import forced_targets
from inference.confidence import sentence_confidence
from models.token_scores import token_log_probs


def token_scores(model, source_ids, translation_ids):
    """`(log_probs, lengths, confidence)` of each translation: float32 `[batch, longest target]`
    (0 after a row's tokens), int32 `[batch]` (the tokens, EOS included) and float32 `[batch]`.

    Args:
        model: a `models.transformer.Transformer`.
        source_ids: int32 `[batch, length]`, tokens + EOS, PAD-padded: the sources searched.
        translation_ids: int32 `[batch, length]`, the search's best hypotheses.
    """
    targets, _ = forced_targets(translation_ids)
    log_probs, lengths = token_log_probs(model, source_ids, targets)
    log_probs = tf.convert_to_tensor(log_probs)
    return log_probs, tf.convert_to_tensor(lengths), tf.convert_to_tensor(sentence_confidence(log_probs, lengths))
