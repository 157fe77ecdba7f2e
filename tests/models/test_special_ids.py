import ast
import pathlib

from models import special_ids

MODELS_DIR = pathlib.Path(special_ids.__file__).parent


def _imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module


def test_models_import_neither_data_nor_tensorflow():
    # models/ and data/ are peers at the bottom layer; models/ is backend-agnostic.
    offending = {
        f"{path.name}: {module}"
        for path in sorted(MODELS_DIR.rglob("*.py"))
        for module in _imported_modules(path)
        if module.split(".")[0] in ("data", "tensorflow")
    }
    assert not offending


def test_special_ids_are_distinct_non_negative_ints():
    ids = (special_ids.PAD_ID, special_ids.BOS_ID, special_ids.EOS_ID)
    assert all(isinstance(i, int) and i >= 0 for i in ids)
    assert len(set(ids)) == 3
