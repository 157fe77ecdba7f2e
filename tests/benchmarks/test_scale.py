import json

import pytest


def _run(module, corpus, tmp_path, *flags):
    output = tmp_path / "scale.json"
    report = module.main(
        [f"--base={corpus.root}", "--sizes=500", f"--work={tmp_path / 'work'}", "--vocab_size=600", *flags]
        + [f"--json={output}"]
    )
    assert json.loads(output.read_text()) == report
    (figures,) = report["results"]
    assert figures["pairs"] == 500 and figures["train_pairs"] == 500 and figures["dropped"] == {}
    assert 0 < report["spawner_rss_mb"] < figures["prepare_peak_rss_mb"]
    assert figures["prepare_pairs_per_second"] > 0 and figures["vocabulary_seconds"] > 0
    return figures


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_preparation_and_vocabulary_are_measured(corpus, tmp_path, benchmark_script):
    module, _ = benchmark_script("scale")
    figures = _run(module, corpus, tmp_path, "--train_steps=0")
    assert "train_seconds" not in figures and "served_train_seconds" not in figures
