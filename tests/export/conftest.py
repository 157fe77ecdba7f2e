"""The shared tiny model exported once per session, loaded once, and its model and tokenizer."""

import os
import random

import keras
import numpy as np
import pytest


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
def exported(tiny_run, tiny_export):
    """`(model_dir, version_path)`: the shared export of the tiny run (EXPORT_SETTINGS, version 1)."""
    return tiny_run[0], os.path.join(tiny_export, "1")


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
