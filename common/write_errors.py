"""Writing files: `WriteError`, which names the path and reason of an OSError on write (disk full,
quota, read-only directory) so a tool prints one line, and the mode of new files."""

import contextlib
import os

from common.errors import WorkError


def default_mode(directory=False):
    """The mode `open`/`os.makedirs` gives a new file (directory), less the umask (not `tempfile`'s)."""
    umask = os.umask(0o077)  # Reading the umask sets it: put it back at once.
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


class WriteError(WorkError, RuntimeError):
    """A file could not be written (nothing left in its place); the tools exit with status 1."""

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
