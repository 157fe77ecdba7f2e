"""`inference.confidence`: the confidence is exp(mean log p) of the forced tokens, in [0, 1]; a
search's output is scored up to its EOS (its graph twin: tests/export/test_graph_confidence.py)."""

import keras
import numpy as np

from common.special_ids import EOS_ID, PAD_ID
from inference.confidence import sentence_confidence, token_scores
from models.transformer import Transformer


def test_the_confidence_is_the_geometric_mean_token_probability():
    log_probs = np.log(np.array([[0.5, 0.5, 1.0], [0.9, 1.0, 1.0]], "float32"))
    log_probs[1, 1:] = 0.0  # one token, then padding
    confidence = keras.ops.convert_to_numpy(sentence_confidence(log_probs, np.array([3, 1])))
    assert np.max(np.abs(confidence - [0.25 ** (1 / 3), 0.9])) < 1e-6


def test_token_scores_of_search_outputs_stop_at_eos():
    keras.utils.set_random_seed(0)
    model = Transformer(17, num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32, dropout=0.0)
    sources = [[5, 6, EOS_ID], [7, EOS_ID], [8, 9, 10, EOS_ID]]
    searched = [[11, 12, EOS_ID, PAD_ID], [13, EOS_ID, 14, 15], [PAD_ID, PAD_ID]]
    log_probs, confidences = token_scores(model, sources, searched, batch_size=2)
    assert [len(scores) for scores in log_probs] == [3, 2, 1]  # the last: EOS alone
    for scores, confidence in zip(log_probs, confidences):
        assert (scores < 0).all() and abs(confidence - np.exp(scores.mean())) < 1e-6 and 0 < confidence < 1
    # Compiled (a translator's `token_scorer`, rows padded to multiples of 8): the same scores.
    from inference.translator import compile_search
    from models.token_scores import token_log_probs

    def scorer(source, target):
        return token_log_probs(model, source, target)

    compiled, compiled_confidences = token_scores(
        model, sources, searched, batch_size=2, scorer=compile_search(scorer, model.variables, any_shape=True)
    )
    for eager, traced in zip(log_probs, compiled):
        assert eager.shape == traced.shape and np.max(np.abs(eager - traced)) < 1e-5
    assert np.max(np.abs(np.array(confidences) - compiled_confidences)) < 1e-6
