import pytest

from tests.helpers import load_benchmark


@pytest.fixture
def benchmark_script():
    """`load(name)`: benchmarks/<name>.py imported as a module, and its path (`load_benchmark`)."""
    return load_benchmark
