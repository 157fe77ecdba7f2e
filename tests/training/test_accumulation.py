"""Gradient accumulation (`--accumulate_steps`): K batches give the update of one batch holding
their pairs, on one device and mirrored over two logical CPUs (under JAX over two host devices:
tests/training/test_jax_data_parallel.py); the optimizer's contract (a run with accumulation
checkpointing on update boundaries and resuming from them exactly: the early-stopping run of
tests/training/test_best_checkpoint.py). The TensorFlow process also checks two mirrored replicas
against one device (tests/training/mirrored_step.py)."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.helpers import REPO_ROOT, tiny_run_config, train_flags_refusal
from tests.training.accumulation_step import assert_accumulated_updates
from training.optimizers import FusedAdam, batch_tokens
from training.preemption import at_update_boundary

SCRIPT = os.path.join(REPO_ROOT, "tests", "training", "accumulation_step.py")


def _run_script(devices, *flags):
    """The script's results under TensorFlow for each of `devices` (device counts), in one new process."""
    env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    completed = subprocess.run(
        [sys.executable, SCRIPT, f"--devices={','.join(map(str, devices))}", *flags],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _assert_mirrored_step_matches_one_device(results):
    """mirrored_step.py's checks: two mirrored replicas with the global-token loss take the updates
    of one device on the same global batches; train.py's fused Adam takes Keras's Adam's steps there."""
    ours = results["global"]
    assert ours["largest_update"] > 1e-3  # The step changed the weights.
    assert ours["weight_difference"] < 1e-5 * max(1.0, ours["largest_update"]) + 1e-6
    assert abs(ours["loss_one_device"] - ours["loss_two_replicas"]) < 1e-4
    # The check has teeth: normalising per replica instead gives another update.
    assert results["per_replica"]["weight_difference"] > 100 * max(ours["weight_difference"], 1e-7)
    # train.py's fused Adam under MirroredStrategy: Keras's Adam's steps, on both replicas' copies.
    adam = results["adam"]
    assert adam["optimizer"] == "FusedAdam" and adam["steps"] == 2
    assert adam["largest_update"] > 1e-3
    assert adam["fused_minus_keras"] < 1e-6
    assert adam["replica_spread"] == 0.0


@pytest.mark.slow  # a script in a new process (under JAX: tests/training/test_jax_data_parallel.py)
def test_k_accumulated_batches_give_the_update_of_one_batch_of_their_pairs():
    """TensorFlow on one device and mirrored over two logical CPUs (two code paths of the update).
    The same process runs mirrored_step.py's checks of two mirrored replicas
    (tests/training/test_distribution.py has the other distributions)."""
    results = _run_script([1, 2], "--mirrored_step")
    print(results)
    _assert_mirrored_step_matches_one_device(results["mirrored"])
    assert_accumulated_updates(results["accumulation"], "tensorflow", [1, 2])


def _variables():
    return [keras.Variable(np.ones((3,), "float32")), keras.Variable(np.zeros((2, 2), "float32"))]


def test_the_optimizer_applies_one_update_per_k_batches_weighted_by_their_tokens():
    variables = _variables()
    optimizer = FusedAdam(learning_rate=0.1, accumulate_steps=3, epsilon=1.0)
    reference = FusedAdam(learning_rate=0.1, epsilon=1.0)
    reference_variables = _variables()
    gradients = [[np.full(v.shape, value, "float32") for v in variables] for value in (1.0, -2.0, 4.0)]
    tokens = [10.0, 30.0, 60.0]
    for step, (grads, count) in enumerate(zip(gradients, tokens)):
        with batch_tokens(count):
            optimizer.apply(grads, variables)
        expected = 0 if step < 2 else 1
        assert int(keras.ops.convert_to_numpy(optimizer.iterations)) == expected
        assert int(keras.ops.convert_to_numpy(optimizer.accumulated_batches)) == (step + 1) % 3
        assert at_update_boundary(optimizer) == (step == 2)
    # (10 * 1 - 30 * 2 + 60 * 4) / 100 = 1.9, not the mean of the three, 1.0.
    reference.apply([np.full(v.shape, 1.9, "float32") for v in reference_variables], reference_variables)
    for ours, theirs in zip(variables, reference_variables):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(ours), keras.ops.convert_to_numpy(theirs), atol=1e-7)
    assert float(keras.ops.convert_to_numpy(optimizer.accumulated_tokens)) == 0.0
    assert all(not np.any(keras.ops.convert_to_numpy(s)) for s in optimizer._gradient_sums)


def test_the_optimizer_refuses_bad_input_with_one_clear_error():
    with pytest.raises(ValueError, match="accumulate_steps must be a positive int, received 0"):
        FusedAdam(accumulate_steps=0)
    with pytest.raises(ValueError, match="accumulate_steps or gradient_accumulation_steps, not both"):
        FusedAdam(accumulate_steps=2, gradient_accumulation_steps=2)
    variables = _variables()
    optimizer = FusedAdam(accumulate_steps=2)
    with pytest.raises(ValueError, match="apply the gradients inside `training.optimizers.batch_tokens"):
        optimizer.apply([np.ones(v.shape, "float32") for v in variables], variables)


def test_accumulate_steps_round_trips_through_the_config():
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(FusedAdam(accumulate_steps=4)))
    assert isinstance(restored, FusedAdam) and restored.accumulate_steps == 4
    assert FusedAdam().accumulate_steps == 1


def test_without_accumulation_the_optimizer_state_is_unchanged():
    # Checkpoints of runs without accumulation keep their layout: Adam's variables and no others.
    variables = _variables()
    plain, keras_adam = FusedAdam(), keras.optimizers.Adam()
    plain.build(variables)
    keras_adam.build(variables)
    shapes = [[tuple(v.shape) for v in o.variables] for o in (plain, keras_adam)]
    assert shapes[0] == shapes[1] and len(shapes[0]) == 2 + 2 * len(variables)  # step, rate, m, v


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--accumulate_steps=0"], "flag --accumulate_steps=0: 0 is not a positive integer"),
        (["--accumulate_steps=two"], "flag --accumulate_steps=two: invalid literal for int()"),
        (
            ["--accumulate_steps=4", "--mixed_precision=fp16"],
            "--accumulate_steps=4 does not combine with --mixed_precision=fp16",
        ),
    ],
)
def test_bad_accumulation_flags_are_refused_before_training(flags, message, tmp_path):
    """In process: train.py's flag checks (how train.py prints a refusal: tests/training/test_train.py)."""
    refused = train_flags_refusal(tmp_path / "run", flags)
    assert refused is not None and message in refused, refused
    assert not os.path.exists(tmp_path / "run")


def test_the_trainer_refuses_bad_accumulation_settings(tmp_path):
    from training.trainer import train

    for overrides, message in (
        (dict(accumulate_steps=0), "accumulate_steps must be a positive int, received 0"),
        (dict(accumulate_steps=2, mixed_precision="fp16"), "does not combine with mixed_precision='fp16'"),
    ):
        with pytest.raises(ValueError, match=message):
            train(tiny_run_config(tmp_path / "run", "unused", **overrides))
        assert not os.path.exists(tmp_path / "run")
