"""The export command's layout, versions, atomic writes and warm-up requests."""

import fcntl
import json
import os
import shutil
import stat

import numpy as np
import pytest
import tensorflow as tf

from export import exporter
from tests.export.helpers import run_export
from tests.helpers import EXPORT_SETTINGS, SHARED_EXPORT_GROUP, STARTUP_NOISE, export_arguments, warmup_requests


def test_layout_is_what_tensorflow_serving_watches(exported):
    _, path = exported
    assert os.path.basename(path) == "1"
    for name in (
        "saved_model.pb",
        "variables/variables.index",
        "assets/spm.model",
        "assets.extra/tf_serving_warmup_requests",
        "assets.extra/export_config.json",
    ):
        assert os.path.isfile(os.path.join(path, name)), name
    assert [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp")] == []
    with open(os.path.join(path, "assets.extra", "export_config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    assert config["export"]["max_input_length"] == EXPORT_SETTINGS["max_input_length"]
    assert config["export"]["length_buckets"] == [16, 48]
    assert config["model"]["hidden_dim"] == 64  # the run's config.json travels with the export


def test_spm_model_asset_is_the_run_vocabulary(exported):
    model_dir, path = exported
    with (
        open(os.path.join(model_dir, "spm.model"), "rb") as a,
        open(os.path.join(path, "assets", "spm.model"), "rb") as b,
    ):
        assert a.read() == b.read()


def test_versions_increment_and_existing_versions_are_refused(exported, tmp_path):
    model_dir, path = exported
    export_dir = os.path.dirname(path)
    assert exporter.existing_versions(export_dir) == [1]
    assert exporter.next_version(export_dir) == 2
    assert exporter.next_version(str(tmp_path / "missing")) == 1
    with pytest.raises(exporter.ExportError, match="already exists"):
        exporter.export_model(model_dir, export_dir, version=1)


def test_failed_export_leaves_no_version_directory(exported, tmp_path, monkeypatch):
    model_dir, _ = exported

    def broken_save(module, path):
        with open(os.path.join(path, "saved_model.pb"), "wb") as handle:
            handle.write(b"partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(exporter, "write_saved_model", broken_save)
    export_dir = tmp_path / "exports"
    with pytest.raises(RuntimeError, match="disk full"):
        exporter.export_model(model_dir, str(export_dir), version=3, **export_arguments(EXPORT_SETTINGS))
    assert os.listdir(export_dir) == []


def test_a_directory_without_a_model_is_refused(tmp_path):
    """The command prints an ExportError as one line with exit status 1:
    test_command_errors_are_one_line_naming_the_flag."""
    with pytest.raises(exporter.ExportError, match="has no model.keras"):
        exporter.export_model(str(tmp_path), str(tmp_path / "exports"))
    assert not os.path.exists(tmp_path / "exports" / "1")


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _copy_run(model_dir, destination, names):
    os.makedirs(destination)
    for name in names:
        source = os.path.join(model_dir, name)
        (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, os.path.join(destination, name))
    return str(destination)


def test_version_directory_mode_follows_the_umask(exported, tmp_path):
    _, path = exported
    os.makedirs(tmp_path / "probe")
    assert _mode(path) == _mode(tmp_path / "probe")  # not mkdtemp's 0o700: a server user must read it


def test_cheap_mistakes_are_refused_before_the_model_is_loaded(exported, tmp_path):
    model_dir, path = exported
    export_dir = os.path.dirname(path)
    # A model.keras that fails to load: every refusal below must come before loading it.
    broken = _copy_run(model_dir, tmp_path / "broken", ["spm.model", "config.json"])
    with open(os.path.join(broken, "model.keras"), "wb") as handle:
        handle.write(b"not a zip file")
    a_file = tmp_path / "a_file"
    a_file.write_text("")

    with pytest.raises(exporter.ExportError, match=f"--export_dir {a_file} is a file, not a directory"):
        exporter.export_model(broken, str(a_file))
    with pytest.raises(exporter.ExportError, match=f"{a_file}, which is a file"):
        exporter.export_model(broken, str(a_file / "sub"))
    with pytest.raises(
        exporter.ExportError, match=r"is itself a SavedModel version directory \(saved_model.pb\); pass its parent"
    ):
        exporter.export_model(broken, path)
    assert not [name for name in os.listdir(path) if name.isdigit()]  # nothing nested in the version
    with pytest.raises(exporter.ExportError, match=r"--version=1: .*/1 already exists.*next one \(2\)"):
        exporter.export_model(broken, export_dir, version=1)

    # A run without a best checkpoint (one that has not evaluated yet): refused, naming what it has.
    checkpoints_only = _copy_run(model_dir, tmp_path / "unfinished", ["spm.model", "config.json", "checkpoints"])
    os.remove(os.path.join(checkpoints_only, "checkpoints", "best.json"))
    with pytest.raises(
        exporter.ExportError,
        match=r"--checkpoint=best: .* has no best checkpoint .* It has: last \(step 200\); average:1",
    ):
        exporter.export_model(checkpoints_only, str(tmp_path / "exports"))
    with pytest.raises(
        exporter.ExportError,
        match=r"--checkpoint=average:2: .* keeps 0 checkpoint\(s\).* It has: last \(model.keras\)$",
    ):
        exporter.export_model(broken, str(tmp_path / "exports"), checkpoint="average:2")
    assert not os.path.exists(tmp_path / "exports")


def test_only_unlocked_temporaries_of_the_exporter_are_removed(tmp_path):
    killed = tmp_path / ".tmp-2-k1ll3d_x"
    os.makedirs(killed / "variables")
    (killed / "saved_model.pb").write_bytes(b"partial")
    running = tmp_path / ".tmp-3-running0"
    os.makedirs(running)
    for other in (".tmp-notes", ".tmp-4-UPPER", "2"):
        os.makedirs(tmp_path / other)
    (tmp_path / ".tmp-5-afile000").write_text("")
    descriptor = os.open(running, os.O_RDONLY)  # what a running export holds
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert exporter.remove_stale_temporaries(str(tmp_path)) == [killed.name]
    finally:
        os.close(descriptor)
    assert sorted(os.listdir(tmp_path)) == [".tmp-3-running0", ".tmp-4-UPPER", ".tmp-5-afile000", ".tmp-notes", "2"]
    assert exporter.remove_stale_temporaries(str(tmp_path)) == [running.name]  # its export was killed


@pytest.mark.slow  # A subprocess.
def test_command_errors_are_one_line_naming_the_flag(exported, tmp_path):
    """One refusal through `python -m export` proves the wiring (the flag passed on, one line, exit 2); the others are
    the same ExportError path, checked in this process."""
    model_dir, _ = exported
    flags = (f"--model_dir={model_dir}", f"--export_dir={tmp_path / 'exports'}", "--signatures=serving_default,n_bets")
    result = run_export(*flags, timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("export: error: --signatures: n_bets not among")
    unfinished = _copy_run(model_dir, tmp_path / "unfinished", ["spm.model", "config.json", "checkpoints"])
    expected = f"--checkpoint=average:3: {unfinished} keeps 2 checkpoint(s), fewer than the 3 asked for"
    with pytest.raises(exporter.ExportError) as refused:
        exporter.export_model(str(unfinished), str(tmp_path / "exports"), checkpoint="average:3")
    assert str(refused.value).startswith(expected)
    refusals = {
        ("serving_default", "n_bets", "prefixes"): "--signatures: n_bets, prefixes not among serving_default, n_best,",
        ("n_best", "serving_default", "n_best"): "--signatures: n_best given twice",
        ("align",): "--signatures must include serving_default, .* \\(received align\\)",
        (): "--signatures must include serving_default, .* \\(received none\\)",
    }
    for signatures, message in refusals.items():
        with pytest.raises(exporter.ExportError, match=message):
            exporter.export_model(model_dir, str(tmp_path / "exports"), signatures=signatures)
    assert not os.path.exists(tmp_path / "exports")


@pytest.mark.full  # a whole export in a fresh process
def test_command_writes_a_version_quietly_and_removes_a_killed_exports_leftover(command_export, tmp_path):
    """`python -m export --quantize=int8` on a run that records a search (config.json "search"):
    its max_extra_length is the default of the flag not given, said on stderr; --alpha given beats
    the recorded alpha (tests/evaluation/test_run_search.py). What the command wrote is the int8
    export of tests/export/test_quantize.py, which loads and serves it in a fresh process and with
    saved_model_cli."""
    export_dir, model_dir = command_export["export_dir"], command_export["model_dir"]
    assert command_export["returncode"] == 0, command_export["stderr"][-4000:]
    assert command_export["stdout"].strip() == os.path.join(export_dir, "1")
    assert sorted(os.listdir(export_dir)) == ["1"]
    assert f"removed {command_export['leftover']}" in command_export["stderr"]
    recorded = f"search of {model_dir} (recipe small_data): --max_extra_length={EXPORT_SETTINGS['max_extra_length']};"
    assert recorded in command_export["stderr"]
    with open(os.path.join(export_dir, "1", "assets.extra", "export_config.json"), encoding="utf-8") as handle:
        settings = json.load(handle)["export"]
    assert {name: settings[name] for name in EXPORT_SETTINGS} == dict(
        EXPORT_SETTINGS, length_buckets=[EXPORT_SETTINGS["max_input_length"]]
    )
    assert (settings["quantize"], settings["min_length_ratio"], settings["no_repeat_ngram_size"]) == ("int8", 0.0, 0)
    for noise in STARTUP_NOISE + ("Writing fingerprint", "Assets written"):
        assert noise not in command_export["stderr"], command_export["stderr"][-4000:]
    os.makedirs(tmp_path / "probe")
    assert _mode(os.path.join(export_dir, "1")) == _mode(tmp_path / "probe")


@pytest.mark.xdist_group(SHARED_EXPORT_GROUP)  # with tests/export/test_serving_module.py: one load of the export
def test_warmup_requests_are_prediction_logs_the_signature_answers(exported, served):
    _, path = exported
    logs = warmup_requests(path)
    assert len(logs) == len(EXPORT_SETTINGS["length_buckets"]) + 2  # one per bucket, then a batch
    _, serving, _ = served
    for log in logs:
        request = log.predict_log.request
        assert request.model_spec.signature_name == "serving_default"
        assert request.model_spec.name == "transformer"
        sentences = tf.make_ndarray(request.inputs["inputs"])
        outputs = serving(inputs=tf.constant(sentences))
        assert outputs["translations"].shape == sentences.shape
        assert np.all(np.isfinite(outputs["scores"].numpy()))


class _HeavyModule(tf.Module):
    """What `export_model` saves in place of its `ServingModule` when only the write is under test:
    800 kB of weights and one signature, traced in a moment (the full module takes many seconds)."""

    def __init__(self, *args, **kwargs):
        super().__init__()
        self.weights = tf.Variable(np.zeros(200_000, "float32"))
        self.total = tf.function(lambda: {"total": tf.reduce_sum(self.weights)}, input_signature=[])

    def signatures(self):
        return {"serving_default": self.total.get_concrete_function()}


def test_an_export_that_cannot_be_written_is_one_error_and_keeps_the_versions_there(exported, tmp_path, monkeypatch):
    """Under a 300 kB file-size limit (SIGXFSZ ignored: writes fail with EFBIG) the SavedModel does
    not fit: one ExportError naming the version directory, no temporary directory, and the version
    already there untouched. A failure during the work: the command prints it as one line
    (test_command_errors_are_one_line_naming_the_flag) with exit status 1. The module saved is a
    stand-in (`_HeavyModule`): TensorFlow's own writer fails, as it would with the whole graph."""
    import resource
    import signal

    monkeypatch.setattr(exporter, "ServingModule", _HeavyModule)
    model_dir, path = exported
    export_dir = tmp_path / "exports"
    shutil.copytree(path, export_dir / "1")
    before = sorted((p.relative_to(export_dir), p.stat().st_size) for p in export_dir.rglob("*"))
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, hard))  # The soft limit only: raised again below.
    try:
        with pytest.raises(exporter.ExportError) as refused:
            exporter.export_model(model_dir, str(export_dir))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert refused.value.exit_status == 1
    assert str(refused.value) == (
        f"cannot write {export_dir / '2'}: File too large; nothing was installed (the temporary "
        f"directory is removed) and {export_dir} keeps the versions it had"
    )
    assert sorted((p.relative_to(export_dir), p.stat().st_size) for p in export_dir.rglob("*")) == before
