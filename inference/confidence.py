"""A translation's confidence: its tokens' log-probabilities under the model (forced through it,
`models.token_scores`) and exp(mean log p), one number in [0, 1] for a reviewer to sort by. Why
this formula: docs/translating.md, "Confidence"; `export.graph_confidence` is the graph twin.
"""

import keras
import numpy as np

from common.special_ids import PAD_ID
from inference.alignment import forced_target
from models.token_scores import token_log_probs


def sentence_confidence(log_probs, lengths):
    """float32 `[batch]`: exp(mean log p) of each row's tokens; `log_probs` float `[batch, length]`
    (0 at padding), `lengths` int `[batch]`, at least 1. keras.ops, for the graph twin."""
    total = keras.ops.sum(keras.ops.cast(log_probs, "float32"), axis=1)
    return keras.ops.exp(total / keras.ops.cast(keras.ops.maximum(lengths, 1), "float32"))


def token_scores(model, source_rows, translation_rows, batch_size=32, scorer=None):
    """Each translation's token log-probabilities and confidence, forced through `model`.

    `source_rows`: lists of source ids (tokens + EOS); `translation_rows`: a search's output ids
    per sentence, scored up to EOS (`inference.alignment.forced_target`). Returns `(log_probs,
    confidences)`: a float32 array per translation (EOS included) and a float per translation.
    `scorer`: `token_log_probs` of `model` compiled (`Translator.token_scorer`), called on rows
    padded to multiples of 8 so that few shapes compile; None: `token_log_probs` run eagerly.
    """
    targets = [forced_target(row) for row in translation_rows]
    log_probs, confidences = [], []
    for start in range(0, len(targets), batch_size):
        sources, batch = source_rows[start : start + batch_size], targets[start : start + batch_size]
        if scorer is None:
            scores, lengths = token_log_probs(model, _padded(sources), _padded(batch))
        else:
            scores, lengths = scorer(*(keras.ops.convert_to_tensor(_padded(rows, 8)) for rows in (sources, batch)))
        confidences += keras.ops.convert_to_numpy(sentence_confidence(scores, lengths)).tolist()
        scores = keras.ops.convert_to_numpy(scores)
        log_probs += [scores[row, : len(target)] for row, target in enumerate(batch)]
    return log_probs, confidences


def _padded(rows, multiple=1):
    """int32 `[len(rows), width]`, PAD after each row; `width` the longest row's length rounded up
    to a multiple of `multiple`."""
    batch = np.full((len(rows), -(-max(len(row) for row in rows) // multiple) * multiple), PAD_ID, "int32")
    for index, row in enumerate(rows):
        batch[index, : len(row)] = row
    return batch
