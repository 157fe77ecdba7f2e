"""One base class for every error a user's input or environment can cause.

Each tool's entry point catches `UserError` alone and prints its message as one line (the message
names the file, line, flag or value and what was expected) with a non-zero exit; any other
exception is a bug and keeps its traceback. Subclasses may also derive from the built-in class
their callers have always caught (`ValueError`, `RuntimeError`), so existing handlers keep working.
"""

import sys

from absl import flags

# The exit status of a tool that refuses its input (a flag, a file, a value).
BAD_INPUT_STATUS = 2


class UserError(Exception):
    """Bad input or an unusable environment, described in a message meant for the user."""


def flags_parser(tool):
    """A `flags_parser` for `absl.app.run` that prints a refused flag (a bad value, or a validator's
    refusal) as `<tool>: error: ...` and exits with `BAD_INPUT_STATUS`, where absl exits with 1."""

    def parse(argv):
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            print(f"{tool}: error: {error}\nPass --helpshort or --helpfull to see help on flags.", file=sys.stderr)
            sys.exit(BAD_INPUT_STATUS)

    return parse
