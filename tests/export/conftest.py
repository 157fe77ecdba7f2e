"""The shared tiny model exported once per session, loaded once, and its model and tokenizer."""

import os
import random

import keras
import numpy as np
import pytest

from tests.export.helpers import EXPORT_SETTINGS
from tests.helpers import once_per_session


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
