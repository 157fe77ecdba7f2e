import os
import shutil

import keras
import numpy as np
import pytest

from inference import checkpoint_files
from models.learning_rate_schedule import transformer_optimizer
from models.losses import LabelSmoothedCrossEntropy
from models.transformer import Transformer
from tests.helpers import under_file_size_limit
from training import checkpoints

SMALL = dict(num_layers=1, hidden_dim=8, num_heads=2, intermediate_dim=16)


def _model(seed):
    keras.utils.set_random_seed(seed)
    model = Transformer(20, **SMALL)
    model.build()
    model.compile(optimizer=transformer_optimizer(8, 10), loss=LabelSmoothedCrossEntropy())
    model.optimizer.build(model.trainable_variables)
    return model


def _weights(model):
    return [keras.ops.convert_to_numpy(w).copy() for w in model.weights]


def test_keeps_the_newest_and_resumes_from_the_latest(tmp_path):
    model = _model(0)
    for step in (100, 200, 300, 400):
        checkpoints.save_checkpoint(model, str(tmp_path), step, keep=2)
    assert [step for step, _ in checkpoint_files.list_checkpoints(str(tmp_path))] == [300, 400]
    assert checkpoint_files.latest_checkpoint(str(tmp_path))[0] == 400
    assert sorted(os.listdir(tmp_path)) == ["ckpt-000000300.weights.h5", "ckpt-000000400.weights.h5"]


def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one(tmp_path):
    model = _model(0)
    checkpoints.save_checkpoint(model, str(tmp_path), 100, keep=5)
    with open(checkpoint_files.checkpoint_path(str(tmp_path), 200), "wb") as handle:
        handle.write(b"half a file")
    step, path = checkpoint_files.latest_checkpoint(str(tmp_path))
    assert step == 100 and path.endswith("ckpt-000000100.weights.h5")


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    target = str(tmp_path / "model.keras")
    checkpoints.write_atomically(target, lambda temporary: open(temporary, "w").write("good"))

    def crash(temporary):
        with open(temporary, "w") as handle:
            handle.write("partial")
        raise KeyboardInterrupt("killed mid-write")

    with pytest.raises(KeyboardInterrupt):
        checkpoints.write_atomically(target, crash)
    assert open(target).read() == "good"
    assert os.listdir(tmp_path) == ["model.keras"]


def test_a_run_directory_removed_meanwhile_is_a_write_error_not_recreated(tmp_path):
    """A checkpoint's directory is created when missing, but not a removed run directory above it."""
    run = tmp_path / "run"
    run.mkdir()
    checkpoints.write_atomically(str(run / "checkpoints" / "a.h5"), lambda temporary: open(temporary, "w").write("x"))
    shutil.rmtree(run)
    target = run / "checkpoints" / "b.h5"
    with pytest.raises(checkpoints.WriteError, match=f"cannot write {target}: No such file or directory"):
        checkpoints.write_atomically(str(target), lambda temporary: open(temporary, "w").write("x"))
    assert not run.exists()


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_written_files_get_the_mode_of_a_plain_open(umask, tmp_path):
    previous = os.umask(umask)
    try:
        checkpoints.write_atomically(str(tmp_path / "model.keras"), lambda temporary: open(temporary, "w").write("x"))
        with open(tmp_path / "plain", "w") as handle:
            handle.write("x")
    finally:
        os.umask(previous)
    assert (
        os.stat(tmp_path / "model.keras").st_mode & 0o777
        == os.stat(tmp_path / "plain").st_mode & 0o777
        == 0o666 & ~umask
    )


def test_restoring_brings_back_weights_and_optimizer_step(tmp_path):
    model = _model(0)
    rng = np.random.default_rng(0)
    for _ in range(3):  # Three updates, applied eagerly: what a fit's steps leave, without tracing one.
        gradients = [rng.normal(size=w.shape).astype("float32") for w in model.trainable_variables]
        model.optimizer.apply(gradients, model.trainable_variables)
    path = checkpoints.save_checkpoint(model, str(tmp_path), 3, keep=1)
    restored = _model(1)
    restored.load_weights(path)
    assert int(keras.ops.convert_to_numpy(restored.optimizer.iterations)) == 3
    for saved, loaded in zip(_weights(model), _weights(restored)):
        assert np.array_equal(saved, loaded)


def test_averaging_equals_the_elementwise_mean(tmp_path):
    paths, expected = [], None
    for seed in range(3):
        model = _model(seed)
        paths.append(checkpoints.save_checkpoint(model, str(tmp_path), (seed + 1) * 10, keep=10))
        values = [w.astype("float64") for w in _weights(model)]
        expected = values if expected is None else [a + b for a, b in zip(expected, values)]
    expected = [total / 3 for total in expected]
    averaged = checkpoint_files.average_checkpoints(_model(7), paths)
    for mean, value in zip(expected, _weights(averaged)):
        assert np.max(np.abs(mean - value)) < 1e-6
    # Not a copy of any one input.
    assert np.max(np.abs(_weights(averaged)[0] - _weights(_model(0))[0])) > 1e-3


def test_averaging_needs_checkpoints():
    with pytest.raises(ValueError, match="at least one checkpoint"):
        checkpoint_files.average_checkpoints(_model(0), [])


def test_an_average_takes_the_newest_checkpoints_and_never_fewer_than_asked(tmp_path):
    from training.run_dir import ModelDirError, RunDir

    run = RunDir(str(tmp_path))
    model = _model(0)
    for step in (100, 200, 300):
        checkpoints.save_checkpoint(model, run.checkpoint_dir, step, keep=5)
    # What a run directory needs beside its weights, present but not read by the check.
    for path, content in ((run.vocabulary_path, ""), (run.config_path, "{}")):
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(content)
    assert run.check_loadable("average:2").steps == (200, 300)
    with pytest.raises(ModelDirError, match=r"average:4: .* keeps 3 checkpoint\(s\), fewer than the 4 asked for"):
        run.check_loadable("average:4")


def test_a_failed_write_names_the_path_and_leaves_nothing_behind(tmp_path):
    from training.checkpoints import WriteError, check_room, write_atomically

    target = tmp_path / "data.bin"
    target.write_bytes(b"the good version")

    def write(temporary):
        with open(temporary, "wb") as handle:
            handle.write(b"x" * 200_000)

    with pytest.raises(WriteError, match=f"cannot write {target}: File too large"):
        under_file_size_limit(100_000, lambda: write_atomically(str(target), write))
    assert target.read_bytes() == b"the good version"
    assert sorted(os.listdir(tmp_path)) == ["data.bin"]
    with pytest.raises(WriteError, match="5,000,000 bytes needed, the file-size limit is 100,000"):
        under_file_size_limit(100_000, lambda: check_room(str(tmp_path / "new" / "ckpt.weights.h5"), 5_000_000))
    with pytest.raises(WriteError, match="No space left on device .*bytes needed"):
        check_room(str(tmp_path / "ckpt.weights.h5"), 1 << 62)
    check_room(str(tmp_path / "ckpt.weights.h5"), 1000)  # Room enough: no error.
