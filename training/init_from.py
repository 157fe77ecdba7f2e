"""Fine-tuning (`--init_from=RUN_DIR`): a run that starts from another run's weights, vocabulary and
architecture, with a fresh optimizer and schedule. docs/training.md, "Fine-tuning a trained model".
"""

import dataclasses
import os
import shutil
import zipfile

from common.errors import UserError
from common.json_files import read_json
from data import multilingual
from inference.runs import (
    BEST_RECORD_FILE,
    BEST_WEIGHTS_FILE,
    CONFIG_FILE,
    ModelDirError,
    RunDir,
    search_settings,
)
from models.presets import decoder_layers

# Model options that shape the weights or what they compute; the others (the dropout rates) may change.
ARCHITECTURE_KEYS = (
    "num_layers",
    "num_decoder_layers",
    "hidden_dim",
    "num_heads",
    "intermediate_dim",
    "normalize_first",
    "layer_norm_epsilon",
)
CHOICES = ("auto", "best", "last")


class InitFromError(UserError, ValueError):
    """A parent run that cannot start a new one; the message names --init_from and the file."""


def _flag(path):
    return f"--init_from={path}"


def symbols_refusal(parent, symbols):
    """Why a fine-tuning from `parent` (`read_parent`'s config) cannot have `symbols` as its
    user-defined symbols (it keeps the parent's vocabulary), naming the flags, or None."""
    inherited = list(parent.get("data", {}).get("user_defined_symbols", []))
    if not symbols or list(symbols) == inherited:
        return None
    return (
        f"--user_defined_symbols={','.join(symbols)} with --init_from: a fine-tuned run keeps its parent's "
        f"vocabulary, whose symbols are {','.join(inherited) or 'none'}"
    )


def tags_refusal(path, parent_data, tags):
    """Why a multilingual fine-tuning with target-language `tags` cannot start from the parent at
    `path` (a tag missing from its vocabulary would be split), or None."""
    inherited = set(parent_data.get("user_defined_symbols", []))
    inherited.update(multilingual.tag(language) for language in multilingual.model_languages(parent_data) or ())
    missing = [tag for tag in tags if tag not in inherited]
    if not missing:
        return None
    return (
        f"--init_from={path}: its vocabulary has no {', '.join(missing)} (trained on --corpus="
        f"{parent_data.get('corpus', '')}); a fine-tuned "
        "run keeps its parent's vocabulary, so a multilingual fine-tuning starts from a model trained on its languages"
    )


def read_parent(path):
    """The parent's config.json as a dict; InitFromError unless `path` is a directory with
    config.json, spm.model and weights."""
    run = RunDir(path)
    if not os.path.isdir(path):
        raise InitFromError(f"{_flag(path)}: no such directory")
    found = run.checkpoints()
    if not (found or os.path.exists(run.best_weights_path) or os.path.exists(run.model_path)):
        raise InitFromError(
            f"{_flag(path)}: {path} holds no model (no model.keras, no checkpoints/ckpt-*.weights.h5, no "
            f"checkpoints/{BEST_WEIGHTS_FILE}): give the run directory of a model train.py has trained"
        )
    for name, what in ((CONFIG_FILE, "its architecture"), (os.path.basename(run.vocabulary_path), "its vocabulary")):
        if not os.path.exists(run.file(name)):
            raise InitFromError(
                f"{_flag(path)}: {path} has no {name} ({what}): not a run directory written by train.py"
            )
    config = read_json(run.config_path, InitFromError)
    if not isinstance(config.get("model"), dict):
        raise InitFromError(f"{_flag(path)}: {run.config_path} has no model section")
    return config


def architecture_differences(parent_config, model, vocab_size):
    """`[(key, parent's value, this run's value)]` where `model` (a model config) and `vocab_size`
    differ from the parent's in what the weights mean."""
    # Without num_decoder_layers on either side, the decoder's depth is num_layers: one difference.
    compared = [
        key for key in ARCHITECTURE_KEYS if key != "num_decoder_layers" or key in model or key in parent_config["model"]
    ]
    parent_model, model = _architecture(parent_config["model"]), _architecture(model)
    differences = [(key, parent_model[key], model[key]) for key in compared if parent_model[key] != model[key]]
    parent_vocab_size = parent_config.get("data", {}).get("vocab_size")
    if vocab_size != parent_vocab_size:
        differences.append(("vocab_size", parent_vocab_size, vocab_size))
    return differences


def _architecture(model):
    """`model`'s ARCHITECTURE_KEYS, the decoder's depth resolved (a config without it has equal stacks)."""
    return {key: decoder_layers(model) if key == "num_decoder_layers" else model.get(key) for key in ARCHITECTURE_KEYS}


def vocabulary_kind(parent_config):
    """The parent's --vocabulary: shared (also for runs written before the flag) or separate."""
    return parent_config.get("data", {}).get("vocabulary", "shared")


def direction_refusal(path, parent_config, data):
    """Why a run of data section `data` cannot fine-tune the parent at `path` (separate vocabularies
    hold one language per side, so another direction is refused), or None."""
    if vocabulary_kind(parent_config) != "separate":
        return None
    parent = multilingual.side_languages(parent_config.get("data", {}))
    child = multilingual.side_languages(data)
    if all(theirs is None or ours is None or theirs == ours for theirs, ours in zip(parent, child)):
        return None
    return (
        f"--init_from={path} has separate vocabularies, its source one for {parent[0] or 'several languages'} and "
        f"its target one for {parent[1] or 'several languages'}; this run translates {child[0]}-{child[1]}: "
        "fine-tune it in its own direction, or train a new model"
    )


def describe_differences(path, differences):
    listed = "; ".join(f"--{key}={value} differs from its {before}" for key, before, value in differences)
    return (
        f"{_flag(path)} fine-tunes the parent's model as it is: {listed} ({os.path.join(path, CONFIG_FILE)}). "
        "Leave these flags out (the parent's values are taken) or train a new model"
    )


def choose_weights(path, choice):
    """`(choice, weights path, step)`: the parent's weights `choice` names, "auto" resolved to
    "best" or "last", step None when not recorded; InitFromError for an unknown choice or "best"
    without a best checkpoint."""
    if choice not in CHOICES:
        raise InitFromError(f"--init_checkpoint={choice}: expected one of {', '.join(CHOICES)}")
    run = RunDir(path)
    try:
        record = run.read_best() if os.path.exists(run.best_weights_path) else None
    except ModelDirError as error:
        raise InitFromError(f"--init_from={path}: {error}") from error
    if choice in ("auto", "best") and record:
        return "best", run.best_weights_path, record.get("step")
    if choice == "best":
        raise InitFromError(
            f"--init_checkpoint=best: {path} has no best checkpoint (checkpoints/{BEST_WEIGHTS_FILE} with "
            f"{BEST_RECORD_FILE}, kept by train.py from its first dev evaluation on); pass --init_checkpoint=last "
            "for its newest weights"
        )
    found = run.checkpoints()
    if found:
        step, newest = found[-1]
        return "last", newest, step
    return "last", run.model_path, _saved_step(run.model_path)


def _saved_step(model_path):
    """The optimizer step a `model.keras` was saved at, or None when it holds no optimizer state."""
    import h5py  # NumPy and HDF5 on use, not at the tools' start.

    try:
        with zipfile.ZipFile(model_path) as archive, archive.open("model.weights.h5") as weights:
            with h5py.File(weights, "r") as handle:
                return int(handle["optimizer/vars/0"][()])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return None


@dataclasses.dataclass(frozen=True)
class ParentWeights:
    """The weights a fine-tuning starts from, and where they came from."""

    model_dir: str
    choice: str
    path: str
    step: int | None
    vocabulary_path: str
    values: list
    search: dict | None = None  # The parent's recorded search (config.json "search"), which the run keeps.
    source_vocabulary_path: str | None = None  # With separate vocabularies: the source side's.

    def record(self):
        """What config.json records of the parent."""
        return {"model_dir": self.model_dir, "checkpoint": self.choice, "weights": self.path, "step": self.step}


def load_parent(path, choice, model, vocab_size):
    """The parent's weights for a run of `model` with `vocab_size`, checked before the run's
    directory is touched.

    Raises:
        InitFromError: no model or vocabulary, another architecture (each difference named), or
            weights that do not load (the file named).
    """
    # Loads Keras and TensorFlow: train.py's flag validators import this module.
    import keras

    from data.tokenizer import Tokenizer
    from models.transformer import Transformer

    parent_config = read_parent(path)
    differences = architecture_differences(parent_config, model, vocab_size)
    if differences:
        raise InitFromError(describe_differences(path, differences))
    run = RunDir(path)
    choice, weights_path, step = choose_weights(path, choice)
    separate = vocabulary_kind(parent_config) == "separate"
    sizes = {}
    for side, vocabulary in (("target", run.vocabulary_path), ("source", run.source_vocabulary_path)):
        if side == "source" and not separate:
            continue
        try:
            sizes[side] = Tokenizer.from_file(vocabulary).vocabulary_size
        except (OSError, ValueError, RuntimeError) as error:
            raise InitFromError(f"{_flag(path)}: {vocabulary} cannot be read ({error})") from error
    try:
        if weights_path.endswith(".keras"):
            parent = keras.saving.load_model(weights_path, compile=False)
        else:
            parent = Transformer(sizes["target"], source_vocabulary_size=sizes.get("source"), **parent_config["model"])
            parent.build()
            parent.load_weights(weights_path)
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as error:
        raise InitFromError(
            f"{_flag(path)}: {weights_path} cannot be loaded ({type(error).__name__}: {error}); a run killed while "
            "writing leaves such a file: choose other weights with --init_checkpoint, or retrain the parent"
        ) from error
    values = [keras.ops.convert_to_numpy(weight) for weight in parent.weights]
    return ParentWeights(
        os.path.abspath(path),
        choice,
        os.path.abspath(weights_path),
        step,
        run.vocabulary_path,
        values,
        search=_inherited_search(parent_config, run),
        source_vocabulary_path=run.source_vocabulary_path if separate else None,
    )


def _inherited_search(parent_config, run):
    """The parent's recorded search, as the fine-tuned run records it, or None."""
    record = parent_config.get("search")
    try:
        search_settings(record, run.config_path)
    except ModelDirError as error:
        raise InitFromError(f"{_flag(run.path)}: {error}") from error
    if record is None:
        return None
    chosen_for = record.get("chosen_for", "the parent")
    return {**record, "chosen_for": f"{chosen_for}, kept from the parent run {os.path.abspath(run.path)}"}


def copy_vocabulary(parent, target, side=None):
    """Copies the parent's spm.model (spm.source.model for `side` "source") to `target`, atomically."""
    # Loads Keras: train.py's flag validators import this module.
    from training import checkpoints

    vocabulary = parent.source_vocabulary_path if side == "source" else parent.vocabulary_path
    checkpoints.write_atomically(target, lambda temporary: shutil.copyfile(vocabulary, temporary))


def assign(model, parent):
    """Sets `model`'s weights to the parent's; InitFromError naming the first that differs in number or shape."""
    if len(model.weights) != len(parent.values):
        raise InitFromError(
            f"{_flag(parent.model_dir)}: {parent.path} holds {len(parent.values)} weights, the model "
            f"{len(model.weights)}"
        )
    for weight, value in zip(model.weights, parent.values):
        if tuple(weight.shape) != tuple(value.shape):
            raise InitFromError(
                f"{_flag(parent.model_dir)}: {parent.path} has {weight.path} of shape {tuple(value.shape)}, the model "
                f"{tuple(weight.shape)}"
            )
    for weight, value in zip(model.weights, parent.values):
        weight.assign(value)
