"""Every test of `models/` runs with float32 matrix products computed in float32, also on a GPU with
TF32 (tests/models/precision.py says why)."""

import pytest

from tests.models.precision import float32_matmuls


@pytest.fixture(autouse=True)
def _float32_matmuls():
    with float32_matmuls():
        yield
