"""The resolved configuration of a training run, written as JSON into model_dir.

`model` and `data` decide what a checkpoint means: a run on an existing model_dir must match them
(or be told to start over). `train` may change between runs (e.g. more steps).
"""

import dataclasses
import json
import os

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
    train_files: tuple = ()  # User corpus: (tsv,) or (src, tgt).
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
    eval_sentences: int = 200
    seed: int = 1234
    jit_compile: bool | None = None  # None: XLA on GPUs, not on CPUs.
    steps_per_execution: int = 1  # Train steps per compiled call; divides checkpoint_every.
    cache_tokenized: bool = False  # Tokenized training pairs kept in memory after the first pass.
    accumulate_steps: int = 1  # Batches per optimizer update; steps (train, checkpoint, eval) count updates.


@dataclasses.dataclass(frozen=True)
class RunConfig:
    model_dir: str
    model: dict
    data: DataConfig
    train: TrainConfig

    def to_json(self):
        return {
            "model": dict(self.model),
            "data": dataclasses.asdict(self.data),
            "train": dataclasses.asdict(self.train),
        }


class ConfigMismatchError(ValueError):
    """model_dir holds a run with another model or data configuration."""


def _normalise(value):
    return json.loads(json.dumps(value))


# Where the data lives or comes from, not what it is: a run may move its cache (another machine,
# another disk) and fetch its packages another way.
LOCATION_KEYS = ("cache_dir", "deb_dir", "deb_source", "deb_mirror")
# User files, compared as absolute paths (configs written before paths were made absolute hold them
# as typed, relative to the directory train.py ran in).
PATH_KEYS = ("train_files", "dev_files", "test_files")


def _comparable(section, values, default_direction):
    values = dict(values)
    if section != "data":
        return values
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
