"""The tf.data service on loopback: a dispatcher and two workers, each a process of its own."""

import collections
import contextlib
import dataclasses
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

from common.errors import BAD_INPUT_STATUS, INTERRUPTED_STATUS
from common.special_ids import PAD_ID
from data import pipeline, service
from tests.helpers import REPO_ROOT, STARTUP_NOISE, run_logged, small_run_config


@contextlib.contextmanager
def _service(workers=2):
    """`(address, worker processes)` of a dispatcher and `workers` workers started with
    `python -m data.service`, stopped on exit: the dispatcher by Ctrl-C (SIGINT), which it answers
    with one line and exit status 130."""
    processes = []
    # Ctrl-C as at a terminal, even where the test runner was started with SIGINT ignored.
    options = dict(cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    try:
        dispatcher = subprocess.Popen([sys.executable, "-m", "data.service", "dispatcher", "--port=0"], **options)
        processes.append(dispatcher)
        address = _announced(dispatcher, "dispatcher at ")
        started = []
        for _ in range(workers):
            command = [sys.executable, "-m", "data.service", "worker", f"--dispatcher={address.split('://')[1]}"]
            started.append(subprocess.Popen(command, **options))
        processes += started
        for worker in started:
            _announced(worker, "worker of ")
        yield address, started
        dispatcher.send_signal(signal.SIGINT)
        assert dispatcher.wait(timeout=60) == INTERRUPTED_STATUS
        assert dispatcher.stderr.read().strip() == "data.service: interrupted"
    finally:
        for process in processes:
            process.kill()
            process.wait()


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _announced(process, marker):
    """The last word of the line of `process`'s stderr that holds `marker`, its first line: no
    TensorFlow start-up line comes before it."""
    for line in process.stderr:
        assert marker in line and not any(noise in line for noise in STARTUP_NOISE), line
        return line.split()[-1]
    raise AssertionError(f"{process.args} ended without saying {marker!r}")


def _token_counts(batches):
    """`(rows, length, real target tokens)` of each batch."""
    counts = []
    for (source, _), target in batches:
        counts.append((*source.shape, int(np.sum(np.asarray(target) != PAD_ID))))
    return counts


@pytest.mark.slow  # three processes of TensorFlow, and a training run
def test_two_workers_each_make_the_stream_and_training_outlives_one(
    small_tsv, small_tokenizer, sample_corpus, tmp_path
):
    from training.trainer import train

    options = dict(batch_tokens=1024, max_length=96, validate=False)
    local = _token_counts(pipeline.make_dataset(small_tsv, small_tokenizer, shuffle=False, **options))
    with _service() as (address, workers):
        one_pass = pipeline.make_dataset(small_tsv, small_tokenizer, shuffle=False, data_service=address, **options)
        # Each worker makes the whole pass: the batches are the local ones, twice.
        assert collections.Counter(_token_counts(one_pass)) == collections.Counter(local * 2)
        # Shuffled, each in its own order: other batches, the same pairs.
        shuffled = pipeline.make_dataset(small_tsv, small_tokenizer, seed=None, data_service=address, **options)
        counts = _token_counts(shuffled)
        assert sum(tokens for *_, tokens in counts) == 2 * sum(tokens for *_, tokens in local)
        assert sorted(counts) != sorted(local * 2)
        assert any(times % 2 for times in collections.Counter(counts).values())  # Not one stream twice.

        killed_after = []

        class KillAWorker(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                if batch == 1 and not killed_after:
                    workers[0].kill()
                    workers[0].wait()
                    killed_after.append(int(self.model.optimizer.iterations))

        config = small_run_config(
            tmp_path / "served", sample_corpus, train_steps=4, checkpoint_every=4, eval_every=4, eval_sentences=0
        )
        config = dataclasses.replace(config, train=dataclasses.replace(config.train, data_service=address))
        summary = train(config, callbacks=[KillAWorker()])
    assert killed_after == [2]  # one worker killed after step 2 of 4
    assert summary["step"] == 4 and all(np.isfinite(summary["history"]["loss"]))


def test_an_address_where_no_dispatcher_answers_is_one_error_naming_it():
    with socket_bound() as port:
        with pytest.raises(
            service.DataServiceError,
            match=rf"--data_service=grpc://localhost:{port}: no tf.data service dispatcher answers at localhost:{port}",
        ):
            service.check_dispatcher(f"grpc://localhost:{port}", timeout=2)
    with pytest.raises(service.DataServiceError, match=r"--data_service='localhost:5050': expected grpc://HOST:PORT"):
        service.check_dispatcher("localhost:5050")


def test_a_worker_whose_dispatcher_does_not_answer_is_refused_in_one_line():
    """Before TensorFlow is imported: a quick process, exit status 2."""
    with socket_bound() as port:
        refused = run_logged(
            [sys.executable, "-m", "data.service", "worker", f"--dispatcher=localhost:{port}"],
            cwd=REPO_ROOT,
            text=True,
            timeout=60,
        )
    assert refused.returncode == BAD_INPUT_STATUS, refused.stderr
    assert refused.stderr.splitlines() == [
        f"data.service: error: --dispatcher=grpc://localhost:{port}: no tf.data service dispatcher answers at "
        f"localhost:{port} (Connection refused); start one with `python -m data.service dispatcher --port={port}`"
    ]


@contextlib.contextmanager
def socket_bound():
    """A loopback port that is bound but not listening: connections to it are refused."""
    import socket

    with socket.socket() as held:
        held.bind(("localhost", 0))
        yield held.getsockname()[1]


def test_training_with_no_dispatcher_at_its_address_stops_naming_it(sample_corpus, tmp_path):
    from training.trainer import TrainingError, train

    config = small_run_config(
        tmp_path / "absent", sample_corpus, train_steps=4, checkpoint_every=2, eval_every=4, eval_sentences=0
    )
    with socket_bound() as port:
        config = dataclasses.replace(
            config, train=dataclasses.replace(config.train, data_service=f"grpc://localhost:{port}")
        )
        with pytest.raises(
            TrainingError, match=f"no tf.data service dispatcher answers at localhost:{port}"
        ) as refused:
            train(config)
    assert refused.value.exit_status == BAD_INPUT_STATUS  # A refused start: train.py exits with 2.
