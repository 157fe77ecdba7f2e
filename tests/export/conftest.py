"""The shared tiny model exported once per session, and a runner for fresh Python processes."""

import json
import os
import random
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.conftest import REPO_ROOT

# Small enough that the 256-sentence one-by-one check stays within seconds; two buckets below
# max_input_length so that sentences alone and in a batch take different branches.
EXPORT_SETTINGS = dict(beam_size=4, alpha=0.6, max_input_length=48, max_extra_length=12, length_buckets=(8, 16))

SENTENCES = [
    "Open the file.",
    "Click OK to save your changes.",
    "The selected cells are copied to the clipboard.",
    "Choose Format - Cells and click the Numbers tab to change the number format of the selected cells.",
    "Select the text that you want to print.",
    "Help",
    "If you do not want to print the comments, select the option None in the Comments list box.",
]


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Overrides tests/conftest.py's: seeds Python and NumPy only.

    `keras.utils.set_random_seed` also sets TensorFlow's seed, which destroys the SentencePiece
    resources of everything loaded before it (data/tokenizer.py), so the SavedModel of `served`
    could not be loaded once for all tests. These tests draw no TensorFlow random numbers.
    """
    random.seed(1234)
    np.random.seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture(scope="session")
def exported(tiny_run, tmp_path_factory):
    """`(model_dir, version_path)`: the tiny run exported with EXPORT_SETTINGS as version 1."""
    from export.exporter import export_model
    from tests.conftest import once_per_session

    model_dir, _ = tiny_run
    build = lambda directory: export_model(model_dir, os.path.join(directory, "transformer"), **EXPORT_SETTINGS)
    return model_dir, once_per_session(tmp_path_factory, "exports", build)


@pytest.fixture(scope="session")
def served(exported):
    """`(loaded, serving_default, translate_ids)`: the export loaded once (loading and the first
    call of its graph take seconds)."""
    import tensorflow as tf

    loaded = tf.saved_model.load(exported[1])
    return loaded, loaded.signatures["serving_default"], loaded.signatures["translate_ids"]


@pytest.fixture(scope="session")
def tiny_model_and_tokenizer(tiny_run):
    """The exported run's model and tokenizer, loaded in this process."""
    from training.run_dir import RunDir

    model, tokenizer, _ = RunDir(tiny_run[0]).load_model()
    return model, tokenizer


def run_fresh_python(code, *args, project=False, env=None, timeout=300):
    """Runs `code` in a new interpreter and returns the JSON object it prints last.

    With `project=False` the interpreter is isolated (`-I`, started in `/`): the repository is not
    importable, so the code sees only installed packages. With `project=True` the repository is on
    PYTHONPATH (for code that builds models under another Keras backend).
    """
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", **(env or {}))
    environment.pop("PYTHONPATH", None)
    command = [sys.executable, "-I", "-c", code]
    if project:
        environment["PYTHONPATH"] = REPO_ROOT
        command = [sys.executable, "-c", code]
    result = subprocess.run(
        command + [str(arg) for arg in args], cwd="/", env=environment, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def saved_model_cli_run(export_dir, inputs):
    """`saved_model_cli run` on `serving_default` with `inputs` (a Python list expression of
    strings); returns its stdout after checking it exits 0. saved_model_cli loads through a TF1
    Session, as TensorFlow Serving's C++ loader does, and needs the SentencePiece ops registered,
    hence tensorflow_text imported first (see the README)."""
    command = [
        sys.executable,
        "-c",
        "import sys, tensorflow_text; from tensorflow.python.tools import saved_model_cli; "
        "sys.argv[0] = 'saved_model_cli'; saved_model_cli.main()",
        "run",
        "--dir",
        export_dir,
        "--tag_set",
        "serve",
        "--signature_def",
        "serving_default",
        "--input_exprs",
        f"inputs={inputs}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd="/")
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout
