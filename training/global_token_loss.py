"""The label-smoothed loss normalised by the target tokens of the whole global batch: the
training-only (tf.distribute) form of `models.losses.LabelSmoothedCrossEntropy`.

Under `tf.distribute`, each replica sees part of the global batch and the optimizer sums the
replicas' gradients. Dividing each replica's summed loss by the token count of *all* replicas
(one all-reduce of a scalar) makes that sum the gradient of the global per-token mean, whatever
the split: one device and N devices give the same update for the same data. Under JAX, one jitted
program sees the global batch, so the plain loss already does this.
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
