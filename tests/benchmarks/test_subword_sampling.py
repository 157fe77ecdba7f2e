"""benchmarks/subword_sampling.py end to end on the sample corpus: one run trained through train.py
with --subword_alpha and separate vocabularies (each side sampled by its own) for a few steps,
scored on one source's test split, and its JSON read back."""

import json
import os

import pytest

SPLIT = "test.libreoffice-ui"  # A third of the dev split's sentences: fewer batches to translate.


@pytest.mark.slow  # a train.py process and a beam search over one of the sample's test splits
def test_a_run_with_subword_sampling_is_trained_and_scored(benchmark_script, sample_corpus, tmp_path, capsys):
    bench, _ = benchmark_script("subword_sampling")
    output = tmp_path / "subword.json"
    train_flags = "--checkpoint_every=2 --eval_every=2 --eval_sentences=0 --num_layers=1 --hidden_dim=32"
    bench.main(
        [
            "--corpora=deb-en-de",
            "--alphas=0.1",
            "--vocabularies=separate",
            "--train_steps=2",
            "--checkpoint=last",
            f"--splits={SPLIT}",
            f"--cache_dir={os.path.dirname(sample_corpus.root)}",
            f"--output_dir={tmp_path / 'runs'}",
            f"--train_flags={train_flags} --vocab_size=400",
            f"--json={output}",
        ]
    )
    result = json.loads(output.read_text(encoding="utf-8"))
    (row,) = result["results"]
    assert row["corpus"] == "deb-en-de" and row["subword_alpha"] == 0.1 and row["train_seconds"] >= 0
    assert row["vocabulary"] == "separate" and os.path.exists(os.path.join(row["model_dir"], "spm.source.model"))
    assert 0 <= row[SPLIT]["bleu"] <= 100 and "tok:13a" in row[SPLIT]["bleu_signature"]
    with open(os.path.join(row["model_dir"], "config.json"), encoding="utf-8") as f:
        recorded = json.load(f)
    assert recorded["train"]["subword_alpha"] == 0.1 and recorded["train"]["cache_tokenized"] is False
    assert recorded["train"]["train_steps"] == 2 and recorded["data"]["vocabulary"] == "separate"
    assert f"deb-en-de alpha 0.1 separate vocabulary: {SPLIT} BLEU" in capsys.readouterr().out
