"""Keeping TensorFlow's start-up chatter off a user's terminal.

TensorFlow's C++ libraries write to file descriptor 2 whatever `TF_CPP_MIN_LOG_LEVEL` says, so
`quiet_tool_output` routes it through a thread that drops absl-formatted INFO and WARNING lines and
known harmless errors of a machine without a GPU, and passes the rest on at once."""

import atexit
import logging
import os
import re
import sys
import threading

from absl import flags

# absl's C++ log prefix: severity letter, MMDD, time, thread id, file:line].
_ABSL_LINE = re.compile(rb"^[IWEF]\d{4} [\d:.]+ +\d+ [^ \]]+:\d+\] ")
_DROPPED_LEVELS = (b"I", b"W")
# Error-level lines that only say a CPU machine has no GPU, or that a kernel falls back.
_HARMLESS_ERRORS = (b"failed call to cuInit", b"oneDNN supports DT_INT64 only", b"Unable to register cu")
_NOISE_PREFIXES = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"To enable the following instructions:",
)
_installed = None


def is_noise(line):
    """Whether a line (bytes, without its newline) is start-up chatter to drop."""
    if line.startswith(_NOISE_PREFIXES):
        return True
    if _ABSL_LINE.match(line):
        return line[:1] in _DROPPED_LEVELS or any(text in line for text in _HARMLESS_ERRORS)
    return False


def _may_become_noise(partial):
    """Whether an unfinished line could still turn out to be noise (so it waits for its end)."""
    if not partial or partial.startswith((b"\r", b"\n")):
        return False
    return any(prefix.startswith(partial[: len(prefix)]) for prefix in _NOISE_PREFIXES) or bool(
        re.match(rb"^[IWEF]\d{0,4}( |$)", partial[:6])
    )


class _StderrFilter:
    """Descriptor 2 -> a pipe -> this thread -> the original stderr, minus the noise."""

    def __init__(self):
        self.original = os.dup(2)
        read_end, write_end = os.pipe()
        os.dup2(write_end, 2)
        os.close(write_end)
        self.read_end = read_end
        self.thread = threading.Thread(target=self._pump, name="stderr-filter", daemon=True)
        self.thread.start()

    def _write(self, data):
        while data:
            written = os.write(self.original, data)
            data = data[written:]

    def _pump(self):
        pending = b""
        while True:
            try:
                chunk = os.read(self.read_end, 65536)
            except OSError:
                break
            if not chunk:
                break
            pending += chunk
            *lines, pending = pending.split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if not is_noise(line))
            if pending and not _may_become_noise(pending):
                kept, pending = kept + pending, b""
            if kept:
                self._write(kept)
        if pending and not is_noise(pending):
            self._write(pending)

    def close(self):
        """Puts the original stderr back and lets the thread write what is left (once)."""
        if self.read_end is None:
            return
        sys.stderr.flush()
        os.dup2(self.original, 2)  # Closes the pipe's last write end: the thread reads EOF.
        self.thread.join(timeout=5)
        os.close(self.read_end)
        self.read_end = None


def stderr_descriptor():
    """The descriptor of the tool's real stderr: the original while the filter runs, else 2."""
    return _installed.original if _installed is not None else 2


def restore_stderr():
    """Stops filtering and writes out what is pending (before an `os._exit`, which skips atexit)."""
    global _installed
    if _installed is not None:
        _installed.close()
        _installed = None


def _verbose():
    """Whether absl's `--verbosity` (`-v`) was given at INFO (0) or above: from the parsed flags, or,
    before absl parsed them, from the command line itself."""
    # absl defines --verbosity with its logging module; a script parsing its own arguments may not.
    verbosity = flags.FLAGS["verbosity"] if "verbosity" in flags.FLAGS else None
    if verbosity is not None and verbosity.present:
        return verbosity.value >= 0
    if flags.FLAGS.is_parsed():
        return False
    probe = flags.FlagValues()
    flags.DEFINE_integer("verbosity", -1, "absl's verbosity", short_name="v", flag_values=probe)
    try:
        probe(sys.argv, known_only=True)
    except flags.Error:
        return False  # absl's own parse says what is wrong with it.
    return bool(probe["verbosity"].present) and probe.verbosity >= 0


def quiet_tool_output():
    """Filters this process's stderr unless absl's `--verbosity` is INFO (0) or above; call it
    before TensorFlow is imported (`common.errors.run_tool` does). Idempotent."""
    global _installed

    if _installed is not None or _verbose():
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    logging.getLogger("tensorflow").setLevel(logging.ERROR)
    try:
        _installed = _StderrFilter()
    except OSError:
        return  # No descriptor 2 to filter (a closed stderr): nothing to keep quiet.
    atexit.register(_installed.close)
