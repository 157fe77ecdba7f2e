"""Progress that fits where it goes: a line rewritten in place at a terminal, plain lines in a file
or pipe (docs/design.md, "Output in logs and pipes")."""

import dataclasses
import os
import re
import sys
import time

from common import quiet_logs
from common.errors import UserError

# Plain lines into a file or a pipe: at most one per this many seconds (besides the last).
PLAIN_SECONDS = 30.0
# At a terminal the line is rewritten at most this often.
TERMINAL_SECONDS = 0.1


def is_terminal(stream) -> bool:
    """Whether `stream` (a file object) is a terminal; False for a file, a pipe or a closed stream.
    Stderr is asked about where `common.quiet_logs` sends it, not about the filter's pipe."""
    try:
        descriptor = stream.fileno()
    except (AttributeError, ValueError, OSError):
        descriptor = None
    try:
        return os.isatty(quiet_logs.stderr_descriptor()) if descriptor == 2 else stream.isatty()
    except (AttributeError, ValueError, OSError):
        return False


class ProgressLine:
    """Progress reports on `stream` (default: stderr when reporting): at a terminal the line
    rewritten at most every `terminal_seconds`, elsewhere a plain line at most every `seconds`;
    `final` reports are always written."""

    def __init__(self, stream=None, seconds=PLAIN_SECONDS, terminal_seconds=TERMINAL_SECONDS):
        self._stream = stream
        self._terminal = is_terminal(self.stream)
        self._every = terminal_seconds if self._terminal else seconds
        self._last = None
        self._open = False  # A terminal line is waiting for its newline.

    @property
    def stream(self):
        return self._stream if self._stream is not None else sys.stderr

    def update(self, text, final=False):
        """Reports `text` (one line, without its newline) if it is time to, or if `final`."""
        now = time.monotonic()
        if not final and self._last is not None and now - self._last < self._every:
            return
        self._last = now
        if self._terminal:
            self.stream.write(f"\r{text}")
            self._open = True
            if final:
                self.close()
        else:
            self.stream.write(f"{text}\n")
        self.stream.flush()

    def close(self):
        """Ends the terminal's rewritten line, if one was written."""
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


@dataclasses.dataclass(frozen=True)
class Interval:
    """Plain progress every `steps` steps or `seconds` seconds; neither: at epoch ends only."""

    steps: int = 0
    seconds: float = 0.0


_INTERVAL = re.compile(r"^(?P<number>\d+(\.\d+)?)(?P<unit>s?)$")


def parse_interval(flag, text):
    """`Interval` of a flag's value: `N` steps, `Ns` seconds, 0 for epoch ends only. Raises
    `UserError` on any other form (names `flag` and the value)."""
    match = _INTERVAL.match(text.strip())
    if match is None or (not match["unit"] and "." in match["number"]):
        raise UserError(f"--{flag}={text}: expected a number of steps (100), of seconds (30s), or 0 for epoch ends")
    if match["unit"]:
        return Interval(seconds=float(match["number"]))
    return Interval(steps=int(match["number"]))
