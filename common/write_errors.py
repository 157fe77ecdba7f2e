"""Writing files: one error for a file that could not be written, and the mode of new files.

Disk full, quota, a file-size limit, a read-only or vanished directory: the OSError becomes a
`WriteError` whose message names the path and the reason, so a tool can print one line instead of a
traceback whose OSError (raised by `write()`) often names no file at all.
"""

import contextlib
import os

from common.errors import WorkError


def default_mode(directory=False):
    """The mode `open`/`os.makedirs` would give a new file (directory): 0o666 (0o777) less the umask.
    `tempfile`'s 0o600/0o700 would keep a model from a server or colleague running as another user."""
    umask = os.umask(0o077)  # Reading the umask sets it: put it back at once.
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


class WriteError(WorkError, RuntimeError):
    """A file could not be written; the message names the path and the reason. Nothing was left
    in its place. A failure during the work: the tools exit with status 1."""

    def __init__(self, path, error, detail=None):
        reason = os.strerror(error.errno) if getattr(error, "errno", None) else str(error)
        if detail:
            reason = f"{reason} ({detail})"
        super().__init__(f"cannot write {path}: {reason}")
        self.path, self.errno, self.error, self.detail = path, getattr(error, "errno", None), error, detail

    def renamed(self, path):
        """The same failure named by `path` (the file the user knows, not its temporary name)."""
        return WriteError(path, self.error, self.detail)


@contextlib.contextmanager
def writing(path):
    """Within the block, an OSError is raised as `WriteError(path, ...)`."""
    try:
        yield
    except OSError as error:
        raise WriteError(path, error) from None
