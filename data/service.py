"""The tf.data service: the input pipeline on other machines' CPUs.

When the training host's CPUs cannot feed its accelerators, a dispatcher and workers on other
machines run the tokenization, bucketing and padding, and the trainer receives finished batches
(`train.py --data_service=grpc://HOST:PORT`):

    python -m data.service dispatcher --port=5050                             # one, anywhere
    python -m data.service worker --dispatcher=HOST:5050 --port=5051          # on each input machine

Each worker produces the whole training stream, shuffled in its own order ("parallel_epochs"), so
workers can come and go: a worker that stops takes its stream with it and training goes on with
the others. The workers read the corpus's shard files at the paths the trainer has (a shared
filesystem, or the same corpus prepared at the same path on each machine).
"""

import re
import socket
import sys
import time

from absl import app, flags

from common import quiet_logs
from common.errors import UserError, run_tool

_ADDRESS = re.compile(r"^grpc://(?P<host>[^:/\s]+):(?P<port>\d{1,5})$")


class DataServiceError(UserError, RuntimeError):
    """A tf.data service address that is malformed or where no dispatcher answers."""


def check_dispatcher(address: str, flag: str = "--data_service", timeout: float = 10.0) -> None:
    """Fails unless a dispatcher accepts connections at `address` ("grpc://HOST:PORT").

    The service's own client would retry an absent dispatcher without end; this says at once what
    is wrong.

    Raises:
        DataServiceError: naming `flag`, the address, and what was expected or what happened.
    """
    match = _ADDRESS.match(address or "")
    if match is None:
        raise DataServiceError(f"{flag}={address!r}: expected grpc://HOST:PORT, e.g. grpc://10.0.0.5:5050")
    host, port = match["host"], int(match["port"])
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as error:
        raise DataServiceError(
            f"{flag}={address}: no tf.data service dispatcher answers at {host}:{port} "
            f"({error.strerror or error}); start one with `python -m data.service dispatcher --port={port}`"
        ) from None


FLAGS = flags.FLAGS


def _free_port() -> int:
    """A port no process listens on now, for a worker given --port=0 (its address must be known)."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


def define_flags():
    flags.DEFINE_integer("port", 0, "Port to listen on (0: any free one, printed).", lower_bound=0)
    flags.DEFINE_string("dispatcher", None, "worker: the dispatcher's HOST:PORT.")
    flags.DEFINE_string(
        "worker_host", "localhost", "worker: the host name the dispatcher and trainers reach this worker by."
    )
    flags.DEFINE_string(
        "work_dir", None, "dispatcher: a directory for its journal, so that a restarted dispatcher resumes its jobs."
    )


def main(argv):
    quiet_logs.quiet_tool_output()
    if len(argv) != 2 or argv[1] not in ("dispatcher", "worker"):
        raise app.UsageError(
            f"expected dispatcher or worker (python -m data.service dispatcher|worker [--flags]), received "
            f"{' '.join(argv[1:]) or 'nothing'}"
        )
    if argv[1] == "worker":
        if not FLAGS.dispatcher:
            raise app.UsageError("worker needs --dispatcher=HOST:PORT")
        check_dispatcher(f"grpc://{FLAGS.dispatcher}", flag="--dispatcher")  # exit status 2 (`run_tool`)
    # TensorFlow after the flags and the quiet logs.
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops the workers run)

    service = tf.data.experimental.service
    if argv[1] == "dispatcher":
        config = service.DispatcherConfig(
            port=FLAGS.port, work_dir=FLAGS.work_dir, fault_tolerant_mode=FLAGS.work_dir is not None
        )
        server = service.DispatchServer(config)
        print(f"tf.data service dispatcher at {server.target}", file=sys.stderr, flush=True)
    else:
        port = FLAGS.port or _free_port()
        config = service.WorkerConfig(
            dispatcher_address=FLAGS.dispatcher, port=port, worker_address=f"{FLAGS.worker_host}:{port}"
        )
        server = service.WorkerServer(config)
        print(
            f"tf.data service worker of {FLAGS.dispatcher} at {FLAGS.worker_host}:{port}", file=sys.stderr, flush=True
        )
    # `server` serves until the process ends. Not `server.join()`: it waits in C++, where Ctrl-C
    # never reaches Python; a sleep ends with KeyboardInterrupt (exit status 130).
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    define_flags()
    run_tool(main, "data.service")
