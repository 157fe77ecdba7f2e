import importlib.util
import os

import pytest

_BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")


@pytest.fixture
def benchmark_script():
    """`load(name)`: benchmarks/<name>.py imported as a module, and its path."""

    def load(name):
        path = os.path.join(_BENCHMARKS, f"{name}.py")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module, path

    return load
