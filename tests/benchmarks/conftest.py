import os

import pytest

from tests.helpers import load_benchmark


@pytest.fixture
def benchmark_script():
    """`load(name)`: benchmarks/<name>.py imported as a module, and its path (`load_benchmark`)."""
    return load_benchmark


@pytest.fixture
def jax_environment():
    """os.environ for a script run under JAX: KERAS_BACKEND=jax, and XLA's backend at its lowest
    optimization level (as make test's JAX pass), which compiles faster with the same results."""
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_backend_optimization_level=0".strip()
    return dict(os.environ, KERAS_BACKEND="jax", XLA_FLAGS=flags)
