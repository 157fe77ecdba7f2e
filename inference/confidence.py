"""A translation's confidence: its tokens' log-probabilities under the model (forced through it,
`models.token_scores`) and one number in [0, 1] for a reviewer to sort by.

The formula: the geometric mean of the token probabilities, exp(mean log p) over the tokens, EOS
included (1 / perplexity). Unlike the search's score it does not depend on the length penalty,
and unlike the sum it does not fall with every added token, so sentences of any length compare; it
is the per-token quantity training maximises, and 1 means every token certain. Its weakness: a mean
hides one bad token (a wrong name among confident function words), which the minimum token
probability catches, at the price of noise (one rare but right word sinks it) and of a fall with
length. benchmarks/confidence.py measures both, and the search's penalised score, against sentence
chrF (docs/translating.md, Confidence). `export.graph_confidence` is the graph twin.
"""

import keras
import numpy as np

from common.special_ids import PAD_ID
from inference.alignment import forced_target
from models.token_scores import token_log_probs


def sentence_confidence(log_probs, lengths):
    """float32 `[batch]`: exp(mean log p) of each row's tokens (keras.ops: the graph twin calls it).

    Args:
        log_probs: float `[batch, length]`, 0 at padding (`models.token_scores.token_log_probs`).
        lengths: int `[batch]`, at least 1 (a forced target holds EOS).
    """
    total = keras.ops.sum(keras.ops.cast(log_probs, "float32"), axis=1)
    return keras.ops.exp(total / keras.ops.cast(keras.ops.maximum(lengths, 1), "float32"))


def token_scores(model, source_rows, translation_rows, batch_size=32):
    """Each translation's token log-probabilities and confidence, forced through `model`.

    Args:
        model: a `models.transformer.Transformer`.
        source_rows: lists of source ids, each tokens + EOS.
        translation_rows: a search's output ids per sentence (tokens, EOS, then padding or not):
            the tokens scored are `inference.alignment.forced_target`'s (up to EOS; EOS alone for
            none).

    Returns:
        `(log_probs, confidences)`: a float32 array per translation (one value per token, EOS
        included) and a float per translation.
    """
    targets = [forced_target(row) for row in translation_rows]
    log_probs, confidences = [], []
    for start in range(0, len(targets), batch_size):
        sources, batch = source_rows[start : start + batch_size], targets[start : start + batch_size]
        scores, lengths = token_log_probs(model, _padded(sources), _padded(batch))
        confidences += keras.ops.convert_to_numpy(sentence_confidence(scores, lengths)).tolist()
        scores = keras.ops.convert_to_numpy(scores)
        log_probs += [scores[row, : len(target)] for row, target in enumerate(batch)]
    return log_probs, confidences


def _padded(rows):
    """int32 `[len(rows), longest]`, PAD after each row."""
    batch = np.full((len(rows), max(len(row) for row in rows)), PAD_ID, "int32")
    for index, row in enumerate(rows):
        batch[index, : len(row)] = row
    return batch
