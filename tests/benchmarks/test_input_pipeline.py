"""benchmarks/input_pipeline.py on the shared run's corpus: its counts are the pipeline's batches (no timing checked)."""

import itertools
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from common.special_ids import PAD_ID


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_counts_match_the_batches_train_py_reads_after_the_first_pass(corpus, tiny_run, tmp_path, benchmark_script):
    """One run with --cache_tokenized (the first pass, which fills the cache, read before the timed
    batches; without the flag the script only skips that pass): its counts are those of the same
    pipeline read here."""
    from data.pipeline import make_dataset
    from data.tokenizer import Tokenizer

    _, script = benchmark_script("input_pipeline")
    spm = os.path.join(tiny_run[0], "spm.model")
    out = tmp_path / "cached.json"
    subprocess.run(
        [
            sys.executable,
            script,
            "--tsv",
            corpus.dev,
            "--spm",
            spm,
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
    assert result["cores"] == 1 and result["batches"] == 10 and result["seconds"] > 0
    assert result["first_pass_seconds"] > 0

    # The same pipeline, seeds and order: the first pass (a pair per line at most), two warm-up
    # batches, then the ten timed ones.
    import tensorflow as tf

    tf.random.set_seed(0)
    dataset = make_dataset(
        corpus.dev,
        Tokenizer.from_file(spm),
        batch_tokens=1024,
        max_length=64,
        shuffle=True,
        repeat=True,
        cache_tokenized=True,
    )
    batches = iter(dataset)
    with open(corpus.dev, encoding="utf-8") as handle:
        lines = sum(1 for _ in handle)
    first_pass = 0
    while first_pass < lines:
        first_pass += next(batches)[1].shape[0]
    for _ in range(2):
        next(batches)
    pairs = positions = tokens = 0
    for (_, _), target_output in itertools.islice(batches, 10):
        target_output = target_output.numpy()
        pairs += target_output.shape[0]
        positions += target_output.size
        tokens += int(np.count_nonzero(target_output != PAD_ID))
    seconds = result["seconds"]
    assert result["pairs_per_second"] * seconds == pytest.approx(pairs)
    assert result["padded_target_tokens_per_second"] * seconds == pytest.approx(positions)
    assert result["real_target_tokens_per_second"] * seconds == pytest.approx(tokens)
    assert 0 < tokens < positions <= 10 * 1024
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
