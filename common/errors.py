"""One base class for every error a user's input or environment can cause, and the exit statuses
(docs/design.md, "Exit status"). Entry points catch `UserError` alone and print it as one line; any
other exception is a bug and keeps its traceback."""

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
    """absl's `flags.Error` message without the flag values absl prepends."""
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
    """`absl.app.run(main)` with the tools' conventions: a `UsageError` or `UserError` printed as
    one line `<tool>: error: ...` with its exit status, Ctrl-C as `<tool>: interrupted`, and
    TensorFlow's start-up lines kept off stderr."""

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
