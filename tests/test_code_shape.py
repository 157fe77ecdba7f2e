"""No product function over `MAX_LINES` lines (its `def` to its last line, less its docstring's
lines: an Args/Returns docstring is documentation, not a step): a longer one is a sequence of steps
that wants names of its own.

The product is the packages of tests/helpers.py LAYERS and the entry scripts. `ALLOWED` lists the
functions not split yet, each with why; an entry that no longer exceeds the limit fails the test
too, so the list only shrinks.
"""

import ast
import os

from tests.helpers import REPO_ROOT, product_files

MAX_LINES = 80

ALLOWED: dict[str, str] = {}  # "path::name": why it is not split yet


def _docstring_lines(function):
    """How many lines `function`'s docstring spans (0 without one)."""
    first = function.body[0]
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return first.end_lineno - first.lineno + 1
    return 0


def _functions(tree, prefix=""):
    """`(qualified name, line, length in lines)` of every function in `tree`, nested ones as `outer.inner`;
    the length runs from the `def` to the last line, less the docstring's lines."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node.lineno, node.end_lineno - node.lineno + 1 - _docstring_lines(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield from _functions(node, prefix + node.name + ".")


def _lengths():
    """`{path::name: (line, length)}` for every product function."""
    found = {}
    for path in product_files():
        with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=path)
        for name, line, length in _functions(tree):
            found[f"{path}::{name}"] = (line, length)
    return found


def test_no_product_function_is_longer_than_the_limit():
    long = [
        f"{key.split('::')[0]}:{line} {key.split('::')[1]} has {length} lines"
        for key, (line, length) in sorted(_lengths().items())
        if length > MAX_LINES and key not in ALLOWED
    ]
    assert not long, f"functions over {MAX_LINES} lines (split them into named steps):\n" + "\n".join(long)


def test_the_allow_list_holds_only_functions_still_over_the_limit():
    lengths = _lengths()
    stale = [key for key in ALLOWED if key not in lengths or lengths[key][1] <= MAX_LINES]
    assert not stale, "no longer over the limit (remove from ALLOWED): " + ", ".join(stale)


# In models/ the limit counts the docstring too, `def` to the last line; `MODELS_ALLOWED` as `ALLOWED`.
MODELS_ALLOWED = {}


def test_no_models_function_is_longer_than_the_limit_docstring_included():
    long = []
    for path in product_files():
        if not path.startswith("models/"):
            continue
        with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=path)
        for node in ast.walk(tree):
            is_function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if is_function and node.end_lineno - node.lineno + 1 > MAX_LINES:
                if f"{path}::{node.name}" not in MODELS_ALLOWED:
                    long.append(f"{path}:{node.lineno} {node.name} has {node.end_lineno - node.lineno + 1} lines")
    assert not long, f"models/ functions over {MAX_LINES} lines, docstring included:\n" + "\n".join(long)


def test_the_check_measures_nested_functions_and_methods():
    tree = ast.parse("def f():\n    def g():\n        pass\n    return g\n\nclass C:\n    def m(self):\n        pass\n")
    assert list(_functions(tree)) == [("f", 1, 4), ("f.g", 2, 2), ("C.m", 7, 2)]


def test_the_check_leaves_out_docstrings():
    tree = ast.parse(
        'def f():\n    """One.\n\n    Two.\n    """\n    return 1\n\ndef g():\n    x = "not a docstring"\n    return x\n'
    )
    assert list(_functions(tree)) == [("f", 1, 2), ("g", 8, 3)]


def _unexplained_local_imports(source):
    """`(line, statement)` of each import inside a function that states no reason: imports belong at
    the top of the module unless a comment on the import, on the line above it, or on the first import
    of its run of consecutive imports says why (a backend-only module, a tool's start-up time, an
    optional package)."""
    lines = source.splitlines()
    tree = ast.parse(source)
    module_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)) or id(node) in module_level:
            continue
        first = node.lineno  # The first import of its run of imports (isort's groups: blank lines between).
        while first >= 2 and (
            lines[first - 2].lstrip().startswith(("import ", "from ")) or not lines[first - 2].strip()
        ):
            first -= 1
        while not lines[first - 1].strip():
            first += 1
        candidates = [lines[node.lineno - 1], lines[first - 1]] + ([lines[first - 2]] if first >= 2 else [])
        if not any("#" in line for line in candidates):
            found.append((node.lineno, lines[node.lineno - 1].strip()))
    return found


def test_imports_inside_functions_say_why():
    unexplained = []
    for path in product_files():
        with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
            source = handle.read()
        unexplained += [f"{path}:{line}: {statement}" for line, statement in _unexplained_local_imports(source)]
    assert unexplained == [], "imports inside functions without a reason:\n" + "\n".join(unexplained)


def test_the_import_check_reads_reasons_above_and_beside():
    source = (
        "import os\n\n"
        "def a():\n    import json\n\n"
        "def b():\n    # JAX backend only.\n    import jax\n    import jax.numpy\n\n"
        "def c():\n    import keras  # after the flag checks\n"
    )
    assert _unexplained_local_imports(source) == [(4, "import json")]
