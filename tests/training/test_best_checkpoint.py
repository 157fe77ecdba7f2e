"""The best checkpoint and early stopping: the ranking rule on scripted scores, real training runs
that stop, resume with their patience and end on the best weights, and the refusals of options that
cannot work."""

import dataclasses
import json
import os

import keras
import numpy as np
import pytest

from tests.helpers import small_run_config, tiny_run_config, train_flags_refusal


def _numpy_weights(weights):
    return [np.array(keras.ops.convert_to_numpy(weight)) for weight in weights]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


def _scripted_model():
    """A small compiled model whose optimizer step and weights the test sets."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.compile(optimizer="adam", loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def _evaluate(callback, model, step, **logs):
    """Sets the model to `step` (its weights all equal to `step`) and runs one epoch end."""
    model.optimizer.iterations.assign(step)
    for weight in model.weights:
        weight.assign(np.full(weight.shape, float(step), dtype="float32"))
    callback.on_epoch_end(step - 1, dict(loss=1.0, **logs))


def test_the_best_is_kept_apart_from_the_rotation_and_patience_counts_small_gains(tmp_path, capsys):
    from training import checkpoints
    from training.callbacks import BestCheckpoint
    from training.run_dir import RunDir

    run = RunDir(str(tmp_path))
    model = _scripted_model()
    callback = BestCheckpoint(run, "bleu", patience=3, min_delta=0.1)
    callback.set_model(model)
    # step: BLEU -> new best?, evaluations without an improvement above 0.1
    script = [(1, 1.0, True, 0), (2, 3.0, True, 0), (3, 2.5, False, 1), (4, 3.05, True, 2), (5, 2.0, False, 3)]
    for step, bleu, new_best, count in script:
        checkpoints.save_checkpoint(model, run.checkpoint_dir, step, keep=1)
        _evaluate(callback, model, step, val_bleu=bleu, val_loss=10.0 - step)
        record = run.read_best()
        assert record["evaluations_without_improvement"] == count, (step, record)
        assert record["evaluated_step"] == step
        assert (f"step {step}: new best checkpoint" in capsys.readouterr().out) == new_best
    # The best of step 4 (3.05 beats 3.0, if by less than min_delta) outlived the rotation of keep=1.
    assert [step for step, _ in run.checkpoints()] == [5]
    assert record == dict(
        metric="bleu",
        score=3.05,
        step=4,
        dev_bleu=3.05,
        dev_loss=6.0,
        evaluations_without_improvement=3,
        evaluated_step=5,
        stopped_at=5,
    )
    fresh = _scripted_model()
    fresh.load_weights(run.best_weights_path)
    assert all(np.all(weights == 4.0) for weights in _numpy_weights(fresh.weights))
    assert int(fresh.optimizer.iterations.numpy()) == 4  # A checkpoint: the optimizer state too.
    assert model.stop_training and callback.stopped_at == 5

    # Resumed, the record comes back: a worse score does not replace the best, the count goes on.
    resumed = BestCheckpoint(run, "bleu", patience=5, min_delta=0.1)
    resumed.set_model(model)
    assert not resumed.already_stopped()  # The patience was raised.
    _evaluate(resumed, model, 6, val_bleu=3.0)
    assert run.read_best()["step"] == 4 and run.read_best()["evaluations_without_improvement"] == 4
    assert not BestCheckpoint(run, "bleu", patience=5).already_stopped()
    _evaluate(resumed, model, 7, val_bleu=2.0)
    assert BestCheckpoint(run, "bleu", patience=5).already_stopped() and resumed.stopped_at == 7

    # Loss ranks the other way; a record of another metric is started anew, and said so.
    by_loss = BestCheckpoint(run, "loss", patience=2)
    assert "ranks by dev bleu, this run by dev loss" in capsys.readouterr().err
    by_loss.set_model(model)
    for step, loss, best_step in [(8, 4.0, 8), (9, 3.5, 9), (10, 3.9, 9)]:
        _evaluate(by_loss, model, step, val_loss=loss)
        assert run.read_best()["step"] == best_step
    # An epoch without the metric (no evaluation) changes nothing.
    _evaluate(by_loss, model, 11)
    assert run.read_best()["evaluated_step"] == 10


def test_checkpoint_choices_parse_or_are_refused_naming_the_flag():
    from inference.runs import CheckpointChoice, ModelDirError, parse_checkpoint

    assert parse_checkpoint("best") == CheckpointChoice("best")
    assert parse_checkpoint(" last ") == CheckpointChoice("last")
    assert parse_checkpoint("average:5") == CheckpointChoice("average", 5)
    assert str(parse_checkpoint("average:20")) == "average:20"
    for bad in ("", "newest", "average", "average:", "average:0", "average:-2", "average:two", "best:3"):
        with pytest.raises(ModelDirError, match=r"^--checkpoint='.*' is not a checkpoint choice: expected best, last"):
            parse_checkpoint(bad)
    with pytest.raises(ModelDirError, match=r"^--weights='x'"):
        parse_checkpoint("x", flag="--weights")


def test_every_choice_resolves_in_one_place_or_names_what_the_run_has(tiny_run, tmp_path):
    import shutil

    from inference.runs import ModelDirError
    from training.run_dir import RunDir

    model_dir, summary = tiny_run
    run = RunDir(model_dir)
    assert summary["best"]["step"] == 200 and summary["best"]["metric"] == "bleu"
    assert run.check_loadable("best").paths == (run.best_weights_path,)
    assert run.check_loadable("last").steps == (200,)
    assert run.check_loadable("average:2").steps == (100, 200)
    # A best of the run's last step is the last checkpoint, loaded the same way.
    best, _, _ = run.load_model("best", quiet=True)
    last, _, _ = run.load_model("last", quiet=True)
    final = keras.saving.load_model(run.model_path, compile=False)
    _assert_same(_numpy_weights(best.weights), _numpy_weights(last.weights))
    _assert_same(_numpy_weights(best.weights), _numpy_weights(final.weights))

    copy = RunDir(str(shutil.copytree(model_dir, tmp_path / "run")))
    os.remove(copy.best_record_path)
    has = r"It has: last \(step 200\); average:1 to average:2 \(checkpoints of steps 100, 200\)$"
    with pytest.raises(ModelDirError, match=r"^--checkpoint=best: .* has no best checkpoint .*" + has):
        copy.load_model("best")
    with pytest.raises(ModelDirError, match=r"^--checkpoint=average:3: .* keeps 2 checkpoint\(s\), fewer .*" + has):
        copy.load_model("average:3")
    # Without checkpoints, last is model.keras, and the choices that need checkpoints say so.
    shutil.rmtree(copy.checkpoint_dir)
    with pytest.raises(ModelDirError, match=r"^--checkpoint=average:1: .* keeps 0 .* It has: last \(model.keras\)$"):
        copy.check_loadable("average:1")
    assert copy.check_loadable("last").paths == ()


class _Recorder(keras.callbacks.Callback):
    """The model's weights after every epoch, by step."""

    def __init__(self):
        super().__init__()
        self.weights = {}

    def on_epoch_end(self, epoch, logs=None):
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self.weights[step] = _numpy_weights(self.model.weights)


class _Crash(keras.callbacks.Callback):
    """Ends training with an exception after the epoch of `step` (its checkpoint and record written)."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_epoch_end(self, epoch, logs=None):
        if int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) == self.step:
            raise RuntimeError(f"crash at step {self.step}")


class _StateAtStart(keras.callbacks.Callback):
    def on_train_begin(self, logs=None):
        self.weights = _numpy_weights(self.model.weights)
        self.optimizer_state = _numpy_weights(self.model.optimizer.variables)


@pytest.mark.slow
def test_early_stopping_resumes_its_patience_and_ends_on_the_best_checkpoint(sample_corpus, tmp_path, capsys):
    """The run accumulates two batches per update (--accumulate_steps): its checkpoints fall on
    updates, and the resume after the crash starts from a checkpoint's weights and whole optimizer
    state (empty accumulators). The optimizer's contract: tests/training/test_accumulation.py."""
    from inference import checkpoint_files
    from training.model_building import build_model
    from training.preemption import at_update_boundary
    from training.run_dir import RunDir
    from training.trainer import train

    # A min_delta no gain exceeds: each evaluation after the first counts, so with patience 2 the
    # run stops at the 3rd (step 15) only if the crash at step 10 kept its count (1). Counted
    # afresh, it would stop at step 25.
    config = small_run_config(
        tmp_path / "run",
        sample_corpus,
        train_steps=40,
        checkpoint_every=5,
        eval_every=5,
        keep_checkpoints=1,
        eval_sentences=4,
        eval_beam_size=2,
        early_stopping=2,
        early_stopping_min_delta=1e9,
        accumulate_steps=2,
    )
    run = RunDir(config.model_dir)
    first = _Recorder()
    with pytest.raises(RuntimeError, match="crash at step 10"):
        train(config, callbacks=[first, _Crash(10)])
    assert run.read_best()["evaluations_without_improvement"] == 1
    assert "step 10: dev BLEU" in capsys.readouterr().out
    saved = build_model(config.model, run.load_tokenizer().vocabulary_size, config.train)
    saved.load_weights(checkpoint_files.checkpoint_path(run.checkpoint_dir, 10))
    assert int(keras.ops.convert_to_numpy(saved.optimizer.iterations)) == 10 and at_update_boundary(saved.optimizer)
    assert float(keras.ops.convert_to_numpy(saved.optimizer.accumulated_tokens)) == 0.0

    second, start = _Recorder(), _StateAtStart()
    summary = train(config, callbacks=[second, start])
    printed = capsys.readouterr()
    assert summary["resumed_from"] == 10
    _assert_same(start.weights + start.optimizer_state, _numpy_weights(saved.weights + saved.optimizer.variables))
    record = summary["best"]
    assert summary["stopped_early_at"] == 15 and summary["step"] == 15 and record["stopped_at"] == 15
    assert record["evaluations_without_improvement"] == 2
    assert sorted(second.weights) == [15]
    # The best is the first evaluation with the highest dev BLEU, whose checkpoint the rotation removed.
    bleu_by_step = {row["step"]: row["val_bleu"] for row in _log(config.model_dir)}
    best_bleu = max(bleu_by_step.values())
    assert record["step"] == min(step for step, bleu in bleu_by_step.items() if bleu == best_bleu)
    assert record["score"] == pytest.approx(best_bleu)
    assert [step for step, _ in run.checkpoints()] == [15]
    recorded = {**first.weights, **second.weights}[record["step"]]
    final = keras.saving.load_model(run.model_path, compile=False)
    _assert_same(_numpy_weights(final.weights), recorded[: len(final.weights)])
    message = (
        f"early stopping at step 15: 2 evaluations without an improvement of dev bleu above 1e+09; "
        f"model.keras holds the best checkpoint, of step {record['step']}"
    )
    assert message in printed.err
    assert "sentences (beam 2)" in printed.out

    # Run again, the stopped run trains no further and keeps its model.
    again = train(config)
    assert again["stopped_early_at"] == 15 and again["history"] == {}
    assert "stopped early at step 15 after 2 evaluations without improvement" in capsys.readouterr().err
    _assert_same(
        _numpy_weights(keras.saving.load_model(run.model_path, compile=False).weights), _numpy_weights(final.weights)
    )
    assert [step for step, _ in run.checkpoints()] == [15]


def _log(model_dir):
    import csv

    with open(os.path.join(model_dir, "training_log.csv")) as handle:
        return [
            {"step": int(row["step"]), "val_bleu": float(row["val_bleu"])}
            for row in csv.DictReader(handle)
            if row["val_bleu"]
        ]


def test_options_that_cannot_work_are_refused_before_anything_is_written(tmp_path):
    from training.config import evaluation_refusal
    from training.trainer import TrainingError, train

    base = tiny_run_config(
        tmp_path / "run", str(tmp_path / "cache"), train_steps=40, checkpoint_every=10, eval_every=10
    )
    cases = {
        "ranks dev evaluations by --best_metric=bleu, but --eval_sentences=0": dict(early_stopping=2, eval_sentences=0),
        "--eval_every=40 evaluates only at the end of --train_steps=40": dict(early_stopping=2, eval_every=40),
        "not available with --distribution=multi_worker": dict(early_stopping=2, distribution="multi_worker"),
        "--best_metric=bleu4 is not one of bleu, loss": dict(best_metric="bleu4"),
        "--eval_beam_size=0: the dev BLEU's beam_size must be >= 1": dict(eval_beam_size=0),
        "--eval_no_repeat_ngram_size=-1: the dev BLEU's no_repeat_ngram_size must be >= 0": dict(
            eval_no_repeat_ngram_size=-1
        ),
    }
    for message, changes in cases.items():
        config = dataclasses.replace(base, train=dataclasses.replace(base.train, **changes))
        assert message in evaluation_refusal(config.train)
        with pytest.raises(TrainingError, match=message.replace("(", r"\(")):
            train(config)
        assert not os.path.exists(config.model_dir)
    # Dev loss ranks without dev BLEU; and without early stopping a BLEU-less run simply keeps no best by BLEU.
    assert (
        evaluation_refusal(dataclasses.replace(base.train, early_stopping=2, eval_sentences=0, best_metric="loss"))
        is None
    )
    assert evaluation_refusal(dataclasses.replace(base.train, eval_sentences=0)) is None


def test_train_py_refuses_early_stopping_without_evaluations_and_writes_nothing(tmp_path):
    model_dir = tmp_path / "run"
    for flags, message in [
        (
            ["--early_stopping=3", "--eval_sentences=0"],
            "--early_stopping=3 ranks dev evaluations by --best_metric=bleu",
        ),
        (["--early_stopping=3", "--eval_every=1000", "--train_steps=1000"], "evaluates only at the end"),
        (["--eval_sentences=some"], "--eval_sentences=some must be a number of sentences (0 or more) or all"),
        # "all" passes its own check and meets the next one.
        (["--eval_sentences=all", "--early_stopping=1", "--eval_every=500", "--train_steps=500"], "evaluates only at"),
    ]:
        # In process: train.py's flag checks (how train.py prints a refusal: tests/training/test_train.py).
        refused = train_flags_refusal(model_dir, ["--checkpoint_every=100", *flags])
        assert refused is not None and message in refused, refused
        assert not model_dir.exists()


def test_eval_sentences_all_reads_the_whole_dev_split(tmp_path):
    from training.callbacks import read_pairs

    dev = tmp_path / "dev.tsv"
    dev.write_text("".join(f"en {n}\tde {n}\n" for n in range(7)), encoding="utf-8")
    assert len(read_pairs(str(dev), None)[0]) == 7
    assert read_pairs(str(dev), 2, reverse=True) == (["de 0", "de 1"], ["en 0", "en 1"])
    assert read_pairs(str(dev), 0) == ([], [])
    config = json.loads(
        json.dumps(dataclasses.asdict(tiny_run_config(tmp_path, str(tmp_path), eval_sentences=None).train))
    )
    assert config["eval_sentences"] is None


def test_early_stopping_without_dev_pairs_is_refused_and_leaves_no_run_directory(corpus, tmp_path):
    from data.sources import cleaning
    from training.config import DataConfig
    from training.trainer import TrainingError, train

    pairs = []
    with open(corpus.train[0], encoding="utf-8") as handle:
        for line in handle:
            english, german = line.rstrip("\n").split("\t")
            if cleaning.split_of(english) == "train" and len(pairs) < 40:
                pairs.append(f"{english}\t{german}\n")
    train_tsv = tmp_path / "train.tsv"
    train_tsv.write_text("".join(pairs), encoding="utf-8")
    config = tiny_run_config(
        tmp_path / "run", str(tmp_path / "cache"), train_steps=40, checkpoint_every=10, eval_every=10, early_stopping=2
    )
    data = DataConfig(
        corpus="files", cache_dir=str(tmp_path / "cache"), languages="en-de", train_files=(str(train_tsv),)
    )
    with pytest.raises(TrainingError, match="has no dev pairs.*Pass --dev_tsv or --dev_src/--dev_tgt"):
        train(dataclasses.replace(config, data=data))
    assert not os.path.exists(config.model_dir)


def test_a_run_without_dev_bleu_has_no_best_by_bleu_and_the_refusal_says_why(tmp_path):
    from inference.runs import ModelDirError
    from training import config as run_config
    from training.run_dir import RunDir

    config = tiny_run_config(tmp_path / "run", str(tmp_path / "cache"), eval_sentences=0)
    run = RunDir(config.model_dir)
    os.makedirs(run.checkpoint_dir)
    run_config.write(config)
    (tmp_path / "run" / "spm.model").write_bytes(b"")
    keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)]).save_weights(
        os.path.join(run.checkpoint_dir, "ckpt-000000200.weights.h5")
    )
    with pytest.raises(
        ModelDirError, match=r"decodes no dev sentence, --eval_sentences=0\)\. It has: last \(step 200\)"
    ):
        run.check_loadable("best")


def test_dev_bleu_scores_with_the_target_languages_tokenizer(capsys):
    """Dev BLEU during training scores as evaluate.py does: Chinese with sacreBLEU's zh tokenizer,
    under which a near match scores above zero (13a sees each sentence as one word)."""
    from common.bleu_tokenizers import bleu_tokenizer
    from models.search_config import SearchConfig
    from training.callbacks import DevBleu

    class FixedTranslator:
        search = SearchConfig(beam_size=1)

        def translate(self, sources, split_sentences=True):
            assert not split_sentences  # dev pairs are scored whole, as the corpus aligned them
            return ["我喜欢猫。"] * len(sources), None

    scores = {}
    for tokenize in ("13a", bleu_tokenizer("zh_cn")):
        callback = DevBleu(lambda model: FixedTranslator(), ["I like dogs."], ["我喜欢狗。"], 1, tokenize=tokenize)
        callback.set_model(_scripted_model())
        callback.params = {"epochs": 1}
        callback.on_train_begin()
        logs = {}
        callback.on_epoch_end(0, logs)
        scores[tokenize] = logs["val_bleu"]
    assert scores["13a"] == 0.0 and scores["zh"] > 10
