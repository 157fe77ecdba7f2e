"""training/preemption.py with real signals sent to this process."""

import os
import signal
import time

import keras
import pytest

from training.optimizers import FusedAdam
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


def _model_with(optimizer):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=optimizer, loss="mse")
    model.optimizer.build(model.trainable_variables)
    return model


def test_the_callback_raises_after_the_step_once_a_stop_was_requested():
    with stop_on_signals() as request:
        callback = StopOnSignal(request)
        callback.set_model(_model_with(FusedAdam()))
        callback.on_train_batch_end(0)  # Nothing requested yet.
        _deliver(signal.SIGINT)
        with pytest.raises(Preempted, match="SIGINT") as stop:
            callback.on_train_batch_end(1)
    assert exit_status(stop.value.signal_number) == 130 and exit_status(signal.SIGTERM) == 143


def test_with_accumulation_the_callback_waits_for_the_batch_that_completes_an_update():
    model = _model_with(FusedAdam(accumulate_steps=2))
    with stop_on_signals() as request:
        callback = StopOnSignal(request)
        callback.set_model(model)
        _deliver(signal.SIGTERM)
        model.optimizer.accumulated_batches.assign(1)  # One batch of the update's two taken.
        callback.on_train_batch_end(0)
        model.optimizer.accumulated_batches.assign(0)  # The second batch applied the update.
        with pytest.raises(Preempted, match="SIGTERM"):
            callback.on_train_batch_end(1)


def test_disabled_handling_leaves_the_handlers_alone():
    before = signal.getsignal(signal.SIGTERM)
    with stop_on_signals(enabled=False) as request:
        assert signal.getsignal(signal.SIGTERM) is before
    assert request.signal_number is None
