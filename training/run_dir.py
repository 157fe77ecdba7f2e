"""The model_dir as train.py writes it: `inference.runs.RunDir` with the writing added (preparing
and clearing it, its lock, the best checkpoint's record).
"""

import fcntl
import json
import os
import shutil
import socket
import sys
import time

from inference import runs
from inference.runs import (
    CHECKPOINT_DIR,
    CONFIG_FILE,
    LOCK_FILE,
    LOG_DIR,
    MODEL_FILE,
    SOURCE_VOCABULARY_FILE,
    TRAINING_LOG,
    VOCABULARY_FILE,
    WORKERS_DIR,
    ModelDirError,
)

# Everything train.py writes, in the order --start_over deletes it.
RUN_ENTRIES = (
    CHECKPOINT_DIR,
    LOG_DIR,
    WORKERS_DIR,
    MODEL_FILE,
    VOCABULARY_FILE,
    SOURCE_VOCABULARY_FILE,
    TRAINING_LOG,
    CONFIG_FILE,
)


class RunDir(runs.RunDir):
    """A training run's directory as train.py writes it."""

    def worker(self, index):
        """The run directory of worker `index` (not the chief) of a multi-worker run."""
        return RunDir(os.path.join(self.path, WORKERS_DIR, str(index)))

    def lock(self):
        """Takes the exclusive right to train into this directory; returns the open lock file.

        A `flock` on `.train.lock`, held until the file is closed or the process ends however it
        ends, so a killed run leaves no stale lock; the file records the holder's pid and host.

        Raises:
            ModelDirError: another process holds the lock (names its pid and host).
        """

        os.makedirs(self.path, exist_ok=True)
        handle = open(self.file(LOCK_FILE), "a+", encoding="utf-8")  # noqa: SIM115 (the caller closes it)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "a process that recorded no pid"
            handle.close()
            raise ModelDirError(
                f"{self.path} is being trained by another train.py ({holder}); one run writes a directory at a "
                "time: wait for it to end, stop it, or train into another --model_dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        started = time.strftime("%Y-%m-%d %H:%M:%S")
        handle.write(f"pid {os.getpid()} on host {socket.gethostname()}, since {started}\n")
        handle.flush()
        return handle

    def remove_if_unused(self):
        """Removes the directory if it holds nothing but the lock file: what a train.py refused
        before it wrote anything leaves of a directory it created."""
        try:
            if os.listdir(self.path) == [LOCK_FILE]:
                os.remove(self.file(LOCK_FILE))
                os.rmdir(self.path)
        except OSError:
            pass

    def write_best(self, record, write_weights=None):
        """Writes `write_weights(path)` (when given), then the best record, each atomically: a kill
        leaves the previous pair, or the new weights with the previous record."""
        # Loads Keras: the tools import this module before their flag checks.
        from training import checkpoints

        if write_weights is not None:
            checkpoints.write_atomically(self.best_weights_path, write_weights)

        def write_record(temporary):
            with open(temporary, "w", encoding="utf-8") as handle:
                json.dump(record, handle, indent=2, sort_keys=True)
                handle.write("\n")

        checkpoints.write_atomically(self.best_record_path, write_record)

    def has_trained(self):
        """Whether a checkpoint or the final model exists: a config.json binds only then."""
        return bool(self.checkpoints()) or os.path.exists(self.model_path)

    def remove(self, entries=RUN_ENTRIES):
        """Deletes the named entries (train.py's files and directories) that exist."""
        for name in entries:
            path = self.file(name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)

    def prepare(self, start_over, mixed_precision, ema_decay=None):
        """Clears the directory for `--start_over` (only train.py's files, only in a train.py run),
        or the leftovers of a start that never trained (a config.json without checkpoint or model
        binds nothing), and refuses a resume the run's state cannot support.

        Raises:
            ModelDirError: `--start_over` on a directory that is not a train.py run, or a resume
                whose optimizer state differs (fp16 loss scaling added or dropped by
                `mixed_precision`, a moving average `ema_decay` added or dropped).
        """
        has_config = os.path.exists(self.config_path)
        if start_over:
            if not has_config:
                # Names a user's own files may have; train.py's own leftovers (spm.model, workers/)
                # are replaced as a fresh start replaces them.
                present = [name for name in (CHECKPOINT_DIR, LOG_DIR, MODEL_FILE) if os.path.exists(self.file(name))]
                if present:
                    raise ModelDirError(
                        f"--start_over: {self.path} holds no {CONFIG_FILE}, so it is not a train.py run; "
                        f"not deleting its {', '.join(present)}"
                    )
                return
            self.remove()
            return
        if not has_config:
            return
        if not self.has_trained():
            print(f"{self.path}: no checkpoint from the earlier start; starting afresh", file=sys.stderr)
            self.remove((VOCABULARY_FILE, SOURCE_VOCABULARY_FILE, TRAINING_LOG, LOG_DIR, CONFIG_FILE))
            return
        self._check_resumable(mixed_precision, ema_decay)

    def _check_resumable(self, mixed_precision, ema_decay):
        """`prepare`'s refusals of a resume whose optimizer state differs from the run's."""
        trained = (self.previous_config() or {}).get("train", {})
        before = trained.get("mixed_precision")
        if before is not None and (before == "fp16") != (mixed_precision == "fp16"):
            raise ModelDirError(
                f"{self.path} was trained with --mixed_precision={before}; --mixed_precision={mixed_precision} "
                "cannot resume it (fp16's loss scaling keeps optimizer state the other policies do not). Resume "
                f"with --mixed_precision={before}, or pass --start_over"
            )
        kept = trained.get("ema_decay")
        if (kept is None) != (ema_decay is None):
            was = "without --ema_decay" if kept is None else f"with --ema_decay={kept}"
            now = "without --ema_decay" if ema_decay is None else f"with --ema_decay={ema_decay}"
            again = "without --ema_decay" if kept is None else "with --ema_decay (any decay in (0, 1))"
            raise ModelDirError(
                f"{self.path} was trained {was}; it cannot resume {now} (the moving average of the weights is "
                f"optimizer state, kept in every checkpoint or in none). Resume {again}, or pass --start_over"
            )
