"""benchmarks/export_latency.py on the shared tiny run and its shared export at the smallest settings:
it times the SavedModel and the Python path over three sentences (no timing checked)."""

import json
import os

import pytest

from tests.helpers import EXPORT_SETTINGS, SHARED_EXPORT_GROUP


@pytest.mark.slow  # the shared export timed twice and the Python path traced: the full tier runs it
@pytest.mark.xdist_group(SHARED_EXPORT_GROUP)
def test_times_the_export_its_signatures_a_baseline_and_the_python_path(
    benchmark_script, tiny_run, tiny_export, shared_export_loaded_once, capsys
):
    """The shared export given (not exported again; loaded as the export tests load it), timed with
    two of its forced-pass signatures beside itself as the baseline, then the Python path with the
    search given on the command line."""
    bench, _ = benchmark_script("export_latency")
    model_dir, _ = tiny_run
    version = os.path.join(tiny_export, "1")
    signatures = ["serving_default", "score", "prefix"]
    arguments = [f"--model_dir={model_dir}", f"--export_dir={version}", f"--baseline_export_dir={version}"]
    arguments += ["--count=3", "--batch=2", f"--signatures={','.join(signatures)}"]
    arguments += ["--beam_size=2", "--max_input_length=16", "--max_extra_length=4"]
    bench.main(arguments)
    result = json.loads(capsys.readouterr().out)
    assert result["sentences"] == 3 and "export_seconds" not in result  # Given, not exported.
    # The shared export's buckets and its maximum input length, read from its config.
    assert result["length_buckets"] == [*EXPORT_SETTINGS["length_buckets"], EXPORT_SETTINGS["max_input_length"]]
    given = dict(beam_size=2, alpha=0.6, max_extra_length=4, max_input_length=16)
    assert result["search"] == {**given, "no_repeat_ngram_size": 0, "shortlist": 0, "stopping": "exact"}
    for which in ("export", "baseline"):
        timed = [result[which]] + [result[f"{which}_signatures"][name] for name in signatures[1:]]
        for name, entry in zip(signatures, timed):
            assert entry["single"]["calls"] == 3 and entry["batched"]["sentences_per_second"] > 0, (which, name)
    assert sorted(result["over_baseline"]) == sorted(signatures)
    assert all(ratio["batched_rate"] > 0 and ratio["single_speed"] > 0 for ratio in result["over_baseline"].values())
    single, batched = result["python_path"]["single"], result["python_path"]["batched"]
    assert single["calls"] == 3 and 0 < single["p50_ms"] <= single["p95_ms"]
    assert batched["batch"] == 2 and batched["sentences_per_second"] > 0


def test_unknown_signatures_are_refused_by_name(benchmark_script, capsys):
    bench, _ = benchmark_script("export_latency")
    with pytest.raises(SystemExit) as exit_info:
        bench.parse_args(["--model_dir=runs/x", "--signatures=n_best,translate_ids"])
    assert exit_info.value.code == 2
    assert "['translate_ids'] not of serving_default, n_best" in capsys.readouterr().err
