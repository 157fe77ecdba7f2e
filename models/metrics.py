"""Token accuracy over non-pad target positions."""

import keras
from keras import ops

from common.special_ids import PAD_ID


@keras.saving.register_keras_serializable(package="transformer")
class MaskedAccuracy(keras.metrics.Metric):
    """Share of non-pad target tokens whose argmax is right, over batches; `update_state(y_true
    [batch, length] ids, y_pred [batch, length, vocab] logits)`."""

    def __init__(self, pad_id=PAD_ID, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.correct = self.add_variable(shape=(), initializer="zeros", name="correct", dtype="float32")
        self.total = self.add_variable(shape=(), initializer="zeros", name="total", dtype="float32")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_true = ops.cast(y_true, "int32")
        weights = ops.cast(ops.not_equal(y_true, self.pad_id), "float32")
        if sample_weight is not None:
            weights = weights * ops.cast(sample_weight, "float32")
        hits = ops.cast(ops.equal(ops.cast(ops.argmax(y_pred, axis=-1), "int32"), y_true), "float32")
        self.correct.assign_add(ops.sum(hits * weights))
        self.total.assign_add(ops.sum(weights))

    def result(self):
        return self.correct / ops.maximum(self.total, 1.0)

    def reset_state(self):
        self.correct.assign(0.0)
        self.total.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}


@keras.saving.register_keras_serializable(package="transformer")
class TargetTokenCount(keras.metrics.Metric):
    """Non-pad target tokens since the last reset, summed over replicas (for tokens per second)."""

    def __init__(self, pad_id=PAD_ID, name="target_tokens", **kwargs):
        super().__init__(name=name, **kwargs)
        self.pad_id = pad_id
        self.total = self.add_variable(shape=(), initializer="zeros", name="total", dtype="float32")

    def update_state(self, y_true, y_pred=None, sample_weight=None):
        self.total.assign_add(ops.sum(ops.cast(ops.not_equal(y_true, self.pad_id), "float32")))

    def result(self):
        # A snapshot, not the variable: fit's logs must not change when validation resets it.
        return ops.copy(self.total)

    def reset_state(self):
        self.total.assign(0.0)

    def get_config(self):
        return {**super().get_config(), "pad_id": self.pad_id}
