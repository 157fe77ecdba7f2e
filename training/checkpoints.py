"""Checkpoints that survive a kill: written aside and renamed, the last N kept, resumed from.

A checkpoint is `ckpt-<step>.weights.h5` (model and optimizer variables, Keras's weights format).
Each is written to a temporary file in the same directory, flushed, and renamed into place, so a
process killed mid-write leaves the previous checkpoints untouched and at worst a stray temporary
file, which is ignored and cleaned up. `latest_checkpoint` returns the newest one that opens.
"""

import glob
import os
import re
import tempfile

import h5py
import keras
import numpy as np

_CHECKPOINT = re.compile(r"^ckpt-(\d+)\.weights\.h5$")


def checkpoint_path(directory, step):
    return os.path.join(directory, f"ckpt-{step:09d}.weights.h5")


def list_checkpoints(directory):
    """`[(step, path)]` of the complete checkpoints in `directory`, oldest first."""
    found = []
    for path in glob.glob(os.path.join(directory, "ckpt-*.weights.h5")):
        match = _CHECKPOINT.match(os.path.basename(path))
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


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


def default_mode(directory=False):
    """The mode `open`/`os.makedirs` would give a new file (directory): 0o666 (0o777) less the umask.
    `tempfile`'s 0o600/0o700 would keep a model from a server or colleague running as another user."""
    umask = os.umask(0o077)  # Reading the umask sets it: put it back at once.
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def write_atomically(path, write):
    """Calls `write(temporary_path)`, then renames the file to `path` (same filesystem), with the
    mode a plain `open` would have given it."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    suffix = "".join(os.path.basename(path).partition(".")[1:])  # Keras checks the extension.
    handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
    os.close(handle)
    try:
        write(temporary)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.chmod(temporary, default_mode())
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise


def save_checkpoint(model, directory, step, keep):
    """Writes `ckpt-<step>` atomically and deletes all but the newest `keep` checkpoints."""
    path = checkpoint_path(directory, step)
    write_atomically(path, lambda temporary: model.save_weights(temporary))
    for _, old in list_checkpoints(directory)[:-keep]:
        os.remove(old)
    for stray in glob.glob(os.path.join(directory, ".tmp-*")):
        os.remove(stray)
    return path


def average_checkpoints(model, paths):
    """Sets `model`'s weights to the element-wise mean of the checkpoints at `paths` (section 6.1
    averages the last 5 checkpoints of base models and the last 20 of big ones).

    Only the model's variables are averaged (the optimizer's are not read). Returns the model.
    """
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


def newest_checkpoints(directory, count):
    """`[(step, path)]` of the newest `count` checkpoints in `directory`, oldest first: the
    checkpoints an average of the last `count` uses.

    Raises:
        ValueError: `directory` holds fewer than `count` checkpoints (the message names them), so
            that an average is never taken silently over fewer than asked for.
    """
    found = list_checkpoints(directory)
    if not found:
        raise ValueError(f"{directory} holds no ckpt-*.weights.h5 to average")
    if len(found) < count:
        raise ValueError(
            f"{count} checkpoints asked for, but {directory} holds only {len(found)}: "
            f"{[os.path.basename(path) for _, path in found]}"
        )
    return found[-count:]
