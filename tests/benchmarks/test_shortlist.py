"""benchmarks/shortlist.py: a smoke run on a copy of the shared tiny run with its lexical table."""

import json
import os
import shutil

import pytest


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_a_smoke_run_measures_each_mode_with_and_without_the_shortlist(benchmark_script, tiny_run, tmp_path):
    from training.shortlist import TableOptions, build_table

    shortlist, _ = benchmark_script("shortlist")
    run = str(tmp_path / "run")
    shutil.copytree(tiny_run[0], run)
    build_table(run, TableOptions(candidates=4, frequent=10, max_pairs=200), log=open(os.devnull, "w"))
    output = str(tmp_path / "shortlist.json")
    arguments = [
        f"--model_dir={run}",
        "--checkpoint=last",
        "--shortlist=4",
        "--count=4",
        "--batch=2",
        "--single=1",
        "--repeats=1",
    ]
    results = shortlist.main([*arguments, "--beam_size=2", f"--output={output}"])
    assert [(row["mode"], row["shortlist"]) for row in results] == [
        ("batch", 0),
        ("batch", 4),
        ("single", 0),
        ("single", 4),
    ]
    vocabulary = results[0]["mean_columns"]
    assert all(row["sentences_per_second"] > 0 for row in results)
    assert results[1]["mean_columns"] < vocabulary and results[3]["mean_columns"] <= results[1]["mean_columns"]
    assert json.load(open(output))["results"] == results
