"""The model_dir that train.py writes, and every reader's and writer's way into it: `RunDir`.

model_dir/
    config.json          the resolved RunConfig (`training.config`)
    spm.model            the SentencePiece vocabulary
    model.keras          the final model, written when training reaches --train_steps
    checkpoints/         ckpt-<step>.weights.h5 (`training.checkpoints`: their format and atomic writes)
    logs/                TensorBoard
    training_log.csv     one row per epoch (checkpoint), appended across restarts
    workers/<index>/     a multi-worker run's other workers' own run directories
    .train.lock          held by the train.py process writing the directory (`RunDir.lock`)

Training prepares it (`RunDir.prepare`: `--start_over`, the leftovers of a start that never
trained); evaluation, export and checkpoint averaging load from it (`RunDir.load_model`: the final
model, or the mean of the newest N checkpoints, refused when fewer than N exist).
"""

import json
import os
import shutil
import sys
import zipfile

CONFIG_FILE = "config.json"
VOCABULARY_FILE = "spm.model"
MODEL_FILE = "model.keras"
CHECKPOINT_DIR = "checkpoints"
LOG_DIR = "logs"
TRAINING_LOG = "training_log.csv"
WORKERS_DIR = "workers"
LOCK_FILE = ".train.lock"
BEST_WEIGHTS_FILE = "best.weights.h5"  # In CHECKPOINT_DIR; its name is not a rotated ckpt-<step>.
BEST_RECORD_FILE = "best.json"

# Everything train.py writes, in the order --start_over deletes it.
RUN_ENTRIES = (CHECKPOINT_DIR, LOG_DIR, WORKERS_DIR, MODEL_FILE, VOCABULARY_FILE, TRAINING_LOG, CONFIG_FILE)


class ModelDirError(RuntimeError):
    """A model_dir that does not hold what a tool needs, or cannot be used as asked (names the path)."""


def read_json(path, error_class):
    """The JSON file at `path` as a dict, or None if there is none; `error_class` names a file that
    is not JSON."""
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        try:
            return json.load(handle)
        except ValueError as error:
            raise error_class(f"{path} is not valid JSON: {error}") from error


class RunDir:
    """A training run's directory: the paths of its files, its checkpoints, and loading its model.

    Keras, h5py and the checkpoint module are imported where used, so that the flag checks of the
    command-line tools, which import `training.config` and with it this module, stay quick.
    """

    def __init__(self, path):
        self.path = path

    def __repr__(self):
        return f"RunDir({self.path!r})"

    def file(self, name):
        return os.path.join(self.path, name)

    @property
    def config_path(self):
        return self.file(CONFIG_FILE)

    @property
    def vocabulary_path(self):
        return self.file(VOCABULARY_FILE)

    @property
    def model_path(self):
        return self.file(MODEL_FILE)

    @property
    def checkpoint_dir(self):
        return self.file(CHECKPOINT_DIR)

    @property
    def log_dir(self):
        return self.file(LOG_DIR)

    @property
    def training_log(self):
        return self.file(TRAINING_LOG)

    def worker(self, index):
        """The run directory of worker `index` (not the chief) of a multi-worker run."""
        return RunDir(os.path.join(self.path, WORKERS_DIR, str(index)))

    def lock(self):
        """Takes the exclusive right to train into this directory; returns the open lock file.

        A kernel lock (`flock`) on `.train.lock`: the process holds it until it closes the returned
        file or ends, however it ends, so a killed run never leaves a stale lock. The file records
        the holder's pid and host for the refusal message of a second train.py.

        Raises:
            ModelDirError: another process holds the lock (the message names its pid and host).
        """
        import fcntl
        import socket
        import time

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

    # Checkpoints and the training state.

    def checkpoints(self):
        """`[(step, path)]` of the complete checkpoints, oldest first."""
        from training import checkpoints

        return checkpoints.list_checkpoints(self.checkpoint_dir)

    def latest_checkpoint(self):
        """`(step, path)` of the newest checkpoint that opens, or None."""
        from training import checkpoints

        return checkpoints.latest_checkpoint(self.checkpoint_dir)

    def has_trained(self):
        """Whether a checkpoint or the final model exists: a config.json binds only then."""
        return bool(self.checkpoints()) or os.path.exists(self.model_path)

    def read_config(self):
        """config.json as a dict, or None if there is none.

        Raises:
            ModelDirError: config.json is not JSON.
        """
        return read_json(self.config_path, ModelDirError)

    def previous_config(self):
        """config.json as a dict, or None if there is none or it is not JSON (the config check names that)."""
        try:
            return self.read_config()
        except ModelDirError:
            return None

    def remove(self, entries=RUN_ENTRIES):
        """Deletes the named entries (train.py's files and directories) that exist."""
        for name in entries:
            path = self.file(name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)

    def prepare(self, start_over, mixed_precision):
        """Clears the directory for `--start_over`, or the leftovers of a start that never trained,
        and refuses a resume the run's state cannot support.

        `--start_over` deletes only what train.py writes, and only in a directory that holds its
        config.json. A config.json without any checkpoint or model (a first start that failed, on
        bad data, say) binds nothing: it is removed with its vocabulary copy, so fixing a flag is
        not refused as "another configuration".

        Raises:
            ModelDirError: `--start_over` on a directory that is not a train.py run, or a resume
                under a `mixed_precision` whose optimizer state differs (fp16's loss scaling).
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
            self.remove((VOCABULARY_FILE, TRAINING_LOG, LOG_DIR, CONFIG_FILE))
            return
        before = (self.previous_config() or {}).get("train", {}).get("mixed_precision")
        if before is not None and (before == "fp16") != (mixed_precision == "fp16"):
            raise ModelDirError(
                f"{self.path} was trained with --mixed_precision={before}; --mixed_precision={mixed_precision} "
                "cannot resume it (fp16's loss scaling keeps optimizer state the other policies do not). Resume "
                f"with --mixed_precision={before}, or pass --start_over"
            )

    # Loading what training wrote.

    def load_tokenizer(self):
        from data.tokenizer import Tokenizer

        if not os.path.exists(self.vocabulary_path):
            raise ModelDirError(f"{self.path} has no {VOCABULARY_FILE}: not a model directory written by train.py")
        return Tokenizer.from_file(self.vocabulary_path)

    def check_loadable(self, average_last=0, flag="--average_last"):
        """Checks, without loading anything, that `load_model(average_last)` has what it needs;
        returns the checkpoints `[(step, path)]`, oldest first. `flag` names `average_last` in messages.

        Raises:
            ModelDirError: what is missing, named, with what to do instead.
        """
        if not os.path.isdir(self.path):
            raise ModelDirError(f"--model_dir {self.path!r} is not a directory")
        found = self.checkpoints()
        if not os.path.exists(self.model_path) and not found:
            raise ModelDirError(
                f"{self.path} holds no model: it has no {MODEL_FILE} and no {CHECKPOINT_DIR}/ckpt-*.weights.h5 "
                "(train one with train.py --model_dir=...)"
            )
        if not os.path.exists(self.vocabulary_path):
            raise ModelDirError(f"{self.path} has no {VOCABULARY_FILE}: not a model directory written by train.py")
        if average_last:
            if not os.path.exists(self.config_path):
                raise ModelDirError(f"{flag} needs {self.config_path} to build the model")
            self._newest_checkpoints(average_last, flag)
        elif not os.path.exists(self.model_path):
            raise ModelDirError(
                f"--model_dir={self.path} has no {MODEL_FILE} (train.py writes it when training reaches "
                f"--train_steps) but has {len(found)} checkpoint(s), the newest of step {found[-1][0]}: run "
                "train.py to the end, or pass --average_last=N to use the mean of the newest N checkpoints "
                "(--average_last=1: the newest alone)"
            )
        return found

    def _newest_checkpoints(self, count, flag):
        from training import checkpoints

        try:
            return checkpoints.newest_checkpoints(self.checkpoint_dir, count)
        except ValueError as error:
            raise ModelDirError(f"{flag}={count}: {error}") from error

    def load_model(self, average_last=0, flag="--average_last", quiet=False):
        """`(model, tokenizer, run_config)`: the final model, or the mean of the newest checkpoints.

        Args:
            average_last: 0 loads `model.keras` (the final weights); N > 0 builds the model from
                `config.json` and sets its weights to the mean of the newest N checkpoints (section
                6.1 averages the last 5 for base models). Fewer than N checkpoints: refused.
            flag: the name of `average_last` in messages (the tool's flag).
            quiet: leaves out the line saying which checkpoints were averaged.

        Raises:
            ModelDirError: a missing directory, vocabulary, model or checkpoints, or one that cannot
                be read (names the path).
        """
        import keras

        import models.transformer  # noqa: F401  (registers the Keras classes that model.keras names)

        self.check_loadable(average_last, flag)
        run_config = self.read_config()
        tokenizer = self.load_tokenizer()
        if not average_last:
            try:
                model = keras.saving.load_model(self.model_path, compile=False)
            except (OSError, ValueError, zipfile.BadZipFile) as error:
                raise ModelDirError(
                    f"{self.model_path} cannot be loaded ({type(error).__name__}: {error}); pass --average_last=N "
                    "to evaluate the run's checkpoints instead"
                ) from error
            return model, tokenizer, run_config
        model, chosen = self._averaged_model(average_last, flag, tokenizer.vocabulary_size, run_config)
        if not quiet:
            steps = ", ".join(str(step) for step, _ in chosen)
            print(f"averaged {len(chosen)} checkpoint(s) of steps {steps}", file=sys.stderr)
        return model, tokenizer, run_config

    def average_checkpoints(self, count, flag="--average_last"):
        """`(model, [(step, path)])`: a model built from config.json whose weights are the mean of
        the newest `count` checkpoints, and those checkpoints. The one averaging rule of every tool.

        Raises:
            ModelDirError: fewer than `count` checkpoints, no config.json, or a checkpoint that
                cannot be read (names it).
        """
        self.check_loadable(count, flag)
        return self._averaged_model(count, flag, self.load_tokenizer().vocabulary_size, self.read_config())

    def _averaged_model(self, count, flag, vocabulary_size, run_config):
        """`average_checkpoints` once `check_loadable` has passed."""
        from models.transformer import Transformer
        from training import checkpoints

        chosen = self._newest_checkpoints(count, flag)
        paths = [path for _, path in chosen]
        for path in paths:
            _check_checkpoint(path, f"{flag}={count}")
        model = Transformer(vocabulary_size, **run_config["model"])
        model.build()
        try:
            checkpoints.average_checkpoints(model, paths)
        except (OSError, ValueError) as error:
            raise ModelDirError(
                f"{flag}={count}: averaging {', '.join(paths)} failed ({type(error).__name__}: {error})"
            ) from error
        return model, chosen


def _check_checkpoint(path, context):
    """Opens the checkpoint `path` as HDF5, so that a truncated or corrupt file (a run killed while
    writing it, a full disk) is reported by name: h5py's own message does not name the file."""
    import h5py

    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise ModelDirError(
            f"{context}: checkpoint {path} cannot be read ({error}); a run killed while writing a checkpoint "
            "leaves such a file: delete it and evaluate again"
        ) from error
