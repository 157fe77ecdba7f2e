"""translate.py's checks of its input's bytes: a UTF-8 byte-order mark at the start of a file is
dropped, and a NUL byte (binary or UTF-16 input) is refused with its file and line, for a file
before anything is translated."""

from common.errors import UserError

BOM = b"\xef\xbb\xbf"
CHUNK = 1 << 20


class NulByteError(UserError, ValueError):
    """Input with a NUL byte, named by file, line and byte."""

    def __init__(self, name, number, offset):
        super().__init__(
            f"{name} line {number}: a NUL byte at byte {offset} of the line: text input holds none (a binary or "
            "UTF-16 file? translate.py reads UTF-8)"
        )


def checked_bytes(raw, number, name):
    """A line's bytes (its ending dropped), the BOM of line 1 dropped; NulByteError for a NUL."""
    if number == 1 and raw.startswith(BOM):
        raw = raw[len(BOM) :]
    if b"\0" in raw:
        raise NulByteError(name, number, raw.index(b"\0"))
    return raw


def refuse_nul_bytes(*paths):
    """NulByteError for the first NUL byte of the files `paths` (None and '-' skipped: stdin is
    checked line by line as it is read); a file that cannot be opened is left to its reader."""
    for path in paths:
        if path in (None, "-"):
            continue
        try:
            handle = open(path, "rb")  # noqa: SIM115 (closed below)
        except OSError:
            continue
        with handle:
            lines, line_start = 0, 0  # newlines before the chunk, and where the current line began
            read = 0
            for chunk in iter(lambda handle=handle: handle.read(CHUNK), b""):
                nul = chunk.find(b"\0")
                end = len(chunk) if nul < 0 else nul
                newlines = chunk.count(b"\n", 0, end)
                if newlines:
                    line_start = read + chunk.rindex(b"\n", 0, end) + 1
                lines += newlines
                if nul >= 0:
                    raise NulByteError(path, lines + 1, read + nul - line_start)
                read += len(chunk)
