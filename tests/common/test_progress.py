"""common/progress.py: a line rewritten in place at a terminal, plain lines in a file, and the
interval flag's values."""

import io
import os
import pty
import subprocess
import sys

import pytest

from common.errors import UserError
from common.progress import Interval, ProgressLine, is_terminal, parse_interval
from tests.helpers import REPO_ROOT


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_file_gets_plain_lines_at_most_every_interval_and_always_the_last():
    stream = io.StringIO()
    line = ProgressLine(stream, seconds=3600)
    for done in range(1, 6):
        line.update(f"translated {done}/5", final=done == 5)
    line.close()
    assert stream.getvalue() == "translated 1/5\ntranslated 5/5\n"
    every = io.StringIO()
    line = ProgressLine(every, seconds=0)
    for done in range(1, 4):
        line.update(f"{done}/3")
    assert every.getvalue() == "1/3\n2/3\n3/3\n"


def test_a_terminal_gets_one_line_rewritten_in_place():
    stream = Terminal()
    line = ProgressLine(stream, terminal_seconds=0)
    for done in range(1, 4):
        line.update(f"translated {done}/3", final=done == 3)
    line.close()  # The final update ended the line already.
    assert stream.getvalue() == "\rtranslated 1/3\rtranslated 2/3\rtranslated 3/3\n"
    unfinished = Terminal()
    line = ProgressLine(unfinished, terminal_seconds=0)
    line.update("scored 1/9")
    line.close()
    assert unfinished.getvalue() == "\rscored 1/9\n"


def test_is_terminal_is_false_for_files_and_closed_streams():
    closed = io.StringIO()
    closed.close()
    assert is_terminal(Terminal()) and not is_terminal(io.StringIO()) and not is_terminal(closed)
    assert not is_terminal(None)


def test_intervals_are_steps_seconds_or_epoch_ends_only():
    assert parse_interval("progress_every", "100") == Interval(steps=100)
    assert parse_interval("progress_every", "30s") == Interval(seconds=30.0)
    assert parse_interval("progress_every", "2.5s") == Interval(seconds=2.5)
    assert parse_interval("progress_every", "0") == Interval()
    for bad in ("abc", "1.5", "-3", "10m", ""):
        with pytest.raises(UserError, match=f"--progress_every={bad}: expected a number of steps"):
            parse_interval("progress_every", bad)


PROGRAM = r"""
import sys
from common import progress
from common.errors import run_tool

def main(argv):
    print(progress.is_terminal(sys.stderr), progress.is_terminal(sys.stdout))

run_tool(main, "program")
"""


def test_stderr_at_a_terminal_is_a_terminal_behind_the_quiet_logs_filter():
    """A tool's descriptor 2 is the filter's pipe (`common.quiet_logs`); its progress still goes to
    a terminal when the tool's stderr is one."""
    controller, terminal = pty.openpty()
    try:
        result = subprocess.run(
            [sys.executable, "-c", PROGRAM],
            cwd=REPO_ROOT,
            env=dict(os.environ, PYTHONPATH=REPO_ROOT),
            stdout=subprocess.PIPE,
            stderr=terminal,
            text=True,
            timeout=60,
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert result.returncode == 0 and result.stdout.split() == ["True", "False"]
