"""Fast path: the paper's Adam as TensorFlow's fused `ResourceApplyAdam` per variable, which must
equal `keras.optimizers.Adam` (tests/training/test_optimizers.py); with token-weighted gradient
accumulation and Keras's moving average (docs/training.md, "How FusedAdam updates").

A `model.keras` from train.py names this optimizer in its compile config: load it with
`compile=False`, or import this module and `training.global_token_loss` first.
"""

import contextlib
import threading

import keras
from keras import ops

from common import compat

# The current batch's target-token count, per thread: tf.distribute's MirroredStrategy may trace
# each replica's step in its own thread.
_pending = threading.local()


@contextlib.contextmanager
def batch_tokens(count):
    """Within the block, an accumulating `FusedAdam.apply` weights the gradients by `count`, the
    non-pad target tokens of the batch they come from (over all replicas)."""
    previous = getattr(_pending, "tokens", None)
    _pending.tokens = count
    try:
        yield
    finally:
        _pending.tokens = previous


def count_update_tokens(model):
    """Wraps this model instance's `train_step` in `batch_tokens`, so that the accumulating
    `FusedAdam` weights each batch by its non-pad target tokens; the class (what `model.save`
    writes) is unchanged. `model.loss` needs `pad_id` and `token_count(weights)`."""
    loss = model.loss

    def counting(train_step):
        def counting_train_step(*args):
            _, targets, _ = keras.utils.unpack_x_y_sample_weight(args[-1])  # args: (data,) or (state, data) under JAX
            weights = ops.cast(ops.not_equal(targets, loss.pad_id), "float32")
            with batch_tokens(loss.token_count(weights)):
                return train_step(*args)

        return counting_train_step

    compat.wrap_step(model, "train_step", counting)


@keras.saving.register_keras_serializable(package="transformer")
class FusedAdam(keras.optimizers.Adam):
    """`keras.optimizers.Adam` as one fused kernel per variable, with token-weighted accumulation
    over `accumulate_steps` batches and, with `use_ema`, averages kept beside the weights."""

    def __init__(self, *args, accumulate_steps=1, **kwargs):
        if not isinstance(accumulate_steps, int) or accumulate_steps < 1:
            raise ValueError(f"accumulate_steps must be a positive int, received {accumulate_steps!r}")
        if accumulate_steps > 1 and kwargs.get("gradient_accumulation_steps"):
            raise ValueError("pass accumulate_steps or gradient_accumulation_steps, not both")
        super().__init__(*args, **kwargs)
        self.accumulate_steps = accumulate_steps

    def build(self, variables):
        super().build(variables)
        if self.accumulate_steps == 1:
            return
        # After Adam's variables, so that a checkpoint without accumulation lists them in the same order.
        self._gradient_sums = [self.add_variable_from_reference(v, name="token_gradient_sum") for v in variables]
        self.accumulated_tokens = self.add_variable(
            (), initializer="zeros", dtype="float32", aggregation="only_first_replica", name="accumulated_tokens"
        )
        self.accumulated_batches = self.add_variable(
            (), initializer="zeros", dtype="int32", aggregation="only_first_replica", name="accumulated_batches"
        )

    def apply(self, grads, trainable_variables=None):
        if self.accumulate_steps == 1:
            return super().apply(grads, trainable_variables)
        tokens = getattr(_pending, "tokens", None)
        if tokens is None:
            raise ValueError(
                "FusedAdam with accumulate_steps > 1 needs each batch's target-token count: apply the "
                "gradients inside `training.optimizers.batch_tokens(count)`"
            )
        if trainable_variables is None:
            trainable_variables = compat.optimizer_built_variables(self)
        trainable_variables = list(trainable_variables)
        if not self.built:
            self.build(trainable_variables)
        tokens = ops.cast(tokens, "float32")
        pairs = [(g, v) for g, v in zip(grads, trainable_variables) if g is not None]
        variables = [v for _, v in pairs]
        sums = [self._gradient_sums[compat.optimizer_variable_index(self, v)] for v in variables]
        weighted = [ops.cast(g, s.dtype) * ops.cast(tokens, s.dtype) for (g, _), s in zip(pairs, sums)]
        if keras.backend.backend() == "jax":
            return self._select_update(variables, sums, weighted, tokens)

        def update(weighted, tokens):
            super(FusedAdam, self).apply(self._averaged(sums, weighted, tokens), variables)
            self._assign_each(sums, [ops.zeros(s.shape, s.dtype) for s in sums])
            self.accumulated_tokens.assign(0.0)
            self.accumulated_batches.assign(0)

        def accumulate(weighted, tokens):
            self._assign_each(sums, [s.value + w for s, w in zip(sums, weighted)])
            self.accumulated_tokens.assign_add(tokens)
            self.accumulated_batches.assign_add(1)

        # TensorFlow backend only: the JAX path never imports it.
        import tensorflow as tf

        if tf.distribute.in_cross_replica_context() or compat.strategy_supports_no_merge_call():
            ops.cond(self._is_update(), lambda: update(weighted, tokens), lambda: accumulate(weighted, tokens))
            return

        # The optimizer's update synchronises the replicas (merge_call), which tf.distribute allows
        # in a conditional only from the cross-replica context (as keras.optimizers.LossScaleOptimizer).
        def in_cross_replica_context(distribution, weighted, tokens):
            def each_replica(branch):
                return lambda: distribution.extended.call_for_each_replica(branch, args=(weighted, tokens))

            ops.cond(self._is_update(), each_replica(update), each_replica(accumulate))

        tf.distribute.get_replica_context().merge_call(in_cross_replica_context, args=(weighted, tokens))

    def _is_update(self):
        return ops.equal(self.accumulated_batches + 1, self.accumulate_steps)

    def _averaged(self, sums, weighted, tokens):
        """The update's gradient: the token-weighted sums over the K batches over their tokens."""
        total = ops.maximum(self.accumulated_tokens + tokens, 1.0)
        return [(s.value + w) / ops.cast(total, s.dtype) for s, w in zip(sums, weighted)]

    def _select_update(self, variables, sums, weighted, tokens):
        """The stateless form (JAX, inside `stateless_apply`): the update is computed on every batch
        and kept on the K-th, since a branch cannot assign variables there."""
        is_update = self._is_update()
        kept = [v.value for v in variables], [v.value for v in self.variables]
        new_sums = [ops.where(is_update, ops.zeros_like(w), s.value + w) for s, w in zip(sums, weighted)]
        new_tokens = ops.where(is_update, 0.0, self.accumulated_tokens + tokens)
        new_batches = ops.where(is_update, 0, self.accumulated_batches.value + 1)
        super().apply(self._averaged(sums, weighted, tokens), variables)
        for group, before in zip((variables, self.variables), kept):
            for variable, value in zip(group, before):
                variable.assign(ops.where(is_update, variable.value, value))
        for s, value in zip(sums, new_sums):
            s.assign(value)
        self.accumulated_tokens.assign(new_tokens)
        self.accumulated_batches.assign(new_batches)

    def _assign_each(self, variables, values):
        """Assigns each replica's own value (under tf.distribute the sums differ between replicas
        until the update all-reduces them)."""
        if keras.backend.backend() != "tensorflow":
            for variable, value in zip(variables, values):
                variable.assign(value)
            return
        # TensorFlow backend only: the JAX path never imports it.
        import tensorflow as tf

        def assign_in_cross_replica_context(distribution, values):
            for variable, value in zip(variables, values):
                distribution.extended.update(variable.value, lambda v, x: v.assign(x), args=(value,), group=False)

        compat.maybe_merge_call(assign_in_cross_replica_context, tf.distribute.get_strategy(), values)

    def finalize_variable_values(self, var_list):
        """Leaves the live weights in the model at the end of `fit` (Keras would swap in the averages)."""

    def get_config(self):
        config = super().get_config()
        config["accumulate_steps"] = self.accumulate_steps
        return config

    def update_step(self, gradient, variable, learning_rate):
        if keras.backend.backend() != "tensorflow" or self.amsgrad:
            return super().update_step(gradient, variable, learning_rate)
        # TensorFlow backend only: the JAX path never imports it.
        import tensorflow as tf

        if isinstance(gradient, tf.IndexedSlices):
            return super().update_step(gradient, variable, learning_rate)
        target = variable.value if isinstance(variable, keras.Variable) else variable
        dtype = target.dtype
        m, v = (moment.value for moment in compat.adam_moments(self, variable))
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
