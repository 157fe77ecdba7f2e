"""Per-token log-probabilities of given translations forced through the model (no search), what a
confidence (`inference.confidence`) is computed from; keras.ops only, so it also traces into the
SavedModel (`export.graph_confidence`)."""

from keras import ops

from common.special_ids import BOS_ID


def token_log_probs(model, source_ids, target_ids, *, bos_id=BOS_ID, encoded=None, attention_layer=None):
    """log P(token | source, previous tokens) of every target token of `model` (a `Transformer`).
    `source_ids` int `[batch, source_length]` and `target_ids` int `[batch, target_length]` are
    tokens + EOS padded with the model's pad id. Returns float32 `[batch, target_length]` (0 at
    padding) and the int32 `[batch]` lengths, EOS included; a row's sum is `score_ids`'s.

    `encoded`: `model.encode(source_ids)`'s `(encoder_output, padding_mask)` where the caller has
    it (a search's, `translate_ids(encoded=...)`); the pass then decodes only (`source_ids` may be
    None). More padding after a source does not change its rows.

    `attention_layer`: also return that decoder layer's encoder-decoder attention of the same pass,
    float32 `[batch, heads, target_length, source_length]` (`cross_attention_weights`'), so that
    word alignments and token scores take one forced pass."""
    target_ids = ops.cast(target_ids, "int32")
    batch_size = ops.shape(target_ids)[0]
    decoder_input = ops.concatenate([ops.full((batch_size, 1), bos_id, dtype="int32"), target_ids[:, :-1]], axis=1)
    weights = None
    if attention_layer is not None:
        encoder_output, padding_mask = model.encode(source_ids, training=False) if encoded is None else encoded
        logits, weights = model.decode(
            decoder_input,
            encoder_output,
            padding_mask,
            training=False,
            return_attention_scores=True,
            attention_layer=attention_layer,
        )
    elif encoded is None:
        logits = model((source_ids, decoder_input), training=False)
    else:
        logits = model.decode(decoder_input, *encoded, training=False)
    logits = ops.cast(logits, "float32")
    log_probs = ops.take_along_axis(ops.log_softmax(logits, axis=-1), target_ids[:, :, None], axis=2)[:, :, 0]
    real = ops.not_equal(target_ids, model.pad_id)
    scores = ops.where(real, log_probs, 0.0), ops.sum(ops.cast(real, "int32"), axis=1)
    return scores if weights is None else (*scores, ops.cast(weights, "float32"))
