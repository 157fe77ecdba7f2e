"""Every error a user's input can cause derives from `UserError`, the one class the tools catch."""

import ast
import importlib
import os

import pytest
from absl import flags

from common.errors import UserError, refused_flags_message
from tests.helpers import LAYERS, REPO_ROOT, product_files

# Not user errors: control flow inside one module, never raised to a tool.
INTERNAL = {"data.sources.deb_packages._TruncatedDownload"}


def _error_classes():
    """`module.Class` for every class named `...Error` in the product packages."""
    found = []
    for path in product_files():
        if path.split("/")[0] not in LAYERS:
            continue  # An entry script: its classes are the tool's own.
        with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        module = path[: -len(".py")].replace("/", ".")
        found += [f"{module}.{node.name}" for node in tree.body if isinstance(node, ast.ClassDef)]
    return [name for name in found if name.endswith("Error")]


def test_every_error_class_of_the_product_is_a_user_error():
    classes = _error_classes()
    assert len(classes) >= 20, classes
    not_user_errors = []
    for name in classes:
        module, class_name = name.rsplit(".", 1)
        error_class = getattr(importlib.import_module(module), class_name)
        if name not in INTERNAL and not issubclass(error_class, UserError):
            not_user_errors.append(name)
    assert not_user_errors == []


def test_entry_points_catch_user_error_not_a_list_of_classes():
    """A tool that catches ValueError or OSError around its work would print a bug as a one-line user
    error (a handler that turns one OSError into a `UserError` at its source is fine)."""
    for script in ("train.py", "evaluate.py", "translate.py", "export/__main__.py", "data/prepare.py"):
        with open(os.path.join(REPO_ROOT, script), encoding="utf-8") as handle:
            tree = ast.parse(handle.read())
        main = next(node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == "main")
        caught = {
            ast.unparse(handler.type) for node in main.body if isinstance(node, ast.Try) for handler in node.handlers
        }
        assert "UserError" in caught, (script, caught)
        assert not caught & {"ValueError", "OSError", "RuntimeError", "Exception"}, (script, caught)


def _refusal(argv):
    """absl's error for `argv` parsed against three flags, two validators, and its message as the
    tools print it."""
    flag_values = flags.FlagValues()
    flags.DEFINE_integer("beam_size", 4, "", flag_values=flag_values)
    flags.DEFINE_float("top_p", None, "", flag_values=flag_values)
    flags.DEFINE_float("scale", 1.0, "", flag_values=flag_values)

    def check_top_p(values):
        if values["top_p"] is not None and not 0 < values["top_p"] <= 1:
            raise flags.ValidationError(f"--top_p must be in (0, 1], received {values['top_p']}")
        return True

    flags.register_multi_flags_validator(["beam_size", "top_p"], check_top_p, message="", flag_values=flag_values)
    flags.register_validator("scale", lambda value: value > 0, "--scale must be above 0", flag_values=flag_values)
    with pytest.raises(flags.Error) as refused:
        flag_values(["tool", *argv])
    return str(refused.value), refused_flags_message(refused.value, flag_values)


def test_a_refused_flag_is_named_alone_with_its_value():
    raw, message = _refusal(["--top_p=1.5"])
    assert raw == "flags beam_size=4, top_p=1.5: --top_p must be in (0, 1], received 1.5"  # absl's own
    assert message == "--top_p must be in (0, 1], received 1.5"
    assert _refusal(["--scale=0"])[1] == "--scale=0.0 must be above 0"
    assert _refusal(["--scale=0", "--top_p=2"])[1].splitlines() == [
        "--top_p must be in (0, 1], received 2.0",
        "--scale=0.0 must be above 0",
    ]
    assert _refusal(["--beam_size=x"])[1] == "flag --beam_size=x: invalid literal for int() with base 10: 'x'"
