"""benchmarks/confidence.py: the measures computed from token log-probabilities by hand, and a smoke
run on the shared tiny run (a few sentences of test and test.ding) read back from its table."""

import math

import numpy as np
import pytest


def test_the_measures_of_hand_made_token_scores(benchmark_script):
    confidence, _ = benchmark_script("confidence")
    log_probs = [np.log([0.5, 0.5, 1.0]), np.log([0.9])]
    found = confidence.measures(log_probs, [-1.5, -0.2])
    assert np.allclose(found["confidence"], [0.25 ** (1 / 3), 0.9])
    assert np.allclose(found["minimum"], [0.5, 0.9])
    assert np.allclose(found["mixture"], [math.sqrt(0.25 ** (1 / 3) * 0.5), 0.9])
    assert found["score"] == [-1.5, -0.2]


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_a_smoke_run_prints_a_row_per_split(benchmark_script, tiny_run, capsys):
    confidence, _ = benchmark_script("confidence")
    results = confidence.main([f"--model_dir={tiny_run[0]}", "--sentences=8", "--batch_size=4", "--beam_size=2"])
    assert list(results) == ["test", "test.ding"]
    for result in results.values():
        assert result["sentences"] == 8 and 0 <= result["chrf"] <= 100
        assert all(-1 <= result[name] <= 1 or math.isnan(result[name]) for name in confidence.MEASURES)
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| test")]
    assert [row.split(" | ")[0] for row in rows] == ["| test", "| test.ding"]
