"""Several training corpora with weights: the mix a run records, and the specs train.py refuses.
A train.py run on weighted files under a recipe, what it prints and records: the full-disk test of
tests/training/test_train.py."""

import dataclasses
import os
import subprocess
import sys

import pytest

from data.sources import corpus_mix, parallel_files
from tests.helpers import (
    DEB_CACHE,
    QUICK_TRAIN_FLAGS,
    REPO_ROOT,
    TINY_MODEL,
    TOOL_ENV,
    tiny_run_config,
    train_flags_refusal,
)


def _refusal(model_dir, *flags):
    """What train.py's flag checks say of a quick tiny run's command with `flags`, run in this process."""
    model_flags = (f"--{key}={value}" for key, value in TINY_MODEL.items())
    return train_flags_refusal(model_dir, ["--preset=tiny", *model_flags, *QUICK_TRAIN_FLAGS, *flags])


def _source_files(corpus, tmp_path):
    """Two corpora cut from the built corpus: its help pages and its dictionary examples."""
    files = corpus_mix.source_training_files(corpus, ["libreoffice-help", "ding"])
    paths = {}
    for name, (path, _) in files.items():
        paths[name] = str(tmp_path / f"{name}.tsv")
        parallel_files.write_tsv(paths[name], parallel_files.read_tsv(path))
    return paths


def test_a_built_in_corpus_mixes_its_sources_by_weight(sample_corpus, tmp_path):
    """--source_weights on a built-in corpus: its sources with their weights, as config.json records
    the mix. `train` reads and records a built-in corpus's mix as it does the weighted files' (the
    train.py run of test_train.py's full-disk test); the stream draws in proportion to the weights (tests/data/sources/test_corpus_mix.py)."""
    from data import corpora

    config = tiny_run_config(tmp_path / "run", os.path.dirname(sample_corpus.root))
    data = dataclasses.replace(config.data, source_weights={"ding": 3})
    corpus, _ = corpora.resolve_corpus(data)
    assert corpora.training_mix(corpus, dataclasses.replace(config.data, source_weights={})) is None
    manifest = sample_corpus.load_manifest()
    assert [
        (entry["corpus"], entry["weight"], entry["share"], entry["pairs"])
        for entry in corpus_mix.describe(corpora.training_mix(corpus, data))
    ] == [
        (name, weight, share, manifest["sources"][name]["splits"]["train"])
        for name, weight, share in (("libreoffice-help", 1.0, 0.2), ("libreoffice-ui", 1.0, 0.2), ("ding", 3.0, 0.6))
    ]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--train_tsv={a}:3,{b}:0"], "--train_tsv={a}:3,{b}:0: the weight '0' of {b} is not a positive number"),
        (["--train_tsv={a}:3,{b}:heavy"], "--train_tsv={a}:3,{b}:heavy: the weight 'heavy' of {b} is not a positive"),
        (["--train_tsv={a}:3,{missing}:1"], "--train_tsv={a}:3,{missing}:1: no such file: {missing}"),
        (["--train_tsv={a}:3,{b}"], "--train_tsv={a}:3,{b}: several training files need a weight each"),
        (
            ["--train_tsv={a}", "--source_weights=ding:3"],
            "--source_weights needs a built-in corpus (received --corpus=files)",
        ),
    ],
)
def test_bad_weighted_files_are_one_clear_error_and_nothing_is_written(tmp_path, flags, message):
    """In process: train.py's flag checks (how train.py prints a refusal: tests/training/test_train.py)."""
    names = {name: str(tmp_path / f"{name}.tsv") for name in ("a", "b", "missing")}
    for name in ("a", "b"):
        parallel_files.write_tsv(names[name], [("A house.", "Ein Haus.")])
    model_dir = tmp_path / "run"
    refused = _refusal(model_dir, "--corpus=files", "--languages=en-de", *(flag.format(**names) for flag in flags))
    assert refused is not None and message.format(**names) in refused, refused
    assert not model_dir.exists()


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "dign:2",
            "--source_weights=dign:2: deb-en-de has no source dign; its sources are libreoffice-help, "
            "libreoffice-ui, ding",
        ),
        ("ding:-1", "--source_weights=ding:-1: the weight '-1' of ding is not a positive number"),
        ("ding", "--source_weights=ding: 'ding' is not NAME:WEIGHT"),
    ],
)
def test_bad_source_weights_are_one_clear_error_and_nothing_is_written(tmp_path, value, message):
    model_dir = tmp_path / "run"
    refused = _refusal(model_dir, f"--source_weights={value}", f"--deb_dir={DEB_CACHE}")
    assert refused is not None and message in refused, refused
    assert not model_dir.exists()


@pytest.mark.slow  # a data.prepare process
def test_several_workers_are_told_the_command_that_builds_the_weighted_corpus_and_both_vocabularies(
    sample_corpus, tmp_path
):
    """Workers refuse to train their vocabulary and print the command that builds it: for a weighted
    mix it must name the same files and weights, so that it finds the corpus train.py built; with
    separate vocabularies it builds both sides' models."""
    import shlex

    from data.corpora import resolve_corpus
    from training.config import DataConfig
    from training.run_dir import RunDir
    from training.trainer import TrainingError, resolve_tokenizer

    paths = _source_files(sample_corpus, tmp_path)
    data = DataConfig(
        corpus="files",
        cache_dir=str(tmp_path / "cache"),
        languages="en-de",
        train_files=(paths["libreoffice-help"], paths["ding"]),
        train_weights=(3.0, 1.0),
        dev_files=(sample_corpus.dev,),
        vocab_size=500,
        vocabulary="separate",
    )
    built, _ = resolve_corpus(data)
    manifest = os.stat(built.manifest).st_ino
    worker = str(tmp_path / "worker")
    with pytest.raises(TrainingError, match="spm-bpe-500-col0.model is missing.*build the vocabulary first") as refused:
        resolve_tokenizer(worker, built, data, may_train=False)
    command = str(refused.value).split("`")[1]
    assert command.startswith("python -m data.prepare ") and "--vocabulary=separate" in command
    assert f"--train_tsv={paths['libreoffice-help']}:3,{paths['ding']}:1" in command
    completed = subprocess.run(
        [sys.executable, *shlex.split(command)[1:]],
        cwd=REPO_ROOT,
        env=TOOL_ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert os.stat(built.manifest).st_ino == manifest  # Found in the cache, not rebuilt.
    # The command built the vocabularies into the corpus entry the workers read.
    assert resolve_tokenizer(worker, built, data, may_train=False).vocabulary_size == 500
    run = RunDir(worker)
    assert run.load_source_tokenizer().model_proto != run.load_tokenizer().model_proto
