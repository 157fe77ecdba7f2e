"""Ending a training run on SIGTERM or Ctrl-C with a checkpoint at the current step: the first
signal is recorded, `StopOnSignal` raises `Preempted` after the step in progress, the trainer
writes a checkpoint and exits with `exit_status` (128 + the signal's number). docs/training.md.
"""

import contextlib
import signal
import threading

import keras

HANDLED = (signal.SIGTERM, signal.SIGINT)


class Preempted(Exception):
    """A stop was requested by a signal (`signal_number`) during training."""

    def __init__(self, signal_number):
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number


def exit_status(signal_number):
    return 128 + int(signal_number)


class StopRequest:
    """The signal received during training, if any (`signal_number`, None until one arrives)."""

    def __init__(self):
        self.signal_number = None

    def _handle(self, signal_number, frame):
        del frame
        if self.signal_number is not None and signal_number == signal.SIGINT:
            raise KeyboardInterrupt  # A second Ctrl-C: stop at once.
        if self.signal_number is None:
            self.signal_number = signal_number


@contextlib.contextmanager
def stop_on_signals(enabled=True):
    """Within the block, SIGTERM and SIGINT set the yielded `StopRequest` instead of ending the
    process. Not enabled, or off the main thread: a request that never fires."""
    request = StopRequest()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {number: signal.signal(number, request._handle) for number in HANDLED}
    try:
        yield request
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


class StopOnSignal(keras.callbacks.Callback):
    """Raises `Preempted` after the first step that ends on an update boundary once a stop was requested."""

    def __init__(self, request):
        super().__init__()
        self.request = request

    def on_train_batch_end(self, batch, logs=None):
        if self.request.signal_number is not None and at_update_boundary(self.model.optimizer):
            raise Preempted(self.request.signal_number)


def at_update_boundary(optimizer):
    """Whether an accumulating optimizer (`training.optimizers.FusedAdam`) holds no batches since its
    last update (always true for one that does not accumulate)."""
    pending = getattr(optimizer, "accumulated_batches", None)
    return pending is None or int(keras.ops.convert_to_numpy(pending)) == 0
