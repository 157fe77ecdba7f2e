"""translate.py --output=FILE after a real SIGKILL: the next run with the same flags (translate.py's
`run` in this process, with main's writer) goes on from the killed run's last recorded window, and
the file equals an uninterrupted run's output line by line. (The record's checks, refusals and
cut-back: tests/cli/test_resumable_output.py.)"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.helpers import REPO_ROOT

COMMAND = [sys.executable, os.path.join(REPO_ROOT, "translate.py")]
ENVIRONMENT = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO_ROOT)
SENTENCES = ["Open the file.", "", "The document could not be saved because the disk is full.", "Print"]
# Twelve windows of three lines: the kill comes after the second, with ten still to do.
LINES = SENTENCES * 9


def recorded_lines(record, process, timeout=240):
    """The input lines `record` (FILE.progress) says are done, once it says some are, while
    `process` runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "translate.py ended before it could be killed"
        try:
            lines = json.loads(record.read_text())["lines"]
        except (OSError, ValueError):
            lines = 0
        if lines >= 6:
            return lines
        time.sleep(0.02)
    raise AssertionError(f"{record}: no window recorded in {timeout} s")


@pytest.mark.slow  # a process of translate.py
def test_a_killed_run_goes_on_with_nothing_twice_or_lost(tiny_run, tmp_path, translate_here):
    """--n_best=2 with --alignments: two lines per input line, each numbered by its input line,
    so that a line written twice, lost or numbered from the wrong line shows."""
    model_dir, _ = tiny_run
    flags = [f"--model_dir={model_dir}", "--n_best=2", "--alignments", "--window=3", "--batch_size=2"]
    flags += ["--max_extra_length=6", "--min_length_ratio=1"]
    source, output = tmp_path / "doc.en", tmp_path / "doc.de"
    source.write_text("".join(f"{text}\n" for text in LINES), encoding="utf-8")
    expected, error, _ = translate_here(*flags, stdin=source.read_bytes())
    assert error is None and len(expected) == 2 * len(LINES)
    command = COMMAND + flags + [f"--input={source}", f"--output={output}"]
    with open(tmp_path / "killed.err", "wb") as stderr:
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=stderr, env=ENVIRONMENT, cwd=REPO_ROOT)
        try:
            done = recorded_lines(tmp_path / "doc.de.progress", process)
            process.send_signal(signal.SIGKILL)
        finally:
            process.kill()
            process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL
    written = output.read_text(encoding="utf-8").split("\n")
    assert 0 < done < len(LINES) and written[: 2 * done] == expected[: 2 * done]
    _, error, stderr = translate_here(*flags, f"--input={source}", f"--output={output}")
    assert error is None, stderr
    going_on = int(stderr.split("going on after line ")[1].split()[0])
    assert going_on >= done and going_on % 3 == 0, stderr
    assert output.read_text(encoding="utf-8").split("\n") == expected + [""]
    assert not (tmp_path / "doc.de.progress").exists()
    assert f"translate.py: {len(LINES)}/{len(LINES)} lines (100.0%)" in stderr
