import keras
import numpy as np
import pytest

from models.losses import LabelSmoothedCrossEntropy


def _numpy_reference(targets, logits, epsilon, pad_id=0):
    vocab = logits.shape[-1]
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    smoothed = np.full(logits.shape, epsilon / vocab) + (1.0 - epsilon) * np.eye(vocab)[targets]
    token_losses = -(smoothed * log_probs).sum(-1)
    mask = targets != pad_id
    return token_losses[mask].sum() / mask.sum()


def _batch():
    rng = np.random.default_rng(0)
    logits = (rng.normal(size=(3, 5, 11)) * 3).astype("float32")
    targets = rng.integers(4, 11, size=(3, 5)).astype("int32")
    targets[0, 3:] = 0
    targets[2, 1:] = 0
    return targets, logits


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3])
def test_matches_numpy_reference(epsilon):
    targets, logits = _batch()
    loss = float(keras.ops.convert_to_numpy(LabelSmoothedCrossEntropy(label_smoothing=epsilon)(targets, logits)))
    assert abs(loss - _numpy_reference(targets, logits, epsilon)) < 1e-5


def test_padding_contributes_nothing():
    targets, logits = _batch()
    changed = logits.copy()
    changed[targets == 0] = 1000.0  # Whatever the model predicts at padded positions.
    loss = LabelSmoothedCrossEntropy()
    assert float(loss(targets, logits)) == pytest.approx(float(loss(targets, changed)), abs=1e-6)


def test_no_smoothing_equals_keras_sparse_cross_entropy_on_real_tokens():
    targets, logits = _batch()
    mask = targets != 0
    reference = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(targets[mask], logits[mask])
    ours = LabelSmoothedCrossEntropy(label_smoothing=0.0)(targets, logits)
    assert abs(float(ours) - float(reference)) < 1e-5


def test_all_padding_gives_zero_not_nan():
    loss = LabelSmoothedCrossEntropy()(np.zeros((2, 3), "int32"), np.zeros((2, 3, 7), "float32"))
    assert float(loss) == 0.0


def test_config_round_trip_and_bad_arguments():
    loss = LabelSmoothedCrossEntropy(label_smoothing=0.2, pad_id=5)
    revived = LabelSmoothedCrossEntropy.from_config(loss.get_config())
    assert (revived.label_smoothing, revived.pad_id) == (0.2, 5)
    with pytest.raises(ValueError, match=r"label_smoothing must be in \[0, 1\), received 1.5"):
        LabelSmoothedCrossEntropy(label_smoothing=1.5)
    with pytest.raises(ValueError, match="y_true .batch, length. and y_pred"):
        LabelSmoothedCrossEntropy()(np.zeros((2,), "int32"), np.zeros((2, 7), "float32"))


def _value_and_gradient(loss, targets, logits):
    """The loss and its gradient with respect to `logits` (in their dtype), by the backend's autodiff."""
    if keras.backend.backend() == "jax":
        import jax

        return jax.value_and_grad(lambda x: loss(targets, x))(logits)
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        variable = tf.Variable(logits)
        with tf.GradientTape() as tape:
            value = loss(targets, variable)
        return value, tape.gradient(value, variable)
    pytest.skip(f"no gradient helper for the {keras.backend.backend()} backend")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_gradient_matches_numpy_reference(dtype):
    # d loss / d logits = (softmax(logits) - q) * is_real_token / number of real tokens, returned in
    # the logits' dtype (bfloat16 under mixed precision: within its 8-bit mantissa of the reference).
    targets, logits = _batch()
    logits = keras.ops.convert_to_numpy(keras.ops.cast(keras.ops.cast(logits, dtype), "float32"))
    epsilon, vocab = 0.1, logits.shape[-1]
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    probabilities = shifted / shifted.sum(-1, keepdims=True)
    smoothed = np.full(logits.shape, epsilon / vocab) + (1.0 - epsilon) * np.eye(vocab)[targets]
    weights = (targets != 0).astype("float32")
    expected = (probabilities - smoothed) * weights[..., None] / weights.sum()
    loss = LabelSmoothedCrossEntropy(label_smoothing=epsilon)
    _, gradient = _value_and_gradient(loss, targets, keras.ops.cast(logits, dtype))
    assert keras.backend.standardize_dtype(gradient.dtype) == dtype
    gradient = keras.ops.convert_to_numpy(keras.ops.cast(gradient, "float32"))
    tolerance = 1e-6 if dtype == "float32" else 2**-8 * np.abs(expected).max()
    assert np.abs(gradient - expected).max() < tolerance


def test_a_pad_id_outside_the_vocabulary_gives_the_same_loss_and_gradient():
    # pad_id=-1 has no row in the logits: the pad positions are masked as they are for pad_id=0.
    targets, logits = _batch()
    shifted_pads = np.where(targets == 0, -1, targets).astype("int32")
    results = []
    for ids, pad_id in ((targets, 0), (shifted_pads, -1)):
        value, gradient = _value_and_gradient(
            LabelSmoothedCrossEntropy(label_smoothing=0.1, pad_id=pad_id), ids, logits
        )
        results.append((float(value), keras.ops.convert_to_numpy(gradient)))
    assert abs(results[0][0] - results[1][0]) < 1e-6
    assert np.abs(results[0][1] - results[1][1]).max() < 1e-7
