"""`models.token_scores.token_log_probs`: each token's log-probability, against a NumPy log-softmax
of the model's logits; 0 at padding; a row's sum is `score_ids`'s; padding does not change a row,
nor does decoding from an encoding of the sources padded further, which also gives a layer's
attention from the same pass."""

import keras
import numpy as np

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from models.token_scores import token_log_probs
from models.translation import cross_attention_weights, score_ids
from tests.models.small_model import small_transformer


def test_token_log_probs_are_the_forced_tokens_log_softmax_and_sum_to_score_ids():
    model = small_transformer()
    # The shared batch's shapes: source [3, 7], target [3, 6].
    source = np.full((3, 7), PAD_ID, "int32")
    source[0], source[1, :4], source[2, :2] = [5, 6, 7, 8, 9, 10, EOS_ID], [11, 12, 13, EOS_ID], [14, EOS_ID]
    target = np.full((3, 6), PAD_ID, "int32")
    target[0, :3], target[1], target[2, :4] = [9, 10, EOS_ID], [11, 12, 13, 14, 15, EOS_ID], [16, 17, 18, EOS_ID]
    log_probs, lengths = (keras.ops.convert_to_numpy(x) for x in token_log_probs(model, source, target))
    assert lengths.tolist() == [3, 6, 4] and np.all(log_probs[0, 3:] == 0.0) and np.all(log_probs[2, 4:] == 0.0)
    decoder_input = np.concatenate([np.full((3, 1), BOS_ID, "int32"), target[:, :-1]], axis=1)
    logits = keras.ops.convert_to_numpy(model((source, decoder_input), training=False)).astype("float64")
    expected = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    expected = np.take_along_axis(expected, target[:, :, None], axis=2)[:, :, 0] * (target != PAD_ID)
    assert np.max(np.abs(log_probs - expected)) < 1e-5
    totals, counts = (keras.ops.convert_to_numpy(x) for x in score_ids(model, source, target))
    assert np.max(np.abs(log_probs.sum(1) - totals)) < 1e-5 and counts.tolist() == lengths.tolist()
    alone, _ = token_log_probs(model, source[:1, :], target[:1, :3])
    assert np.max(np.abs(keras.ops.convert_to_numpy(alone)[0] - log_probs[0, :3])) < 1e-5
    # From an encoding of the sources padded further (a search's, padded to its bucket).
    wider = np.concatenate([source, np.full((3, 5), PAD_ID, "int32")], axis=1)
    decoded, _ = token_log_probs(model, None, target, encoded=model.encode(wider, training=False))
    assert np.max(np.abs(keras.ops.convert_to_numpy(decoded) - log_probs)) < 1e-5
    # With a layer's attention, from the same pass: the same log-probs, and that layer's weights.
    decoded, _, weights = token_log_probs(
        model, None, target, encoded=model.encode(wider, training=False), attention_layer=0
    )
    assert np.max(np.abs(keras.ops.convert_to_numpy(decoded) - log_probs)) < 1e-5
    expected = keras.ops.convert_to_numpy(cross_attention_weights(model, source, decoder_input, layer=0))
    weights = keras.ops.convert_to_numpy(weights)
    assert weights.shape == (3, model.num_heads, 6, wider.shape[1])
    assert np.max(np.abs(weights[..., : source.shape[1]] - expected)) < 1e-6
    assert np.max(np.abs(weights[..., source.shape[1] :])) < 1e-6  # none on the padding
