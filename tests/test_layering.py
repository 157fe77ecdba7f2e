"""Imports point one way: `common` -> `data`, `models` -> `inference` -> `cli` -> `training` ->
`evaluation` -> `export` (docs/design.md, "Layers").

Every module under these packages is parsed (imports at module level and inside functions); an
import of a higher layer, or between `data` and `models`, fails the test with its file and line; so
does an import of TensorFlow in `models` (backend-agnostic).
"""

import ast
import os

from tests.helpers import LAYERS, REPO_ROOT, product_files

RANKS = LAYERS


def _imported_modules(tree):
    """`(line, module)` for every absolute import in the tree, at any depth."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module


def _product_imports():
    """`(path, line, module)` for every absolute import of every product module."""
    for relative in product_files():
        with open(os.path.join(REPO_ROOT, relative), encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=relative)
        for line, module in _imported_modules(tree):
            yield relative, line, module


def _imports_across_packages():
    """`(path, line, importing package, imported module, imported package)` for every import of
    one of the packages from another."""
    found = []
    for relative, line, module in _product_imports():
        package, imported = relative.split("/")[0], module.split(".")[0]
        # An entry script (no package) is the top layer, free to import any package.
        if package in RANKS and imported in RANKS and imported != package:
            found.append((relative, line, package, module, imported))
    return found


def _imports_of(package, under=""):
    """ "path:line imports module" for each import of `package` by a product module under `under`."""
    return [
        f"{path}:{line} imports {module}"
        for path, line, module in _product_imports()
        if path.startswith(under) and module.split(".")[0] == package
    ]


def test_imports_point_one_way():
    backward = []
    for path, line, package, module, imported in _imports_across_packages():
        if RANKS[imported] >= RANKS[package]:
            relation = "a higher layer" if RANKS[imported] > RANKS[package] else "the same layer"
            backward.append(f"{path}:{line} ({package}) imports {module} ({imported}, {relation})")
    assert not backward, "imports pointing back:\n" + "\n".join(backward)


def test_the_check_sees_imports_inside_functions():
    tree = ast.parse("import os\n\ndef f():\n    from evaluation.scoring import bleu\n    import export.exporter\n")
    assert list(_imported_modules(tree)) == [(1, "os"), (4, "evaluation.scoring"), (5, "export.exporter")]


def test_every_product_package_has_a_layer():
    packages = {
        name
        for name in os.listdir(REPO_ROOT)
        if os.path.isfile(os.path.join(REPO_ROOT, name, "__init__.py")) and name not in ("tests", "benchmarks", "tools")
    }
    assert packages == set(RANKS), f"packages without a layer: {sorted(packages - set(RANKS))}"


def test_models_import_no_tensorflow():
    # models/ is backend-agnostic (docs/design.md): keras and keras.ops only, also inside functions.
    offending = _imports_of("tensorflow", under="models/")
    assert not offending, "\n".join(offending)


def test_the_product_never_imports_the_maintainers_tools():
    offending = _imports_of("tools")
    assert not offending, "\n".join(offending)
