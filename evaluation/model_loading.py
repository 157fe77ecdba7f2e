"""Loading what `train.py` wrote into a model_dir: the model (or an average of its newest
checkpoints), the SentencePiece vocabulary and the run's configuration."""

import json
import os
import sys
import zipfile

import h5py
import keras

import models.transformer  # noqa: F401  (registers the Keras classes that model.keras names)
from data.tokenizer import Tokenizer
from models.transformer import Transformer
from training import checkpoints
from training.run_dir import CHECKPOINT_DIR, CONFIG_FILE, MODEL_FILE, VOCABULARY_FILE


class ModelDirError(RuntimeError):
    """A model_dir that does not hold what evaluation needs (the message names the path)."""


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


def read_run_config(model_dir):
    """model_dir/config.json as a dict, or None if there is none."""
    return read_json(os.path.join(model_dir, CONFIG_FILE), ModelDirError)


def load_tokenizer(model_dir):
    path = os.path.join(model_dir, VOCABULARY_FILE)
    if not os.path.exists(path):
        raise ModelDirError(f"{model_dir} has no {VOCABULARY_FILE}: not a model directory written by train.py")
    return Tokenizer.from_file(path)


def check_model_dir(model_dir, average_last=0):
    """Checks, without loading anything, that `model_dir` holds what `load_model(model_dir,
    average_last)` needs; returns its checkpoints `[(step, path)]`, oldest first.

    Raises:
        ModelDirError: what is missing, named, with what to do instead.
    """
    if not os.path.isdir(model_dir):
        raise ModelDirError(f"--model_dir {model_dir!r} is not a directory")
    model_path = os.path.join(model_dir, MODEL_FILE)
    checkpoint_dir = os.path.join(model_dir, CHECKPOINT_DIR)
    found = checkpoints.list_checkpoints(checkpoint_dir)
    if not os.path.exists(model_path) and not found:
        raise ModelDirError(
            f"{model_dir} holds no model: it has no {MODEL_FILE} and no {CHECKPOINT_DIR}/ckpt-*.weights.h5 "
            "(train one with train.py --model_dir=...)"
        )
    if not os.path.exists(os.path.join(model_dir, VOCABULARY_FILE)):
        raise ModelDirError(f"{model_dir} has no {VOCABULARY_FILE}: not a model directory written by train.py")
    if average_last:
        if not os.path.exists(os.path.join(model_dir, CONFIG_FILE)):
            raise ModelDirError(f"--average_last needs {os.path.join(model_dir, CONFIG_FILE)} to build the model")
        try:
            checkpoints.newest_checkpoints(checkpoint_dir, average_last)
        except ValueError as error:
            raise ModelDirError(f"--average_last={average_last}: {error}") from error
    elif not os.path.exists(model_path):
        raise ModelDirError(
            f"--model_dir={model_dir} has no {MODEL_FILE} (train.py writes it when training reaches --train_steps) "
            f"but has {len(found)} checkpoint(s), the newest of step {found[-1][0]}: run train.py to the end, or "
            "pass --average_last=N to use the mean of the newest N checkpoints (--average_last=1: the newest alone)"
        )
    return found


def load_model(model_dir, average_last=0):
    """`(model, tokenizer, run_config)` from a model_dir written by `train.py`.

    Args:
        model_dir: the training run's directory.
        average_last: 0 loads `model.keras` (the final weights); N > 0 builds the model from
            `config.json` and sets its weights to the mean of the newest N checkpoints (section 6.1
            averages the last 5 for base models). Fewer than N checkpoints: refused
            (`training.checkpoints.newest_checkpoints`).

    Raises:
        ModelDirError: a missing directory, vocabulary, model or checkpoints, or one that cannot be
            read (names the path).
    """
    check_model_dir(model_dir, average_last)
    run_config = read_run_config(model_dir)
    model_path = os.path.join(model_dir, MODEL_FILE)
    checkpoint_dir = os.path.join(model_dir, CHECKPOINT_DIR)
    tokenizer = load_tokenizer(model_dir)
    if average_last:
        chosen = checkpoints.newest_checkpoints(checkpoint_dir, average_last)
        model = Transformer(tokenizer.vocabulary_size, **run_config["model"])
        model.build()
        paths = [path for _, path in chosen]
        for path in paths:
            _check_checkpoint(path, average_last)
        try:
            checkpoints.average_checkpoints(model, paths)
        except (OSError, ValueError) as error:
            raise ModelDirError(
                f"--average_last={average_last}: averaging {', '.join(paths)} failed ({type(error).__name__}: {error})"
            ) from error
        steps = ", ".join(str(step) for step, _ in chosen)
        print(f"averaged {len(chosen)} checkpoint(s) of steps {steps}", file=sys.stderr)
        return model, tokenizer, run_config
    try:
        model = keras.saving.load_model(model_path, compile=False)
    except (OSError, ValueError, zipfile.BadZipFile) as error:
        raise ModelDirError(
            f"{model_path} cannot be loaded ({type(error).__name__}: {error}); pass --average_last=N to "
            "evaluate the run's checkpoints instead"
        ) from error
    return model, tokenizer, run_config


def _check_checkpoint(path, average_last):
    """Opens the checkpoint `path` as HDF5, so that a truncated or corrupt file (a run killed while
    writing it, a full disk) is reported by name: h5py's own message does not name the file."""
    try:
        with h5py.File(path, "r"):
            pass
    except OSError as error:
        raise ModelDirError(
            f"--average_last={average_last}: checkpoint {path} cannot be read ({error}); a run killed "
            "while writing a checkpoint leaves such a file: delete it and evaluate again"
        ) from error
