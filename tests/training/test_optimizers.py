import keras
import numpy as np
import pytest
import tensorflow as tf

from common.special_ids import BOS_ID, PAD_ID
from models.learning_rate_schedule import transformer_optimizer
from models.losses import LabelSmoothedCrossEntropy
from models.transformer import Transformer
from training.optimizers import FusedAdam


def fused_adam_optimizer(*args, **kwargs):
    """`train.py`'s optimizer."""
    return transformer_optimizer(*args, optimizer_class=FusedAdam, **kwargs)


SMALL = dict(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32, dropout=0.0)
VOCABULARY = 40


def _dataset(steps):
    rng = np.random.default_rng(0)
    batches = []
    for _ in range(steps):
        source = rng.integers(4, VOCABULARY, size=(4, 6)).astype("int32")
        target = rng.integers(4, VOCABULARY, size=(4, 8)).astype("int32")
        target[:, 0] = BOS_ID
        labels = np.roll(target, -1, axis=1)
        labels[:, -1] = PAD_ID
        batches.append(((source, target), labels))
    sources, targets, labels = (
        np.stack([b[0][0] for b in batches]),
        np.stack([b[0][1] for b in batches]),
        np.stack([b[1] for b in batches]),
    )
    return tf.data.Dataset.from_tensor_slices(((sources, targets), labels))


def _model(optimizer, weights=None, jit_compile=False):
    keras.utils.set_random_seed(0)
    model = Transformer(VOCABULARY, **SMALL)
    model.build()
    if weights is not None:
        model.set_weights(weights)
    model.compile(optimizer=optimizer, loss=LabelSmoothedCrossEntropy(), jit_compile=jit_compile)
    model.optimizer.build(model.trainable_variables)
    return model


def _optimizer_state(model):
    return [np.asarray(v) for v in model.optimizer.variables]


def _largest_difference(first, second):
    return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b)))) for a, b in zip(first, second))


def test_fused_adam_update_equals_keras_adams_to_rounding():
    rng = np.random.default_rng(0)
    initial = [rng.normal(size=(64, 48)).astype("float32"), rng.normal(size=(48,)).astype("float32")]
    gradients = [[rng.normal(size=w.shape).astype("float32") for w in initial] for _ in range(6)]
    results = []
    for optimizer_class in (keras.optimizers.Adam, FusedAdam):
        variables = [keras.Variable(w.copy()) for w in initial]
        optimizer = optimizer_class(learning_rate=0.01, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
        for step_gradients in gradients:
            optimizer.apply([tf.constant(g) for g in step_gradients], variables)
        results.append(([np.asarray(v) for v in variables], [np.asarray(v) for v in optimizer.variables]))
    (keras_weights, keras_state), (fused_weights, fused_state) = results
    assert _largest_difference(keras_weights, initial) > 0.03  # ~lr per step: the steps happened
    assert _largest_difference(keras_weights, fused_weights) < 1e-6  # float32 rounding of ~1
    assert _largest_difference(keras_state, fused_state) < 1e-6


@pytest.mark.parametrize(
    "jit_compile",
    [False, pytest.param(True, marks=pytest.mark.slow)],
    ids=["graph", "xla"],  # XLA compiles: slow.
)
def test_fused_adam_trains_like_keras_adam_and_resumes_its_checkpoint(jit_compile, tmp_path):
    # One step from the same weights: both see the same gradients, so the weights agree to rounding.
    # (Over several steps they drift apart wherever a gradient is rounding noise, which Adam scales
    # up to a step of the learning rate: the key projection's bias, whose true gradient is zero.)
    # Under XLA (train.py's default on GPUs) ResourceApplyAdam is compiled by tf2xla.
    keras_model = _model(
        transformer_optimizer(SMALL["hidden_dim"], warmup_steps=2, scale=10.0), jit_compile=jit_compile
    )
    initial = keras_model.get_weights()
    fused_model = _model(fused_adam_optimizer(SMALL["hidden_dim"], warmup_steps=2, scale=10.0), initial, jit_compile)
    assert isinstance(fused_model.optimizer, FusedAdam)
    keras_model.fit(_dataset(1), epochs=1, verbose=0)
    fused_model.fit(_dataset(1), epochs=1, verbose=0)
    assert int(fused_model.optimizer.iterations.numpy()) == 1
    assert _largest_difference(keras_model.get_weights(), initial) > 0.1
    assert _largest_difference(keras_model.get_weights(), fused_model.get_weights()) < 1e-5
    assert _largest_difference(_optimizer_state(keras_model), _optimizer_state(fused_model)) < 1e-6

    # A checkpoint of Keras's Adam, two steps further on, loads into the fused one as it is, and both
    # take the same next step.
    keras_model.fit(_dataset(2), epochs=1, verbose=0)
    resumed_from = keras_model.get_weights()
    path = str(tmp_path / "ckpt-3.weights.h5")
    keras_model.save_weights(path)
    fused_model.load_weights(path)
    assert int(fused_model.optimizer.iterations.numpy()) == 3
    for expected, actual in zip(_optimizer_state(keras_model), _optimizer_state(fused_model)):
        np.testing.assert_array_equal(actual, expected)
    keras_model.fit(_dataset(1), epochs=1, verbose=0)
    fused_model.fit(_dataset(1), epochs=1, verbose=0)
    assert int(fused_model.optimizer.iterations.numpy()) == 4
    assert _largest_difference(keras_model.get_weights(), resumed_from) > 0.1
    assert _largest_difference(keras_model.get_weights(), fused_model.get_weights()) < 1e-5


def test_fused_adam_config_round_trips():
    optimizer = fused_adam_optimizer(64, warmup_steps=10)
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(optimizer))
    assert isinstance(restored, FusedAdam)
    assert (restored.beta_1, restored.beta_2, restored.epsilon) == pytest.approx((0.9, 0.98, 1e-9))
    assert restored.get_config()["learning_rate"] == optimizer.get_config()["learning_rate"]
