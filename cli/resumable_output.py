"""translate.py's `--output=FILE`, written so that a killed run can go on where it stopped.

The output is appended to in input order; after each window its lines are flushed, then the
record FILE.progress is replaced (written aside and renamed) by the window's end: input lines
done, output bytes, a BLAKE2 digest of those input lines, and the flags that shape the output. A
kill (even SIGKILL) leaves the file a prefix of the full output and a record of a window end
within it. A new run into the same FILE with a record there checks the flags, reads past the
lines done while checking their digest (a changed input is refused, whatever its name, a pipe
too), cuts the file back to the recorded end (a partial last line, or lines of an unrecorded
window) and appends the rest. The record is removed when the run ends well.
"""

import hashlib
import json
import os
import stat
import sys

from common.errors import UserError
from common.json_files import write_json_atomically
from common.write_errors import writing

SUFFIX = ".progress"


class ResumeError(UserError, ValueError):
    """An interrupted run's output that this run cannot go on with (other flags, another input)."""


class ResumableOutput:
    """Output lines into `path`, resumable (see the module's docstring). Call it with a line to
    write it; `resume` the input stream, and `checkpoint` after each window's lines.

    Args:
        path: the output file. One that exists and is not a regular file (/dev/null, a FIFO) is
            written plainly, without a record.
        settings: the flags that shape the output, JSON values by name.
        resume: go on from a record left by a killed run (False: start over).
    """

    def __init__(self, path, settings, resume=True):
        self.path, self.record_path = path, path + SUFFIX
        self.settings = json.loads(json.dumps(settings, default=str))  # as the record reads back
        self.lines_done = 0  # input lines whose output is in the file, skipped by `resume`
        self._pending = None  # the record to resume from, once the input is checked
        self._digest = hashlib.blake2b(digest_size=16)
        self._lines = 0  # input lines seen by `resume`'s stream
        self._bytes = 0
        self._recorded_lines = None  # in the record this run wrote last
        try:
            plain = os.path.exists(path) and not stat.S_ISREG(os.stat(path).st_mode)
        except OSError:
            plain = False
        self._recorded = not plain
        if self._recorded and resume:
            self._pending = self._resumable()
        try:
            self._handle = open(path, "ab" if self._pending else "wb")  # noqa: SIM115 (closed by `close`)
        except OSError as error:
            raise ResumeError(f"--output={path}: cannot write: {error.strerror}") from error
        if self._recorded and not self._pending:
            self._write_record()

    def _resumable(self):
        """The record of a killed run to go on from, or None; ResumeError where it was written with
        other flags, or its file is shorter than recorded."""
        try:
            with open(self.record_path, encoding="utf-8") as handle:
                record = json.load(handle)
            size = os.path.getsize(self.path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise ResumeError(f"{self.record_path}: not a record of translate.py ({error}); {self._over}") from None
        if not isinstance(record, dict) or not {"settings", "lines", "bytes", "input"} <= record.keys():
            raise ResumeError(f"{self.record_path}: not a record of translate.py; {self._over}")
        if not record["lines"]:
            return None
        changed = [
            f"--{name}={record['settings'].get(name)!r} (now {value!r})"
            for name, value in sorted(self.settings.items())
            if record["settings"].get(name) != value
        ]
        if changed:
            raise ResumeError(
                f"--output={self.path}: an interrupted run wrote its first {record['lines']} lines with other flags: "
                f"{', '.join(changed)}; give the same flags to go on, or {self._over}"
            )
        if size < record["bytes"]:
            raise ResumeError(
                f"--output={self.path}: {size} bytes, fewer than the {record['bytes']} an interrupted run recorded "
                f"in {self.record_path}: the file was changed; {self._over}"
            )
        return record

    @property
    def _over(self):
        return f"pass --noresume to translate from the start into {self.path}"

    def resume(self, lines, name):
        """The `(number, text)` stream `lines` (of the input `name`) after the lines the killed
        run did, which are read and checked against its record (ResumeError if they differ);
        then the file is cut back to the record's end. Every line is counted into the digest."""
        if self._pending is not None:
            done = self._pending["lines"]
            for _ in range(done):
                item = next(lines, None)
                if item is None:
                    break
                self._add(item[1])
            if self._lines != done or self._digest.hexdigest() != self._pending["input"]:
                raise ResumeError(
                    f"--output={self.path}: an interrupted run translated the first {done} lines of another input "
                    f"than {name} ({self.record_path}); {self._over}"
                )
            with writing(self.path):
                self._handle.truncate(self._pending["bytes"])
            self._bytes, self.lines_done, self._pending = self._pending["bytes"], done, None
            print(f"translate.py: {self.path}: going on after line {done} ({self.record_path})", file=sys.stderr)
        return self._counted(lines)

    def _counted(self, lines):
        for item in lines:
            self._add(item[1])
            yield item

    def _add(self, text):
        self._digest.update(text.encode("utf-8", "surrogatepass") + b"\n")
        self._lines += 1

    def __call__(self, line):
        data = line.encode("utf-8", "surrogatepass") + b"\n"
        with writing(self.path):
            self._handle.write(data)
        self._bytes += len(data)

    def checkpoint(self):
        """Records that the output of every input line read so far is written (after a window)."""
        if self._recorded:
            with writing(self.path):
                self._handle.flush()
            self._write_record()

    def _write_record(self):
        record = dict(lines=self._lines, bytes=self._bytes, input=self._digest.hexdigest(), settings=self.settings)
        with writing(self.record_path):
            write_json_atomically(self.record_path, record)
        self._recorded_lines = self._lines

    def finish(self):
        """The run ended well: the output flushed and closed, the record removed."""
        self.close()
        if self._recorded and os.path.exists(self.record_path):
            os.remove(self.record_path)

    def close(self):
        """Closes the file (flushing what was written); the record stays for a later run, unless
        this run wrote it with no line done (a run refused before its first window)."""
        if not self._handle.closed:
            with writing(self.path):
                self._handle.close()
        if self._recorded_lines == 0 and os.path.exists(self.record_path):
            os.remove(self.record_path)


def resumed(write, lines, name):
    """`(lines, lines done, checkpoint)` of translate.py's input stream `lines` (named `name`) for
    the writer `write`: a `ResumableOutput` resumes it (`checkpoint` records each window's end),
    any other writer takes it whole."""
    if not isinstance(write, ResumableOutput):
        return lines, 0, lambda: None
    lines = write.resume(lines, name)
    return lines, write.lines_done, write.checkpoint
