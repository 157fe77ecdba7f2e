"""Per-token log-probabilities of given translations, forced through the model (no search): what a
confidence (`inference.confidence`) is computed from. `models.translation.score_ids` is their sum.

Backend-agnostic (keras.ops only): it runs eagerly, under `jax.jit`, and traces into the
SavedModel's graph (`export.graph_confidence`).
"""

from keras import ops

from common.special_ids import BOS_ID


def token_log_probs(model, source_ids, target_ids, *, bos_id=BOS_ID):
    """log P(token | source, previous tokens) of every target token.

    Args:
        model: a `models.transformer.Transformer`.
        source_ids: int `[batch, source_length]`, tokens + EOS, padded with the model's pad id.
        target_ids: int `[batch, target_length]`, tokens + EOS, padded with the model's pad id.
        bos_id: the first decoder input.

    Returns:
        `(log_probs, lengths)`: float32 `[batch, target_length]`, each token's log-probability (0
        at padding), and int32 `[batch]`, the tokens (EOS included) in each row. Their sum over a
        row is `score_ids`'s log-probability.
    """
    target_ids = ops.cast(target_ids, "int32")
    batch_size = ops.shape(target_ids)[0]
    decoder_input = ops.concatenate([ops.full((batch_size, 1), bos_id, dtype="int32"), target_ids[:, :-1]], axis=1)
    logits = ops.cast(model((source_ids, decoder_input), training=False), "float32")
    log_probs = ops.take_along_axis(ops.log_softmax(logits, axis=-1), target_ids[:, :, None], axis=2)[:, :, 0]
    real = ops.not_equal(target_ids, model.pad_id)
    return ops.where(real, log_probs, 0.0), ops.sum(ops.cast(real, "int32"), axis=1)
