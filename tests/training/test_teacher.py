"""`train.py --teacher` (training/teachers.py): a distilled student records its teachers, and a teacher
of another direction is refused before anything is written, in this process."""

import json
import os

import pytest
from absl import flags

from common.errors import refused_flags_message
from tests.helpers import tool_flags
from training import config as run_config
from training import train_flags


def _teacher(path, data):
    """A run directory holding only the config.json of a run trained on `data` (all the check reads)."""
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as handle:
        json.dump({"model": {}, "data": data}, handle)
    return str(path)


def test_a_student_records_its_teachers_and_a_teacher_of_another_direction_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    builtin = _teacher(tmp_path / "t1", {"corpus": "deb-en-de", "direction": None})
    files = _teacher(tmp_path / "t2", {"corpus": "files", "languages": "en-de"})
    _teacher(tmp_path / "t3", {"corpus": "deb-en-de", "direction": "de-en"})
    pairs = tmp_path / "distilled.tsv"
    pairs.write_text("Open the file.\tÖffnen Sie die Datei.\n", encoding="utf-8")
    student = [
        "--corpus=files",
        "--languages=en-de",
        f"--train_tsv={pairs}",
        f"--dev_tsv={pairs}",
        f"--test_tsv={pairs}",
    ]

    def run(*argv):
        with tool_flags() as flag_values:
            train_flags.define_train_flags()
            try:
                flag_values(["train.py", f"--model_dir={tmp_path / 'student'}", *student, *argv])
                return train_flags.config_from_flags()
            except flags.Error as error:
                return refused_flags_message(error)

    config = run("--teacher=t1,t2")
    assert config.data.teacher == f"{builtin},{files}"  # Absolute, in their order.
    os.makedirs(config.model_dir)
    recorded = json.loads(open(run_config.write(config), encoding="utf-8").read())
    assert recorded["data"]["teacher"] == f"{builtin},{files}"
    plain = run()
    assert plain.data.teacher is None
    # A config.json written before the flag resumes as a run without teachers; another teacher does not.
    with open(run_config.write(plain), encoding="utf-8") as handle:
        old = json.load(handle)
    del old["data"]["teacher"]
    with open(os.path.join(plain.model_dir, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(old, handle)
    run_config.check(plain)
    with pytest.raises(run_config.ConfigMismatchError, match="data.teacher: None -> '"):
        run_config.check(config)
    assert run("--teacher=t1,t3") == (
        f"--teacher=t3 translates de-en ({os.path.join('t3', 'config.json')}); this run trains en-de on its "
        "translations: give a teacher of this direction, or this run the teacher's languages (--languages, --direction)"
    )
    assert run("--teacher=t1", "--direction=de-en").startswith("--teacher=t1 translates en-de")
    assert run("--teacher=missing").startswith(
        f"--teacher=missing: {os.path.join('missing', 'config.json')} is missing or has no data section"
    )
    with tool_flags() as flag_values:
        train_flags.define_train_flags()
        with pytest.raises(flags.Error, match="it needs --corpus=files \\(not --corpus=deb-en-de\\)"):
            flag_values(["train.py", f"--model_dir={tmp_path / 'b'}", "--teacher=t1"])
    assert not os.path.exists(tmp_path / "b")
