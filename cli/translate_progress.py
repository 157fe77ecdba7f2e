"""translate.py's progress on stderr (`common.progress.ProgressLine`): lines done, their rate,
and the time left when the input's line count is known (a regular file, counted first)."""

import os
import stat
import sys
import time

from common.progress import ProgressLine

# Plain lines into a file or a pipe: at most one a minute (and the last one).
PLAIN_SECONDS = 60.0


def count_lines(path):
    """The lines of `path` ('-': stdin) as the tool reads them (a last line without its newline
    counts), from its current position; None unless it is a regular file (a pipe, a terminal)."""
    try:
        descriptor = sys.stdin.fileno() if path == "-" else os.open(path, os.O_RDONLY)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is a ValueError
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        position = os.lseek(descriptor, 0, os.SEEK_CUR) if path == "-" else 0
        newlines, last = 0, b"\n"
        while chunk := os.pread(descriptor, 1 << 20, position):
            newlines, last, position = newlines + chunk.count(b"\n"), chunk[-1:], position + len(chunk)
        return newlines + (last != b"\n")
    except OSError:
        return None
    finally:
        if path != "-":
            os.close(descriptor)


class InputProgress:
    """Reports `lines done[/total] (percent), rate, time left` through a `ProgressLine`, or
    nothing unless `enabled`.

    Args:
        total: the input's lines, or None (no percentage, no time left).
        stream: where to (default: stderr); seconds: between plain lines (not at a terminal).
        clock: seconds from a fixed point (`time.monotonic`).
    """

    def __init__(self, total=None, stream=None, seconds=PLAIN_SECONDS, enabled=True, clock=time.monotonic):
        self._line = ProgressLine(stream, seconds=seconds) if enabled else None
        self._total, self._done, self._first = total, 0, 0
        self._sentences = None
        self._clock = clock
        self._started = clock()

    @property
    def enabled(self):
        """Whether the line is shown at all."""
        return self._line is not None

    def skip(self, lines):
        """`lines` done before this run (a resumed output): counted as done, not in the rate."""
        self._done += lines
        self._first += lines

    def advance(self, lines, sentences=None):
        """`lines` more input lines done (holding `sentences` sentences, when told)."""
        if self._line is None:
            return
        self._done += lines
        if sentences is not None:
            self._sentences = (self._sentences or 0) + sentences
        if self._total is None or self._done < self._total:  # The whole input: `finish` reports it.
            self._line.update(self.text())

    def finish(self):
        """The last report, written wherever the stream is."""
        if self._line is not None:
            self._line.update(self.text(final=True), final=True)

    def text(self, final=False):
        seconds = max(self._clock() - self._started, 1e-9)
        done = f"{self._done}/{self._total} lines" if self._total is not None else f"{self._done} lines"
        if self._total:
            done += f" ({100 * self._done / self._total:.1f}%)"
        rate = (self._done - self._first) / seconds
        parts = [f"translate.py: {done}"]
        if self._sentences is not None:
            parts.append(f"{self._sentences / seconds:.1f} sentences/s")
        parts.append(f"{rate:.1f} lines/s")
        if final:
            parts.append(f"in {duration(seconds)}")
        elif self._total is not None and rate > 0:
            parts.append(f"{duration((self._total - self._done) / rate)} left")
        return ", ".join(parts)


def duration(seconds):
    """`1h02m`, `5m07s` or `12s`."""
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"
