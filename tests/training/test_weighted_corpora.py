"""Several training corpora with weights, through train.py: what the run prints and records (under
a recipe too), and the specs it refuses."""

import dataclasses
import json
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
    run_train_py,
    tiny_run_config,
    train_flags_refusal,
)


def _train_py(model_dir, *flags):
    model_flags = (f"--{key}={value}" for key, value in TINY_MODEL.items())
    return run_train_py(model_dir, "--preset=tiny", *model_flags, *QUICK_TRAIN_FLAGS, *flags)


def _refusal(model_dir, *flags):
    """What train.py's flag checks say of `_train_py`'s command with `flags`, run in this process."""
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


@pytest.mark.slow
def test_train_py_samples_weighted_files_under_a_recipe_and_records_both(sample_corpus, tmp_path):
    """The run also takes --recipe=small_data: the recipe sets the flags the command line leaves
    out and its search goes into config.json (tests/training/test_recipes.py checks the rest)."""
    paths = _source_files(sample_corpus, tmp_path)
    model_dir = tmp_path / "run"
    completed = _train_py(
        model_dir,
        "--recipe=small_data",
        "--corpus=files",
        "--languages=en-de",
        f"--cache_dir={tmp_path / 'cache'}",
        f"--train_tsv={paths['libreoffice-help']}:3,{paths['ding']}:1",
        f"--dev_tsv={sample_corpus.dev}",
        "--vocab_size=500",
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"trained to step 10; model written to {model_dir / 'model.keras'}" in completed.stdout
    applied = "recipe small_data: --normalize_first --warmup_steps=400 --learning_rate_scale=2.0 --cache_tokenized"
    assert applied in completed.stderr
    with open(model_dir / "config.json") as handle:
        recorded = json.load(handle)
    assert recorded["model"] == dict(TINY_MODEL, normalize_first=True)
    assert recorded["train"]["warmup_steps"] == 400 and recorded["train"]["cache_tokenized"] is True
    assert recorded["search"] == {"alpha": 1.0, "min_length_ratio": 0.8, "chosen_for": "recipe small_data"}
    assert recorded["data"]["train_weights"] == [3.0, 1.0]
    mix = recorded["training_corpora"]
    assert [(entry["corpus"], entry["weight"], entry["share"]) for entry in mix] == [
        (paths["libreoffice-help"], 3.0, 0.75),
        (paths["ding"], 1.0, 0.25),
    ]
    for entry in mix:
        with open(entry["file"]) as handle:
            assert entry["pairs"] == sum(1 for _ in handle) > 100
        printed = (
            f"training corpus {entry['corpus']}: {entry['pairs']} pairs, weight {entry['weight']:g} "
            f"({entry['share']:.1%} of the pairs sampled)"
        )
        assert printed in completed.stderr
    # One vocabulary, trained on the union of the corpora.
    root = os.path.dirname(mix[0]["file"])
    shards = [os.path.join(root, name) for name in sorted(os.listdir(root)) if name.startswith("train-0")]
    assert shards and sum(1 for shard in shards for _ in open(shard)) == sum(entry["pairs"] for entry in mix)
    with open(os.path.join(root, "spm-bpe-500.model"), "rb") as cached, open(model_dir / "spm.model", "rb") as used:
        assert cached.read() == used.read()


def test_a_built_in_corpus_mixes_its_sources_by_weight(sample_corpus, tmp_path):
    """--source_weights on a built-in corpus: its sources with their weights, as config.json records
    the mix. `train` reads and records a built-in corpus's mix as it does the weighted files' (the
    train.py run above); the stream draws in proportion to the weights (tests/data/sources/test_corpus_mix.py)."""
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


@pytest.mark.slow  # a data.prepare process; the fast tier runs the command for separate vocabularies
# (tests/training/test_run_dir.py)
def test_the_vocabulary_command_for_several_workers_builds_the_same_weighted_corpus(sample_corpus, tmp_path):
    """Workers build their vocabulary with the command the first start prints: for a weighted mix
    it must name the same files and weights, so that it finds the corpus train.py built."""
    import shlex

    from data.corpora import prepare_command, resolve_corpus
    from training.config import DataConfig

    paths = _source_files(sample_corpus, tmp_path)
    data = DataConfig(
        corpus="files",
        cache_dir=str(tmp_path / "cache"),
        languages="en-de",
        train_files=(paths["libreoffice-help"], paths["ding"]),
        train_weights=(3.0, 1.0),
        dev_files=(sample_corpus.dev,),
        vocab_size=500,
    )
    built, _ = resolve_corpus(data)
    manifest = os.stat(built.manifest).st_ino
    command = prepare_command(data, 500)
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
    assert os.path.exists(os.path.join(built.root, "spm-bpe-500.model"))
