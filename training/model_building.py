"""The compiled Transformer that `model.fit` trains: the paper's optimizer, the global-token
label-smoothed loss, the --mixed_precision policy, XLA where it pays, accumulation and --ema_decay."""

import keras
import numpy as np
import tensorflow as tf

from common import compat
from common.special_ids import BOS_ID
from models.learning_rate_schedule import transformer_optimizer
from models.metrics import MaskedAccuracy, TargetTokenCount
from models.transformer import Transformer
from training.global_token_loss import GlobalTokenLabelSmoothedCrossEntropy
from training.optimizers import FusedAdam, count_update_tokens

# --mixed_precision -> the Keras dtype policy.
POLICIES = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}


def build_model(model_config, vocabulary_size, train, source_vocabulary_size=None):
    """A compiled Transformer with the paper's optimizer (or a constant learning rate, with
    `train.learning_rate_schedule == "constant"`) and the global-token loss; `vocabulary_size` is
    the shared vocabulary's, or the target's with separate ones (`source_vocabulary_size`)."""
    model = Transformer(vocabulary_size, source_vocabulary_size=source_vocabulary_size, **model_config)
    model.build()
    constant = train.learning_rate if train.learning_rate_schedule == "constant" else None
    optimizer = transformer_optimizer(
        model_config["hidden_dim"],
        train.warmup_steps,
        train.learning_rate_scale,
        optimizer_class=FusedAdam,
        constant_learning_rate=constant,
        accumulate_steps=train.accumulate_steps,
        **_moving_average(train.ema_decay),
    )
    if train.mixed_precision == "fp16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(
        optimizer=optimizer,
        loss=GlobalTokenLabelSmoothedCrossEntropy(label_smoothing=train.label_smoothing, pad_id=model.pad_id),
        metrics=[MaskedAccuracy(pad_id=model.pad_id), TargetTokenCount(pad_id=model.pad_id)],
        jit_compile=resolve_jit(train.jit_compile),
        steps_per_execution=train.steps_per_execution,
    )
    model.optimizer.build(model.trainable_variables)
    if train.accumulate_steps > 1:
        count_update_tokens(model)
    return model


def _moving_average(ema_decay):
    """The optimizer's arguments for `--ema_decay` (None: no average): Keras's own moving average
    (`training.optimizers` says why)."""
    return {} if ema_decay is None else dict(use_ema=True, ema_momentum=ema_decay)


def build_metrics_before_fit(model, strategy):
    """Builds the compiled loss and metrics on a dummy batch, then turns off Keras's pre-fit build,
    which under tf.distribute averages the first batch over replicas and fails on bucketed batches
    of different shapes. Private Keras API (`common.compat`).
    """
    dummy = np.full((1, 8), BOS_ID, dtype="int32")
    with strategy.scope():
        compat.build_compiled_metrics(model, ((dummy, dummy), dummy))
    compat.skip_build_before_fit(model)


def resolve_jit(jit_compile):
    """XLA by default on accelerators only: on CPUs each bucket shape costs a compilation that
    takes longer than the steps it speeds up."""
    if jit_compile is not None:
        return jit_compile
    if keras.backend.backend() == "jax":
        # JAX backend only.
        import jax

        return jax.default_backend() != "cpu"
    return bool(tf.config.list_logical_devices("GPU"))
