"""The warm-up learning-rate schedule and Adam optimizer of Vaswani et al. (2017), Section 5.3:
lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup_steps^-1.5) (equation 3)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="transformer")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warm-up for `warmup_steps`, then inverse square-root decay, times `scale`.

    Args:
        hidden_dim: d_model. Defaults to 512.
        warmup_steps: defaults to 4000.
        scale: defaults to 1.0 (the paper).

    Evaluated at `step_num = iterations + 1`, so the first update is the paper's step 1.
    """

    def __init__(self, hidden_dim=512, warmup_steps=4000, scale=1.0):
        if not hidden_dim or hidden_dim < 1:
            raise ValueError(f"hidden_dim must be a positive int, received {hidden_dim!r}")
        if not warmup_steps or warmup_steps < 1:
            raise ValueError(f"warmup_steps must be a positive int, received {warmup_steps!r}")
        if scale <= 0:
            raise ValueError(f"scale must be positive, received {scale!r}")
        self.hidden_dim = hidden_dim
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step_num = ops.cast(step, "float32") + 1.0
        decay = ops.minimum(ops.rsqrt(step_num), step_num * float(self.warmup_steps) ** -1.5)
        return float(self.scale) * float(self.hidden_dim) ** -0.5 * decay

    def get_config(self):
        return {"hidden_dim": self.hidden_dim, "warmup_steps": self.warmup_steps, "scale": self.scale}


def transformer_optimizer(
    hidden_dim=512, warmup_steps=4000, scale=1.0, optimizer_class=None, constant_learning_rate=None, **adam_kwargs
):
    """Adam(0.9, 0.98, 1e-9) on the warm-up schedule (Section 5.3). `constant_learning_rate` replaces
    the schedule (not in the paper: for fine-tuning, where a fresh warm-up can undo what was learnt)."""
    options = dict(beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    options.update(adam_kwargs)
    optimizer_class = optimizer_class or keras.optimizers.Adam
    if constant_learning_rate is not None:
        if not constant_learning_rate > 0:
            raise ValueError(f"constant_learning_rate must be positive, received {constant_learning_rate!r}")
        return optimizer_class(learning_rate=float(constant_learning_rate), **options)
    return optimizer_class(learning_rate=TransformerSchedule(hidden_dim, warmup_steps, scale), **options)
