"""The export command's layout, versions, atomic writes and warm-up requests."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from export import exporter, warmup
from tests.conftest import REPO_ROOT
from tests.export.conftest import EXPORT_SETTINGS


def test_layout_is_what_tensorflow_serving_watches(exported):
    _, path = exported
    assert os.path.basename(path) == "1"
    for name in ("saved_model.pb", "variables/variables.index", "assets/spm.model",
                 "assets.extra/tf_serving_warmup_requests", "assets.extra/export_config.json"):
        assert os.path.isfile(os.path.join(path, name)), name
    assert [n for n in os.listdir(os.path.dirname(path)) if n.startswith(".tmp")] == []
    with open(os.path.join(path, "assets.extra", "export_config.json"), encoding="utf-8") as handle:
        config = json.load(handle)
    assert config["export"]["max_input_length"] == EXPORT_SETTINGS["max_input_length"]
    assert config["export"]["length_buckets"] == [8, 16, 48]
    assert config["model"]["hidden_dim"] == 64  # the run's config.json travels with the export


def test_spm_model_asset_is_the_run_vocabulary(exported):
    model_dir, path = exported
    with open(os.path.join(model_dir, "spm.model"), "rb") as a, open(os.path.join(path, "assets", "spm.model"), "rb") as b:
        assert a.read() == b.read()


def test_versions_increment_and_existing_versions_are_refused(exported, tmp_path):
    model_dir, path = exported
    export_dir = os.path.dirname(path)
    assert exporter.existing_versions(export_dir) == [1]
    assert exporter.next_version(export_dir) == 2
    assert exporter.next_version(str(tmp_path / "missing")) == 1
    with pytest.raises(FileExistsError, match="already exists"):
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
        exporter.export_model(model_dir, str(export_dir), version=3, **EXPORT_SETTINGS)
    assert os.listdir(export_dir) == []


def test_command_rejects_a_directory_without_a_model(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "export", f"--model_dir={tmp_path}", f"--export_dir={tmp_path / 'exports'}"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode != 0
    assert "has no model.keras" in result.stderr
    assert not os.path.exists(tmp_path / "exports" / "1")


def test_warmup_requests_are_prediction_logs_the_signature_answers(exported, served):
    _, path = exported
    logs = warmup.read_warmup_requests(os.path.join(path, "assets.extra", warmup.WARMUP_FILE))
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
