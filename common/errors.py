"""One base class for every error a user's input or environment can cause.

Each tool's entry point catches `UserError` alone and prints its message as one line (the message
names the file, line, flag or value and what was expected) with a non-zero exit; any other
exception is a bug and keeps its traceback. Subclasses may also derive from the built-in class
their callers have always caught (`ValueError`, `RuntimeError`), so existing handlers keep working.
"""


class UserError(Exception):
    """Bad input or an unusable environment, described in a message meant for the user."""
