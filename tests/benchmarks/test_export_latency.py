"""benchmarks/export_latency.py on the shared tiny run at the smallest settings: it exports, then times
the SavedModel and the Python path over two sentences (no timing checked)."""

import json

import pytest


@pytest.mark.slow  # an export of the shared run
def test_times_the_export_and_the_python_path(benchmark_script, tiny_run, capsys):
    bench, _ = benchmark_script("export_latency")
    model_dir, _ = tiny_run
    arguments = [f"--model_dir={model_dir}", "--count=3", "--batch=2", "--beam_size=2", "--max_input_length=16"]
    arguments += ["--max_extra_length=4", "--length_buckets="]
    bench.main(arguments)
    result = json.loads(capsys.readouterr().out)
    assert result["sentences"] == 3 and result["export_seconds"] > 0
    assert result["search"] == dict(beam_size=2, alpha=0.6, max_extra_length=4, max_input_length=16)
    for path in ("export", "python_path"):
        single, batched = result[path]["single"], result[path]["batched"]
        assert single["calls"] == 3 and 0 < single["p50_ms"] <= single["p95_ms"], path
        assert batched["batch"] == 2 and batched["sentences_per_second"] > 0, path
