"""training/callbacks.py's plain progress lines, from a real (tiny) `model.fit`. The other callbacks:
test_best_checkpoint.py, test_train.py, test_checkpoints.py."""

import io
import re

import keras
import numpy as np

from common.progress import Interval
from training.callbacks import PlainProgress


class _DevBleu(keras.callbacks.Callback):
    """Puts a dev BLEU into the second epoch's logs, as `DevBleu` does on its evaluations."""

    def on_epoch_end(self, epoch, logs=None):
        if epoch == 1:
            logs["val_bleu"] = 12.345


def test_plain_progress_writes_a_line_every_n_steps_and_one_per_epoch_with_the_dev_bleu():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    x, y = np.ones((12, 3), "float32"), np.zeros((12, 1), "float32")
    stream = io.StringIO()
    progress = PlainProgress(total_steps=6, interval=Interval(steps=2), stream=stream)
    model.fit(x, y, batch_size=4, epochs=2, verbose=0, callbacks=[_DevBleu(), progress])
    lines = stream.getvalue().splitlines()
    step = r"loss \d+\.\d{4}, lr 0\.001, \d+\.\d\d steps/s"
    assert [re.sub(r"\d+\.\d+", "X", line) for line in lines] == [
        "step 2/6: loss X, lr X, X steps/s",
        "epoch 1/2, step 3/6: loss X, X steps/s",
        "step 5/6: loss X, lr X, X steps/s",
        "epoch 2/2, step 6/6: loss X, X steps/s; dev BLEU X",
    ], lines
    assert re.fullmatch(f"step 2/6: {step}", lines[0])
    assert lines[-1].endswith("; dev BLEU 12.35")
    assert not any(control in stream.getvalue() for control in ("\r", "\b", "\x1b"))


def test_plain_progress_every_zero_writes_the_epoch_ends_only():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    stream = io.StringIO()
    progress = PlainProgress(total_steps=6, interval=Interval(), stream=stream)
    model.fit(np.ones((12, 3)), np.zeros((12, 1)), batch_size=4, epochs=2, verbose=0, callbacks=[progress])
    assert [line.split(":")[0] for line in stream.getvalue().splitlines()] == [
        "epoch 1/2, step 3/6",
        "epoch 2/2, step 6/6",
    ]
