"""One base class for every error a user's input or environment can cause, and the tools' exit statuses.

Each tool's entry point catches `UserError` alone and prints its message as one line (the message
names the file, line, flag or value and what was expected), exiting with the error's
`exit_status`; any other exception is a bug and keeps its traceback. Subclasses may also derive
from the built-in class their callers have always caught (`ValueError`, `RuntimeError`), so
existing handlers keep working.

Every tool exits with (docs/design.md, "Exit status"): 0 done; `BAD_INPUT_STATUS` (2) for bad flags
or input, refused before any work; `FAILURE_STATUS` (1) for a failure during the work (a full
disk, a loss gone NaN, a crash); 130 after SIGINT (Ctrl-C) and 143 after SIGTERM, 128 + the
signal's number as a shell reports a process a signal ended.
"""

import sys

from absl import app, flags

from common import quiet_logs

FAILURE_STATUS = 1
BAD_INPUT_STATUS = 2
INTERRUPTED_STATUS = 130  # SIGINT (Ctrl-C).


class UserError(Exception):
    """Bad input or an unusable environment, described in a message meant for the user."""

    exit_status = BAD_INPUT_STATUS


class WorkError(UserError):
    """The work started and could not finish for a reason the user must act on (a full disk, a
    loss gone NaN): the tool exits with `FAILURE_STATUS`, not as for bad input."""

    exit_status = FAILURE_STATUS


def refused_flags_message(error, flag_values=None):
    """The message of absl's `flags.Error` without the values absl puts before a validator's
    refusal: every checked flag's before a multi-flag validator's (`flags a=1, b=None, ...: --b
    must ...` becomes `--b must ...`); a single flag's joined to a refusal that names the flag
    (`flag --b=3: --b must ...` becomes `--b=3 must ...`). Each line names the flag that is wrong,
    its value and what is allowed."""
    flag_values = flag_values if flag_values is not None else flags.FLAGS
    prefixes = {}  # `<absl's list of values>: ` -> the flag of a single-flag validator, or None
    for name in flag_values:
        for validator in flag_values[name].validators:
            prefixes[validator.print_flags_with_values(flag_values) + ": "] = getattr(validator, "flag_name", None)
    lines = []
    for line in str(error).split("\n"):
        for prefix, single in sorted(prefixes.items(), key=lambda item: -len(item[0])):
            if not line.startswith(prefix):
                continue
            rest = line[len(prefix) :]
            if single is None or rest.startswith(f"--{single}="):
                line = rest
            elif rest.startswith(f"--{single} "):  # `flag --b=3: ` -> `--b=3`
                line = prefix[len("flag ") : -len(": ")] + rest[len(f"--{single}") :]
            break
        lines.append(line)
    return "\n".join(lines)


def flags_parser(tool):
    """A `flags_parser` for `absl.app.run` that prints a refused flag (a bad value, or a validator's
    refusal) as `<tool>: error: ...` and exits with `BAD_INPUT_STATUS`, where absl exits with 1."""

    def parse(argv):
        try:
            return flags.FLAGS(argv)
        except flags.Error as error:
            message = refused_flags_message(error)
            print(f"{tool}: error: {message}\nPass --helpshort or --helpfull to see help on flags.", file=sys.stderr)
            sys.exit(BAD_INPUT_STATUS)

    return parse


def run_tool(main, tool):
    """`absl.app.run(main)` with the tools' conventions: flags parsed by `flags_parser(tool)`; an
    `app.UsageError` or `UserError` raised by `main` printed as one line `<tool>: error: ...` (absl
    would print the module's docstring and every flag) with `BAD_INPUT_STATUS` (a `UserError`: its
    `exit_status`); Ctrl-C (KeyboardInterrupt) printed as `<tool>: interrupted` with
    `INTERRUPTED_STATUS`, without a traceback. TensorFlow's start-up lines are kept off stderr
    from the start (`quiet_logs`), before the flags' validators run."""

    def guarded(argv):
        try:
            return main(argv)
        except (app.UsageError, UserError) as error:
            print(f"{tool}: error: {error}", file=sys.stderr)
            sys.exit(getattr(error, "exit_status", BAD_INPUT_STATUS))
        except KeyboardInterrupt:
            print(f"{tool}: interrupted", file=sys.stderr)
            sys.exit(INTERRUPTED_STATUS)

    quiet_logs.quiet_tool_output()
    app.run(guarded, flags_parser=flags_parser(tool))
