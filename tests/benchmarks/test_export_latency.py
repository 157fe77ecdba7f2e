"""benchmarks/export_latency.py on the shared tiny run and its shared export at the smallest settings:
it times the SavedModel and the Python path over three sentences (no timing checked)."""

import json
import os

import pytest

from tests.helpers import EXPORT_SETTINGS


@pytest.mark.slow  # an export timed against the Python path: the fast tier's budget; the full tier runs it
def test_times_the_export_and_the_python_path(benchmark_script, tiny_run, tiny_export, capsys):
    bench, _ = benchmark_script("export_latency")
    model_dir, _ = tiny_run
    arguments = [f"--model_dir={model_dir}", f"--export_dir={os.path.join(tiny_export, '1')}", "--count=3"]
    arguments += ["--batch=2", "--beam_size=2", "--max_input_length=16", "--max_extra_length=4"]
    bench.main(arguments)
    result = json.loads(capsys.readouterr().out)
    assert result["sentences"] == 3 and "export_seconds" not in result  # Given, not exported.
    # The shared export's buckets and its maximum input length, read from its config.
    assert result["length_buckets"] == [*EXPORT_SETTINGS["length_buckets"], EXPORT_SETTINGS["max_input_length"]]
    given = dict(beam_size=2, alpha=0.6, max_extra_length=4, max_input_length=16)
    assert result["search"] == {**given, "no_repeat_ngram_size": 0, "shortlist": 0, "stopping": "exact"}
    for path in ("export", "python_path"):
        single, batched = result[path]["single"], result[path]["batched"]
        assert single["calls"] == 3 and 0 < single["p50_ms"] <= single["p95_ms"], path
        assert batched["batch"] == 2 and batched["sentences_per_second"] > 0, path


@pytest.mark.slow  # the shared export's forced-pass signatures, each traced: the full tier runs it
def test_times_other_signatures_beside_a_baseline_export(benchmark_script, tiny_run, tiny_export, capsys):
    bench, _ = benchmark_script("export_latency")
    model_dir, _ = tiny_run
    version = os.path.join(tiny_export, "1")
    signatures = ["serving_default", "score", "prefix"]
    arguments = [f"--model_dir={model_dir}", f"--export_dir={version}", f"--baseline_export_dir={version}"]
    arguments += ["--count=2", "--batch=2", "--skip_python_path", f"--signatures={','.join(signatures)}"]
    bench.main(arguments)
    result = json.loads(capsys.readouterr().out)
    assert "python_path" not in result
    for which in ("export", "baseline"):
        timed = [result[which]] + [result[f"{which}_signatures"][name] for name in signatures[1:]]
        for name, entry in zip(signatures, timed):
            assert entry["single"]["calls"] == 2 and entry["batched"]["sentences_per_second"] > 0, (which, name)
    assert sorted(result["over_baseline"]) == sorted(signatures)
    assert all(ratio["batched_rate"] > 0 and ratio["single_speed"] > 0 for ratio in result["over_baseline"].values())


def test_unknown_signatures_are_refused_by_name(benchmark_script, capsys):
    bench, _ = benchmark_script("export_latency")
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--model_dir=runs/x", "--signatures=n_best,translate_ids"])
    assert exit_info.value.code == 2
    assert "['translate_ids'] not of serving_default, n_best" in capsys.readouterr().err
