import keras
import numpy as np
import pytest

from models.transformer_encoder import TransformerEncoder, TransformerEncoderLayer
from tests.models.layer_contract import run_layer_test

OPTIONS = dict(hidden_dim=16, num_heads=4, intermediate_dim=32, dropout=0.1)


def _inputs():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.ones((2, 6), bool)
    mask[1, 3:] = False
    return x, mask


def test_layer_contract():
    x, mask = _inputs()
    run_layer_test(TransformerEncoderLayer, OPTIONS, {"inputs": x, "padding_mask": mask}, (2, 6, 16))


@pytest.mark.parametrize("normalize_first", [False, True])
def test_stack_contract(normalize_first):
    x, mask = _inputs()
    # One layer: the stack's own config, weights and final norm around it (layers in a chain: the
    # two of test_padding_does_not_change_real_positions and test_pre_norm_adds_a_final_layer_norm).
    # A fit step where the stack has a weight of its own, the pre-norm final norm: post-norm its
    # weights are its layer's, which test_layer_contract's fit step moves.
    run_layer_test(
        TransformerEncoder,
        {"num_layers": 1, "normalize_first": normalize_first, **OPTIONS},
        {"inputs": x, "padding_mask": mask},
        (2, 6, 16),
        fit=normalize_first,
    )


def test_padding_does_not_change_real_positions():
    encoder = TransformerEncoder(num_layers=2, **OPTIONS)
    x, _ = _inputs()
    short = encoder(x[:1, :3], padding_mask=np.ones((1, 3), bool))
    padded_mask = np.zeros((1, 6), bool)
    padded_mask[0, :3] = True
    padded = encoder(x[:1], padding_mask=padded_mask)
    difference = keras.ops.convert_to_numpy(padded)[:, :3] - keras.ops.convert_to_numpy(short)
    assert np.max(np.abs(difference)) < 1e-5


def test_pre_norm_adds_a_final_layer_norm():
    post = TransformerEncoder(num_layers=2, **OPTIONS)
    post.build((None, None, 16))
    pre = TransformerEncoder(num_layers=2, normalize_first=True, **OPTIONS)
    pre.build((None, None, 16))
    assert len(pre.weights) == len(post.weights) + 2


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="divisible by num_heads.*hidden_dim=10, num_heads=4"):
        TransformerEncoder(num_layers=2, hidden_dim=10, num_heads=4)
    with pytest.raises(ValueError, match="num_layers must be a positive int, received 0"):
        TransformerEncoder(num_layers=0)
