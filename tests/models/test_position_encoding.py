import math

import keras
import numpy as np
import pytest

from models.position_encoding import SinusoidalPositionEncoding, sinusoidal_position_encoding
from tests.models.layer_contract import run_layer_test


def test_values_match_hand_computed_numbers():
    encoding = keras.ops.convert_to_numpy(sinusoidal_position_encoding(3, 4))
    # d_model = 4: dimension pairs i = 0, 1 have wavelengths 10000^(0/4) = 1 and 10000^(2/4) = 100.
    expected = np.array(
        [
            [math.sin(0), math.cos(0), math.sin(0), math.cos(0)],
            [math.sin(1), math.cos(1), math.sin(1 / 100), math.cos(1 / 100)],
            [math.sin(2), math.cos(2), math.sin(2 / 100), math.cos(2 / 100)],
        ]
    )
    np.testing.assert_allclose(encoding, expected, atol=1e-6)
    # Row 1 written out: [0.841471, 0.540302, 0.0099998, 0.99995].
    np.testing.assert_allclose(encoding[1], [0.8414710, 0.5403023, 0.0099998, 0.9999500], atol=1e-6)


def test_start_position_gives_the_same_rows_as_a_full_pass():
    full = keras.ops.convert_to_numpy(sinusoidal_position_encoding(50, 16))
    tail = keras.ops.convert_to_numpy(sinusoidal_position_encoding(5, 16, start_position=45))
    assert np.max(np.abs(full[45:] - tail)) < 1e-5


def test_long_positions_stay_bounded():
    encoding = keras.ops.convert_to_numpy(sinusoidal_position_encoding(5000, 512))
    assert encoding.shape == (5000, 512)
    assert np.all(np.abs(encoding) <= 1.0 + 1e-6)
    # The last dimension pair has wavelength 10000^(510/512) * 2 pi: position 4999 is far from a period.
    expected = math.cos(4999 / 10000 ** (510 / 512))
    assert abs(encoding[4999, 511] - expected) < 1e-4


def test_layer_contract():
    x = np.zeros((2, 7, 8), "float32")
    run_layer_test(SinusoidalPositionEncoding, {"max_wavelength": 10000.0}, {"inputs": x}, (7, 8))


def test_odd_hidden_dim_is_rejected():
    with pytest.raises(ValueError, match="hidden_dim must be even.*7"):
        sinusoidal_position_encoding(3, 7)


def test_wrong_rank_is_rejected():
    with pytest.raises(ValueError, match="rank 3.*received shape"):
        SinusoidalPositionEncoding()(np.zeros((7, 8), "float32"))
