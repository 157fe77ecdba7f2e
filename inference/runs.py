"""Reading the model_dir that train.py writes (layout: docs/training.md): `RunDir`, and the weights
a tool's `--checkpoint=best|last|average:N|ema` names. `training.run_dir` adds the writing.
"""

import dataclasses
import os
import sys
import zipfile

from common.errors import UserError
from common.json_files import read_json
from models.search_config import RECORDED_SETTINGS, SETTING_BOUNDS, SearchConfigError, check_setting

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
SHORTLIST_FILE = "shortlist.tsv"  # The lexical table of the vocabulary shortlist (python -m training.shortlist).

# The tools' `--checkpoint` (evaluate.py, translate.py, `python -m export`,
# `training.average_checkpoints`): docs/training.md, "The best checkpoint", argues the default.
DEFAULT_CHECKPOINT = "best"


class ModelDirError(UserError, RuntimeError):
    """A model_dir that does not hold what a tool needs, or cannot be used as asked (names the path)."""


# The search settings a run may record in config.json ("search"); `SearchConfig` checks them.
RECORDED_SEARCH = RECORDED_SETTINGS


def search_settings(record, where):
    """The search settings of a config.json "search" record as `{name: value}` ({} for None; its
    "chosen_for" is no setting); raises ModelDirError naming `where` for a malformed record."""
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
        except SearchConfigError as error:
            if name in SETTING_BOUNDS:
                kind, least = SETTING_BOUNDS[name]
                expected = f"{kind.__name__} >= {least}"
            else:
                expected = error.expected
            raise ModelDirError(f'{where}: "search" has {name}={value!r}; it must be {expected}') from None
    return settings


@dataclasses.dataclass(frozen=True)
class CheckpointChoice:
    """A parsed `--checkpoint`: `kind` "best", "last", "ema" or "average" (of the newest `count`)."""

    kind: str
    count: int = 0

    def __str__(self):
        return f"average:{self.count}" if self.kind == "average" else self.kind


def parse_checkpoint(value, flag="--checkpoint"):
    """The `CheckpointChoice` that `value` ("best", "last", "ema", "average:N" or a `CheckpointChoice`)
    names; raises ModelDirError naming `flag` for a malformed one."""
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


@dataclasses.dataclass(frozen=True)
class ChosenWeights:
    """What a `--checkpoint` choice resolved to: `paths` and `steps` of its weights files, oldest
    first; empty when the choice is `model.keras` itself."""

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


class _RunPath:
    """A read-only attribute of a `RunDir`: the path of one of its files (`parts` joined under it)."""

    def __init__(self, *parts):
        self.parts = parts

    def __get__(self, run, owner=None):
        return self if run is None else os.path.join(run.path, *self.parts)


class RunDir:
    """A training run's directory as the tools read it: its files, its checkpoints, its model.
    Keras and h5py are imported where used, so that the tools' flag checks stay quick."""

    def __init__(self, path):
        self.path = path

    def __repr__(self):
        return f"RunDir({self.path!r})"

    def file(self, name):
        return os.path.join(self.path, name)

    # The run's files (docs/training.md, "The run directory"), each a path under it.
    config_path = _RunPath(CONFIG_FILE)
    vocabulary_path = _RunPath(VOCABULARY_FILE)
    source_vocabulary_path = _RunPath(SOURCE_VOCABULARY_FILE)  # The source side's of separate vocabularies.
    model_path = _RunPath(MODEL_FILE)
    checkpoint_dir = _RunPath(CHECKPOINT_DIR)
    log_dir = _RunPath(LOG_DIR)
    training_log = _RunPath(TRAINING_LOG)
    best_weights_path = _RunPath(CHECKPOINT_DIR, BEST_WEIGHTS_FILE)
    best_record_path = _RunPath(CHECKPOINT_DIR, BEST_RECORD_FILE)
    shortlist_path = _RunPath(SHORTLIST_FILE)

    def has_separate_vocabularies(self):
        return os.path.exists(self.source_vocabulary_path)

    # Checkpoints and the best record.

    def checkpoints(self):
        """`[(step, path)]` of the complete checkpoints, oldest first."""
        # Loads Keras: the tools import this module before their flag checks.
        from inference import checkpoint_files

        return checkpoint_files.list_checkpoints(self.checkpoint_dir)

    def latest_checkpoint(self):
        """`(step, path)` of the newest checkpoint that opens, or None."""
        # Loads Keras: the tools import this module before their flag checks.
        from inference import checkpoint_files

        return checkpoint_files.latest_checkpoint(self.checkpoint_dir)

    def latest_ema(self):
        """`(step, path)` of the newest moving average of the weights (`--ema_decay`) that opens, or None."""
        # Loads Keras: the tools import this module before their flag checks.
        from inference import checkpoint_files

        return checkpoint_files.latest_ema(self.checkpoint_dir)

    def read_best(self):
        """best.json as a dict (`step`, `metric`, `score`, ...), or None; ModelDirError if not JSON."""
        return read_json(self.best_record_path, ModelDirError)

    def read_config(self):
        """config.json as a dict, or None if there is none; ModelDirError if not JSON."""
        return read_json(self.config_path, ModelDirError)

    def recorded_search(self):
        """The search settings config.json records (`search_settings`), {} when none; ModelDirError
        if config.json is not JSON or its "search" is not valid."""
        return search_settings((self.read_config() or {}).get("search"), self.config_path)

    def previous_config(self):
        """config.json as a dict, or None if there is none or it is not JSON (the config check names that)."""
        try:
            return self.read_config()
        except ModelDirError:
            return None

    # Loading what training wrote.

    def load_tokenizer(self):
        # Loads TensorFlow: the tools import this module before their flag checks.
        from data.tokenizer import Tokenizer

        if not os.path.exists(self.vocabulary_path):
            raise ModelDirError(f"{self.path} has no {VOCABULARY_FILE}: not a model directory written by train.py")
        return Tokenizer.from_file(self.vocabulary_path)

    def load_source_tokenizer(self):
        """The source side's tokenizer: spm.source.model with separate vocabularies, else spm.model."""
        if not self.has_separate_vocabularies():
            return self.load_tokenizer()
        from data.tokenizer import Tokenizer  # TensorFlow, as in load_tokenizer.

        return Tokenizer.from_file(self.source_vocabulary_path)

    def separate_source_tokenizer(self):
        """The source side's own tokenizer with separate vocabularies, else None."""
        return self.load_source_tokenizer() if self.has_separate_vocabularies() else None

    def load_shortlist(self):
        """The run's lexical table (`inference.lexical_table.read_table`), checked against its
        vocabularies and corpus; `lexical_table.ShortlistError` when it has none or another's."""
        from inference import lexical_table  # NumPy, on use.

        if not os.path.exists(self.shortlist_path):
            raise lexical_table.ShortlistError(
                f"{self.path} has no {SHORTLIST_FILE}, the lexical table a shortlist reads: build it with "
                f"python -m training.shortlist --model_dir={self.path}"
            )
        data = (self.read_config() or {}).get("data", {})
        return lexical_table.read_table(self.shortlist_path, lexical_table.expected_header(self, data))

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
        """Checks, loading nothing, that `load_model(checkpoint)` can succeed; returns the
        `ChosenWeights`, or raises ModelDirError naming `flag` and what the directory has."""
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
        """`(model, tokenizer, run_config)` with the weights `checkpoint` names; `tokenizer` is the
        target's (`load_source_tokenizer` gives the source's).

        `checkpoint`: "best", "last" (`model.keras` where no checkpoint is kept), "average:N" (the
        mean of the newest N; section 6.1), "ema" (`--ema_decay`), or a `CheckpointChoice`.
        `flag` names it in messages; `quiet` leaves out the line saying which weights were loaded.

        Raises:
            ModelDirError: a missing or unreadable file, or a choice the run cannot give (names the path).
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
        names; "last" without checkpoints is refused (`model.keras` is that model). Raises as `load_model`."""
        chosen = self.check_loadable(checkpoint, flag)
        if not chosen.paths:
            raise ModelDirError(
                f"{flag}={chosen.choice}: {self.path} keeps no checkpoint; its {MODEL_FILE} is the last model"
            )
        return self._model_from(chosen, flag, self.load_tokenizer().vocabulary_size, self.read_config()), chosen

    def _model_from(self, chosen, flag, vocabulary_size, run_config):
        """The model of `chosen` (weights files) once `check_loadable` has passed."""
        # Loads Keras: the tools import this module before their flag checks.
        from inference import checkpoint_files
        from models.transformer import Transformer

        context = f"{flag}={chosen.choice}"
        for path in chosen.paths:
            _check_checkpoint(path, context)
        source = self.separate_source_tokenizer()
        model = Transformer(
            vocabulary_size, source_vocabulary_size=source and source.vocabulary_size, **run_config["model"]
        )
        model.build()
        try:
            checkpoint_files.average_checkpoints(model, list(chosen.paths))
        except (OSError, ValueError) as error:
            raise ModelDirError(
                f"{context}: loading {', '.join(chosen.paths)} failed ({type(error).__name__}: {error})"
            ) from error
        return model


def _check_checkpoint(path, context):
    """Opens `path` as HDF5, so that a truncated or corrupt file is reported by name (h5py's message omits it)."""
    import h5py  # NumPy and HDF5 on use, not at the tools' start.

    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise ModelDirError(
            f"{context}: checkpoint {path} cannot be read ({error}); a run killed while writing a checkpoint "
            "leaves such a file: delete it and evaluate again"
        ) from error


def run_paths(model_dir):
    """The run directories of `--model_dir`: a list or tuple as is, one directory, or a comma-joined ensemble."""
    if isinstance(model_dir, (list, tuple)):
        return [str(path) for path in model_dir]
    model_dir = str(model_dir)
    if "," not in model_dir or os.path.isdir(model_dir):
        return [model_dir]
    return [path.strip() for path in model_dir.split(",")]
