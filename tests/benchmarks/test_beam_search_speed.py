"""benchmarks/beam_search_speed.py at tiny sizes: ours under the suite's backend, and the whole script
under JAX in a process without TensorFlow (no timing checked). keras-hub's candidate under TensorFlow:
tests/benchmarks/test_cpu_inference.py's keras-hub system, which compiles the same `keras_hub_search`."""

import json
import subprocess
import sys

import numpy as np
import pytest

from common.special_ids import EOS_ID, PAD_ID
from tests import no_tensorflow

TINY = ["--num_layers=1", "--hidden_dim=16", "--intermediate_dim=32", "--num_heads=2", "--vocab=50"]
TINY += ["--batch=3", "--beam=2", "--output_length=5", "--source_lengths=2,6"]


def test_ours_runs_every_hypothesis_to_the_output_length(benchmark_script):
    """The EOS-suppressing wrapper passes for the model `translate_ids` reads: the compiled search
    returns `--output_length` real tokens per sentence, none of them EOS or PAD."""
    bench, _ = benchmark_script("beam_search_speed")
    args = bench.parse_args(TINY)
    source = bench.source_batch(args)
    assert source.shape == (3, 8) and (source == EOS_ID).sum() == 3
    translate = bench.build_ours(args)
    output, _, seconds = bench.time_candidate(translate, source, repeats=1)
    assert output.shape == (3, 1, 5) and len(seconds) == 1
    assert not np.isin(output, [EOS_ID, PAD_ID]).any(), output


@pytest.mark.full  # a fresh process under JAX
def test_jax_path_runs_without_tensorflow(benchmark_script, jax_environment, tmp_path):
    """Both candidates compiled with `jax.jit`, in a process where TensorFlow cannot be imported (a
    GPU machine has JAX and Keras only)."""
    _, script = benchmark_script("beam_search_speed")
    site, output = tmp_path / "site", tmp_path / "result.json"
    env = no_tensorflow.environment(site, jax_environment)
    command = [sys.executable, script, "--backend=jax", *TINY, "--repeats=1", f"--json={output}"]
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr[-3000:]
    result = json.loads(output.read_text())
    assert result["backend"] == "jax" and list(result["results"]) == ["ours", "keras_hub"]
    assert result["results"]["ours"]["output_shape"] == [3, 1, 5]
    assert result["results"]["keras_hub"]["output_shape"] == [3, 6]  # BOS + the generated tokens
    assert result["ratio_ours_over_keras_hub"] > 0
    assert no_tensorflow.started(site) == [" ".join(command[1:])]
    assert no_tensorflow.refused_by_project(site) == []
