"""benchmarks/domain_fine_tuning.py: its flags, and a whole run at tiny sizes on the sample corpus
(a parent, a child fine-tuned from it, both scored; no quality checked)."""

import json
import math
import os

import pytest


def test_sizes_override_the_model_and_unknown_ones_are_refused(benchmark_script):
    bench, _ = benchmark_script("domain_fine_tuning")
    args = bench.parse_args(["--sizes=num_layers=1,dropout=0.1,normalize_first=false"])
    assert args.model == dict(bench.MODEL, num_layers=1, dropout=0.1, normalize_first=False)
    with pytest.raises(SystemExit):
        bench.parse_args(["--sizes=depth=3"])


@pytest.mark.slow  # two trainings and two scorings: the fast tier's budget; the full tier runs it
def test_a_tiny_run_scores_the_parent_and_its_child(benchmark_script, sample_corpus, tmp_path, capsys):
    """The smoke run, at the smallest sizes: two trainings of two steps and two scorings."""
    bench, _ = benchmark_script("domain_fine_tuning")
    output = tmp_path / "results.json"
    code = bench.main(
        [
            f"--cache_dir={os.path.dirname(sample_corpus.root)}",
            f"--output_dir={tmp_path / 'runs'}",
            "--sizes=num_layers=1,hidden_dim=16,num_heads=2,intermediate_dim=32",
            "--vocab_size=500",
            "--max_length=32",
            "--batch_tokens=512",
            "--parent_steps=2",
            "--warmup_steps=2",
            "--child_steps=2",
            "--domain_pairs=16",
            "--dev_sentences=4",
            "--min_bleu_gain=101",  # Beyond any BLEU: the exit code says so.
            f"--json={output}",
        ]
    )
    captured = capsys.readouterr()
    assert code == 1 and "domain_fine_tuning.py: bleu gain" in captured.err and "is below 101" in captured.err
    assert "libreoffice-ui test (" in captured.out and "gain: loss" in captured.out
    results = json.loads(output.read_text())
    for name in ("parent", "child"):
        assert results["dev_pairs"] == 4
        assert math.isfinite(results[name]["loss"]) and 0 <= results[name]["bleu"] <= 100
    assert results["gain"]["bleu"] == results["child"]["bleu"] - results["parent"]["bleu"]
    with open(tmp_path / "runs" / "child" / "config.json") as handle:
        recorded = json.load(handle)
    assert recorded["init_from"]["model_dir"] == str(tmp_path / "runs" / "parent")
    assert recorded["init_from"]["step"] == 2
    assert recorded["data"]["train_files"] == [str(tmp_path / "runs" / "domain-train.tsv")]
