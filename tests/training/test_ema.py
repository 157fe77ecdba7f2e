"""train.py --ema_decay: the exponential moving average of the weights (training/optimizers.py), written
with each checkpoint (training/checkpoints.py), restored exactly on resume (training/trainer.py), and
loaded by the tools' --checkpoint=ema (inference/runs.py). A training run's checks: `assert_ema_run`
(tests/training/helpers.py), which tests/training/test_train.py's steps_per_execution test calls on
its run with --ema_decay."""

import json
import os

import keras
import numpy as np
import pytest

from inference import checkpoint_files
from inference.runs import CheckpointChoice, ModelDirError, parse_checkpoint
from models.learning_rate_schedule import transformer_optimizer
from models.losses import LabelSmoothedCrossEntropy
from models.transformer import Transformer
from tests.helpers import small_run_config, train_flags_refusal
from tests.training.helpers import (
    EMA_DECAY,
    assert_close,
    assert_equal,
    averages,
    closed_form,
    file_weights,
    numpy_values,
)
from training import checkpoints
from training.config import TrainConfig, ema_refusal
from training.optimizers import FusedAdam, batch_tokens
from training.run_dir import RunDir
from training.trainer import TrainingError, train


@pytest.mark.parametrize("accumulate_steps", [1, 2])
def test_the_average_follows_the_updates_not_the_batches(accumulate_steps):
    variable = keras.Variable(np.array([1.0, -2.0, 3.0], "float32"))
    optimizer = FusedAdam(learning_rate=0.1, use_ema=True, ema_momentum=0.9, accumulate_steps=accumulate_steps)
    optimizer.build([variable])
    trajectory = []
    for batch in range(6):
        with batch_tokens(3.0 + batch):
            optimizer.apply([np.array([0.5, -1.0, batch], "float32")], [variable])
        if (batch + 1) % accumulate_steps == 0:
            trajectory.append(numpy_values([variable]))
    assert int(keras.ops.convert_to_numpy(optimizer.iterations)) == len(trajectory) == 6 // accumulate_steps
    assert_close(averages(optimizer), closed_form(trajectory, 0.9))
    optimizer.finalize_variable_values([variable])  # What fit calls at its end: the live weights stay.
    assert_equal(numpy_values([variable]), trajectory[-1])


SMALL = dict(num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16, dropout=0.0)


def _small_model():
    model = Transformer(20, **SMALL)
    model.build()
    optimizer = transformer_optimizer(8, 10, optimizer_class=FusedAdam, use_ema=True, ema_momentum=EMA_DECAY)
    model.compile(optimizer=optimizer, loss=LabelSmoothedCrossEntropy())
    model.optimizer.build(model.trainable_variables)
    return model


def test_a_checkpoint_holds_the_average_and_a_restored_one_continues_it_exactly(tmp_path):
    directory = str(tmp_path)
    ids = np.random.default_rng(0).integers(4, 20, size=(3, 2, 5)).astype("int32")
    model, trajectory = _small_model(), []
    for batch in ids[:2]:
        model.train_on_batch((batch, batch), batch)
        trajectory.append(numpy_values(model.trainable_variables))
    checkpoints.save_checkpoint(model, directory, 2, keep=1)
    assert sorted(os.listdir(directory)) == ["ckpt-000000002.weights.h5", "ema-000000002.weights.h5"]
    written = file_weights(checkpoint_files.ema_path(directory, 2), 20, SMALL)
    assert_close(written, closed_form(trajectory, EMA_DECAY))
    assert_equal(written, averages(model.optimizer))
    assert_equal(numpy_values(model.trainable_variables), trajectory[-1])  # The live weights given back.

    # The uninterrupted run's third update, then the same update resumed from the checkpoint.
    model.train_on_batch((ids[2], ids[2]), ids[2])
    uninterrupted = averages(model.optimizer)
    assert_close(uninterrupted, closed_form([numpy_values(model.trainable_variables)], EMA_DECAY, start=written))
    model.load_weights(checkpoint_files.checkpoint_path(directory, 2))
    assert_equal(averages(model.optimizer), written)
    model.train_on_batch((ids[2], ids[2]), ids[2])
    assert_equal(averages(model.optimizer), uninterrupted)
    checkpoints.save_checkpoint(model, directory, 3, keep=1)
    assert sorted(os.listdir(directory)) == ["ckpt-000000003.weights.h5", "ema-000000003.weights.h5"]
    assert checkpoint_files.latest_ema(directory) == (3, checkpoint_files.ema_path(directory, 3))


def _fake_run(path, ema_decay):
    """A run directory as the refusals see it: config.json, spm.model and a checkpoint's name."""
    os.makedirs(os.path.join(path, "checkpoints"))
    with open(os.path.join(path, "config.json"), "w") as handle:
        json.dump({"model": {}, "train": {"mixed_precision": "none", "ema_decay": ema_decay}}, handle)
    for name in ("spm.model", "checkpoints/ckpt-000000010.weights.h5"):
        open(os.path.join(path, name), "w").close()
    return RunDir(str(path))


def test_bad_decays_and_choices_are_refused(sample_corpus, tmp_path):
    for decay in (0.0, 1.0, -0.5, 1.5, float("nan")):
        assert "--ema_decay" in ema_refusal(TrainConfig(ema_decay=decay))
    assert ema_refusal(TrainConfig()) is None and ema_refusal(TrainConfig(ema_decay=0.9999)) is None
    with pytest.raises(TrainingError, match=r"--ema_decay=1.0 must lie strictly between 0 and 1"):
        train(small_run_config(tmp_path / "one", sample_corpus, ema_decay=1.0))
    assert not os.path.exists(tmp_path / "one")
    # train.py's flag check, in this process (how train.py prints a refusal: tests/training/test_train.py).
    refused = train_flags_refusal(tmp_path / "flag", ["--ema_decay=0"])
    assert refused is not None and "--ema_decay=0.0 must lie strictly between 0 and 1" in refused, refused
    assert not os.path.exists(tmp_path / "flag")
    assert parse_checkpoint(" ema ") == CheckpointChoice("ema")
    with pytest.raises(ModelDirError, match="expected best, last, ema or average:N"):
        parse_checkpoint("ema:2")
    plain = _fake_run(tmp_path / "plain", None)
    with pytest.raises(ModelDirError, match=f"--checkpoint=ema: {plain.path} has no moving average of the weights"):
        plain.check_loadable("ema")


def test_a_resume_that_adds_or_drops_the_average_is_refused(tmp_path):
    plain, averaged = _fake_run(tmp_path / "plain", None), _fake_run(tmp_path / "averaged", 0.999)
    with pytest.raises(ModelDirError, match="was trained without --ema_decay; it cannot resume with --ema_decay=0.9"):
        plain.prepare(False, "none", ema_decay=0.9)
    with pytest.raises(ModelDirError, match="trained with --ema_decay=0.999; it cannot resume without --ema_decay"):
        averaged.prepare(False, "none")
    averaged.prepare(False, "none", ema_decay=0.99)  # Another decay goes on from the same averages.
    plain.prepare(False, "none")
