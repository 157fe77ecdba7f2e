"""benchmarks/multilingual.py end to end on the sample corpora (deb-en-de's sample, deb-en-ja from
sample packages): a bilingual run per pair and one multilingual run, each trained through train.py
for a few steps, scored per pair on the dev split, and the JSON read back."""

import json
import os

import pytest

from tests.helpers import build_sample_multilingual


@pytest.mark.slow  # three train.py processes and four scorings: the full tier runs it
def test_bilingual_runs_and_one_multilingual_run_are_trained_and_scored_per_pair(benchmark_script, tmp_path, capsys):
    bench, _ = benchmark_script("multilingual")
    cache, debs = tmp_path / "cache", tmp_path / "debs"
    build_sample_multilingual(str(cache), str(debs))
    output = tmp_path / "multilingual.json"
    train_flags = "--checkpoint_every=2 --eval_sentences=0 --num_layers=1 --hidden_dim=32 --vocab_size=500"
    bench.main(
        [
            "--pairs=deb-en-de,deb-en-ja",
            "--steps_per_pair=2",
            "--temperature=2",
            "--split=dev",
            "--checkpoint=last",
            f"--cache_dir={cache}",
            f"--deb_dir={debs}",
            f"--output_dir={tmp_path / 'runs'}",
            f"--train_flags={train_flags}",
            f"--json={output}",
        ]
    )
    printed = capsys.readouterr().out
    results = json.loads(output.read_text(encoding="utf-8"))["results"]
    multilingual = results["multilingual"]
    assert multilingual["steps"] == 4 and multilingual["model_dir"].endswith("multi-de-ja")
    for pair in ("deb-en-de", "deb-en-ja"):
        bilingual = results["bilingual"][pair]
        assert bilingual["steps"] == 2 and bilingual["train_seconds"] >= 0
        for scored in (bilingual["dev"], multilingual["pairs"][pair]["dev"]):
            assert 0 <= scored["bleu"] <= 100 and "nrefs:1" in scored["bleu_signature"]
        with open(os.path.join(bilingual["model_dir"], "config.json"), encoding="utf-8") as f:
            assert json.load(f)["data"]["corpus"] == pair
        assert f"{pair}: bilingual " in printed
    with open(os.path.join(multilingual["model_dir"], "config.json"), encoding="utf-8") as f:
        recorded = json.load(f)
    assert recorded["data"]["corpus"] == "deb-en-de,deb-en-ja" and recorded["train"]["train_steps"] == 4
    assert recorded["data"]["pair_sampling_temperature"] == 2.0
    assert "training: bilingual" in printed
