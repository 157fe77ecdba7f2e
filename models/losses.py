"""Label-smoothed cross-entropy over non-pad target tokens (Vaswani et al., 2017, section 5.4).

With smoothing epsilon_ls (0.1 in the paper, after Szegedy et al., 2016) the target distribution is
q = (1 - epsilon_ls) * one_hot(y) + epsilon_ls / V, and the loss of a token is

    -sum_v q_v log p_v = (1 - epsilon_ls) * (-log p_y) + epsilon_ls * mean_v(-log p_v)

computed from logsumexp so that no second `[batch, length, V]` float32 tensor (a log-softmax or a
smoothed one-hot) is materialised: -log p_v = logsumexp(logits) - logits_v.
"""

import keras
from keras import ops

from data.special_ids import PAD_ID


def label_smoothed_token_losses(target_ids, logits, label_smoothing=0.1):
    """Per-token label-smoothed cross-entropy, float32 `[batch, length]` (no masking)."""
    logits = ops.cast(logits, "float32")
    log_normalizer = ops.logsumexp(logits, axis=-1)  # [batch, length]
    target_logits = ops.squeeze(
        ops.take_along_axis(logits, ops.expand_dims(ops.cast(target_ids, "int32"), -1), axis=-1), -1
    )
    nll = log_normalizer - target_logits
    if not label_smoothing:
        return nll
    smooth = log_normalizer - ops.mean(logits, axis=-1)
    return (1.0 - label_smoothing) * nll + label_smoothing * smooth


@keras.saving.register_keras_serializable(package="transformer")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Label-smoothed cross-entropy, summed over non-pad tokens and divided by their number.

    Args:
        label_smoothing: epsilon_ls. Defaults to 0.1.
        pad_id: target positions holding this id contribute nothing and are not counted.

    Call arguments:
        y_true: int target ids `[batch, length]`.
        y_pred: logits `[batch, length, vocabulary_size]` (float32 expected; cast otherwise).

    Returns:
        A float32 scalar: the mean loss per non-pad target token of this batch.

    The loss is a sum (Keras reduction "sum") of per-token terms divided by `token_count`, so under
    `tf.distribute`, where the optimizer sums the replicas' gradients, the count must be the global
    one: `train.py` uses `training.losses.GlobalTokenLabelSmoothedCrossEntropy`, which all-reduces it.
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
