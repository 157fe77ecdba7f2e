"""Fast path: the paper's Adam, updating each variable with TensorFlow's fused Adam kernel.

It must equal `keras.optimizers.Adam` (tests/training/test_optimizers.py).

`keras.optimizers.Adam.update_step` is written in `keras.ops`: under TensorFlow every variable's
update is ~20 graph ops (casts, the two bias-correction powers, the moment updates, the square root
and division of the step, three assignments), per variable and step (benchmarks/README.md has the
measurements). `FusedAdam` runs the same update as
one `ResourceApplyAdam` per variable, whose kernel computes, as Keras's Adam does,

    m += (g - m) (1 - beta_1);  v += (g^2 - v) (1 - beta_2)
    variable -= lr sqrt(1 - beta_2^t) / (1 - beta_1^t) m / (sqrt(v) + epsilon)

with t = iterations + 1, on the same moment variables (`_momentums`, `_velocities`), so checkpoints
are interchangeable with Keras's Adam. Sparse gradients, `amsgrad` and other backends use Keras's
update. Under `tf.distribute` the update runs inside `Strategy.extended.update`, where the variables'
handles are the replica's own copies.

Importing this module does not import TensorFlow (the benchmarks import it under JAX). A
`model.keras` written by `train.py` names this optimizer (and `training.losses`' loss) in its
compile config: load it with `compile=False`, as `evaluate.py` and `export/` do, or import
`training.optimizers` and `training.losses` before `keras.saving.load_model`.
"""

import keras


@keras.saving.register_keras_serializable(package="transformer")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` whose TensorFlow update is one fused kernel per variable."""

    def update_step(self, gradient, variable, learning_rate):
        if keras.backend.backend() != "tensorflow" or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        target = variable.value if isinstance(variable, keras.Variable) else variable
        dtype = target.dtype
        index = self._get_variable_index(variable)
        m, v = self._momentums[index].value, self._velocities[index].value
        local_step = tf.cast(self.iterations + 1, dtype)
        beta_1 = tf.cast(self.beta_1, dtype)
        beta_2 = tf.cast(self.beta_2, dtype)
        return tf.raw_ops.ResourceApplyAdam(
            var=target.handle,
            m=m.handle,
            v=v.handle,
            beta1_power=tf.pow(beta_1, local_step),
            beta2_power=tf.pow(beta_2, local_step),
            lr=tf.cast(learning_rate, dtype),
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.cast(gradient, dtype),
            use_locking=False,
        )
