"""The resolved configuration of a training run, written as JSON into model_dir.

`model` and `data` decide what a checkpoint means: a run on an existing model_dir must match them
(or be told to start over). `train` may change between runs (e.g. more steps).
"""

import dataclasses
import json
import os

from common.errors import UserError
from training.run_dir import CONFIG_FILE


@dataclasses.dataclass(frozen=True)
class DataConfig:
    corpus: str = "deb-en-de"
    cache_dir: str = "cache/corpora"
    deb_dir: str | None = None
    deb_source: str = "auto"  # How missing .deb files are fetched: "auto", "apt" or "mirror".
    deb_mirror: str | None = None  # The Debian mirror for "mirror"; None: data.deb_packages.DEFAULT_MIRROR.
    languages: str | None = None  # "en-de" for user files; built-in corpora know theirs.
    direction: str | None = None  # e.g. "de-en"; default the corpus's own (en-xx).
    train_files: tuple = ()  # User corpus: (tsv,) or (src, tgt); with train_weights, several TSVs.
    train_weights: tuple = ()  # A weight per training TSV of a weighted mix (data.corpus_mix).
    source_weights: dict = dataclasses.field(default_factory=dict)  # {source: weight} of a built-in corpus.
    dev_files: tuple = ()
    test_files: tuple = ()
    vocab_size: int = 8000
    max_length: int = 128


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    preset: str = "base"
    train_steps: int = 100000
    batch_tokens: int = 4096
    warmup_steps: int = 4000
    learning_rate_scale: float = 1.0
    label_smoothing: float = 0.1
    distribution: str = "auto"
    cpu_replicas: int = 0
    mixed_precision: str = "none"
    checkpoint_every: int = 1000
    keep_checkpoints: int = 5
    eval_every: int = 5000
    eval_sentences: int | None = 200  # Dev sentences decoded for BLEU; None: the whole dev split; 0: none.
    eval_beam_size: int = 1  # The dev BLEU's search: 1 is greedy.
    best_metric: str = "bleu"  # What ranks the dev evaluations for the best checkpoint: "bleu" or "loss".
    early_stopping: int = 0  # Evaluations without an improvement that end the run; 0: never.
    early_stopping_min_delta: float = 0.0  # The improvement that resets that count must exceed this.
    seed: int = 1234
    jit_compile: bool | None = None  # None: XLA on GPUs, not on CPUs.
    steps_per_execution: int = 1  # Train steps per compiled call; divides checkpoint_every.
    cache_tokenized: bool = False  # Tokenized training pairs kept in memory after the first pass.
    learning_rate_schedule: str = "noam"  # "noam": equation (3); "constant": `learning_rate` throughout.
    learning_rate: float | None = None  # The rate of the "constant" schedule.
    init_from: str | None = None  # A run directory whose weights and vocabulary a new run starts from.
    init_checkpoint: str = "auto"  # Which of its weights: "auto", "best" or "last" (training.init_from).
    accumulate_steps: int = 1  # Batches per optimizer update; steps (train, checkpoint, eval) count updates.


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """`model`, `data` and `train` as above; `record` holds what training found when it started
    (the training mix's pair counts, the parent run of a fine-tuning), written to config.json
    beside them and never compared."""

    model_dir: str
    model: dict
    data: DataConfig
    train: TrainConfig
    record: dict = dataclasses.field(default_factory=dict)

    def to_json(self):
        return {
            "model": dict(self.model),
            "data": dataclasses.asdict(self.data),
            "train": dataclasses.asdict(self.train),
            **self.record,
        }


BEST_METRICS = ("bleu", "loss")


def evaluation_refusal(train, distribution=None):
    """Why the best checkpoint and early-stopping options of `train` (a TrainConfig) cannot work,
    in words naming the flags, or None. Checked before anything is written to the run directory.

    Args:
        distribution: the --distribution to check against (default: `train.distribution`).
    """
    if train.best_metric not in BEST_METRICS:
        return f"--best_metric={train.best_metric} is not one of {', '.join(BEST_METRICS)}"
    if train.eval_beam_size < 1:
        return f"--eval_beam_size={train.eval_beam_size} must be 1 (greedy) or more"
    if train.early_stopping_min_delta < 0:
        return f"--early_stopping_min_delta={train.early_stopping_min_delta} must be 0 or more"
    if not train.early_stopping:
        return None
    flag = f"--early_stopping={train.early_stopping}"
    if train.early_stopping < 0:
        return f"{flag} must be 0 (off) or a positive number of evaluations"
    if train.best_metric == "bleu" and train.eval_sentences == 0:
        return (
            f"{flag} ranks dev evaluations by --best_metric=bleu, but --eval_sentences=0 decodes no dev "
            "sentence: pass --eval_sentences=N (or all), or --best_metric=loss"
        )
    if train.eval_every >= train.train_steps:
        return (
            f"{flag} needs dev evaluations during training, but --eval_every={train.eval_every} evaluates only "
            f"at the end of --train_steps={train.train_steps}: lower --eval_every"
        )
    if (distribution or train.distribution) == "multi_worker":
        return (
            f"{flag} is not available with --distribution=multi_worker (dev BLEU is decoded by the chief alone, "
            "and every worker must stop at the same step)"
        )
    return None


class ConfigMismatchError(UserError, ValueError):
    """model_dir holds a run with another model or data configuration."""


def _normalise(value):
    return json.loads(json.dumps(value))


# Where the data lives or comes from, not what it is: a run may move its cache (another machine,
# another disk) and fetch its packages another way.
LOCATION_KEYS = ("cache_dir", "deb_dir", "deb_source", "deb_mirror")
# User files, compared as absolute paths (configs written before paths were made absolute hold them
# as typed, relative to the directory train.py ran in).
PATH_KEYS = ("train_files", "dev_files", "test_files")


# Data keys added after configs were first written, with the value that an older config meant.
_DATA_DEFAULTS = {"train_weights": [], "source_weights": {}}


def _comparable(section, values, default_direction):
    values = dict(values)
    if section != "data":
        return values
    for key, default in _DATA_DEFAULTS.items():
        values.setdefault(key, default)
    for key in LOCATION_KEYS:
        values.pop(key, None)
    for key in PATH_KEYS:
        values[key] = [os.path.abspath(path) for path in values.get(key) or ()]
    if values.get("direction") is None:
        values["direction"] = default_direction
    return values


def check(config, default_direction=None):
    """Checks that model_dir/config.json, if there, has the same model and data as `config`.

    Locations (`cache_dir`, `deb_dir`, `deb_source`, `deb_mirror`) may differ; user file paths are
    compared as absolute paths; an unset direction stands for `default_direction` (the corpus's own).

    Raises:
        ConfigMismatchError: the existing run used another model or data configuration (names the keys).
    """
    path = os.path.join(config.model_dir, CONFIG_FILE)
    if not os.path.exists(path):
        return
    current = _normalise(config.to_json())
    with open(path, encoding="utf-8") as handle:
        try:
            previous = json.load(handle)
        except ValueError as error:
            raise ConfigMismatchError(
                f"{path} is not valid JSON ({error}); pass --start_over to replace the run"
            ) from error
    differences = []
    for section in ("model", "data"):
        before = _comparable(section, previous.get(section, {}), default_direction)
        after = _comparable(section, current[section], default_direction)
        differences += [
            f"{section}.{key}: {before.get(key)!r} -> {after.get(key)!r}"
            for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)
        ]
    if differences:
        raise ConfigMismatchError(
            f"{config.model_dir} holds a run with another configuration ({'; '.join(differences)}). "
            "Use another --model_dir, or pass --start_over to delete its checkpoints and start again."
        )


def write(config):
    """Writes model_dir/config.json atomically; returns its path."""
    path = os.path.join(config.model_dir, CONFIG_FILE)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(_normalise(config.to_json()), handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(temporary, path)
    return path


def check_or_write(config, start_over):
    """Checks model_dir/config.json against `config` (unless `start_over`), then writes it.

    Raises:
        ConfigMismatchError: the existing run used another model or data configuration (names the keys).
    """
    if not start_over:
        check(config)
    return write(config)


def load(model_dir):
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{model_dir} has no {CONFIG_FILE}: not a model directory written by train.py")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
