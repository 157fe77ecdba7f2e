"""Writes a trained model_dir as a TensorFlow Serving version: `export_dir/<version>/`.

Layout (what `tensorflow_model_server --model_base_path=export_dir` watches):

    export_dir/
      <version>/                      an integer; the server loads the highest
        saved_model.pb                signatures serving_default (text) and translate_ids (token ids)
        variables/                    the Transformer's weights
        assets/spm.model              the SentencePiece model
        assets.extra/
          tf_serving_warmup_requests  PredictionLog TFRecord replayed by the server before traffic
          export_config.json          the training run's config.json plus the export settings

The version is written under `export_dir/.tmp-<version>-*` (a name TensorFlow Serving ignores: it
only loads integer directories) and renamed into place when complete, so a failed export leaves no
version directory and a server never sees a half-written one.
"""

import json
import os
import shutil
import tempfile

import keras
import tensorflow as tf

import models.transformer  # noqa: F401  (registers the Keras classes that model.keras names)
from data.tokenizer import Tokenizer
from export import warmup
from export.serving_module import DEFAULT_LENGTH_BUCKETS, ServingModule

MODEL_FILE = "model.keras"
VOCABULARY_FILE = "spm.model"
RUN_CONFIG_FILE = "config.json"
EXPORT_CONFIG_FILE = "export_config.json"


def existing_versions(export_dir):
    """The integer version directories under `export_dir`, sorted."""
    if not os.path.isdir(export_dir):
        return []
    return sorted(
        int(name) for name in os.listdir(export_dir)
        if name.isdigit() and os.path.isdir(os.path.join(export_dir, name))
    )


def next_version(export_dir):
    """One more than the highest existing version, or 1."""
    versions = existing_versions(export_dir)
    return versions[-1] + 1 if versions else 1


def load_trained(model_dir):
    """`(model, tokenizer, run_config dict)` of a model_dir written by train.py.

    Raises:
        FileNotFoundError: a file the export needs is missing (names it).
    """
    paths = {name: os.path.join(model_dir, name) for name in (MODEL_FILE, VOCABULARY_FILE, RUN_CONFIG_FILE)}
    for name, path in paths.items():
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"--model_dir={model_dir} has no {name}: expected a directory written by train.py "
                f"(with {', '.join(paths)})"
            )
    with open(paths[RUN_CONFIG_FILE], encoding="utf-8") as handle:
        run_config = json.load(handle)
    model = keras.saving.load_model(paths[MODEL_FILE], compile=False)
    tokenizer = Tokenizer.from_file(paths[VOCABULARY_FILE])
    if tokenizer.vocabulary_size != model.vocabulary_size:
        raise ValueError(
            f"{paths[VOCABULARY_FILE]} has {tokenizer.vocabulary_size} pieces but {paths[MODEL_FILE]} was "
            f"built for {model.vocabulary_size}"
        )
    return model, tokenizer, run_config


def write_saved_model(module, path):
    """Traces the `ServingModule`'s signatures and saves it (graph, variables, assets) to `path`."""
    tf.saved_model.save(module, path, signatures=module.signatures())


def export_model(
    model_dir,
    export_dir,
    *,
    version=None,
    beam_size=4,
    alpha=0.6,
    max_input_length=256,
    max_extra_length=50,
    length_buckets=DEFAULT_LENGTH_BUCKETS,
):
    """Exports `model_dir` to `export_dir/<version>/` and returns that path.

    Args:
        model_dir: a directory written by train.py (model.keras, spm.model, config.json).
        export_dir: the model base path TensorFlow Serving watches; created if missing.
        version: positive int; default `next_version(export_dir)`.
        beam_size, alpha, max_extra_length: the search baked into the graph.
        max_input_length: source tokens kept per sentence, EOS included; longer inputs are cut.
        length_buckets: source lengths with one traced search each (`export.serving_module`).

    Raises:
        FileExistsError: `export_dir/<version>` exists (versions are never overwritten).
    """
    if version is None:
        version = next_version(export_dir)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"version must be a positive int, received {version!r}")
    final_path = os.path.join(export_dir, str(version))
    if os.path.exists(final_path):
        raise FileExistsError(f"{final_path} already exists; pass another --version or leave it out for the next one")
    model, tokenizer, run_config = load_trained(model_dir)
    module = ServingModule(
        model,
        tokenizer,
        os.path.join(model_dir, VOCABULARY_FILE),
        beam_size=beam_size,
        alpha=alpha,
        max_input_length=max_input_length,
        max_extra_length=max_extra_length,
        length_buckets=length_buckets,
    )
    os.makedirs(export_dir, exist_ok=True)
    temporary = tempfile.mkdtemp(dir=export_dir, prefix=f".tmp-{version}-")
    try:
        write_saved_model(module, temporary)
        extra = os.path.join(temporary, "assets.extra")
        os.makedirs(extra, exist_ok=True)
        batches = warmup.warmup_batches(tokenizer, module.length_buckets)
        model_name = os.path.basename(os.path.normpath(export_dir))
        warmup.write_warmup_requests(os.path.join(extra, warmup.WARMUP_FILE), batches, model_name)
        settings = {
            "version": version,
            "beam_size": module.beam_size,
            "alpha": module.alpha,
            "max_input_length": module.max_input_length,
            "max_extra_length": module.max_extra_length,
            "length_buckets": list(module.length_buckets),
            "tensorflow": tf.__version__,
            "keras": keras.__version__,
        }
        with open(os.path.join(extra, EXPORT_CONFIG_FILE), "w", encoding="utf-8") as handle:
            json.dump({"export": settings, **run_config}, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.rename(temporary, final_path)  # Atomic on one file system; fails if final_path appeared.
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return final_path
