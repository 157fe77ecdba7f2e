"""Checkpoints that survive a kill: `ckpt-<step>.weights.h5` (model and optimizer variables)
written to a temporary file and renamed, the newest N kept; with `--ema_decay`, also
`ema-<step>.weights.h5` (the averages as the model's weights), the newest only.
`inference.checkpoint_files` names them and finds the newest that opens.
"""

import contextlib
import errno
import glob
import os
import resource
import shutil
import sys
import tempfile

import keras
import numpy as np

from common import compat
from common.write_errors import WriteError, default_mode
from inference.checkpoint_files import checkpoint_path, ema_path, list_checkpoints, list_emas

# The OSErrors of failed writes, kept alive on purpose: a Keras/h5py weights file whose write failed
# holds HDF5 objects that crash the interpreter (a segmentation fault) when they are freed. While
# they are referenced here they never are; a process that has one ends with `os._exit`
# (`exit_after_failed_write`), skipping the final garbage collection.
_FAILED_WRITES = []


def exit_after_failed_write(status):
    """Ends the process with `status` without the interpreter's clean-up if a write failed
    (see `_FAILED_WRITES`); returns otherwise. Flushes stdout and stderr first."""
    if not _FAILED_WRITES:
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(status)


def write_atomically(path, write):
    """Calls `write(temporary_path)`, then renames it to `path` with a plain `open`'s mode.

    Raises:
        WriteError: the write failed with an OSError; `path` keeps what it had.
    """
    directory = os.path.dirname(os.path.abspath(path))
    temporary = None
    try:
        if not os.path.isdir(directory):
            # Only the last component: a run directory removed under a running train.py is not
            # silently recreated as an empty one (the write fails with ENOENT instead).
            os.mkdir(directory)
        suffix = "".join(os.path.basename(path).partition(".")[1:])  # Keras checks the extension.
        handle, temporary = tempfile.mkstemp(prefix=".tmp-", suffix=suffix, dir=directory)
        os.close(handle)
        with _h5py_write_errors_reported_once():
            write(temporary)
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.chmod(temporary, default_mode())
        os.replace(temporary, path)
    except OSError as error:
        _FAILED_WRITES.append(error)
        _remove_quietly(temporary)
        raise WriteError(path, error) from None
    except BaseException:
        _remove_quietly(temporary)
        raise


@contextlib.contextmanager
def _h5py_write_errors_reported_once():
    """Drops h5py's "Exception ignored in ObjectID.__dealloc__" reports within the block (one per
    object freed while a failed write unwinds): `WriteError` names the failure once."""
    previous = sys.unraisablehook

    def hook(unraisable):
        if "h5py" not in repr(getattr(unraisable, "object", "")) and "ref count" not in str(unraisable.exc_value):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
    finally:
        sys.unraisablehook = previous


def _remove_quietly(path):
    if path is not None and os.path.exists(path):
        try:
            os.remove(path)
        except OSError:
            pass


def expected_bytes(model, directory):
    """The size a new checkpoint (or `model.keras`) will have: the newest checkpoint's, or (before
    the first) the variables' bytes with room for HDF5's per-dataset overhead."""
    found = list_checkpoints(directory)
    if found:
        try:
            return os.path.getsize(found[-1][1])
        except OSError:
            pass
    variables = list(model.weights) + list(getattr(model.optimizer, "variables", []) or [])
    return int(
        1.1 * sum(np.prod(v.shape) * np.dtype(keras.backend.standardize_dtype(v.dtype)).itemsize for v in variables)
    )


def check_room(path, size):
    """Raises WriteError (ENOSPC or EFBIG) when `size` bytes cannot be written to `path` (free
    space, RLIMIT_FSIZE): a failure inside h5py leaves objects that crash the interpreter when freed."""

    directory = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(directory) and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)  # The first checkpoint creates its directory.
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return
    if size > free:
        raise WriteError(path, OSError(errno.ENOSPC, "disk full"), f"{size:,} bytes needed, {free:,} free")
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and size > limit:
        raise WriteError(
            path, OSError(errno.EFBIG, "file too large"), f"{size:,} bytes needed, the file-size limit is {limit:,}"
        )


def save_checkpoint(model, directory, step, keep):
    """Writes `ckpt-<step>` atomically and deletes all but the newest `keep` checkpoints; with a
    moving average of the weights, then writes `ema-<step>` and deletes the older one."""
    path = checkpoint_path(directory, step)
    size = expected_bytes(model, directory)
    check_room(path, size)
    write_atomically(path, lambda temporary: model.save_weights(temporary))
    averages = compat.moving_averages(model.optimizer)
    if averages:
        _save_averages(model, averages, ema_path(directory, step), size)
    for _, old in list_checkpoints(directory)[:-keep]:
        os.remove(old)
    for stray in glob.glob(os.path.join(directory, ".tmp-*")):
        os.remove(stray)
    return path


def _save_averages(model, averages, path, size):
    """Writes `model`'s weights with the `averages` (`[(variable, average)]`) in place, atomically,
    then deletes older average files; the variables get their values back however the write ends."""
    check_room(path, size)
    live = [np.copy(keras.ops.convert_to_numpy(variable)) for variable, _ in averages]
    try:
        for variable, average in averages:
            variable.assign(keras.ops.convert_to_numpy(average))
        write_atomically(path, lambda temporary: model.save_weights(temporary))
    finally:
        for (variable, _), value in zip(averages, live):
            variable.assign(value)
    for _, old in list_emas(os.path.dirname(path)):
        if old != path:
            os.remove(old)
