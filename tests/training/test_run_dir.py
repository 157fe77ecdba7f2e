"""What train.py does with a model_dir before and around training: the config check, --start_over,
resuming under changed flags, data that cannot train, and the training log's columns."""

import csv
import dataclasses
import json
import os
import shutil

import pytest

from tests.helpers import tiny_run_config


def _config_with(config, **data_changes):
    from training.config import RunConfig

    return RunConfig(config.model_dir, config.model, dataclasses.replace(config.data, **data_changes), config.train)


def test_moved_caches_relative_paths_and_the_default_direction_are_the_same_run(tmp_path, monkeypatch):
    from training import config as run_config

    monkeypatch.chdir(tmp_path)
    first = _config_with(
        tiny_run_config(tmp_path / "run", "cache/corpora"),
        corpus="files",
        languages="en-de",
        train_files=("train.tsv",),
        deb_dir="debs",
    )
    os.makedirs(first.model_dir)
    run_config.write(first)
    # The cache moved, the files are named by absolute path, the direction is spelt out: same run.
    moved = _config_with(
        first,
        cache_dir="/elsewhere/corpora",
        deb_dir=None,
        deb_source="mirror",
        deb_mirror="https://mirror.example/debian",
        train_files=(str(tmp_path / "train.tsv"),),
        direction="en-de",
    )
    run_config.check(moved, default_direction="en-de")
    # Another direction, or other files, are another run.
    with pytest.raises(run_config.ConfigMismatchError, match="data.direction: 'en-de' -> 'de-en'"):
        run_config.check(_config_with(first, direction="de-en"), default_direction="en-de")
    with pytest.raises(run_config.ConfigMismatchError, match="data.train_files"):
        run_config.check(_config_with(first, train_files=(str(tmp_path / "other.tsv"),)), default_direction="en-de")


def test_user_corpora_are_cached_by_absolute_path_and_languages(tmp_path, monkeypatch):
    from data.sources.user_corpus import cache_name as user_corpus_name
    from training.config import DataConfig

    data = DataConfig(corpus="files", languages="en-de", train_files=("train.tsv",))
    for project in ("a", "b"):
        os.makedirs(tmp_path / project)
    monkeypatch.chdir(tmp_path / "a")
    in_a = user_corpus_name(data)
    assert user_corpus_name(dataclasses.replace(data, train_files=(str(tmp_path / "a" / "train.tsv"),))) == in_a
    assert user_corpus_name(dataclasses.replace(data, languages="de-en")) != in_a
    monkeypatch.chdir(tmp_path / "b")
    assert user_corpus_name(data) != in_a


def test_start_over_deletes_only_a_train_py_run(tmp_path):
    from inference.runs import ModelDirError
    from training.run_dir import RunDir

    run = RunDir(str(tmp_path))
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "server.log").write_text("not ours")
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "spm.model").write_text("a leftover of a failed start")
    with pytest.raises(
        ModelDirError, match=r"--start_over: .* holds no config.json.*not deleting its checkpoints, logs$"
    ):
        run.prepare(start_over=True, mixed_precision="none")
    assert (tmp_path / "logs" / "server.log").read_text() == "not ours"
    # With train.py's config.json it is a run: everything train.py wrote goes.
    (tmp_path / "config.json").write_text("{}")
    (tmp_path / "spm.model").write_text("old vocabulary")
    (tmp_path / "notes.txt").write_text("the user's")
    run.prepare(start_over=True, mixed_precision="none")
    assert sorted(os.listdir(tmp_path)) == ["notes.txt"]


def test_a_start_that_never_trained_does_not_bind_the_model_dir(tmp_path):
    from training import config as run_config
    from training.run_dir import RunDir

    failed = _config_with(tiny_run_config(tmp_path, "unused"), vocab_size=100)
    run_config.write(failed)
    (tmp_path / "spm.model").write_text("a 100-piece vocabulary")
    fixed = tiny_run_config(tmp_path, "unused")
    with pytest.raises(run_config.ConfigMismatchError):
        run_config.check(fixed)
    RunDir(fixed.model_dir).prepare(start_over=False, mixed_precision=fixed.train.mixed_precision)
    assert not os.path.exists(tmp_path / "config.json") and not os.path.exists(tmp_path / "spm.model")
    # Once a checkpoint exists, the config binds.
    run_config.write(failed)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "ckpt-000000100.weights.h5").write_text("")
    RunDir(fixed.model_dir).prepare(start_over=False, mixed_precision=fixed.train.mixed_precision)
    with pytest.raises(run_config.ConfigMismatchError, match="data.vocab_size: 100 -> 2000"):
        run_config.check(fixed)


def test_resuming_refuses_an_optimizer_state_that_does_not_load(tiny_run, tmp_path):
    from training.trainer import TrainingError, _check_resume_step, train

    model_dir = str(tmp_path / "run")
    shutil.copytree(tiny_run[0], model_dir)
    corpus_cache = os.path.dirname(tiny_run[1]["corpus"]["root"])
    before = sorted(os.listdir(os.path.join(model_dir, "checkpoints")))
    # fp16's loss scaling has optimizer variables the float32 run's checkpoints lack: Keras would skip
    # the whole optimizer state and restart at step 0 over the good checkpoints.
    with pytest.raises(
        TrainingError, match="trained with --mixed_precision=none; --mixed_precision=fp16 cannot resume"
    ):
        train(tiny_run_config(model_dir, corpus_cache, train_steps=400, mixed_precision="fp16"))
    # Any other optimizer state that does not load (the step read back differs) is refused too.
    with pytest.raises(TrainingError, match="ckpt-200 is from step 200, but its optimizer state did not load"):
        _check_resume_step(200, 0, "ckpt-200")
    assert sorted(os.listdir(os.path.join(model_dir, "checkpoints"))) == before


def test_a_resume_off_the_epoch_boundaries_runs_a_short_first_epoch():
    from training.trainer import _epoch_plan

    assert _epoch_plan(0, 100, 5) == [(0, 0, 100)]
    assert _epoch_plan(200, 100, 5) == [(200, 2, 100)]
    # A signal's checkpoint at step 235: 65 steps to the boundary, then whole epochs to 500.
    assert _epoch_plan(235, 100, 5) == [(235, 2, 65), (300, 3, 100)]
    assert _epoch_plan(450, 100, 5) == [(450, 4, 50)]
    # A --checkpoint_every changed from 100 to 300 at step 200 (and fp16's skipped steps at 1987).
    assert _epoch_plan(200, 300, 2) == [(200, 0, 100), (300, 1, 300)]
    assert _epoch_plan(1987, 100, 30) == [(1987, 19, 13), (2000, 20, 100)]
    assert _epoch_plan(500, 100, 5) == [] and _epoch_plan(600, 100, 5) == []


@pytest.mark.parametrize("setting", ["train_steps", "eval_every"])
def test_steps_off_the_checkpoint_cadence_are_refused_before_anything_is_written(setting, tmp_path):
    # The epochs are checkpoint_every updates long: the remainder would silently go untrained.
    from training.trainer import train

    steps = dict(train_steps=90, eval_every=30, checkpoint_every=30) | {setting: 70}
    config = tiny_run_config(tmp_path / "run", "unused", **steps)
    with pytest.raises(ValueError, match=f"{setting}=70 must be a multiple of checkpoint_every=30"):
        train(config)
    assert not os.path.exists(tmp_path / "run")


def test_the_training_log_has_dev_bleu_and_fixed_columns(tiny_run, tmp_path):
    from training.callbacks import TrainingLog

    with open(os.path.join(tiny_run[0], "training_log.csv"), newline="") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    assert tuple(reader.fieldnames) == TrainingLog.COLUMNS
    assert [row["step"] for row in rows] == ["100", "200"]
    # Dev loss and BLEU at step 200 (eval_every), blank at step 100.
    assert rows[0]["val_loss"] == rows[0]["val_bleu"] == ""
    assert float(rows[1]["val_loss"]) > 0 and 0 <= float(rows[1]["val_bleu"]) <= 100
    # A log written by Keras's CSVLogger (columns of the first epoch) is rewritten under these columns.
    # Its rows after a resume could be shorter or longer than its header.
    old = tmp_path / "training_log.csv"
    old.write_text("epoch,loss,val_target_tokens\n0,5.5,NA\n1,4.5\n2,4.0,NA,surplus\n")
    TrainingLog(str(old)).on_train_begin()
    with open(old, newline="") as handle:
        assert list(csv.DictReader(handle)) == [
            dict.fromkeys(TrainingLog.COLUMNS, "") | {"epoch": str(epoch), "loss": loss}
            for epoch, loss in enumerate(["5.5", "4.5", "4.0"])
        ]


def test_dev_loss_is_computed_at_the_last_step_too():
    from training.trainer import _validation_epochs

    assert _validation_epochs(eval_epochs=5, epochs=2) == [2]
    assert _validation_epochs(eval_epochs=2, epochs=5) == [2, 4, 5]
    assert _validation_epochs(eval_epochs=1, epochs=3) == [1, 2, 3]


def _user_run(tmp_path, corpus, train_pairs, dev_pairs=None, **data):
    """A RunConfig on user files made of the given pairs of the real corpus."""
    from training.config import DataConfig

    os.makedirs(tmp_path, exist_ok=True)

    def write(name, pairs):
        path = tmp_path / name
        path.write_text("".join(f"{en}\t{de}\n" for en, de in pairs), encoding="utf-8")
        return (str(path),)

    config = tiny_run_config(
        tmp_path / "run",
        str(tmp_path / "cache"),
        train_steps=20,
        checkpoint_every=10,
        eval_every=20,
        eval_sentences=0,
        batch_tokens=1024,
    )
    data = DataConfig(
        corpus="files",
        cache_dir=str(tmp_path / "cache"),
        languages="en-de",
        train_files=write("train.tsv", train_pairs),
        dev_files=write("dev.tsv", dev_pairs) if dev_pairs else (),
        vocab_size=500,
        **data,
    )
    return dataclasses.replace(config, data=data)


def _corpus_pairs(corpus, count, longest=None, shortest=None):
    pairs = []
    with open(corpus.train[0], encoding="utf-8") as handle:
        for line in handle:
            en, de = line.rstrip("\n").split("\t")
            if (longest is None or max(len(en), len(de)) <= longest) and (
                shortest is None or min(len(en), len(de)) >= shortest
            ):
                pairs.append((en, de))
                if len(pairs) == count:
                    return pairs
    raise AssertionError(f"fewer than {count} such pairs")


@pytest.mark.slow
@pytest.mark.full  # pairs of 100-150 characters, which the sample corpus lacks
def test_data_that_cannot_train_is_named_before_the_run_is_bound(deb_en_de, tmp_path):
    from data.sources import cleaning
    from training.trainer import TrainingError, train

    corpus = deb_en_de[0]
    short, long = _corpus_pairs(corpus, 600, longest=30), _corpus_pairs(corpus, 40, longest=150, shortest=100)
    # Files without dev pairs whose hash split gives none to dev.
    no_dev = [pair for pair in short if cleaning.split_of(pair[0]) == "train"][:20]
    with pytest.raises(TrainingError, match="has no dev pairs.*Pass --dev_tsv or --dev_src/--dev_tgt"):
        train(_user_run(tmp_path / "no_dev", corpus, no_dev))
    # Every dev pair longer than --max_length: refused before the first step, not after an epoch.
    config = _user_run(tmp_path / "long_dev", corpus, short, long, max_length=24)
    with pytest.raises(TrainingError, match="no dev pair of .*dev.tsv fits --max_length=24"):
        train(config)
    assert not os.path.exists(os.path.join(config.model_dir, "checkpoints"))
    # Every training pair too long: the stream of training batches ends at once. Started on the same
    # model_dir with other files, after the refusal above: a fresh start, not "another configuration".
    long_train = _user_run(tmp_path / "long_train", corpus, long, short[:20], max_length=24)
    long_train = dataclasses.replace(long_train, model_dir=config.model_dir)
    with pytest.raises(
        TrainingError,
        match="the training data ran out: no training pair of .*/cache/user-[0-9a-f]+ fits --max_length=24",
    ):
        train(long_train)
    with open(os.path.join(config.model_dir, "config.json")) as handle:
        assert json.load(handle)["data"]["train_files"] == list(long_train.data.train_files)


def test_what_cleaning_did_to_the_users_files_is_printed(corpus, tmp_path, capsys):
    from data.corpora import resolve_corpus

    pairs = _corpus_pairs(corpus, 200, longest=60)
    config = _user_run(tmp_path, corpus, pairs + pairs[:3] + [("same", "same")], pairs[:2] + pairs[:2])
    resolve_corpus(config.data)
    printed = capsys.readouterr().err.splitlines()
    # The training file loses a duplicate, the untranslated pair and the dev pairs (twice each); the dev file is kept whole.
    assert "dev files (dev.tsv): 4 pairs read, 4 kept (4 dev), dropped: none" in printed
    assert (
        "train files (train.tsv): 204 pairs read, 198 kept (198 train), dropped: 1 duplicate, 1 identical, 4 in_evaluation_files"
        in printed
    )


def test_the_averaging_tool_and_the_tools_share_one_checkpoint_rule(tiny_run, tmp_path):
    import keras
    import numpy as np

    from inference.runs import ModelDirError
    from training.average_checkpoints import write_chosen
    from training.run_dir import RunDir

    model_dir, _ = tiny_run
    run = RunDir(model_dir)
    found = run.checkpoints()
    assert len(found) == 2, found  # 200 steps, a checkpoint every 100.
    output = str(tmp_path / "averaged.keras")
    assert write_chosen(model_dir, "average:2", output).paths == tuple(path for _, path in found)
    written = keras.saving.load_model(output, compile=False)
    loaded, _, _ = run.load_model("average:2", quiet=True)
    for a, b in zip(written.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
    # Never an average over fewer checkpoints than asked for, under either tool's flag.
    for refused in (
        lambda: write_chosen(model_dir, "average:3", str(tmp_path / "three.keras")),
        lambda: run.load_model("average:3"),
    ):
        with pytest.raises(ModelDirError, match=r"^--checkpoint=average:3: .* keeps 2 checkpoint\(s\), fewer than"):
            refused()
    assert not os.path.exists(tmp_path / "three.keras")


def test_a_worker_has_its_own_run_directory_under_the_chiefs(tmp_path):
    from training.run_dir import RunDir

    worker = RunDir(str(tmp_path)).worker(2)
    assert worker.path == os.path.join(str(tmp_path), "workers", "2")
    assert worker.checkpoint_dir == os.path.join(str(tmp_path), "workers", "2", "checkpoints")
    assert not worker.has_trained() and worker.latest_checkpoint() is None and worker.read_config() is None


def test_one_writer_per_run_directory_and_a_killed_holder_leaves_no_lock(tmp_path):
    import signal
    import socket
    import subprocess
    import sys
    import textwrap

    from inference.runs import ModelDirError
    from tests.helpers import REPO_ROOT
    from training.run_dir import RunDir

    run = RunDir(str(tmp_path / "run"))
    with run.lock():
        with pytest.raises(
            ModelDirError, match=f"another train.py \\(pid {os.getpid()} on host {socket.gethostname()}"
        ):
            RunDir(run.path).lock()
    RunDir(run.path).lock().close()  # Released when its holder closes it.

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            sys.path.insert(0, {REPO_ROOT!r})
            from training.run_dir import RunDir
            lock = RunDir({run.path!r}).lock()
            print("locked", flush=True)
            time.sleep(600)
        """),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(ModelDirError, match=f"pid {holder.pid} "):
            RunDir(run.path).lock()
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        RunDir(run.path).lock().close()  # The kernel released the killed holder's lock.
    finally:
        if holder.poll() is None:
            holder.kill()
