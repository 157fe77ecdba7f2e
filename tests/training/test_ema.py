"""train.py --ema_decay: the exponential moving average of the weights (training/optimizers.py), written
with each checkpoint (training/checkpoints.py), restored exactly on resume (training/trainer.py), and
loaded by the tools' --checkpoint=ema (inference/runs.py). A training run's checks: `assert_ema_run`, which
tests/training/test_train.py's steps_per_execution test calls on its run with --ema_decay."""

import json
import os

import keras
import numpy as np
import pytest

from common import compat
from inference import checkpoint_files
from inference.runs import CheckpointChoice, ModelDirError, parse_checkpoint
from models.learning_rate_schedule import transformer_optimizer
from models.losses import LabelSmoothedCrossEntropy
from models.transformer import Transformer
from tests.helpers import small_run_config, train_flags_refusal
from training import checkpoints
from training.config import TrainConfig, ema_refusal
from training.model_building import build_model
from training.optimizers import FusedAdam, batch_tokens
from training.run_dir import RunDir
from training.trainer import TrainingError, train

# Far from 1, so that a few updates leave the average visibly apart from the weights.
DECAY = 0.5


def _numpy(variables):
    return [np.copy(keras.ops.convert_to_numpy(variable)) for variable in variables]


def _averages(optimizer):
    return _numpy(average for _, average in compat.moving_averages(optimizer))


def _closed_form(trajectory, decay, start=None):
    """The moving average after the updates that left the weights `trajectory`, in float32 as the
    optimizer computes it: the first update's weights (or the average `start`), then
    decay * average + (1 - decay) * weights after each update."""
    decay = np.float32(decay)
    average = start
    for weights in trajectory:
        if average is None:
            average = weights
        else:
            average = [decay * a + (np.float32(1) - decay) * w for a, w in zip(average, weights)]
    return average


def _assert_close(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def _assert_equal(actual, expected):
    assert len(actual) == len(expected)
    assert all(np.array_equal(a, e) for a, e in zip(actual, expected))


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
            trajectory.append(_numpy([variable]))
    assert int(keras.ops.convert_to_numpy(optimizer.iterations)) == len(trajectory) == 6 // accumulate_steps
    _assert_close(_averages(optimizer), _closed_form(trajectory, 0.9))
    optimizer.finalize_variable_values([variable])  # What fit calls at its end: the live weights stay.
    _assert_equal(_numpy([variable]), trajectory[-1])


class EmaWatch(keras.callbacks.Callback):
    """The trainable weights after each update (one batch each), and the optimizer's averages and
    the weights at each epoch's end (after its checkpoint), by step."""

    def __init__(self):
        super().__init__()
        self.trajectory, self.averages, self.weights = [], {}, {}

    def on_train_batch_end(self, batch, logs=None):
        self.trajectory.append(_numpy(self.model.trainable_variables))

    def on_epoch_end(self, epoch, logs=None):
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self.averages[step] = _averages(self.model.optimizer)
        self.weights[step] = _numpy(self.model.trainable_variables)


def _file_weights(path, vocabulary_size, model_config):
    """The trainable weights a weights file gives a plain model (as the tools build one)."""
    model = Transformer(vocabulary_size, **model_config)
    model.build()
    model.load_weights(path)
    return _numpy(model.trainable_variables)


SMALL = dict(num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16, dropout=0.0)


def _small_model():
    model = Transformer(20, **SMALL)
    model.build()
    optimizer = transformer_optimizer(8, 10, optimizer_class=FusedAdam, use_ema=True, ema_momentum=DECAY)
    model.compile(optimizer=optimizer, loss=LabelSmoothedCrossEntropy())
    model.optimizer.build(model.trainable_variables)
    return model


def test_a_checkpoint_holds_the_average_and_a_restored_one_continues_it_exactly(tmp_path):
    directory = str(tmp_path)
    ids = np.random.default_rng(0).integers(4, 20, size=(3, 2, 5)).astype("int32")
    model, trajectory = _small_model(), []
    for batch in ids[:2]:
        model.train_on_batch((batch, batch), batch)
        trajectory.append(_numpy(model.trainable_variables))
    checkpoints.save_checkpoint(model, directory, 2, keep=1)
    assert sorted(os.listdir(directory)) == ["ckpt-000000002.weights.h5", "ema-000000002.weights.h5"]
    written = _file_weights(checkpoint_files.ema_path(directory, 2), 20, SMALL)
    _assert_close(written, _closed_form(trajectory, DECAY))
    _assert_equal(written, _averages(model.optimizer))
    _assert_equal(_numpy(model.trainable_variables), trajectory[-1])  # The live weights given back.

    # The uninterrupted run's third update, then the same update resumed from the checkpoint.
    model.train_on_batch((ids[2], ids[2]), ids[2])
    uninterrupted = _averages(model.optimizer)
    _assert_close(uninterrupted, _closed_form([_numpy(model.trainable_variables)], DECAY, start=written))
    model.load_weights(checkpoint_files.checkpoint_path(directory, 2))
    _assert_equal(_averages(model.optimizer), written)
    model.train_on_batch((ids[2], ids[2]), ids[2])
    _assert_equal(_averages(model.optimizer), uninterrupted)
    checkpoints.save_checkpoint(model, directory, 3, keep=1)
    assert sorted(os.listdir(directory)) == ["ckpt-000000003.weights.h5", "ema-000000003.weights.h5"]
    assert checkpoint_files.latest_ema(directory) == (3, checkpoint_files.ema_path(directory, 3))


def assert_ema_run(config, watch, summary):
    """The checks of a finished run of `config` (--ema_decay=DECAY, keep_checkpoints above 1) that
    `watch` (an EmaWatch, updates of one batch) saw: the average written with the newest checkpoint
    and loaded by --checkpoint=ema, the live weights in model.keras, and the averages a resume from
    the checkpoint before restores. tests/training/test_train.py's steps_per_execution run has
    --ema_decay: it calls this."""
    run = RunDir(config.model_dir)
    (earlier, _), (last, _) = run.checkpoints()[-2:]
    path = checkpoint_files.ema_path(run.checkpoint_dir, last)
    assert [name for name in os.listdir(run.checkpoint_dir) if name.startswith("ema-")] == [os.path.basename(path)]
    vocabulary_size = run.load_tokenizer().vocabulary_size
    written = _file_weights(path, vocabulary_size, config.model)
    assert len(watch.trajectory) == last
    _assert_close(written, _closed_form(watch.trajectory, DECAY))
    _assert_equal(written, watch.averages[last])
    assert max(np.max(np.abs(a - w)) for a, w in zip(written, watch.trajectory[-1])) > 1e-4
    # model.keras holds the live weights: Keras's swap of the averages at the end of fit is off.
    final = keras.saving.load_model(summary["model_path"], compile=False)
    _assert_equal(_numpy(final.trainable_variables), watch.trajectory[-1])
    # What a resume from the earlier checkpoint restores (trainer._model): its averages, bit for bit.
    resumed = build_model(config.model, vocabulary_size, config.train)
    resumed.load_weights(checkpoint_files.checkpoint_path(run.checkpoint_dir, earlier))
    _assert_equal(_averages(resumed.optimizer), watch.averages[earlier])
    # --checkpoint=ema loads the newest average.
    model, _, _ = run.load_model("ema", quiet=True)
    _assert_equal(_numpy(model.trainable_variables), written)
    chosen = run.check_loadable("ema")
    assert chosen.paths == (path,) and chosen.describe() == f"the moving average of the weights, of step {last}"
    assert f"ema (step {last})" in run.available()


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
