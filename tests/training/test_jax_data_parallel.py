"""train.py under JAX on two host devices (`--distribution=auto` -> `keras.distribution.DataParallel`
through `training.distribution`) ends on the weights one device reaches from the same batches; and
gradient accumulation over the two devices. One JAX process runs both (accumulation_step.py), its
train.py runs in process (train.py's flags and exit in a process of their own: test_train.py)."""

import csv
import json
import os
import re
import subprocess
import sys

import keras
import numpy as np
import pytest

from data import pipeline
from tests.helpers import REPO_ROOT, jax_environment
from tests.training.accumulation_step import assert_accumulated_updates

SCRIPT = os.path.join(REPO_ROOT, "tests", "training", "accumulation_step.py")

MAX_LENGTH = 8  # One bucket length (each is compiled for training and for the dev loss).
PER_REPLICA_TOKENS = (
    384  # A multiple of every bucket length, so one device's batches hold 768 // L = 2 * (384 // L) pairs.
)


def _train_flags(model_dir, corpus, devices, distribution):
    return [
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
        f"--distribution={distribution}",
        "--jit_compile=true",  # Op by op, a step over sharded arrays dispatches slowly on a CPU.
    ]


@pytest.fixture(scope="module")
def jax_process(sample_corpus, tmp_path_factory):
    """One JAX process on two host devices (accumulation_step.py): train.py's `main` on one device,
    the accumulation checks, then train.py's `main` with --distribution=auto over both devices.
    Returns the accumulation results, the process's stderr and the two run directories."""
    root = tmp_path_factory.mktemp("jax")
    runs = [
        _train_flags(root / "one", sample_corpus, 1, "one_device"),
        _train_flags(root / "two", sample_corpus, 2, "auto"),
    ]
    # XLA's backend at its lowest optimization level: the process compiles far more than it runs,
    # and both device layouts compile alike, so the weights they reach still agree.
    env = dict(
        jax_environment("--xla_force_host_platform_device_count=2"),
        PYTHONPATH=REPO_ROOT,
        TF_CPP_MIN_LOG_LEVEL="2",
        CI="1",
    )
    command = [sys.executable, SCRIPT, "--devices=2", f"--train_py={json.dumps(runs)}"]
    completed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1]), completed.stderr, root / "one", root / "two"


def _run(model_dir):
    with open(os.path.join(model_dir, "training_log.csv")) as handle:
        losses = [float(row["loss"]) for row in csv.DictReader(handle)]
    model = keras.saving.load_model(os.path.join(model_dir, "model.keras"), compile=False)
    return losses, [(w.path, np.asarray(keras.ops.convert_to_numpy(w))) for w in model.weights]


def _unnumbered(path):
    """A weight's path without the numbers Keras appends to the names of a process's later layers."""
    return re.sub(r"_[0-9]+(?=/|$)", "", path)


@pytest.mark.slow
def test_two_jax_host_devices_end_on_the_weights_of_one(jax_process):
    import models.transformer  # noqa: F401  (registers the class for load_model)

    one_plan, two_plan = (pipeline.bucket_plan(PER_REPLICA_TOKENS * n, MAX_LENGTH) for n in (2, 1))
    assert one_plan.batch_sizes == tuple(2 * size for size in two_plan.batch_sizes)  # The same batches.
    _, stderr, one_dir, two_dir = jax_process
    assert stderr.index("on 1 replica(s)") < stderr.index("on 2 replica(s)"), stderr[-3000:]
    one_losses, one = _run(one_dir)
    two_losses, two = _run(two_dir)
    np.testing.assert_allclose(two_losses, one_losses, rtol=1e-5)
    assert [_unnumbered(path) for path, _ in one] == [_unnumbered(path) for path, _ in two]
    assert one_losses[-1] < one_losses[0]  # It trained.
    for (path, weights), (_, other) in zip(one, two):
        if path.endswith("key_value/bias"):
            # The key half of this bias adds the same amount to all the scores of a query, which the
            # softmax ignores: its gradient is rounding noise, which Adam scales up to steps of the
            # learning rate. The value half is compared.
            weights, other = weights[weights.shape[0] // 2 :], other[other.shape[0] // 2 :]
        np.testing.assert_allclose(other, weights, atol=2e-5, err_msg=path)


@pytest.mark.slow
def test_k_accumulated_batches_give_the_update_of_one_batch_of_their_pairs(jax_process):
    """Accumulation under JAX over two host devices (one compiled program for any count, the batch
    split by Keras); TensorFlow's: tests/training/test_accumulation.py."""
    assert_accumulated_updates(jax_process[0], "jax", [2])
