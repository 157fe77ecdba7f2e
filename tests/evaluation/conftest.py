"""translate.py's `run` in this process, for the tests of its modes and its flags' wiring."""

import importlib.util
import io
import os
import sys

import pytest

from common.errors import UserError
from inference.runs import DEFAULT_CHECKPOINT
from tests.helpers import REPO_ROOT, SHARED_EXPORT_GROUP, tool_flags


def _imported_tool(name):
    """Yields the entry script `name`.py imported as a module, its flags defined inside `tool_flags`."""
    with tool_flags():
        spec = importlib.util.spec_from_file_location(f"{name}_tool", os.path.join(REPO_ROOT, f"{name}.py"))
        tool = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tool)
        yield tool


@pytest.fixture(scope="module")
def translate_tool():
    """translate.py imported in this process. Its flags live in absl's global FLAGS while a test
    module's tests run and are deleted after; flags another tool defined there before (train.py's,
    which benchmarks/quality.py imports) are set aside meanwhile and put back."""
    yield from _imported_tool("translate")


@pytest.fixture(scope="module")
def _loaded_runs():
    """What `runs_loaded_once` keeps while a test module runs: the models by run and checkpoint
    choice, and each model's compiled functions by its id (the model kept with them, so that the id
    stays its own)."""
    return {}, {}


@pytest.fixture
def runs_loaded_once(_loaded_runs, monkeypatch):
    """Within a test module, a run's quiet loads (translate.py's) give one model per checkpoint
    choice (an ensemble of a run with itself: the one model twice), and every `Translator` of one
    model shares its compiled searches, alignment functions and scorer: each traces once per module
    for each setting and shape, where each translator would trace it again, and tracing takes
    longer than translating a few lines. A loud load (what evaluate.py prints is checked) and a
    refused one go through whole."""
    from inference.runs import RunDir
    from inference.translator import Translator

    models, compiled = _loaded_runs
    load_model, init, score = RunDir.load_model, Translator.__init__, Translator.score

    def loaded_once(run, checkpoint=DEFAULT_CHECKPOINT, flag="--checkpoint", quiet=False):
        if not quiet:
            return load_model(run, checkpoint, flag, quiet)
        key = (os.path.realpath(run.path), checkpoint)
        if key not in models:
            models[key] = load_model(run, checkpoint, flag, quiet)
        return models[key]

    def shared(translator):
        model = translator.model
        return compiled.setdefault(id(model), dict(model=model, searches={}, aligners={}, scorer=None))

    def sharing(translator, *args, **kwargs):
        init(translator, *args, **kwargs)
        functions = shared(translator)
        translator._searches, translator._aligners = functions["searches"], functions["aligners"]

    def scoring(translator, *args, **kwargs):
        functions = shared(translator)
        translator._scorer = translator._scorer or functions["scorer"]
        try:
            return score(translator, *args, **kwargs)
        finally:
            functions["scorer"] = translator._scorer

    monkeypatch.setattr(RunDir, "load_model", loaded_once)
    monkeypatch.setattr(Translator, "__init__", sharing)
    monkeypatch.setattr(Translator, "score", scoring)


@pytest.fixture
def translate_here(translate_tool, runs_loaded_once, monkeypatch, capsys):
    """`translate_here(*flags, stdin=b"")`: translate.py's `run` in this process with `flags` and
    `stdin`, as its `main` calls it. Returns `(output lines, the UserError's message or None,
    stderr text)`; main prints such an error as one line and exits with status 2
    (tests/evaluation/test_run_search.py runs that through translate.py). With --output among
    `flags`, the lines go through main's resumable writer into that file and none are returned.
    Its runs load each run once and share their traces (`runs_loaded_once`): a translator the
    test makes of the same model gives the same translations without tracing them again."""

    def translate_here(*argv, stdin=b""):
        translate_tool.FLAGS.unparse_flags()
        translate_tool.FLAGS(["translate.py", *argv])
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
        lines, error = [], None
        try:
            if translate_tool.FLAGS.output == "-":
                translate_tool.run(lines.append)
            else:
                with translate_tool.translate_tool.output_lines(translate_tool.FLAGS.output) as write:
                    translate_tool.run(write)
        except UserError as refused:
            error = str(refused)
        finally:
            translate_tool.FLAGS.unparse_flags()
        return lines, error, capsys.readouterr().err

    return translate_here


@pytest.fixture(scope="module")
def evaluate_tool():
    """evaluate.py imported in this process, its flags in absl's FLAGS as `translate_tool`'s are
    (a module's tests use one of the two)."""
    yield from _imported_tool("evaluate")


@pytest.fixture
def evaluate_here(evaluate_tool, capsys):
    """`evaluate_here(*flags)`: evaluate.py's `main` in this process with `flags`, as `run_tool`
    calls it after absl's parse; returns `(exit status, stdout text, stderr text)`. --verbosity=0
    keeps main from filtering this process's stderr (common/quiet_logs.py). How the status and the
    output reach a shell: the runs of evaluate.py in tests/evaluation/test_evaluate.py."""

    def evaluate_here(*argv):
        evaluate_tool.FLAGS.unparse_flags()
        evaluate_tool.FLAGS(["evaluate.py", "--verbosity=0", *argv])
        try:
            status = evaluate_tool.main([])
        finally:
            evaluate_tool.FLAGS.unparse_flags()
        captured = capsys.readouterr()
        return status, captured.out, captured.err

    return evaluate_here


# The xdist group of the tests that use `export_loaded_once` on the shared export: the export tests'
# group, whose process loads it once for all of them (`make test`: --dist loadgroup).
LOADED_EXPORT_GROUP = SHARED_EXPORT_GROUP


@pytest.fixture(scope="session")
def _loaded_exports():
    return {}


@pytest.fixture
def export_loaded_once(_loaded_exports, monkeypatch, shared_export_loaded_once):
    """Each export loaded once per test process: a later `SavedModelTranslator` of the same export
    and settings (made by translate.py's `run` or `evaluator.evaluate`, through `load_translator`)
    is the one the first load made, its signatures already instantiated; the shared export's
    SavedModel is the export tests' (`shared_export_loaded_once`). Loading an export takes longer
    than translating a few lines with it; the first load runs it whole."""
    from inference import saved_model_translator

    load = saved_model_translator.SavedModelTranslator

    def loaded_once(path, *args, **kwargs):
        key = (os.path.realpath(path), args, tuple(sorted(kwargs.items())))
        if key not in _loaded_exports:
            _loaded_exports[key] = load(path, *args, **kwargs)
        return _loaded_exports[key]

    monkeypatch.setattr(saved_model_translator, "SavedModelTranslator", loaded_once)
