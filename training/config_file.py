"""`train.py --config=RUN/config.json`: another run's resolved configuration (the JSON train.py
writes into model_dir) as the values of train.py's flags, which the flags given on the command line
override (docs/training.md, "Starting from another run's config")."""

import dataclasses
import json

from common.errors import UserError
from data import multilingual
from models.presets import MODEL_OPTIONS
from training.config import DataConfig, TrainConfig, flag_default, flag_fields

# What the trainer records beside the sections (never compared, never a flag); "search" carries over.
RECORD_KEYS = ("search", "training_corpora", "init_from")
# The model options train.py has a flag for (layer_norm_epsilon has none), and the type of each.
MODEL_FLAG_KINDS = {
    "num_layers": "integer",
    "num_decoder_layers": "integer",
    "hidden_dim": "integer",
    "num_heads": "integer",
    "intermediate_dim": "integer",
    "dropout": "float",
    "attention_dropout": "float",
    "activation_dropout": "float",
    "normalize_first": "boolean",
}
# Data fields written as the user-file flags (`_file_flags`) rather than a flag of their own.
FILE_KEYS = {"train_files": "list", "dev_files": "list", "test_files": "list", "train_weights": "numbers"}
_TYPES = {
    "integer": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "boolean": ((bool,), "true or false"),
    "string": ((str,), "a string"),
    "enum": ((str,), "a string"),
    "list": ((list,), "a list of strings"),
    "numbers": ((list,), "a list of numbers"),
    "weights": ((dict,), "an object of numbers"),
}


class ConfigFileError(UserError, ValueError):
    """A --config file that is missing, not JSON, or holds an unknown key or a value of the wrong type."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.reason = reason


def read(path):
    """The JSON object of `path`, with its sections and record keys checked by name."""
    try:
        with open(path, encoding="utf-8") as handle:
            values = json.load(handle)
    except OSError as error:
        raise ConfigFileError(path, f"cannot read: {error.strerror}") from None
    except ValueError as error:
        raise ConfigFileError(path, f"not valid JSON ({error})") from None
    if not isinstance(values, dict):
        raise ConfigFileError(path, "expected a JSON object with model, data and train sections")
    unknown = sorted(set(values) - {"model", "data", "train", *RECORD_KEYS})
    if unknown:
        raise ConfigFileError(path, f"unknown key {unknown[0]!r}; expected model, data, train or a record")
    for section in ("model", "data", "train"):
        if not isinstance(values.get(section, {}), dict):
            raise ConfigFileError(path, f"{section} is {values[section]!r}, expected a JSON object")
    return values


def _check_type(path, key, value, kind, nullable):
    if value is None and nullable:
        return
    types, expected = _TYPES[kind]
    valid = isinstance(value, types) and not (isinstance(value, bool) and kind in ("integer", "float"))
    if valid and kind == "list":
        valid = all(isinstance(item, str) for item in value)
    if valid and kind in ("numbers", "weights"):
        numbers = value.values() if kind == "weights" else value
        valid = all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in numbers)
    if not valid:
        raise ConfigFileError(path, f"{key} is {value!r}, expected {expected}")


def _field_kinds(config_class):
    """`{field name: (kind of its JSON value, None allowed, its Flag)}` of the fields with a flag."""
    kinds = {}
    for field, flag in flag_fields(config_class):
        kind = "integer" if field.name == "eval_sentences" else flag.kind  # JSON holds the count, or null: all
        nullable = field.default is None or flag_default(field, flag) is None or field.name == "eval_sentences"
        kinds[field.name] = (kind, nullable, flag)
    return kinds


def _file_flags(data):
    """The user-file flags (--train_tsv, --dev_src, ...) and --source_weights that give `data`'s files."""
    values = {}
    several_pairs = multilingual.is_multilingual("files", data.get("languages"))
    for split in ("train", "dev", "test"):
        files = data.get(f"{split}_files") or []
        weights = data.get("train_weights") or [] if split == "train" else []
        if weights:
            values["train_tsv"] = ",".join(f"{path}:{weight}" for path, weight in zip(files, weights))
        elif len(files) == 1 or (files and several_pairs):
            values[f"{split}_tsv"] = ",".join(files)
        elif files:
            values[f"{split}_src"], values[f"{split}_tgt"] = files
    if data.get("source_weights"):
        values["source_weights"] = ",".join(f"{name}:{weight}" for name, weight in data["source_weights"].items())
    return values


def flag_values(path):
    """`{flag name: value in the flag's form}` of the run configuration in `path` (config.json).

    Raises:
        ConfigFileError: a missing file, bad JSON, an unknown key or a value of the wrong type.
    """
    values = read(path)
    flags = {}
    for key, value in values.get("model", {}).items():
        if key not in MODEL_FLAG_KINDS:
            known = "a model option with a flag" if key in MODEL_OPTIONS else "a model option"
            raise ConfigFileError(path, f"unknown key model.{key}: not {known} ({', '.join(MODEL_FLAG_KINDS)})")
        _check_type(path, f"model.{key}", value, MODEL_FLAG_KINDS[key], nullable=False)
        flags[key] = value
    for section, config_class in (("data", DataConfig), ("train", TrainConfig)):
        kinds = _field_kinds(config_class)
        if section == "data":
            kinds.update({key: (kind, False, None) for key, kind in FILE_KEYS.items()})
            kinds["source_weights"] = ("weights", False, None)
        names = [field.name for field in dataclasses.fields(config_class)]
        for key, value in values.get(section, {}).items():
            if key not in kinds:
                expected = "a field without a flag" if key in names else "a field"
                raise ConfigFileError(path, f"unknown key {section}.{key}: not {expected} of train.py's {section}")
            kind, nullable, flag = kinds[key]
            _check_type(path, f"{section}.{key}", value, kind, nullable)
            if flag is not None:
                convert = flag.to_flag and (value is not None or key == "eval_sentences")
                flags[key] = flag.to_flag(value) if convert else value
    data = values.get("data", {})
    if data.get("corpus", "files") == "files":
        flags.update(_file_flags(data))
    return flags


def search_record(path):
    """The search `path` records (its recipe's, or its parent's), carried over to the new run; None if none."""
    return read(path).get("search")
