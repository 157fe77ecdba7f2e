"""The resolved configuration of a training run, written as JSON into model_dir.

`model` and `data` decide what a checkpoint means: a run on an existing model_dir must match them
(or be told to start over). `train` may change between runs (e.g. more steps).
"""

import dataclasses
import json
import os


@dataclasses.dataclass(frozen=True)
class DataConfig:
    corpus: str = "deb-en-de"
    cache_dir: str = "cache/corpora"
    deb_dir: str | None = None
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


@dataclasses.dataclass(frozen=True)
class RunConfig:
    model_dir: str
    model: dict
    data: DataConfig
    train: TrainConfig

    def to_json(self):
        return {"model": dict(self.model), "data": dataclasses.asdict(self.data), "train": dataclasses.asdict(self.train)}


CONFIG_FILE = "config.json"


class ConfigMismatchError(ValueError):
    """model_dir holds a run with another model or data configuration."""


def _normalise(value):
    return json.loads(json.dumps(value))


def check_or_write(config, start_over):
    """Writes model_dir/config.json, or checks that the one there has the same model and data.

    Raises:
        ValueError: the existing run used another model or data configuration (names the keys).
    """
    path = os.path.join(config.model_dir, CONFIG_FILE)
    current = _normalise(config.to_json())
    if os.path.exists(path) and not start_over:
        with open(path, encoding="utf-8") as handle:
            try:
                previous = json.load(handle)
            except ValueError as error:
                raise ConfigMismatchError(f"{path} is not valid JSON ({error}); pass --start_over to replace the run") from error
        differences = [
            f"{section}.{key}: {previous.get(section, {}).get(key)!r} -> {current[section].get(key)!r}"
            for section in ("model", "data")
            for key in sorted(set(previous.get(section, {})) | set(current[section]))
            if previous.get(section, {}).get(key) != current[section].get(key)
        ]
        if differences:
            raise ConfigMismatchError(
                f"{config.model_dir} holds a run with another configuration ({'; '.join(differences)}). "
                "Use another --model_dir, or pass --start_over to delete its checkpoints and start again."
            )
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(current, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(temporary, path)
    return path


def load(model_dir):
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{model_dir} has no {CONFIG_FILE}: not a model directory written by train.py")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
