"""A Python process without TensorFlow, as on a GPU machine that has JAX and Keras only.

`environment(directory)` writes a `sitecustomize.py` into `directory` and returns the environment
of a process that runs with it: on its first import the process installs a `sys.meta_path` finder
that fails every import of `tensorflow` or `tensorflow_text` (and their submodules) with the
ModuleNotFoundError of a missing package, and appends each refused import to `REFUSED_FILE`, with
the file and line of the `import` statement. A library that tries TensorFlow and carries on without
it (keras-hub does) passes, as it would on that machine; `refused_by_project(directory)` lists the
refused imports whose statement is in this project's own code, so that a test also fails where the
project catches the ImportError itself; `started(directory)` lists the processes that ran with the
blocker, so that a test can check that its subprocesses (and theirs) did.

From a shell (e.g. to run a test directory without TensorFlow):

    python -m tests.no_tensorflow /tmp/no-tf    # prints the PYTHONPATH entry to prepend
"""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REFUSED_FILE = "refused-imports.txt"
STARTED_FILE = "started-processes.txt"
BLOCKED = ("tensorflow", "tensorflow_text")

_SITECUSTOMIZE = '''\
"""Written by tests/no_tensorflow.py: imports of {blocked} fail in this process."""

import sys

_BLOCKED = {blocked!r}
_LOG = {log!r}
_STARTED = {started!r}


class _RefuseTensorFlow:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] not in _BLOCKED:
            return None
        frame = sys._getframe(1)
        while frame is not None and (
            frame.f_code.co_filename.startswith("<frozen") or frame.f_code.co_filename.endswith("importlib/__init__.py")
        ):
            frame = frame.f_back  # importlib's own frames: the first other one holds the import
        where = f"{{frame.f_code.co_filename}}:{{frame.f_lineno}}" if frame is not None else "?"
        with open(_LOG, "a", encoding="utf-8") as log:
            log.write(f"{{name}}\\t{{where}}\\n")
        raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by tests/no_tensorflow.py)", name=name)


sys.meta_path.insert(0, _RefuseTensorFlow())
with open(_STARTED, "a", encoding="utf-8") as started:
    started.write(" ".join(sys.argv) + "\\n")
'''


def environment(directory, base=None):
    """The environment (a dict, from `base` or `os.environ`) of a process in which TensorFlow cannot
    be imported, this project on its path; `directory` receives `sitecustomize.py` and the log."""
    os.makedirs(directory, exist_ok=True)
    log = os.path.join(os.path.abspath(directory), REFUSED_FILE)
    with open(os.path.join(directory, "sitecustomize.py"), "w", encoding="utf-8") as handle:
        started = os.path.join(os.path.abspath(directory), STARTED_FILE)
        handle.write(_SITECUSTOMIZE.format(blocked=BLOCKED, log=log, started=started))
    env = dict(os.environ if base is None else base)
    path = [os.path.abspath(directory), REPO_ROOT, env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(entry for entry in path if entry)
    return env


def started(directory):
    """The command lines (`sys.argv` joined) of the processes that have run with the blocker: a test
    checks that its subprocesses, and theirs, did."""
    path = os.path.join(directory, STARTED_FILE)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle if line.strip()]


def refused(directory):
    """The refused imports so far, as (module name, "file:line" of the import statement)."""
    log = os.path.join(directory, REFUSED_FILE)
    if not os.path.exists(log):
        return []
    with open(log, encoding="utf-8") as handle:
        return [tuple(line.rstrip("\n").split("\t", 1)) for line in handle if line.strip()]


def refused_by_project(directory):
    """The refused imports whose `import` statement is in this repository's code (not in an
    installed package, not in the virtual environment)."""
    ours = []
    for name, where in refused(directory):
        path = os.path.abspath(where.rsplit(":", 1)[0])
        inside = path.startswith(REPO_ROOT + os.sep) and os.sep + ".venv" + os.sep not in path
        if inside and os.sep + "site-packages" + os.sep not in path:
            ours.append((name, where))
    return ours


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else "/tmp/no-tensorflow"
    print(environment(target)["PYTHONPATH"].split(os.pathsep)[0])
