"""cli/resumable_output.py: --output=FILE written so that a killed translate.py goes on from its
last recorded window, and refuses to go on for other flags or another input. (A real SIGKILL of
translate.py: tests/evaluation/test_translate_resume.py.)"""

import json
import os

import pytest

from cli.resumable_output import ResumableOutput, ResumeError, resumed

SETTINGS = {"model_dir": "runs/demo", "n_best": 2}
INPUT = [(number, f"line {number}") for number in range(1, 8)]


def translated(text):
    """Two output lines per input line, as --n_best=2 writes."""
    return [f"{text} ({rank})" for rank in (1, 2)]


def run(path, windows, settings=SETTINGS, resume=True, finish=True, lines=INPUT):
    """Writes `windows` windows of 3 input lines through a ResumableOutput (each a checkpoint);
    `finish`: the end of a good run. Returns the output."""
    output = ResumableOutput(str(path), settings, resume=resume)
    stream, done, checkpoint = resumed(output, iter(lines), "doc.en")
    window = []
    for item in stream:
        window.append(item)
        if len(window) == 3 or item == lines[-1]:
            if not windows:
                break
            for _, text in window:
                for line in translated(text):
                    output(line)
            checkpoint()
            window, windows = [], windows - 1
    if finish:
        output.finish()
    output.close()
    return output, done


def expected():
    return "".join(line + "\n" for _, text in INPUT for line in translated(text))


def test_a_killed_run_goes_on_after_its_last_window_without_a_line_twice_or_lost(tmp_path):
    path = tmp_path / "doc.de"
    run(path, windows=1, finish=False)  # Killed after its first window of 3 lines...
    record = json.loads((tmp_path / "doc.de.progress").read_text())
    assert record["lines"] == 3 and record["bytes"] == path.stat().st_size and record["settings"] == SETTINGS
    with open(path, "a", encoding="utf-8") as handle:  # ...while writing the second one.
        handle.write("line 4 (1)\nline 4 (2)\nline 5 (")
    _, done = run(path, windows=3)
    assert done == 3
    assert path.read_text() == expected()
    assert not (tmp_path / "doc.de.progress").exists()  # A run that ended well leaves no record.


def test_without_a_record_or_with_noresume_the_file_is_written_anew(tmp_path):
    path = tmp_path / "doc.de"
    path.write_text("an earlier run's whole output\n")
    _, done = run(path, windows=3)
    assert done == 0 and path.read_text() == expected()
    run(path, windows=1, finish=False)
    _, done = run(path, windows=3, resume=False)
    assert done == 0 and path.read_text() == expected()


@pytest.mark.parametrize(
    "settings, lines, message",
    [
        (dict(SETTINGS, n_best=3), INPUT, "with other flags: --n_best=2 (now 3)"),
        (SETTINGS, [(1, "line 1"), (2, "line two"), *INPUT[2:]], "the first 3 lines of another input than doc.en"),
        (SETTINGS, INPUT[:2], "the first 3 lines of another input than doc.en"),
    ],
)
def test_another_input_or_other_flags_are_refused_and_the_file_kept(tmp_path, settings, lines, message):
    path = tmp_path / "doc.de"
    run(path, windows=1, finish=False)
    before = path.read_bytes()
    with pytest.raises(ResumeError, match="pass --noresume to translate from the start") as refused:
        run(path, windows=3, settings=settings, lines=lines)
    assert message in str(refused.value)
    assert path.read_bytes() == before and (tmp_path / "doc.de.progress").exists()


def test_a_file_shorter_than_its_record_or_a_bad_record_is_refused(tmp_path):
    path = tmp_path / "doc.de"
    run(path, windows=2, finish=False)
    os.truncate(path, 10)
    with pytest.raises(ResumeError, match="10 bytes, fewer than the 132 an interrupted run recorded"):
        ResumableOutput(str(path), SETTINGS)
    (tmp_path / "doc.de.progress").write_text("{")
    with pytest.raises(ResumeError, match="doc.de.progress: not a record of translate.py"):
        ResumableOutput(str(path), SETTINGS)


def test_a_run_stopped_before_its_first_window_leaves_no_record(tmp_path):
    path = tmp_path / "doc.de"
    run(path, windows=0, finish=False)
    assert path.read_text() == "" and not (tmp_path / "doc.de.progress").exists()


def test_a_device_is_written_without_a_record(tmp_path):
    output = ResumableOutput(os.devnull, SETTINGS)
    output("a line")
    output.checkpoint()
    output.finish()
    assert not os.path.exists(os.devnull + ".progress")
