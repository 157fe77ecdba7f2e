"""benchmarks/train_throughput.py: flags, synthetic batches, the interleaved summary, and a whole run of
its JAX path at tiny sizes without TensorFlow (no timing checked)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from tests import no_tensorflow


def test_flags_and_sizes(benchmark_script):
    bench, _ = benchmark_script("train_throughput")
    args = bench.parse_args(
        ["--preset", "tiny", "--sizes", "num_layers=1,dropout=0.0", "--anchor", "keras_hub,none", "--backend", "jax"]
    )
    assert args.anchors == ["keras_hub"] and args.source_length == args.length
    assert bench.model_sizes(args) == dict(num_layers=1, hidden_dim=128, intermediate_dim=512, num_heads=4, dropout=0.0)
    with pytest.raises(SystemExit):
        bench.parse_args(["--anchor", "tensorflow_models"])


def test_synthetic_batches_are_shifted_targets_without_padding(benchmark_script):
    bench, _ = benchmark_script("train_throughput")
    args = bench.parse_args(
        ["--vocab", "50", "--batch", "3", "--length", "5", "--source_length", "7", "--distinct_batches", "2"]
    )
    batches = bench.synthetic_batches(args)
    assert len(batches) == 2
    source, target_in, target_out = batches[0]
    assert source.shape == (3, 7) and target_in.shape == target_out.shape == (3, 5)
    assert (target_in[:, 0] == BOS_ID).all() and (target_out[:, -1] == EOS_ID).all()
    np.testing.assert_array_equal(target_in[:, 1:], target_out[:, :-1])
    assert (source != PAD_ID).all() and (target_out != PAD_ID).all() and source.max() < 50


def test_interleave_flag_times_ours_against_keras_hub_only(benchmark_script):
    bench, _ = benchmark_script("train_throughput")
    assert bench.parse_args(["--interleave", "4"]).interleave == 4
    for bad in (
        ["--interleave", "4", "--variant", "x=/tmp"],
        ["--interleave", "4", "--anchor", "none"],
        ["--interleave", "4", "--no_ours"],
        ["--interleave", "-1"],
        ["--interleave", "4", "--profile_dir", "/tmp/profiles"],
    ):
        with pytest.raises(SystemExit):
            bench.parse_args(bad)


def test_interleaved_summary_takes_medians_over_every_burst(benchmark_script):
    bench, _ = benchmark_script("train_throughput")
    rounds = [
        dict(bursts=[dict(ours=300.0, keras_hub=200.0, ratio=1.5), dict(ours=100.0, keras_hub=100.0, ratio=1.0)]),
        dict(name="interleaved", error="worker failed"),
        dict(bursts=[dict(ours=400.0, keras_hub=200.0, ratio=2.0)]),
    ]
    summary = bench.interleaved_summary(rounds)
    assert summary["bursts"] == 3 and summary["ratio_median"] == 1.5 and summary["ratio_at_least_1_5"] == 2
    assert summary["ours_median"] == 300.0 and summary["keras_hub_median"] == 200.0
    assert bench.interleaved_summary([dict(name="interleaved", error="worker failed")]) == {}


@pytest.mark.full  # fresh processes under JAX
def test_jax_path_runs_without_tensorflow(benchmark_script, jax_environment, tmp_path, capsys):
    """The whole script under JAX at tiny sizes, in a process where TensorFlow cannot be imported (a
    GPU machine has JAX and Keras only): ours with gradient accumulation (train.py's token counting)
    and a profile, which benchmarks/jax_trace_summary.py then reads."""
    bench, script = benchmark_script("train_throughput")
    site, output, profiles = tmp_path / "site", tmp_path / "result.json", tmp_path / "profiles"
    sizes = "num_layers=1,hidden_dim=16,intermediate_dim=32,num_heads=2"
    arguments = ["--backend=jax", "--preset=tiny", f"--sizes={sizes}", "--vocab=50", "--batch=2", "--length=4"]
    arguments += ["--steps=2", "--warmup=1", "--accumulate_steps=2", "--anchor=none"]
    arguments += [f"--profile_dir={profiles}", f"--json={output}"]
    env = no_tensorflow.environment(site, jax_environment)
    finished = subprocess.run(
        [sys.executable, script, *arguments], env=env, capture_output=True, text=True, timeout=300
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    (result,) = json.loads(output.read_text())["results"]
    assert "error" not in result, result.get("error")
    assert result["name"] == "ours" and result["backend"] == "jax" and result["accumulate_steps"] == 2
    assert np.isfinite(result["final_loss"]) and result["target_tokens_per_second"] > 0
    assert no_tensorflow.refused_by_project(site) == []
    started = no_tensorflow.started(site)  # The script, then its worker: both without TensorFlow.
    assert len(started) == 2 and started[0].startswith(script) and started[1].endswith("--worker ours"), started

    summary, _ = benchmark_script("jax_trace_summary")
    summary.main([str(profiles / "ours"), "--steps=3", "--top=3"])
    printed = capsys.readouterr().out
    assert f"trace: {profiles / 'ours'}" in printed and "busy time per step (ms), 3 step(s) traced:" in printed
