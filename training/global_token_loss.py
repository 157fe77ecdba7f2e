"""The label-smoothed loss normalised by the target tokens of the whole global batch (one
all-reduce of a scalar), so one device and N give the same update: the tf.distribute form of
`models.losses.LabelSmoothedCrossEntropy` (under JAX the plain loss sees the global batch).
"""

import keras

from models.losses import LabelSmoothedCrossEntropy


@keras.saving.register_keras_serializable(package="transformer")
class GlobalTokenLabelSmoothedCrossEntropy(LabelSmoothedCrossEntropy):
    """`LabelSmoothedCrossEntropy` whose token count is summed over all replicas."""

    def token_count(self, weights):
        count = super().token_count(weights)
        if keras.backend.backend() != "tensorflow":
            return count
        # TensorFlow backend only: the JAX path never imports it.
        import tensorflow as tf

        context = tf.distribute.get_replica_context()
        if context is None or context.num_replicas_in_sync == 1:
            return count
        return context.all_reduce(tf.distribute.ReduceOp.SUM, count)
