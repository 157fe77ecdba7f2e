"""Imports point one way: `data`, `models` -> `training` -> `evaluation` -> `export` (DESIGN.md).

Every module under the five packages is parsed (imports at module level and inside functions); an
import of a higher layer, or between `data` and `models`, fails the test with its file and line.
"""

import ast
import os

from tests.conftest import REPO_ROOT

RANKS = {"data": 0, "models": 0, "training": 1, "evaluation": 2, "export": 3}

# models/ importing data.special_ids: the special ids are moving out of data/ (the only imports
# across the data/models line that the rule tolerates until then). The test asserts that this is
# exactly what it finds, so the entries go when the imports do.
_PENDING_MODELS_TO_DATA = {
    ("models/beam_search.py", "data.special_ids"),
    ("models/losses.py", "data.special_ids"),
    ("models/metrics.py", "data.special_ids"),
    ("models/transformer.py", "data.special_ids"),
    ("models/translation.py", "data.special_ids"),
}


def _imported_modules(tree):
    """`(line, module)` for every absolute import in the tree, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _imports_across_packages():
    """`(path, line, importing package, imported module, imported package)` for every import of
    one of the five packages from another."""
    found = []
    for package in RANKS:
        for root, _, files in os.walk(os.path.join(REPO_ROOT, package)):
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(root, name)
                with open(path, encoding="utf-8") as handle:
                    tree = ast.parse(handle.read(), filename=path)
                relative = os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")
                for line, module in _imported_modules(tree):
                    imported = module.split(".")[0]
                    if imported in RANKS and imported != package:
                        found.append((relative, line, package, module, imported))
    return found


def test_imports_point_one_way():
    backward, models_to_data = [], set()
    for path, line, package, module, imported in _imports_across_packages():
        if RANKS[imported] > RANKS[package]:
            backward.append(f"{path}:{line} ({package}) imports {module} ({imported}, a higher layer)")
        elif RANKS[imported] == RANKS[package]:
            if (package, imported) == ("models", "data") and (path, module) in _PENDING_MODELS_TO_DATA:
                models_to_data.add((path, module))
            else:
                backward.append(f"{path}:{line} ({package}) imports {module} ({imported}, the same layer)")
    assert not backward, "imports pointing back:\n" + "\n".join(backward)
    assert models_to_data == _PENDING_MODELS_TO_DATA, (
        f"_PENDING_MODELS_TO_DATA lists {sorted(_PENDING_MODELS_TO_DATA - models_to_data)}, which are gone: "
        "remove them from the list"
    )


def test_the_check_sees_imports_inside_functions():
    tree = ast.parse("import os\n\ndef f():\n    from evaluation.scoring import bleu\n    import export.exporter\n")
    assert list(_imported_modules(tree)) == [(1, "os"), (4, "evaluation.scoring"), (5, "export.exporter")]
