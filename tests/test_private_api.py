"""No module of the product uses private Keras or TensorFlow API outside `common/compat.py`.

Every module of the product packages, `benchmarks/` and the entry scripts is parsed; these fail the
test with their file and line:
- an import of a private module (`keras.src`, `tensorflow.python`, ...);
- `tf.__internal__` or `tf.compat`;
- a `tf.raw_ops` op not in `PUBLIC_RAW_OPS`: a raw op is public API, but each one used outside
  `common/compat.py` is listed there with the documented behaviour it is used for;
- a private attribute (`x._name`, `self._name` too) that the project does not define itself, or that
  Keras's classes also have (an inherited private attribute, or one the project's class shadows);
- a method of a Keras model, layer, optimizer, callback, loss or metric replaced on an instance
  (`model.train_step = ...`).
Tests may use private API for what they check; they are not scanned.
"""

import ast
import os

import keras
import pytest

from tests.helpers import REPO_ROOT

SCANNED = ("common", "data", "models", "inference", "cli", "training", "evaluation", "export", "benchmarks")
ENTRY_SCRIPTS = ("train.py", "evaluate.py", "translate.py")
COMPAT = "common/compat.py"
PRIVATE_MODULES = (
    "keras.src",
    "keras._",
    "tensorflow.python",
    "tensorflow.core",
    "tensorflow._",
    "tensorflow.compiler",
    "tensorflow.tsl",
)
TENSORFLOW_NAMES = ("tf", "tensorflow")
PRIVATE_TENSORFLOW_NAMESPACES = ("__internal__", "compat")
# Raw ops used outside common/compat.py, each for its documented behaviour.
PUBLIC_RAW_OPS = {
    "ResourceApplyAdam": "training/optimizers.py: the documented Adam update, equal to Keras's Adam "
    "(tests/training/test_optimizers.py)",
}
# Underscored names that are public API of the Python standard library.
PUBLIC_UNDERSCORED = {"os._exit"}


def _keras_private_names():
    """The private attribute names of Keras's base classes and of built instances of them."""
    variable = keras.Variable([[1.0]])
    optimizer = keras.optimizers.Adam()
    optimizer.build([variable])
    layer = keras.layers.Dense(1)
    layer.build((None, 1))
    inputs = keras.Input((1,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    objects = [variable, optimizer, layer, model, keras.callbacks.Callback(), keras.losses.MeanSquaredError()]
    objects.append(keras.metrics.Mean())
    return {name for thing in objects for name in dir(thing) if name.startswith("_") and not name.startswith("__")}


def _keras_method_names():
    """The methods of Keras's base classes, public and private: none may be replaced on an instance."""
    classes = (
        keras.Model,
        keras.layers.Layer,
        keras.optimizers.Optimizer,
        keras.callbacks.Callback,
        keras.losses.Loss,
        keras.metrics.Metric,
    )
    return {name for cls in classes for name in dir(cls) if callable(getattr(cls, name, None))} - {"__class__"}


def _scanned_files():
    paths = [os.path.join(REPO_ROOT, name) for name in ENTRY_SCRIPTS]
    for package in SCANNED:
        for root, _, files in os.walk(os.path.join(REPO_ROOT, package)):
            paths.extend(os.path.join(root, name) for name in sorted(files) if name.endswith(".py"))
    found = {}
    for path in paths:
        relative = os.path.relpath(path, REPO_ROOT).replace(os.sep, "/")
        if relative != COMPAT:
            with open(path, encoding="utf-8") as handle:
                found[relative] = ast.parse(handle.read(), filename=path)
    return found


def _is_self(node):
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _own_names(trees):
    """The names the project defines: functions, classes, names bound in a module or class body,
    and attributes assigned on `self`/`cls` or with `setattr(self, "name", ...)`."""
    names = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _is_self(node.value):
                names.add(node.attr)
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and len(node.args) > 1:
                if _is_self(node.args[0]) and isinstance(node.args[1], ast.Constant):
                    names.add(node.args[1].value)
    return names


def _assigned_attributes(node):
    """`(object, name)` for each attribute `node` assigns: `object.name = ...` or
    `setattr(object, "name", ...)`."""
    if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
        for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
            for part in ast.walk(target):
                if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store):
                    yield part.value, part.attr
    elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr" and len(node.args) > 1:
        if isinstance(node.args[1], ast.Constant):
            yield node.args[0], node.args[1].value


def private_uses(trees, keras_private, keras_methods):
    """`path:line: what` for every private Keras/TensorFlow use in `trees` (`{path: ast}`)."""
    own = _own_names(trees.values()) - keras_private
    found = []
    for path, tree in trees.items():
        for node in ast.walk(tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for module in modules:
                    if module.startswith(PRIVATE_MODULES):
                        found.append(f"{path}:{line}: imports the private module {module}")
            if isinstance(node, ast.Attribute):
                text = ast.unparse(node)
                base = node.value
                if node.attr == "__internal__" or (
                    isinstance(base, ast.Name)
                    and base.id in TENSORFLOW_NAMES
                    and node.attr in PRIVATE_TENSORFLOW_NAMESPACES
                ):
                    found.append(f"{path}:{line}: {text} is TensorFlow's internal or legacy API")
                elif (
                    isinstance(base, ast.Attribute)
                    and base.attr == "raw_ops"
                    and ast.unparse(base.value) in TENSORFLOW_NAMES
                    and node.attr not in PUBLIC_RAW_OPS
                ):
                    found.append(f"{path}:{line}: {text} is not in PUBLIC_RAW_OPS")
                elif (
                    node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and node.attr not in own
                    and text not in PUBLIC_UNDERSCORED
                ):
                    found.append(f"{path}:{line}: {text} is a private attribute the project does not own")
            for target, name in _assigned_attributes(node):
                if not _is_self(target) and name in keras_methods:
                    found.append(f"{path}:{line}: {ast.unparse(target)}.{name} replaced on an instance")
    return sorted(set(found))


@pytest.fixture(scope="module")
def keras_names():
    return _keras_private_names(), _keras_method_names()


def test_no_private_keras_or_tensorflow_api_outside_compat(keras_names):
    found = private_uses(_scanned_files(), *keras_names)
    assert not found, f"private Keras/TensorFlow API outside {COMPAT}, move it there:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source, what",
    [
        ("from keras.src import ops\n", "imports the private module keras.src"),
        ("import tensorflow.python.ops\n", "imports the private module tensorflow.python.ops"),
        ("import tensorflow as tf\ntf.__internal__.distribute.f()\n", "tf.__internal__ is TensorFlow's internal"),
        ("import tensorflow as tf\ntf.compat.v1.Session()\n", "tf.compat is TensorFlow's internal or legacy"),
        (
            "import tensorflow as tf\ntf.raw_ops.InplaceUpdate(x=1, i=2, v=3)\n",
            "InplaceUpdate is not in PUBLIC_RAW_OPS",
        ),
        ("def f(model):\n    model._symbolic_build(data_batch=None)\n", "model._symbolic_build is a private"),
        ("class A:\n    def f(self):\n        return self._momentums\n", "self._momentums is a private"),
        ("class A:\n    def f(self):\n        self._momentums = []\n", "self._momentums is a private"),
        ("def f(model):\n    model.train_step = lambda data: data\n", "model.train_step replaced on an instance"),
        ("def f(model, g):\n    setattr(model, 'test_step', g)\n", "model.test_step replaced on an instance"),
    ],
)
def test_the_scan_finds(keras_names, source, what):
    found = private_uses({"example.py": ast.parse(source)}, *keras_names)
    assert any(what in line for line in found), found


def test_the_scan_accepts_the_projects_own_private_names_and_public_raw_ops(keras_names):
    source = (
        "import os\nimport tensorflow as tf\n\n"
        "class Parser:\n    def __init__(self):\n        self._order = []\n\n"
        "def keys(parser):\n    tf.raw_ops.ResourceApplyAdam()\n    os._exit(0)\n    return parser._order\n"
    )
    assert private_uses({"example.py": ast.parse(source)}, *keras_names) == []
