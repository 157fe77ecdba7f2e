import pytest

from tests import helpers
from tests.helpers import load_benchmark


@pytest.fixture
def benchmark_script():
    """`load(name)`: benchmarks/<name>.py imported as a module, and its path (`load_benchmark`)."""
    return load_benchmark


@pytest.fixture
def jax_environment():
    """os.environ for a script run under JAX (`tests.helpers.jax_environment`)."""
    return helpers.jax_environment()
