"""benchmarks/input_pipeline.py on the shared run's corpus: its counts are the pipeline's batches (no timing checked)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from common.special_ids import PAD_ID


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_counts_match_the_batches_train_py_reads(corpus, tiny_run, tmp_path, benchmark_script):
    from data.pipeline import make_dataset
    from data.tokenizer import Tokenizer

    _, script = benchmark_script("input_pipeline")
    (train_tsv,) = corpus.train
    spm = os.path.join(tiny_run[0], "spm.model")
    out = tmp_path / "pipeline.json"
    subprocess.run(
        [
            sys.executable,
            script,
            "--tsv",
            train_tsv,
            "--spm",
            spm,
            "--batch_tokens",
            "1024",
            "--max_length",
            "64",
            "--cores",
            "1",
            "--warmup_batches",
            "3",
            "--batches",
            "20",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    (result,) = json.loads(out.read_text())["results"]
    assert result["cores"] == 1 and result["batches"] == 20 and result["seconds"] > 0

    # The same pipeline, seeds and order: batches 4-23 are the timed ones.
    import tensorflow as tf

    tf.random.set_seed(0)
    dataset = make_dataset(
        train_tsv, Tokenizer.from_file(spm), batch_tokens=1024, max_length=64, shuffle=True, repeat=True
    )
    pairs = positions = tokens = 0
    for (_, _), target_output in dataset.skip(3).take(20):
        target_output = target_output.numpy()
        pairs += target_output.shape[0]
        positions += target_output.size
        tokens += int(np.count_nonzero(target_output != PAD_ID))
    seconds = result["seconds"]
    assert result["pairs_per_second"] * seconds == pytest.approx(pairs)
    assert result["padded_target_tokens_per_second"] * seconds == pytest.approx(positions)
    assert result["real_target_tokens_per_second"] * seconds == pytest.approx(tokens)
    assert 0 < tokens < positions <= 20 * 1024
    assert result["target_padding_share"] == pytest.approx(1 - tokens / positions)


def test_bad_flags_name_the_flag(tmp_path, capsys, benchmark_script):
    bench, _ = benchmark_script("input_pipeline")
    tsv = tmp_path / "corpus.tsv"
    tsv.write_text("a\tb\n")
    for argv, message in (
        (["--tsv", str(tsv), "--spm", str(tsv), "--cores", "0"], "--cores"),
        (["--tsv", str(tsv), "--spm", str(tsv), "--cores", "one"], "--cores"),
        (["--tsv", str(tmp_path / "missing.tsv"), "--spm", str(tsv)], "--tsv: no such file"),
        (["--tsv", str(tsv), "--spm", str(tsv), "--batches", "0"], "--batches"),
    ):
        with pytest.raises(SystemExit):
            bench.parse_args(argv)
        assert message in capsys.readouterr().err


@pytest.mark.slow  # The fast tier runs the script once: test_counts_match_the_batches_train_py_reads.
def test_cached_pipeline_is_timed_after_its_first_pass(corpus, tiny_run, tmp_path, benchmark_script):
    _, script = benchmark_script("input_pipeline")
    out = tmp_path / "cached.json"
    subprocess.run(
        [
            sys.executable,
            script,
            "--tsv",
            corpus.dev,
            "--spm",
            os.path.join(tiny_run[0], "spm.model"),
            "--batch_tokens",
            "1024",
            "--max_length",
            "64",
            "--cores",
            "1",
            "--warmup_batches",
            "2",
            "--batches",
            "10",
            "--cache_tokenized",
            "--json",
            str(out),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    summary = json.loads(out.read_text())
    (result,) = summary["results"]
    assert summary["cache_tokenized"] and result["cache_tokenized"]
    assert result["first_pass_seconds"] > 0 and result["batches"] == 10
    assert result["padded_target_tokens_per_second"] > 0
