"""benchmarks/beam_length_study.py on the shared tiny run: a few dev sentences through every kind of
setting, the search's scores equal to the script's rescoring of its outputs."""

import numpy as np
import pytest


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_study_rescores_what_the_search_returns(benchmark_script, tiny_run, capsys):
    study, _ = benchmark_script("beam_length_study")
    model_dir, _ = tiny_run
    arguments = ["--sentences=6", "--alphas=0.6,1.0", "--wide_beam=6", "--min_length_ratios=0.8"]
    results = study.main([f"--model_dir={model_dir}", *arguments])
    names = ["greedy", "beam 4 alpha 0.6", "beam 4 alpha 1", "beam 6 alpha 0.6", "beam 4 alpha 0.6 min ratio 0.8"]
    assert list(results) == names
    for result in results.values():
        kept = [index for index, output in enumerate(result["outputs"]) if output is not None]
        assert kept
        lengths = result["lengths"][kept]
        rescored = result["log_probs"][kept] / study.length_penalty(lengths, result["options"]["alpha"])
        np.testing.assert_allclose(result["returned"][kept], rescored, atol=1e-3)
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0][2:] for line in table[1:]] == names
