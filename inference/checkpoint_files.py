"""The weights files in a run's checkpoints/ (`ckpt-<step>.weights.h5`, `ema-<step>.weights.h5`,
written by `training.checkpoints`): their names, the newest that opens (a file a kill cut short does
not), and their average.
"""

import glob
import os
import re

import h5py
import keras
import numpy as np

_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.weights\.h5$")
_EMA = re.compile(r"^ema-(\d+)\.weights\.h5$")


def checkpoint_path(directory, step):
    return os.path.join(directory, f"ckpt-{step:09d}.weights.h5")


def ema_path(directory, step):
    return os.path.join(directory, f"ema-{step:09d}.weights.h5")


def _list(directory, pattern):
    found = []
    for path in glob.glob(os.path.join(directory, "*.weights.h5")):
        match = pattern.match(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def list_checkpoints(directory):
    """`[(step, path)]` of the complete checkpoints in `directory`, oldest first."""
    return _list(directory, _CHECKPOINT)


def list_emas(directory):
    """`[(step, path)]` of the moving-average weights files in `directory`, oldest first."""
    return _list(directory, _EMA)


def _readable(path):
    try:
        with h5py.File(path, "r") as handle:
            return "vars" in handle or len(handle.keys()) > 0
    except OSError:
        return False


def latest_checkpoint(directory):
    """`(step, path)` of the newest checkpoint that opens, or None."""
    for step, path in reversed(list_checkpoints(directory)):
        if _readable(path):
            return step, path
    return None


def latest_ema(directory):
    """`(step, path)` of the newest moving-average weights file that opens, or None."""
    for step, path in reversed(_list(directory, _EMA)):
        if _readable(path):
            return step, path
    return None


def average_checkpoints(model, paths):
    """Sets `model`'s weights (not the optimizer's) to the mean of the checkpoints at `paths`
    (section 6.1); returns the model."""
    if not paths:
        raise ValueError("average_checkpoints needs at least one checkpoint path, received none")
    sums = None
    for path in paths:
        model.load_weights(path, skip_mismatch=False)
        values = [np.asarray(keras.ops.convert_to_numpy(weight), dtype="float64") for weight in model.weights]
        sums = values if sums is None else [total + value for total, value in zip(sums, values)]
    for weight, total in zip(model.weights, sums):
        weight.assign((total / len(paths)).astype(keras.backend.standardize_dtype(weight.dtype)))
    return model
