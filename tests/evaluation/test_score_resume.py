"""translate.py --score --output=FILE: a run stopped after a window goes on from it, as translations
do (the kill itself: tests/evaluation/test_translate_resume.py)."""

import io
import sys

from common.errors import UserError

PAIRS = ["Open the file.\tÖffnen Sie die Datei.", "Print\tDrucken", "Save\tSpeichern", "Close\tSchließen"]


def run_into(translate_tool, monkeypatch, path, lines, *flags):
    """translate.py's main path in this process: `run` writing into --output=`path` through the
    resumable writer; the UserError's message or None."""
    translate_tool.FLAGS.unparse_flags()
    translate_tool.FLAGS(["translate.py", *flags, f"--output={path}", "--window=2", "--noprogress"])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(lines).encode() + b"\n"), encoding="utf-8"))
    try:
        with translate_tool.translate_tool.output_lines(str(path)) as write:
            translate_tool.run(write)
    except UserError as refused:
        return str(refused)
    finally:
        translate_tool.FLAGS.unparse_flags()
    return None


def test_a_score_run_stopped_after_a_window_goes_on_from_it(translate_tool, tiny_run, tmp_path, monkeypatch, capsys):
    model = f"--model_dir={tiny_run[0]}"
    whole = tmp_path / "whole.tsv"
    assert run_into(translate_tool, monkeypatch, whole, PAIRS, model, "--score") is None
    expected = whole.read_text().splitlines()
    assert len(expected) == 4 and not (tmp_path / "whole.tsv.progress").exists()
    # Line 3 without its tab stops the run after the first window's two scores.
    scored = tmp_path / "scored.tsv"
    broken = [*PAIRS[:2], "Save", PAIRS[3]]
    assert "line 3: no tab" in run_into(translate_tool, monkeypatch, scored, broken, model, "--score")
    assert scored.read_text().splitlines() == expected[:2]
    assert (tmp_path / "scored.tsv.progress").exists()
    # Other flags are refused with the file kept; the same flags go on after line 2.
    refused = run_into(translate_tool, monkeypatch, scored, PAIRS, model, "--score", "--format=jsonl")
    assert "with other flags" in refused and scored.read_text().splitlines() == expected[:2]
    capsys.readouterr()
    assert run_into(translate_tool, monkeypatch, scored, PAIRS, model, "--score") is None
    assert "going on after line 2" in capsys.readouterr().err
    assert scored.read_text().splitlines() == expected
    assert not (tmp_path / "scored.tsv.progress").exists()
