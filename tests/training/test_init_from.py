"""Fine-tuning with --init_from: a run that starts from another run's weights and vocabulary."""

import csv
import dataclasses
import json
import os
import shutil

import keras
import numpy as np
import pytest
from absl import app

from data.sources import corpus_mix, parallel_files
from tests.helpers import (
    DEB_CACHE,
    QUICK_TRAIN_FLAGS,
    TINY_MODEL,
    tiny_run_config,
    tool_flags,
    train_flags_refusal,
)


def _domain_files(corpus, tmp_path):
    """The ding dictionary's training pairs of the corpus as a training file, and its test pairs,
    which the parent never saw, as the domain's dev file."""
    ((ding_train, _),) = corpus_mix.source_training_files(corpus, ["ding"]).values()
    train, dev = str(tmp_path / "ding-train.tsv"), str(tmp_path / "ding-dev.tsv")
    shutil.copyfile(ding_train, train)
    pairs = list(parallel_files.read_tsv(corpus.test_by_source["ding"]))
    parallel_files.write_tsv(dev, pairs)
    return train, dev, pairs


def _parent_dev_loss(parent_dir, dev_tsv):
    """The dev loss of the parent's best weights on the domain's dev pairs, as a run of
    `tiny_run_config` (the parent's, and the child's batches) computes its own: the trainer's
    compiled model and loss, its dev batches."""
    from data import pipeline
    from training.model_building import build_model
    from training.run_dir import RunDir

    config, run = tiny_run_config(parent_dir, "unused"), RunDir(parent_dir)
    tokenizer = run.load_tokenizer()
    model = build_model(config.model, tokenizer.vocabulary_size, config.train)
    model.load_weights(run.best_weights_path)
    options = dict(batch_tokens=config.train.batch_tokens, max_length=config.data.max_length)
    dev = pipeline.make_dataset(dev_tsv, tokenizer, shuffle=False, seed=config.train.seed, **options)
    return model.evaluate(dev, verbose=0, return_dict=True)["loss"]


def _logged_dev_loss(model_dir):
    """The last dev loss that training_log.csv records."""
    with open(os.path.join(model_dir, "training_log.csv"), newline="") as handle:
        return [float(row["val_loss"]) for row in csv.DictReader(handle) if row["val_loss"]][-1]


_FINE_TUNING = dict(
    train_steps=30,
    checkpoint_every=15,
    eval_every=30,
    eval_sentences=0,
    batch_tokens=2048,
    distribution="one_device",
    learning_rate_schedule="constant",
    # Well below the parent's peak rate: a fresh Adam's first updates are about the rate itself
    # for every weight, and 1e-2 threw the real corpus's parent off its dev loss.
    learning_rate=3e-3,
)


@pytest.mark.slow  # A training run.
def test_train_py_fine_tunes_the_parents_model_on_a_domain_and_lowers_its_dev_loss(
    tiny_run, corpus, tmp_path, train_flag_values, capsys
):
    """train.py --init_from with no model flag but a dropout rate trains the parent's architecture
    and vocabulary from its best weights, with a fresh optimizer from step 0; it records the parent
    and keeps the search its parent recorded; the fine-tuning lowers the domain's dev loss. A later
    start of the same run resumes from its own checkpoints and keeps that record. In process, as
    train.py's `main` runs (its flags, `launch`'s run and summary): train.py in a process of its
    own, its output into a file, is test_train.py's."""
    from training import init_from, launch, train_flags
    from training.model_building import build_model
    from training.run_dir import RunDir
    from training.trainer import _assign_parent, _parent_weights, _record

    parent = tmp_path / "parent"
    shutil.copytree(tiny_run[0], parent)
    with open(parent / "config.json") as handle:
        parent_config = json.load(handle)
    parent_config["search"] = {"alpha": 1.0, "min_length_ratio": 0.8, "chosen_for": "recipe small_data"}
    (parent / "config.json").write_text(json.dumps(parent_config))
    train_tsv, dev_tsv, dev_pairs = _domain_files(corpus, tmp_path)
    model_dir = tmp_path / "ding"
    argv = [
        "train.py",
        f"--model_dir={model_dir}",
        f"--init_from={parent}",
        "--dropout=0.0",
        "--corpus=files",
        "--languages=en-de",
        f"--cache_dir={tmp_path / 'cache'}",
        f"--train_tsv={train_tsv}",
        f"--dev_tsv={dev_tsv}",
        "--max_length=64",
        *(f"--{name}={value}" for name, value in _FINE_TUNING.items()),
    ]
    train_flag_values.unparse_flags()
    try:
        train_flag_values(argv)
        capsys.readouterr()
        launch.print_summary(launch.train_run(train_flags.config_from_flags()))
    finally:
        train_flag_values.unparse_flags()
    printed = capsys.readouterr()
    assert f"fine-tuning from {parent}/checkpoints/best.weights.h5 (step 200), the best" in printed.err
    assert f"trained to step 30; model written to {model_dir / 'model.keras'}" in printed.out
    # Its output is not a terminal: a plain line per epoch, not Keras's bar.
    epochs = [line for line in printed.out.splitlines() if line.startswith("epoch ")]
    assert [line.split(":")[0] for line in epochs] == ["epoch 1/2, step 15/30", "epoch 2/2, step 30/30"], epochs
    assert "; dev loss " in epochs[-1], epochs
    with open(model_dir / "config.json") as handle:
        recorded = json.load(handle)
    assert recorded["model"] == dict(TINY_MODEL, dropout=0.0)
    assert recorded["data"]["vocab_size"] == 2000 and recorded["train"]["preset"] == "tiny"
    assert recorded["train"]["learning_rate_schedule"] == "constant"
    # The parent's one dev evaluation, at its last step, made its best checkpoint: auto takes it.
    assert recorded["init_from"] == {
        "model_dir": str(parent),
        "checkpoint": "best",
        "weights": os.path.join(str(parent), "checkpoints", "best.weights.h5"),
        "step": 200,
    }
    assert recorded["search"] == {
        "alpha": 1.0,
        "min_length_ratio": 0.8,
        "chosen_for": f"recipe small_data, kept from the parent run {parent}",
    }
    with open(model_dir / "spm.model", "rb") as child, open(parent / "spm.model", "rb") as parents:
        assert child.read() == parents.read()
    # The step counted from 0, not from the parent's 200.
    assert [step for step, _ in RunDir(str(model_dir)).checkpoints()] == [15, 30]

    parent_loss, child_loss = _parent_dev_loss(str(parent), dev_tsv), _logged_dev_loss(model_dir)
    print(f"ding dev ({len(dev_pairs)} pairs): loss {parent_loss:.3f} -> {child_loss:.3f}")
    # The loss, not BLEU: this parent's greedy output is empty for (nearly) every ding sentence, before
    # and after. BLEU rising on the domain from a parent that translates is measured by
    # benchmarks/domain_fine_tuning.py.
    assert child_loss < parent_loss - 0.15

    # What the run started from (the message above says `train` took this path): the parent's weights
    # as they are, a fresh optimizer at step 0.
    config = tiny_run_config(model_dir, str(tmp_path / "cache"), init_from=str(parent), **_FINE_TUNING)
    config = dataclasses.replace(config, model=recorded["model"])
    vocabulary_size = RunDir(str(model_dir)).load_tokenizer().vocabulary_size
    model = build_model(config.model, vocabulary_size, config.train)
    _assign_parent(model, init_from.load_parent(str(parent), "auto", config.model, 2000))
    best = _weights_of(os.path.join(str(parent), "checkpoints", "best.weights.h5"), vocabulary_size)
    for got, want in zip(model.get_weights(), best):
        np.testing.assert_array_equal(got, want)
    assert int(keras.ops.convert_to_numpy(model.optimizer.iterations)) == 0
    moments = [v for v in model.optimizer.variables if "momentum" in v.path or "velocity" in v.path]
    assert len(moments) == 2 * len(model.weights)
    assert not any(keras.ops.convert_to_numpy(moment).any() for moment in moments)

    # The same command again resumes from the run's own checkpoints (as test_train.py's resumes do),
    # not from the parent, and records the parent of its first start.
    assert _parent_weights(config, RunDir(str(model_dir)), start_over=False) is None
    assert _parent_weights(config, RunDir(str(model_dir)), start_over=True).step == 200
    again = _record(dataclasses.replace(config, record={}), None, None, recorded)
    assert again.record["init_from"] == recorded["init_from"] and again.record["search"] == recorded["search"]


def _weights_of(checkpoint, vocabulary_size):
    from models.transformer import Transformer

    model = Transformer(vocabulary_size, **TINY_MODEL)
    model.build()
    model.load_weights(checkpoint)
    return model.get_weights()


def test_the_best_checkpoint_is_preferred_then_the_newest_then_model_keras(tiny_run, tmp_path):
    from training import init_from

    parent = str(tmp_path / "parent")
    shutil.copytree(tiny_run[0], parent)
    checkpoints = os.path.join(parent, "checkpoints")
    for name in ("best.weights.h5", "best.json"):
        os.remove(os.path.join(checkpoints, name))
    loaded = init_from.load_parent(parent, "auto", dict(TINY_MODEL), 2000)
    assert (loaded.choice, os.path.basename(loaded.path), loaded.step) == ("last", "ckpt-000000200.weights.h5", 200)
    vocabulary_size = loaded.values[0].shape[0]
    for got, want in zip(loaded.values, _weights_of(loaded.path, vocabulary_size)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(init_from.InitFromError, match="--init_checkpoint=best: .* has no best checkpoint"):
        init_from.load_parent(parent, "best", dict(TINY_MODEL), 2000)

    # A best checkpoint (an earlier step) wins under auto and best.
    shutil.copyfile(
        os.path.join(checkpoints, "ckpt-000000100.weights.h5"), os.path.join(checkpoints, "best.weights.h5")
    )
    with open(os.path.join(checkpoints, "best.json"), "w") as handle:
        json.dump({"step": 100, "metric": "loss", "score": 5.0}, handle)
    want = _weights_of(os.path.join(checkpoints, "ckpt-000000100.weights.h5"), vocabulary_size)
    for choice in ("auto", "best"):
        loaded = init_from.load_parent(parent, choice, dict(TINY_MODEL), 2000)
        assert (loaded.choice, loaded.step) == ("best", 100)
        for got, expected in zip(loaded.values, want):
            np.testing.assert_array_equal(got, expected)
    # Last still names the newest checkpoint (whose weights load_parent loads above).
    choice, path, step = init_from.choose_weights(parent, "last")
    assert (choice, os.path.basename(path), step) == ("last", "ckpt-000000200.weights.h5", 200)

    # Without checkpoints: model.keras, its step read from the optimizer state it was saved with.
    shutil.rmtree(checkpoints)
    loaded = init_from.load_parent(parent, "auto", dict(TINY_MODEL), 2000)
    assert (loaded.choice, os.path.basename(loaded.path), loaded.step) == ("last", "model.keras", 200)
    model = keras.saving.load_model(os.path.join(parent, "model.keras"), compile=False)
    for got, want in zip(loaded.values, model.get_weights()):
        np.testing.assert_array_equal(got, want)


def test_a_constant_schedule_keeps_one_learning_rate():
    from training.config import TrainConfig
    from training.model_building import build_model

    model = build_model(dict(TINY_MODEL), 300, TrainConfig(learning_rate_schedule="constant", learning_rate=3e-4))
    for step in (0, 10, 5000):
        model.optimizer.iterations.assign(step)
        assert float(keras.ops.convert_to_numpy(model.optimizer.learning_rate)) == pytest.approx(3e-4)
    noam = build_model(dict(TINY_MODEL), 300, TrainConfig(warmup_steps=100))
    noam.optimizer.iterations.assign(0)
    assert float(keras.ops.convert_to_numpy(noam.optimizer.learning_rate)) == pytest.approx(64**-0.5 * 100**-1.5)


def _broken_parents(tiny_run, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "config.json").write_text(json.dumps({"model": TINY_MODEL}))
    corrupt = tmp_path / "corrupt"
    shutil.copytree(tiny_run[0], corrupt)
    shutil.rmtree(corrupt / "checkpoints")
    with open(corrupt / "model.keras", "r+b") as handle:
        handle.truncate(1000)
    no_best = tmp_path / "no_best"
    shutil.copytree(tiny_run[0], no_best)
    for name in ("best.weights.h5", "best.json"):
        os.remove(no_best / "checkpoints" / name)
    return {"empty": str(empty), "corrupt": str(corrupt), "missing": str(tmp_path / "missing"), "no_best": str(no_best)}


@pytest.mark.parametrize(
    "parent, flags, message",
    [
        # Refused by train.py's flag validator (init_from.read_parent, choose_weights).
        ("missing", [], "--init_from={missing}: no such directory"),
        # Refused when train.py builds its configuration from the parent's: each flag that differs is
        # named.
        (
            "good",
            ["--preset=base", "--hidden_dim=128", "--num_layers=3", "--vocab_size=4000", "--vocabulary=separate"],
            "--init_from={good} fine-tunes the parent's model as it is: --preset=base (6 encoder and 6 decoder "
            "layers of d_model 512) differs from its tiny (2 encoder and 2 decoder layers of d_model 64); "
            "--num_layers=3 differs from its 2; --hidden_dim=128 differs from its 64; "
            "--vocab_size=4000 differs from its 2000; --vocabulary=separate differs from its shared",
        ),
    ],
)
def test_a_parent_that_cannot_start_the_run_is_one_clear_error_and_nothing_is_written(
    tiny_run, corpus, tmp_path, parent, flags, message
):
    """In process: train.py's flag checks (how train.py prints a refusal: tests/training/test_train.py)."""
    parents = dict(_broken_parents(tiny_run, tmp_path), good=tiny_run[0])
    model_dir = tmp_path / "child"
    quick = (f"--cache_dir={os.path.dirname(corpus.root)}", f"--deb_dir={DEB_CACHE}", *QUICK_TRAIN_FLAGS)
    refused = train_flags_refusal(model_dir, [*quick, f"--init_from={parents[parent]}", *flags])
    assert refused is not None and message.format(**parents) in refused, refused
    assert not model_dir.exists()


@pytest.mark.parametrize(
    "parent, checkpoint, message",
    [
        (
            "empty",
            "auto",
            "--init_from={empty}: {empty} holds no model (no model.keras, no checkpoints/ckpt-*.weights.h5",
        ),
        ("no_best", "best", "--init_checkpoint=best: {no_best} has no best checkpoint"),
        # Passes the validator, refused by `train` when it loads the weights.
        ("corrupt", "auto", "--init_from={corrupt}: {corrupt}/model.keras cannot be loaded"),
    ],
)
def test_a_parent_that_cannot_start_the_run_is_refused_before_anything_is_written(
    tiny_run, corpus, tmp_path, parent, checkpoint, message
):
    """What train.py's flag validator calls (read_parent, then choose_weights for a named checkpoint)
    refuses these parents, but for the corrupt one, which passes; `train` itself refuses each before
    the run's directory is made. How such refusals leave train.py (message, exit status, nothing
    written) is the test above's, and test_train.py's for a refusal inside `train`."""
    from training import init_from
    from training.trainer import TrainingError, train

    parents = _broken_parents(tiny_run, tmp_path)
    expected = message.format(**parents)
    if parent == "corrupt":
        init_from.read_parent(parents[parent])
        init_from.choose_weights(parents[parent], checkpoint)
    else:
        with pytest.raises(init_from.InitFromError) as refused:
            init_from.read_parent(parents[parent])
            init_from.choose_weights(parents[parent], checkpoint)
        assert expected in str(refused.value)
    model_dir = tmp_path / "child"
    config = tiny_run_config(
        model_dir, os.path.dirname(corpus.root), init_from=parents[parent], init_checkpoint=checkpoint
    )
    with pytest.raises(TrainingError) as refused:
        train(config)
    assert expected in str(refused.value)
    assert not model_dir.exists()


def test_vocabulary_symbols_other_than_the_parents_are_refused(tiny_run):
    """A fine-tuning keeps its parent's vocabulary: other --user_defined_symbols cannot be had
    (train.py's flag validator says this; how its refusals leave train.py is test_train.py's)."""
    from training import init_from

    parent = init_from.read_parent(tiny_run[0])
    assert init_from.symbols_refusal(parent, []) is None
    assert init_from.symbols_refusal(parent, ["<2fr>"]) == (
        "--user_defined_symbols=<2fr> with --init_from: a fine-tuned run keeps its parent's vocabulary, whose "
        "symbols are none"
    )
    tagged = {**parent, "data": {**parent["data"], "user_defined_symbols": ["<2fr>", "<2de>"]}}
    assert init_from.symbols_refusal(tagged, ["<2fr>", "<2de>"]) is None
    assert "whose symbols are <2fr>,<2de>" in init_from.symbols_refusal(tagged, ["<2de>"])


def test_separate_vocabularies_fine_tune_in_their_own_direction_only():
    """A parent with separate vocabularies holds one language per side: a run in another
    direction is refused; a shared-vocabulary parent takes either direction."""
    from data import multilingual
    from training import init_from

    assert multilingual.side_languages({"corpus": "deb-en-de"}) == ("en", "de")
    assert multilingual.side_languages({"corpus": "deb-en-de", "direction": "de-en"}) == ("de", "en")
    assert multilingual.side_languages({"corpus": "files", "languages": "en-fr,en-ja"}) == ("en", None)
    assert multilingual.side_languages({"corpus": "deb-en-de,deb-en-zh_cn"}) == ("en", None)
    assert multilingual.side_languages({"corpus": "files"}) == (None, None)
    parent = {"data": {"corpus": "deb-en-de", "direction": None, "vocabulary": "separate"}}
    assert init_from.direction_refusal("runs/p", parent, {"corpus": "deb-en-de"}) is None
    assert init_from.direction_refusal("runs/p", parent, {"corpus": "files", "languages": "en-de"}) is None
    assert init_from.direction_refusal("runs/p", parent, {"corpus": "deb-en-de", "direction": "de-en"}) == (
        "--init_from=runs/p has separate vocabularies, its source one for en and its target one for de; this run "
        "translates de-en: fine-tune it in its own direction, or train a new model"
    )
    shared = {"data": {"corpus": "deb-en-de"}}
    assert init_from.direction_refusal("runs/p", shared, {"corpus": "deb-en-de", "direction": "de-en"}) is None
    multi = {"data": {"corpus": "deb-en-de,deb-en-fr", "vocabulary": "separate"}}
    assert init_from.direction_refusal("runs/p", multi, {"corpus": "deb-en-fr"}) is None
    assert "its source one for en and its target one for several languages" in init_from.direction_refusal(
        "runs/p", multi, {"corpus": "files", "languages": "fr-en"}
    )


@pytest.fixture(scope="module")
def train_flag_values():
    """train.py's flags in absl's global FLAGS for this module's in-process tests (`tool_flags`)."""
    from training import train_flags

    with tool_flags() as flag_values:
        train_flags.define_train_flags()
        yield flag_values


def _parent_directory(path, model, preset):
    """A directory `read_parent` takes as a run of `model` (the files it looks for; nothing is loaded)."""
    os.makedirs(path)
    for name in ("spm.model", "model.keras"):
        open(os.path.join(path, name), "wb").close()
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as handle:
        json.dump({"model": model, "data": {"vocab_size": 2000}, "train": {"preset": preset}}, handle)
    return str(path)


def test_a_decoder_of_another_depth_than_the_parents_is_refused_naming_both(train_flag_values, tmp_path):
    """A student preset or --num_decoder_layers against a parent of other stacks: refused when
    train.py builds its configuration (a UsageError: exit status 2), before the run's directory is made."""
    from training import init_from, train_flags

    tiny = _parent_directory(tmp_path / "tiny", TINY_MODEL, "tiny")
    student = _parent_directory(tmp_path / "student", dict(TINY_MODEL, num_layers=4, num_decoder_layers=1), "student")
    model_dir = tmp_path / "child"

    def config(parent, *argv):
        train_flag_values.unparse_flags()
        try:
            train_flag_values(["train.py", f"--model_dir={model_dir}", f"--init_from={parent}", *argv])
            return train_flags.config_from_flags()
        finally:
            train_flag_values.unparse_flags()

    for parent, argv, listed in [
        (
            tiny,
            ["--preset=student"],
            "--preset=student (4 encoder and 1 decoder layers of d_model 128) differs from its tiny (2 encoder and 2 "
            "decoder layers of d_model 64)",
        ),
        (tiny, ["--num_decoder_layers=1"], "--num_decoder_layers=1 differs from its 2"),
        (
            tiny,
            ["--num_layers=4", "--num_decoder_layers=1"],
            "--num_layers=4 differs from its 2; --num_decoder_layers=1 differs from its 2",
        ),
        (student, ["--num_layers=3"], "--num_layers=3 differs from its 4"),
        (student, ["--num_decoder_layers=2"], "--num_decoder_layers=2 differs from its 1"),
        (
            student,
            ["--preset=tiny"],
            "--preset=tiny (2 encoder and 2 decoder layers of d_model 128) differs from its "
            "student (4 encoder and 1 decoder layers of d_model 64)",
        ),
    ]:
        with pytest.raises(app.UsageError) as refused:
            config(parent, *argv)
        assert str(refused.value) == (
            f"--init_from={parent} fine-tunes the parent's model as it is: {listed} ({parent}/config.json). Leave "
            "these flags out (the parent's values are taken) or train a new model"
        )
        assert not model_dir.exists()
    # The parent's own depths, given or not, are no difference; a parent written before the flag has equal stacks.
    assert config(student, "--num_layers=4").model == dict(TINY_MODEL, num_layers=4, num_decoder_layers=1)
    assert config(tiny, "--num_decoder_layers=2").model["num_layers"] == 2
    differences = init_from.architecture_differences(
        {"model": TINY_MODEL}, dict(TINY_MODEL, num_decoder_layers=2), None
    )
    assert differences == []
