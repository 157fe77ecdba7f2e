"""train.py under JAX on two host devices (`--distribution=auto` -> `keras.distribution.DataParallel`
through `training.distribution`) ends on the weights one device reaches from the same batches.
Accumulation over two host devices: tests/training/test_accumulation.py."""

import csv
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from data import pipeline
from tests.helpers import REPO_ROOT

MAX_LENGTH = 8  # One bucket length (each is compiled for training and for the dev loss).
PER_REPLICA_TOKENS = (
    384  # A multiple of every bucket length, so one device's batches hold 768 // L = 2 * (384 // L) pairs.
)


def _train(model_dir, corpus, devices):
    env = dict(
        os.environ,
        PYTHONPATH=REPO_ROOT,
        TF_CPP_MIN_LOG_LEVEL="2",
        KERAS_BACKEND="jax",
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        CI="1",
    )
    command = [
        sys.executable,
        os.path.join(REPO_ROOT, "train.py"),
        f"--model_dir={model_dir}",
        f"--cache_dir={os.path.dirname(corpus.root)}",
        "--vocab_size=2000",
        f"--max_length={MAX_LENGTH}",
        "--preset=tiny",
        "--num_layers=1",
        "--hidden_dim=32",
        "--num_heads=2",
        "--intermediate_dim=64",
        "--dropout=0",  # Dropout masks are drawn per device layout; the weights are what is compared.
        f"--batch_tokens={PER_REPLICA_TOKENS * 2 // devices}",
        "--train_steps=2",
        "--checkpoint_every=1",  # Two epochs, so two logged losses.
        "--eval_every=2",
        "--eval_sentences=0",
        "--warmup_steps=10",
        "--distribution=auto",
        "--jit_compile=true",  # Op by op, a step over sharded arrays dispatches slowly on a CPU.
    ]
    completed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert f"on {devices} replica(s)" in completed.stderr
    with open(os.path.join(model_dir, "training_log.csv")) as handle:
        losses = [float(row["loss"]) for row in csv.DictReader(handle)]
    model = keras.saving.load_model(os.path.join(model_dir, "model.keras"), compile=False)
    return losses, {w.path: np.asarray(keras.ops.convert_to_numpy(w)) for w in model.weights}


@pytest.mark.slow
def test_two_jax_host_devices_end_on_the_weights_of_one(sample_corpus, tmp_path):
    import models.transformer  # noqa: F401  (registers the class for load_model)

    one_plan, two_plan = (pipeline.bucket_plan(PER_REPLICA_TOKENS * n, MAX_LENGTH) for n in (2, 1))
    assert one_plan.batch_sizes == tuple(2 * size for size in two_plan.batch_sizes)  # The same batches.
    one_losses, one = _train(tmp_path / "one", sample_corpus, 1)
    two_losses, two = _train(tmp_path / "two", sample_corpus, 2)
    np.testing.assert_allclose(two_losses, one_losses, rtol=1e-5)
    assert one.keys() == two.keys()
    assert one_losses[-1] < one_losses[0]  # It trained.
    for path, weights in one.items():
        other = two[path]
        if path.endswith("key_value/bias"):
            # The key half of this bias adds the same amount to all the scores of a query, which the
            # softmax ignores: its gradient is rounding noise, which Adam scales up to steps of the
            # learning rate. The value half is compared.
            weights, other = weights[weights.shape[0] // 2 :], other[other.shape[0] // 2 :]
        np.testing.assert_allclose(other, weights, atol=2e-5, err_msg=path)
