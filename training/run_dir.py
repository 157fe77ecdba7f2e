"""The model_dir that train.py writes, and every reader's and writer's way into it: `RunDir`.

model_dir/
    config.json          the resolved RunConfig (`training.config`)
    spm.model            the SentencePiece vocabulary (the target's with --vocabulary=separate)
    spm.source.model     the source's SentencePiece vocabulary, with --vocabulary=separate only
    model.keras          the final model, written when training reaches --train_steps
    checkpoints/         ckpt-<step>.weights.h5 (`training.checkpoints`: their format and atomic writes),
                         the newest --keep_checkpoints of them, and best.weights.h5 with best.json (the
                         dev evaluation with the best score, its step and the early-stopping patience
                         used), which the rotation never removes; with --ema_decay, ema-<step>.weights.h5
                         (the moving average of the weights at the newest checkpoint's step)
    logs/                TensorBoard
    training_log.csv     one row per epoch (checkpoint), appended across restarts
    workers/<index>/     a multi-worker run's other workers' own run directories
    .train.lock          held by the train.py process writing the directory (`RunDir.lock`)

Training prepares it (`RunDir.prepare`: `--start_over`, the leftovers of a start that never
trained); evaluation, translation, export and checkpoint averaging load from it what their one flag
`--checkpoint=best|last|average:N|ema` names (`parse_checkpoint`, `RunDir.load_model`): the best
checkpoint, the newest one, the mean of the newest N, or the moving average of the weights, refused
with what the run has when it has no such thing.
"""

import dataclasses
import fcntl
import json
import os
import shutil
import socket
import sys
import time
import zipfile

from absl import flags

from common.errors import UserError
from common.json_files import read_json
from models.search_config import SETTING_BOUNDS, SearchConfigError, check_setting

CONFIG_FILE = "config.json"
VOCABULARY_FILE = "spm.model"
SOURCE_VOCABULARY_FILE = "spm.source.model"
MODEL_FILE = "model.keras"
CHECKPOINT_DIR = "checkpoints"
LOG_DIR = "logs"
TRAINING_LOG = "training_log.csv"
WORKERS_DIR = "workers"
LOCK_FILE = ".train.lock"
BEST_WEIGHTS_FILE = "best.weights.h5"  # In CHECKPOINT_DIR; its name is not a rotated ckpt-<step>.
BEST_RECORD_FILE = "best.json"

# The tools' `--checkpoint` (evaluate.py, translate.py, `python -m export`,
# `training.average_checkpoints`): docs/training.md, "The best checkpoint", argues the default.
DEFAULT_CHECKPOINT = "best"
CHECKPOINT_HELP = (
    "Which weights of --model_dir to load: best (the checkpoint of the best dev evaluation, "
    "train.py --best_metric), last (the newest checkpoint; model.keras where no checkpoint is kept), "
    "average:N (the mean of the newest N checkpoints, section 6.1 of the paper) or ema (the exponential moving "
    "average of the weights at the newest checkpoint, of a run trained with train.py --ema_decay)."
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


class ModelDirError(UserError, RuntimeError):
    """A model_dir that does not hold what a tool needs, or cannot be used as asked (names the path)."""


# The search settings a run may record in config.json ("search"); `SearchConfig` checks them.
RECORDED_SEARCH = ("beam_size", "alpha", "max_extra_length", "min_length_ratio")


def search_settings(record, where):
    """The search settings of a config.json "search" record as `{name: value}` ({} for None);
    its "chosen_for" says where they came from and is not a setting.

    Raises:
        ModelDirError: a record that is not an object, an unknown name, or a value of the wrong
            type or below its least value (`where`, the file, and the name given).
    """
    if record is None:
        return {}
    if not isinstance(record, dict):
        raise ModelDirError(f'{where}: "search" must be an object of search settings, found {record!r}')
    settings = {}
    for name, value in record.items():
        if name == "chosen_for":
            continue
        if name not in RECORDED_SEARCH:
            raise ModelDirError(f'{where}: "search" has {name!r}, which is not one of {", ".join(RECORDED_SEARCH)}')
        try:
            settings[name] = check_setting(name, value)
        except SearchConfigError:
            kind, least = SETTING_BOUNDS[name]
            raise ModelDirError(
                f'{where}: "search" has {name}={value!r}; it must be {kind.__name__} >= {least}'
            ) from None
    return settings


@dataclasses.dataclass(frozen=True)
class CheckpointChoice:
    """A parsed `--checkpoint`: `kind` "best", "last", "ema" or "average" (of the newest `count`)."""

    kind: str
    count: int = 0

    def __str__(self):
        return f"average:{self.count}" if self.kind == "average" else self.kind


def parse_checkpoint(value, flag="--checkpoint"):
    """The `CheckpointChoice` that `value` ("best", "last", "ema", "average:N" or a `CheckpointChoice`) names.

    Raises:
        ModelDirError: a malformed value (the message names `flag` and the values it takes).
    """
    if isinstance(value, CheckpointChoice):
        return value
    text = str(value).strip()
    if text in ("best", "last", "ema"):
        return CheckpointChoice(text)
    kind, colon, count = text.partition(":")
    if kind == "average" and colon and count.isdigit() and int(count) >= 1:
        return CheckpointChoice("average", int(count))
    raise ModelDirError(
        f"{flag}={value!r} is not a checkpoint choice: expected best, last, ema or average:N with N a positive "
        "integer (e.g. average:5)"
    )


def define_checkpoint_flag(default=DEFAULT_CHECKPOINT, help_text=CHECKPOINT_HELP):
    """Defines the tools' `--checkpoint` flag (absl), its value checked by `parse_checkpoint`."""

    flags.DEFINE_string("checkpoint", default, help_text)

    def check(value):
        try:
            parse_checkpoint(value)
        except ModelDirError as error:
            raise flags.ValidationError(str(error)) from None
        return True

    flags.register_validator("checkpoint", check)


@dataclasses.dataclass(frozen=True)
class ChosenWeights:
    """What a `--checkpoint` choice resolved to in one run directory.

    `paths` and `steps`: the weights files (one, or the N averaged), oldest first; empty when the
    choice is `model.keras` itself (`last` in a directory that keeps no checkpoint).
    """

    choice: CheckpointChoice
    paths: tuple = ()
    steps: tuple = ()
    record: dict | None = None  # The best record, for `best`.

    def describe(self):
        if self.choice.kind == "best":
            return f"the best checkpoint, of step {self.steps[0]} ({describe_score(self.record)})"
        if self.choice.kind == "ema":
            return f"the moving average of the weights, of step {self.steps[0]}"
        if self.choice.kind == "average":
            return f"the mean of {len(self.steps)} checkpoint(s), of steps {', '.join(map(str, self.steps))}"
        if self.paths:
            return f"the newest checkpoint, of step {self.steps[0]}"
        return MODEL_FILE


def describe_score(record):
    """ "dev BLEU 12.30" or "dev loss 3.2100": the best record's score by its metric."""
    if record.get("metric") == "loss":
        return f"dev loss {record['score']:.4f}"
    return f"dev BLEU {record['score']:.2f}"


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
    def source_vocabulary_path(self):
        """The source side's vocabulary of separate vocabularies (`has_separate_vocabularies`)."""
        return self.file(SOURCE_VOCABULARY_FILE)

    def has_separate_vocabularies(self):
        return os.path.exists(self.source_vocabulary_path)

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

    @property
    def best_weights_path(self):
        return os.path.join(self.checkpoint_dir, BEST_WEIGHTS_FILE)

    @property
    def best_record_path(self):
        return os.path.join(self.checkpoint_dir, BEST_RECORD_FILE)

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

    # Checkpoints and the training state.

    def checkpoints(self):
        """`[(step, path)]` of the complete checkpoints, oldest first."""
        # Loads Keras: the tools import this module before their flag checks.
        from training import checkpoints

        return checkpoints.list_checkpoints(self.checkpoint_dir)

    def latest_checkpoint(self):
        """`(step, path)` of the newest checkpoint that opens, or None."""
        # Loads Keras: the tools import this module before their flag checks.
        from training import checkpoints

        return checkpoints.latest_checkpoint(self.checkpoint_dir)

    def latest_ema(self):
        """`(step, path)` of the newest moving average of the weights (`--ema_decay`) that opens, or None."""
        # Loads Keras: the tools import this module before their flag checks.
        from training import checkpoints

        return checkpoints.latest_ema(self.checkpoint_dir)

    def read_best(self):
        """The best record (best.json: `step`, `metric`, `score`, `dev_loss`, `dev_bleu`,
        `evaluations_without_improvement`, ...) as a dict, or None when the run has none.

        Raises:
            ModelDirError: best.json is not JSON.
        """
        return read_json(self.best_record_path, ModelDirError)

    def write_best(self, record, write_weights=None):
        """Writes the best record, and first (when given) its weights with `write_weights(path)`;
        each file atomically, so a kill leaves the previous pair or the new weights with the
        previous record (whose step the next evaluation's record replaces)."""
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

    def read_config(self):
        """config.json as a dict, or None if there is none.

        Raises:
            ModelDirError: config.json is not JSON.
        """
        return read_json(self.config_path, ModelDirError)

    def recorded_search(self):
        """The search settings config.json records (`search_settings`), {} when it has none.

        Raises:
            ModelDirError: config.json is not JSON, or its "search" is not valid.
        """
        return search_settings((self.read_config() or {}).get("search"), self.config_path)

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

    def prepare(self, start_over, mixed_precision, ema_decay=None):
        """Clears the directory for `--start_over`, or the leftovers of a start that never trained,
        and refuses a resume the run's state cannot support.

        `--start_over` deletes only what train.py writes, and only in a directory that holds its
        config.json. A config.json without any checkpoint or model (a first start that failed, on
        bad data, say) binds nothing: it is removed with its vocabulary copy, so fixing a flag is
        not refused as "another configuration".

        Raises:
            ModelDirError: `--start_over` on a directory that is not a train.py run, or a resume
                whose optimizer state differs: under a `mixed_precision` that adds or drops fp16's
                loss scaling, or with a moving average of the weights (`ema_decay`, None: none)
                where the run kept none, or the other way round.
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

    # Loading what training wrote.

    def load_tokenizer(self):
        # Loads TensorFlow: the tools import this module before their flag checks.
        from data.tokenizer import Tokenizer

        if not os.path.exists(self.vocabulary_path):
            raise ModelDirError(f"{self.path} has no {VOCABULARY_FILE}: not a model directory written by train.py")
        return Tokenizer.from_file(self.vocabulary_path)

    def load_source_tokenizer(self):
        """The tokenizer of the source side: spm.source.model with separate vocabularies, else the
        shared spm.model."""
        if not self.has_separate_vocabularies():
            return self.load_tokenizer()
        from data.tokenizer import Tokenizer  # TensorFlow, as in load_tokenizer.

        return Tokenizer.from_file(self.source_vocabulary_path)

    def separate_source_tokenizer(self):
        """The source side's own tokenizer with separate vocabularies, else None (what
        `inference.translator.Translator(source_tokenizer=)` takes)."""
        return self.load_source_tokenizer() if self.has_separate_vocabularies() else None

    def available(self):
        """What `--checkpoint` can choose in this directory, in words (for refusals)."""
        found = self.checkpoints()
        choices = []
        if found:
            choices.append(f"last (step {found[-1][0]})")
        elif os.path.exists(self.model_path):
            choices.append(f"last ({MODEL_FILE})")
        record = self._best_record_or_none()
        if record is not None:
            choices.append(f"best (step {record['step']}, {describe_score(record)})")
        ema = self.latest_ema()
        if ema is not None:
            choices.append(f"ema (step {ema[0]})")
        if found:
            steps = ", ".join(str(step) for step, _ in found)
            averages = "average:1" if len(found) == 1 else f"average:1 to average:{len(found)}"
            choices.append(f"{averages} (checkpoints of steps {steps})")
        return "; ".join(choices) if choices else "nothing"

    def _best_record_or_none(self):
        try:
            record = self.read_best()
        except ModelDirError:
            return None
        if not record or not os.path.exists(self.best_weights_path):
            return None
        return record

    def check_loadable(self, checkpoint=DEFAULT_CHECKPOINT, flag="--checkpoint"):
        """Checks, without loading anything, that `load_model(checkpoint)` has what it needs;
        returns the `ChosenWeights`. `flag` names `checkpoint` in messages.

        Raises:
            ModelDirError: a malformed choice, or one this directory cannot give; the message
                names the flag and what the directory has.
        """
        choice = parse_checkpoint(checkpoint, flag)
        if not os.path.isdir(self.path):
            raise ModelDirError(f"--model_dir {self.path!r} is not a directory")
        found = self.checkpoints()
        if not os.path.exists(self.model_path) and not found and not os.path.exists(self.best_weights_path):
            raise ModelDirError(
                f"{self.path} holds no model: it has no {MODEL_FILE} and no {CHECKPOINT_DIR}/ckpt-*.weights.h5 "
                "(train one with train.py --model_dir=...)"
            )
        if not os.path.exists(self.vocabulary_path):
            raise ModelDirError(f"{self.path} has no {VOCABULARY_FILE}: not a model directory written by train.py")
        separate = (self.previous_config() or {}).get("data", {}).get("vocabulary") == "separate"
        if separate and not self.has_separate_vocabularies():
            raise ModelDirError(
                f"{self.path} was trained with separate vocabularies (--vocabulary=separate) but has no "
                f"{SOURCE_VOCABULARY_FILE}, the source's: copy it beside {VOCABULARY_FILE}"
            )
        refusal = f"{flag}={choice}: {self.path}"
        if choice.kind == "best":
            record = self._best_record_or_none()
            if record is None:
                train = (self.previous_config() or {}).get("train", {})
                why = "train.py keeps one from the first dev evaluation on, by --best_metric"
                if train.get("eval_sentences") == 0 and train.get("best_metric", "bleu") == "bleu":
                    why = "the run ranks by --best_metric=bleu but decodes no dev sentence, --eval_sentences=0"
                raise ModelDirError(
                    f"{refusal} has no best checkpoint ({CHECKPOINT_DIR}/{BEST_WEIGHTS_FILE} and "
                    f"{BEST_RECORD_FILE}: {why}). It has: {self.available()}"
                )
            chosen = ChosenWeights(choice, (self.best_weights_path,), (record["step"],), record)
        elif choice.kind == "ema":
            chosen = self._ema_choice(choice, refusal)
        elif choice.kind == "average" or found:
            count = choice.count or 1
            if len(found) < count:
                raise ModelDirError(
                    f"{refusal} keeps {len(found)} checkpoint(s), fewer than the {count} asked for. "
                    f"It has: {self.available()}"
                )
            newest = found[-count:]
            chosen = ChosenWeights(choice, tuple(path for _, path in newest), tuple(step for step, _ in newest))
        elif os.path.exists(self.model_path):
            return ChosenWeights(choice)
        else:
            raise ModelDirError(f"{refusal} has no checkpoint and no {MODEL_FILE}. It has: {self.available()}")
        if not os.path.exists(self.config_path):
            raise ModelDirError(f"{refusal}: {self.config_path} is missing, and building the model needs it")
        return chosen

    def _ema_choice(self, choice, refusal):
        """The `ChosenWeights` of `--checkpoint=ema`; `refusal` begins the message of its refusal."""
        ema = self.latest_ema()
        if ema is None:
            raise ModelDirError(
                f"{refusal} has no moving average of the weights ({CHECKPOINT_DIR}/ema-<step>.weights.h5, which "
                f"train.py writes with each checkpoint when given --ema_decay). It has: {self.available()}"
            )
        return ChosenWeights(choice, (ema[1],), (ema[0],))

    def load_model(self, checkpoint=DEFAULT_CHECKPOINT, flag="--checkpoint", quiet=False):
        """`(model, tokenizer, run_config)`: the weights `checkpoint` names. `tokenizer` is the
        shared vocabulary's, or the target's of separate ones (`load_source_tokenizer`).

        Args:
            checkpoint: "best" (the best dev evaluation's checkpoint), "last" (the newest
                checkpoint, or `model.keras` where none is kept), "average:N" (the mean of the
                newest N checkpoints; section 6.1 averages the last 5 for base models) or "ema"
                (the moving average of the weights, `--ema_decay`); or a `CheckpointChoice`.
                Checkpoints are loaded into a model built from `config.json`.
            flag: the name of `checkpoint` in messages (the tool's flag).
            quiet: leaves out the line saying which weights were loaded.

        Raises:
            ModelDirError: a missing directory, vocabulary, model or checkpoint, a choice the run
                cannot give, or a file that cannot be read (names the path).
        """
        # Loads Keras: the tools import this module before their flag checks.
        import keras

        import models.transformer  # noqa: F401  (registers the Keras classes that model.keras names)

        chosen = self.check_loadable(checkpoint, flag)
        run_config = self.read_config()
        tokenizer = self.load_tokenizer()
        if not chosen.paths:
            try:
                model = keras.saving.load_model(self.model_path, compile=False)
            except (OSError, ValueError, zipfile.BadZipFile) as error:
                raise ModelDirError(f"{self.model_path} cannot be loaded ({type(error).__name__}: {error})") from error
            return model, tokenizer, run_config
        model = self._model_from(chosen, flag, tokenizer.vocabulary_size, run_config)
        if not quiet:
            print(f"loaded {chosen.describe()}", file=sys.stderr)
        return model, tokenizer, run_config

    def chosen_model(self, checkpoint, flag="--checkpoint"):
        """`(model, ChosenWeights)`: a model built from config.json with the weights `checkpoint`
        names (`load_model`'s rule; "last" in a directory without checkpoints is refused, its
        `model.keras` being that model already).

        Raises:
            ModelDirError: as `load_model`.
        """
        chosen = self.check_loadable(checkpoint, flag)
        if not chosen.paths:
            raise ModelDirError(
                f"{flag}={chosen.choice}: {self.path} keeps no checkpoint; its {MODEL_FILE} is the last model"
            )
        return self._model_from(chosen, flag, self.load_tokenizer().vocabulary_size, self.read_config()), chosen

    def _model_from(self, chosen, flag, vocabulary_size, run_config):
        """The model of `chosen` (weights files) once `check_loadable` has passed."""
        # Loads Keras: the tools import this module before their flag checks.
        from models.transformer import Transformer
        from training import checkpoints

        context = f"{flag}={chosen.choice}"
        for path in chosen.paths:
            _check_checkpoint(path, context)
        source = self.separate_source_tokenizer()
        model = Transformer(
            vocabulary_size, source_vocabulary_size=source and source.vocabulary_size, **run_config["model"]
        )
        model.build()
        try:
            checkpoints.average_checkpoints(model, list(chosen.paths))
        except (OSError, ValueError) as error:
            raise ModelDirError(
                f"{context}: loading {', '.join(chosen.paths)} failed ({type(error).__name__}: {error})"
            ) from error
        return model


def _check_checkpoint(path, context):
    """Opens the checkpoint `path` as HDF5, so that a truncated or corrupt file (a run killed while
    writing it, a full disk) is reported by name: h5py's own message does not name the file."""
    import h5py  # NumPy and HDF5 on use, not at the tools' start.

    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise ModelDirError(
            f"{context}: checkpoint {path} cannot be read ({error}); a run killed while writing a checkpoint "
            "leaves such a file: delete it and evaluate again"
        ) from error
