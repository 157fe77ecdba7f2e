"""train.py with two workers on the loopback interface. Two mirrored CPU replicas against one
device: tests/training/test_accumulation.py (in the process of its TensorFlow accumulation
checks, tests/training/mirrored_step.py). Which strategy one CPU trains under."""

import json
import os
import socket
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.helpers import DEB_CACHE, REPO_ROOT, SMALL_MODEL

ENV = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for sock in sockets:
        sock.bind(("127.0.0.1", 0))
    ports = [sock.getsockname()[1] for sock in sockets]
    for sock in sockets:
        sock.close()
    return ports


@pytest.mark.slow
@pytest.mark.full
def test_two_workers_on_loopback_end_on_the_same_weights(sample_corpus, tmp_path):
    from training.config import DataConfig
    from training.trainer import resolve_tokenizer

    corpus = sample_corpus
    # Several workers refuse to train a vocabulary: it is built first, as their message says.
    (tmp_path / "vocabulary").mkdir()
    resolve_tokenizer(str(tmp_path / "vocabulary"), corpus, DataConfig(vocab_size=500))
    model_dir = str(tmp_path / "multi_worker")
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    command = [
        sys.executable,
        os.path.join(REPO_ROOT, "train.py"),
        f"--model_dir={model_dir}",
        "--distribution=multi_worker",
        f"--cache_dir={os.path.dirname(corpus.root)}",
        f"--deb_dir={DEB_CACHE}",
        "--vocab_size=500",
        "--max_length=64",
        "--preset=tiny",
        *(f"--{key}={value}" for key, value in SMALL_MODEL.items()),
        "--train_steps=2",
        "--checkpoint_every=1",
        "--eval_every=2",
        "--eval_sentences=0",
        "--batch_tokens=512",
        "--warmup_steps=10",
    ]
    processes = []
    for index in range(2):
        tf_config = json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})
        log = open(tmp_path / f"worker{index}.log", "w")
        processes.append(
            (
                subprocess.Popen(
                    command,
                    cwd=REPO_ROOT,
                    env=dict(ENV, TF_CONFIG=tf_config, CI="1"),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        )
    for process, log in processes:
        try:
            process.wait(timeout=600)
        finally:
            if process.poll() is None:
                process.kill()
            log.close()
    logs = [(tmp_path / f"worker{index}.log").read_text() for index in range(2)]
    for process, text in zip(processes, logs):
        assert process[0].returncode == 0, text[-3000:]
    chief = keras.saving.load_model(os.path.join(model_dir, "model.keras"), compile=False)
    other = keras.saving.load_model(os.path.join(model_dir, "workers", "1", "model.keras"), compile=False)
    assert len(chief.weights) == len(other.weights) > 0
    for a, b in zip(chief.weights, other.weights):
        assert np.array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b)), a.path
    from inference.checkpoint_files import latest_checkpoint

    assert latest_checkpoint(os.path.join(model_dir, "checkpoints"))[0] == 2
    assert latest_checkpoint(os.path.join(model_dir, "workers", "1", "checkpoints"))[0] == 2
    assert "2 replica(s)" in logs[0]


@pytest.mark.parametrize("distribution", ["auto", "one_device"])
def test_one_cpu_feeds_fit_the_stream_itself(distribution):
    """On CPUs alone, `fit` iterates the stream it is given: a OneDeviceStrategy would wrap it in
    per-device iterators that autotune whatever the stream's options (docs/data.md)."""
    import tensorflow as tf

    from training.distribution import make_strategy, num_replicas

    strategy = make_strategy(distribution)
    stream = tf.data.Dataset.range(3)
    assert num_replicas(strategy) == 1
    assert strategy.experimental_distribute_dataset(stream) is stream
