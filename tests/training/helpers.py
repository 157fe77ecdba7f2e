"""Helpers shared by the tests of tests/training: the checks of a training run with --ema_decay
(`EmaWatch`, `assert_ema_run`; tests/training/test_ema.py's own tests use the same pieces, and
tests/training/test_train.py's steps_per_execution run calls them on its run)."""

import os

import keras
import numpy as np

from common import compat
from inference import checkpoint_files
from models.transformer import Transformer
from training.model_building import build_model
from training.run_dir import RunDir

# Far from 1, so that a few updates leave the average visibly apart from the weights.
EMA_DECAY = 0.5


def numpy_values(variables):
    return [np.copy(keras.ops.convert_to_numpy(variable)) for variable in variables]


def averages(optimizer):
    """The optimizer's moving averages of the weights, as NumPy arrays."""
    return numpy_values(average for _, average in compat.moving_averages(optimizer))


def closed_form(trajectory, decay, start=None):
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


def assert_close(actual, expected):
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def assert_equal(actual, expected):
    assert len(actual) == len(expected)
    assert all(np.array_equal(a, e) for a, e in zip(actual, expected))


def file_weights(path, vocabulary_size, model_config):
    """The trainable weights a weights file gives a plain model (as the tools build one)."""
    model = Transformer(vocabulary_size, **model_config)
    model.build()
    model.load_weights(path)
    return numpy_values(model.trainable_variables)


class EmaWatch(keras.callbacks.Callback):
    """The trainable weights after each update (one batch each), and the optimizer's averages and
    the weights at each epoch's end (after its checkpoint), by step."""

    def __init__(self):
        super().__init__()
        self.trajectory, self.averages, self.weights = [], {}, {}

    def on_train_batch_end(self, batch, logs=None):
        self.trajectory.append(numpy_values(self.model.trainable_variables))

    def on_epoch_end(self, epoch, logs=None):
        step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))
        self.averages[step] = averages(self.model.optimizer)
        self.weights[step] = numpy_values(self.model.trainable_variables)


def assert_ema_run(config, watch, summary):
    """The checks of a finished run of `config` (--ema_decay=EMA_DECAY, keep_checkpoints above 1)
    that `watch` (an EmaWatch, updates of one batch) saw: the average written with the newest
    checkpoint and loaded by --checkpoint=ema, the live weights in model.keras, and the averages a
    resume from the checkpoint before restores."""
    run = RunDir(config.model_dir)
    (earlier, _), (last, _) = run.checkpoints()[-2:]
    path = checkpoint_files.ema_path(run.checkpoint_dir, last)
    assert [name for name in os.listdir(run.checkpoint_dir) if name.startswith("ema-")] == [os.path.basename(path)]
    vocabulary_size = run.load_tokenizer().vocabulary_size
    written = file_weights(path, vocabulary_size, config.model)
    assert len(watch.trajectory) == last
    assert_close(written, closed_form(watch.trajectory, EMA_DECAY))
    assert_equal(written, watch.averages[last])
    assert max(np.max(np.abs(a - w)) for a, w in zip(written, watch.trajectory[-1])) > 1e-4
    # model.keras holds the live weights: Keras's swap of the averages at the end of fit is off.
    final = keras.saving.load_model(summary["model_path"], compile=False)
    assert_equal(numpy_values(final.trainable_variables), watch.trajectory[-1])
    # What a resume from the earlier checkpoint restores (trainer._model): its averages, bit for bit.
    resumed = build_model(config.model, vocabulary_size, config.train)
    resumed.load_weights(checkpoint_files.checkpoint_path(run.checkpoint_dir, earlier))
    assert_equal(averages(resumed.optimizer), watch.averages[earlier])
    # --checkpoint=ema loads the newest average.
    model, _, _ = run.load_model("ema", quiet=True)
    assert_equal(numpy_values(model.trainable_variables), written)
    chosen = run.check_loadable("ema")
    assert chosen.paths == (path,) and chosen.describe() == f"the moving average of the weights, of step {last}"
    assert f"ema (step {last})" in run.available()
