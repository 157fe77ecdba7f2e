"""training/preemption.py with real signals sent to this process."""

import os
import signal
import time

import pytest

from training.preemption import Preempted, StopOnSignal, exit_status, stop_on_signals


def _deliver(number):
    os.kill(os.getpid(), number)
    time.sleep(0.05)  # Python runs the handler at the next bytecode after the signal arrives.


def test_the_first_signal_is_recorded_and_a_second_ctrl_c_stops_at_once():
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with stop_on_signals() as request:
        assert request.signal_number is None
        _deliver(signal.SIGTERM)
        assert request.signal_number == signal.SIGTERM
        _deliver(signal.SIGTERM)  # A repeated notice changes nothing.
        assert request.signal_number == signal.SIGTERM
        with pytest.raises(KeyboardInterrupt):
            _deliver(signal.SIGINT)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before


def test_the_callback_raises_after_the_step_once_a_stop_was_requested():
    with stop_on_signals() as request:
        callback = StopOnSignal(request)
        callback.on_train_batch_end(0)  # Nothing requested yet.
        _deliver(signal.SIGINT)
        with pytest.raises(Preempted, match="SIGINT") as stop:
            callback.on_train_batch_end(1)
    assert exit_status(stop.value.signal_number) == 130 and exit_status(signal.SIGTERM) == 143


def test_disabled_handling_leaves_the_handlers_alone():
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(enabled=False) as request:
        assert signal.getsignal(signal.SIGTERM) is before
    assert request.signal_number is None
