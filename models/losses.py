"""Label-smoothed cross-entropy over non-pad target tokens (Vaswani et al., 2017, Section 5.4).

docs/training.md, "The loss", gives the formula and why the gradient is written by hand."""

import keras
from keras import ops

from common.special_ids import PAD_ID


def label_smoothed_token_losses(target_ids, logits, label_smoothing=0.1):
    """Per-token label-smoothed cross-entropy, float32 `[batch, length]` (no masking), from logits
    of any float dtype; the gradient is hand-written per backend (docs/training.md, "The loss")."""
    vocabulary_size = logits.shape[-1]
    if vocabulary_size is None:
        raise ValueError(f"logits must have a known last dimension (the vocabulary), received shape {logits.shape}")
    off_value = label_smoothing / vocabulary_size
    on_value = 1.0 - label_smoothing + off_value
    target_ids = ops.cast(target_ids, "int32")
    if keras.backend.backend() == "jax":
        return _fused_token_losses(logits, target_ids, off_value, on_value)
    return _gathered_token_losses(logits, target_ids, off_value, on_value)


def _fused_token_losses(logits, target_ids, off_value, on_value):
    """The loss with q built by comparison and a one-pass gradient (for XLA, which fuses it)."""
    vocabulary_size = logits.shape[-1]

    def smoothed_targets(ids):
        """q as `[batch, length, V]` float32, built by comparison (elementwise, fuses; no one_hot)."""
        is_target = ops.equal(ops.arange(vocabulary_size, dtype="int32"), ids[..., None])
        return ops.where(is_target, on_value, off_value)

    @ops.custom_gradient
    def token_losses(logits, target_ids_as_float):
        # The ids travel as float32 (exact below 2**24) so that the custom gradient has only float inputs.
        ids = ops.cast(target_ids_as_float, "int32")
        float_logits = ops.cast(logits, "float32")
        log_normalizer = ops.logsumexp(float_logits, axis=-1)  # [batch, length]
        # sum_v q_v (log_normalizer - logits_v), with sum_v q_v = 1.
        losses = log_normalizer - ops.sum(float_logits * smoothed_targets(ids), axis=-1)

        def gradient(*args, upstream=None):
            upstream = args[0] if upstream is None else upstream
            probabilities = ops.exp(ops.cast(logits, "float32") - log_normalizer[..., None])
            logits_gradient = (probabilities - smoothed_targets(ids)) * upstream[..., None]
            return ops.cast(logits_gradient, logits.dtype), ops.zeros_like(target_ids_as_float)

        return losses, gradient

    return token_losses(logits, ops.cast(target_ids, "float32"))


def _gathered_token_losses(logits, target_ids, off_value, on_value):
    """The TensorFlow form: the loss from the target logits' gather and the row sums, a scatter in
    the gradient. Ids outside [0, V) are gathered at id 0 with their target term switched off."""
    vocabulary_size = logits.shape[-1]
    batch, length = ops.shape(target_ids)[0], ops.shape(target_ids)[1]
    ids = ops.reshape(target_ids, (-1,))
    in_vocabulary = ops.logical_and(ops.greater_equal(ids, 0), ops.less(ids, vocabulary_size))
    target_weight = ops.where(in_vocabulary, on_value - off_value, 0.0)  # [batch * length] float32
    safe_ids = ops.where(in_vocabulary, ids, 0)
    # (row, target id) of every token in the [batch * length, V] view of the logits.
    target_positions = ops.stack([ops.arange(batch * length, dtype="int32"), safe_ids], axis=1)

    @ops.custom_gradient
    def token_losses(logits):
        float_logits = ops.reshape(ops.cast(logits, "float32"), (batch * length, -1))
        row_max = ops.max(float_logits, axis=-1)
        exponentials = ops.exp(float_logits - row_max[:, None])
        sums = ops.sum(exponentials, axis=-1)
        target_logits = ops.take_along_axis(float_logits, safe_ids[:, None], axis=-1)[:, 0]
        losses = ops.log(sums) + row_max - off_value * ops.sum(float_logits, axis=-1) - target_weight * target_logits

        def gradient(*args, upstream=None):
            upstream = ops.reshape(args[0] if upstream is None else upstream, (-1,))
            scale = upstream / sums
            logits_gradient = exponentials * scale[:, None] - (upstream * off_value)[:, None]
            at_targets = ops.exp(target_logits - row_max) * scale - upstream * (off_value + target_weight)
            logits_gradient = ops.scatter_update(logits_gradient, target_positions, at_targets)
            return ops.cast(ops.reshape(logits_gradient, ops.shape(logits)), logits.dtype)

        return ops.reshape(losses, (batch, length)), gradient

    return token_losses(logits)


@keras.saving.register_keras_serializable(package="transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Label-smoothed cross-entropy, summed over non-pad tokens and divided by their number.

    Args:
        label_smoothing: epsilon_ls. Defaults to 0.1.
        pad_id: target positions holding it are neither counted nor scored.

    Call arguments:
        y_true: int target ids `[batch, length]`.
        y_pred: logits `[batch, length, vocabulary_size]` (cast to float32).

    Returns:
        A float32 scalar, the mean per non-pad token of this batch; under `tf.distribute` use
        `training.global_token_loss.GlobalTokenLabelSmoothedCrossEntropy`, whose count is global.
    """

    def __init__(self, label_smoothing=0.1, pad_id=PAD_ID, name="label_smoothed_cross_entropy", **kwargs):
        kwargs.setdefault("reduction", "sum")
        kwargs.setdefault("dtype", "float32")
        super().__init__(name=name, **kwargs)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"label_smoothing must be in [0, 1), received {label_smoothing!r}")
        self.label_smoothing = label_smoothing
        self.pad_id = pad_id

    def call(self, y_true, y_pred):
        if len(y_true.shape) != 2 or len(y_pred.shape) != 3:
            raise ValueError(
                "LabelSmoothedCrossEntropy expects y_true [batch, length] and y_pred [batch, length, vocab], "
                f"received shapes {y_true.shape} and {y_pred.shape}"
            )
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        losses = label_smoothed_token_losses(y_true, y_pred, self.label_smoothing) * weights
        return losses / ops.maximum(self.token_count(weights), 1.0)

    def token_count(self, weights):
        """The normaliser: the number of non-pad target tokens (subclasses count other replicas too)."""
        return ops.sum(weights)

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "pad_id": self.pad_id})
        return config
