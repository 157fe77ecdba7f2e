"""common/compat.py: each private Keras/TensorFlow use still does what the project relies on, on real
models, optimizers and graphs (no mocks), and the installed versions are the checked ones, so that an
upgrade fails here until every entry has been checked again.

Every entry of `compat.ENTRIES` has a test named `test_<entry>` in this module.
"""

import inspect
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from common import compat

THIS_MODULE = globals()


def _small_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2)(inputs))
    model.compile(optimizer="adam", loss="mse", metrics=["mae"])
    return model


def _data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(8, 3)).astype("float32"), rng.normal(size=(8, 2)).astype("float32")


def test_the_installed_versions_are_the_checked_ones():
    installed = {"keras": keras.__version__, "tensorflow": tf.__version__}
    assert installed == compat.CHECKED, (
        f"installed {installed}, common/compat.py was checked against {compat.CHECKED}: check every "
        "entry there against the new versions (its tests, and the Keras/TensorFlow source it names), "
        "then update CHECKED"
    )


def test_every_entry_names_its_version_and_reason_and_has_a_test():
    functions = {
        name
        for name, value in vars(compat).items()
        if inspect.isfunction(value) and value.__module__ == compat.__name__ and not name.startswith("_")
    }
    assert functions == set(compat.ENTRIES), "every public function of common/compat.py is an entry"
    for name, library in compat.ENTRIES.items():
        doc = getattr(compat, name).__doc__
        assert "Relies on" in doc and f"({library} {compat.CHECKED[library]})" in doc, name
        assert "public" in doc.lower(), f"{name}: say why the public API does not suffice"
        assert callable(THIS_MODULE.get(f"test_{name}")), f"{name} has no test_{name}"


def test_importing_compat_does_not_import_tensorflow():
    import subprocess
    import sys

    from tests.helpers import REPO_ROOT

    code = "import sys; import common.compat; print('tensorflow' in sys.modules)"
    env = dict(os.environ, KERAS_BACKEND="jax")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


# Keras


def test_build_compiled_metrics():
    assert list(inspect.signature(keras.Model._symbolic_build).parameters) == ["self", "iterator", "data_batch"]
    model = _small_model()
    compiled = {metric.name: metric for metric in model.metrics}["compile_metrics"]
    assert not compiled.built and not compiled.variables
    x, y = _data()
    compat.build_compiled_metrics(model, (x[:1], y[:1]))
    assert model.built and compiled.built and compiled.variables  # the mae's total and count
    assert {name: float(value) for name, value in model.get_metrics_result().items()} == {"loss": 0, "mae": 0}
    assert int(model.optimizer.iterations) == 0


def test_skip_build_before_fit():
    assert list(inspect.signature(keras.Model._maybe_symbolic_build).parameters) == ["self", "iterator", "data_batch"]
    model = _small_model()
    calls = []
    # Test-only private use: fit, evaluate and train_on_batch look the method up on the instance.
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: calls.append((iterator, data_batch))
    x, y = _data()
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    model.evaluate(x, y, batch_size=4, verbose=0)
    model.train_on_batch(x, y)
    model.test_on_batch(x, y)
    assert len(calls) == 4

    model = _small_model()
    model_class = type(model)
    compat.build_compiled_metrics(model, (x[:1], y[:1]))
    compat.skip_build_before_fit(model)
    assert model._maybe_symbolic_build(iterator=iter(()), data_batch=None) is None
    history = model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0]) and int(model.optimizer.iterations) == 2
    assert type(model) is model_class


def test_wrap_step():
    model = _small_model()
    model_class = type(model)
    seen = []

    def recording(name):
        def wrapper(step):
            def recorded(*args):
                seen.append(name)
                return step(*args)

            return recorded

        return wrapper

    compat.wrap_step(model, "train_step", recording("train"))
    compat.wrap_step(model, "test_step", recording("test"))
    x, y = _data()
    history = model.fit(x, y, batch_size=4, epochs=1, validation_data=(x, y), verbose=0)
    assert "train" in seen and "test" in seen  # called when fit and evaluate trace their steps
    assert np.isfinite(history.history["val_loss"][0])
    assert type(model) is model_class  # what model.save writes is unchanged
    with pytest.raises(ValueError, match="predict_step"):
        compat.wrap_step(model, "predict_step", recording("predict"))


def _built_adam(*shapes):
    variables = [keras.Variable(np.zeros(shape, "float32"), name=f"v{i}") for i, shape in enumerate(shapes)]
    optimizer = keras.optimizers.Adam(learning_rate=0.1, beta_1=0.9, beta_2=0.98)
    optimizer.build(variables)
    return optimizer, variables


def test_optimizer_variable_index():
    optimizer, variables = _built_adam((2,), (3,), (4,))
    assert [compat.optimizer_variable_index(optimizer, v) for v in variables] == [0, 1, 2]
    assert [compat.optimizer_variable_index(optimizer, v) for v in reversed(variables)] == [2, 1, 0]


def test_optimizer_built_variables():
    optimizer, variables = _built_adam((2,), (3,))
    assert compat.optimizer_built_variables(optimizer) == variables
    optimizer.apply([np.ones((2,), "float32"), np.ones((3,), "float32")])  # no variables: the built ones
    assert all(np.all(keras.ops.convert_to_numpy(v) != 0) for v in variables)


def test_adam_moments():
    optimizer, variables = _built_adam((2,), (3,))
    gradients = [np.full((2,), 2.0, "float32"), np.full((3,), -4.0, "float32")]
    optimizer.apply(gradients, variables)
    owned = {id(v) for v in optimizer.variables}
    for variable, gradient in zip(variables, gradients):
        m, v = compat.adam_moments(optimizer, variable)
        assert isinstance(m, keras.Variable) and isinstance(v, keras.Variable)
        assert id(m) in owned and id(v) in owned  # checkpointed with the optimizer
        np.testing.assert_allclose(keras.ops.convert_to_numpy(m), (1 - 0.9) * gradient, rtol=1e-6)
        np.testing.assert_allclose(keras.ops.convert_to_numpy(v), (1 - 0.98) * gradient**2, rtol=1e-6)


def test_moving_averages():
    variables = [keras.Variable(np.full(shape, 1.0, "float32"), name=f"v{i}") for i, shape in enumerate([(2,), (3,)])]
    optimizer = keras.optimizers.Adam(learning_rate=0.1, use_ema=True, ema_momentum=0.5)
    optimizer.build(variables)
    owned = {id(v) for v in optimizer.variables}
    expected = None  # The first update copies the weights, later ones average half and half.
    for _ in range(2):
        optimizer.apply([np.full((2,), 1.0, "float32"), np.full((3,), -1.0, "float32")], variables)
        after = [keras.ops.convert_to_numpy(v).copy() for v in variables]
        expected = after if expected is None else [0.5 * e + 0.5 * a for e, a in zip(expected, after)]
    pairs = compat.moving_averages(optimizer)
    assert [variable for variable, _ in pairs] == variables
    for (_, average), value in zip(pairs, expected):
        assert id(average) in owned  # checkpointed with the optimizer
        np.testing.assert_allclose(keras.ops.convert_to_numpy(average), value, rtol=1e-6)
    scaled = keras.optimizers.LossScaleOptimizer(keras.optimizers.Adam(use_ema=True))
    scaled.build(variables)
    assert [variable for variable, _ in compat.moving_averages(scaled)] == variables
    assert compat.moving_averages(_built_adam((2,))[0]) == []


# TensorFlow


def _one_cpu_mirrored():
    return tf.distribute.MirroredStrategy(["/cpu:0"])


def test_strategy_supports_no_merge_call():
    assert compat.strategy_supports_no_merge_call() is True  # the default strategy
    strategy = _one_cpu_mirrored()
    with strategy.scope():
        assert not compat.strategy_supports_no_merge_call()
    in_replica = strategy.run(tf.function(lambda: tf.constant(compat.strategy_supports_no_merge_call())))
    assert not bool(in_replica)


def test_maybe_merge_call():
    contexts = []

    def record(strategy, value):
        contexts.append((strategy, tf.distribute.in_cross_replica_context()))
        return value + 1

    default = tf.distribute.get_strategy()
    assert compat.maybe_merge_call(record, default, 1) == 2
    assert contexts == [(default, False)]  # no strategy: called directly

    strategy = _one_cpu_mirrored()
    contexts.clear()
    result = strategy.run(tf.function(lambda: compat.maybe_merge_call(record, strategy, tf.constant(1))))
    assert int(result) == 2
    assert [in_cross for _, in_cross in contexts] == [True]  # through merge_call


def test_one_garbage_collection(monkeypatch):
    import gc

    calls = []
    collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda generation=2: calls.append(generation) or collect(generation))
    layer = keras.layers.Dense(3)
    layer.build((None, 4))
    layer.quantize("int8")
    assert calls  # What the entry relies on: Keras collects while it quantizes.
    layer = keras.layers.Dense(3)
    layer.build((None, 4))
    calls.clear()
    with compat.one_garbage_collection():
        layer.quantize("int8")
        assert calls == [] and gc.collect() == 0
    assert calls == [2]  # Once, when the block ends, through the function it replaced.
    assert keras.backend.standardize_dtype(layer.kernel.dtype) == "int8"


def test_fresh_buffer():
    @tf.function
    def write_one_row(row, value):
        buffer = compat.fresh_buffer([3, 2], "float32")
        return tf.identity(compat.write_rows_in_place(buffer, tf.reshape(row, [1]), tf.fill([1, 2], value)))

    np.testing.assert_array_equal(write_one_row(tf.constant(0), tf.constant(5.0)), [[5, 5], [0, 0], [0, 0]])
    # A second run starts from zeros again: the buffer is not a constant shared between runs.
    np.testing.assert_array_equal(write_one_row(tf.constant(2), tf.constant(7.0)), [[0, 0], [0, 0], [7, 7]])
    graph = write_one_row.get_concrete_function(tf.constant(0), tf.constant(1.0)).graph
    (empty,) = [op for op in graph.get_operations() if op.type == "Empty"]
    assert empty.op_def.is_stateful
    eager = compat.fresh_buffer([2, 3], "int32")
    assert eager.dtype == tf.int32 and eager.shape == (2, 3) and not np.any(eager.numpy())


def test_write_rows_in_place():
    buffer = compat.fresh_buffer([4, 2], "float32")
    written = compat.write_rows_in_place(buffer, tf.constant([1, 3]), tf.constant([[1.0, 2.0], [3.0, 4.0]]))
    expected = [[0, 0], [1, 2], [0, 0], [3, 4]]
    np.testing.assert_array_equal(written, expected)
    np.testing.assert_array_equal(buffer, expected)  # the buffer itself was written: no copy

    @tf.function
    def both():
        buffer = compat.fresh_buffer([3, 2], "float32")
        written = compat.write_rows_in_place(buffer, tf.constant([1]), tf.constant([[5.0, 6.0]]))
        return buffer, written

    buffer, written = both()
    np.testing.assert_array_equal(buffer, written)  # in a graph too


def test_read_profile(tmp_path):
    step = tf.function(lambda x: tf.matmul(x, x))
    step(tf.ones([4, 4]))
    tf.profiler.experimental.start(str(tmp_path))
    step(tf.ones([4, 4]))
    tf.profiler.experimental.stop()
    (path,) = [os.path.join(root, name) for root, _, names in os.walk(tmp_path) for name in names]
    assert path.endswith(".xplane.pb")
    space = compat.read_profile(path)
    events = [
        plane.event_metadata[event.metadata_id].name
        for plane in space.planes
        for line in plane.lines
        for event in line.events
    ]
    assert any("MatMul" in name for name in events), events[:20]
