"""benchmarks/demo_runs.py, which the subword and multilingual benchmarks train and score with: a
train.py that fails ends the benchmark with its error (the run and score path: the subword
benchmark's smoke run, tests/benchmarks/test_subword_sampling.py)."""

import pytest


def test_a_failed_training_ends_the_benchmark_with_its_error(benchmark_script, tmp_path):
    demo_runs, _ = benchmark_script("demo_runs")
    model_dir = str(tmp_path / "run")
    with pytest.raises(SystemExit, match=f"train.py failed for {model_dir}:(.|\\n)*deb-en-de is given twice"):
        demo_runs.train(model_dir, "deb-en-de,deb-en-de", str(tmp_path / "cache"), 200)
    assert "--recipe=small_data" in demo_runs.DEMO_FLAGS
