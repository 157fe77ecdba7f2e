"""Every use of private Keras and TensorFlow API in the project, each a small named function.

Each says what it relies on, why public API does not suffice, and the version checked (`CHECKED`);
tests/common/test_compat.py fails when the installed version differs. No module-level import of
either library, so `models/` and the JAX paths can use it."""

import contextlib
import gc

# The versions each entry below was checked against.
CHECKED = {"keras": "3.15.1", "tensorflow": "2.21.0"}

# Entry name -> the library whose private API it uses (a key of CHECKED).
ENTRIES = {}


def _entry(library):
    def register(function):
        ENTRIES[function.__name__] = library
        return function

    return register


# Keras 3.15.1


@_entry("keras")
def build_compiled_metrics(model, data_batch):
    """Builds `model`'s layers, compiled loss and metrics from one NumPy `(x, y)` batch without
    running a step. Relies on `Model._symbolic_build(data_batch=...)` (keras 3.15.1); public API
    cannot build the compiled loss and metrics outside `fit`/`evaluate`, which run a step."""
    model._symbolic_build(data_batch=data_batch)


@_entry("keras")
def skip_build_before_fit(model):
    """Turns off, on this instance, the build the TensorFlow trainer runs from the first batch under
    a strategy; call `build_compiled_metrics` first. Relies on the trainer calling
    `self._maybe_symbolic_build` (keras 3.15.1), which fails on replicas with bucketed batches of
    different shapes; no public option skips it."""
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None


@_entry("keras")
def wrap_step(model, step_name, wrapper):
    """Replaces `model.<step_name>` on this instance by `wrapper(original)`, leaving the class (and
    so what `model.save` writes) unchanged. Call it before the first `fit`/`evaluate`. Relies on
    every backend's trainer calling `self.train_step`/`self.test_step` (keras 3.15.1); the public
    way, a subclass, would change the saved model's class."""
    if step_name not in ("train_step", "test_step"):
        raise ValueError(f"step_name must be 'train_step' or 'test_step', received {step_name!r}")
    setattr(model, step_name, wrapper(getattr(model, step_name)))


@_entry("keras")
def optimizer_variable_index(optimizer, variable):
    """The index of `variable`'s slot in `optimizer`'s per-variable lists. Relies on
    `BaseOptimizer._get_variable_index` (keras 3.15.1); public API has no lookup and matching by
    name or shape is ambiguous."""
    return optimizer._get_variable_index(variable)


@_entry("keras")
def optimizer_built_variables(optimizer):
    """The trainable variables `optimizer` was built with, in order. Relies on
    `BaseOptimizer._trainable_variables` (keras 3.15.1); public API shows only the optimizer's own."""
    return optimizer._trainable_variables


@_entry("keras")
def adam_moments(optimizer, variable):
    """Adam's `(m, v)` for `variable`. Relies on `Adam._momentums` and `Adam._velocities`
    (keras 3.15.1); public API has no per-variable access to an optimizer's slots."""
    index = optimizer_variable_index(optimizer, variable)
    return optimizer._momentums[index], optimizer._velocities[index]


@_entry("keras")
def moving_averages(optimizer):
    """`[(variable, average)]` for each trainable variable, [] without `use_ema`; a
    `LossScaleOptimizer` answers for its inner optimizer. Relies on
    `BaseOptimizer._model_variables_moving_average` (keras 3.15.1); public API offers them only
    among `optimizer.variables` (ambiguous) or through `finalize_variable_values`, which overwrites
    the live weights."""
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if not getattr(inner, "use_ema", False) or not inner.built:
        return []
    pairs = zip(optimizer_built_variables(inner), inner._model_variables_moving_average)
    return [(variable, average) for variable, average in pairs if average is not None]


# TensorFlow 2.21.0: TensorFlow is imported inside each function.


@_entry("tensorflow")
def strategy_supports_no_merge_call():
    """Whether the current tf.distribute strategy runs without `merge_call`. Relies on
    `tf.__internal__.distribute.strategy_supports_no_merge_call()` (tensorflow 2.21.0), as Keras's
    optimizers do; public API cannot ask it."""
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.__internal__.distribute.strategy_supports_no_merge_call()


@_entry("tensorflow")
def maybe_merge_call(function, strategy, *args):
    """`function(strategy, *args)` through `merge_call` where the strategy needs it, else directly.
    Relies on `tf.__internal__.distribute.interim.maybe_merge_call` (tensorflow 2.21.0), as Keras's
    optimizers do; the public `ReplicaContext.merge_call` would synchronise where not needed."""
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.__internal__.distribute.interim.maybe_merge_call(function, strategy, *args)


@_entry("keras")
@contextlib.contextmanager
def one_garbage_collection():
    """A block in which `gc.collect()` does nothing; one full collection runs when it ends.
    Relies on `Layer.__delattr__` calling `gc.collect()` per deleted variable, as `Dense.quantize`
    does (keras 3.15.1); the public `Model.quantize` cannot skip it and `gc.disable()` does not stop
    an explicit call. Not thread-safe."""

    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect
        collect()


@_entry("tensorflow")
def fresh_buffer(shape, dtype):
    """A zero-filled tensor of `shape` and `dtype`, allocated anew at every graph run. Relies on
    `tf.raw_ops.Empty(init=True)` being stateful, never constant-folded (tensorflow 2.21.0); the
    public `tf.zeros` is folded into one shared constant."""
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.raw_ops.Empty(shape=tf.stack(shape), dtype=tf.as_dtype(dtype), init=True)


@_entry("tensorflow")
def write_rows_in_place(buffer, indices, rows):
    """`buffer` with `buffer[indices[k]] = rows[k]` written in its own memory (the result aliases
    it). Relies on `tf.raw_ops.InplaceUpdate` not copying its input (tensorflow 2.21.0), against its
    documentation; the public `tf.tensor_scatter_nd_update` copies a referenced buffer."""
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.raw_ops.InplaceUpdate(x=buffer, i=indices, v=rows)


@_entry("tensorflow")
def read_profile(path):
    """The `XSpace` protobuf of a TensorFlow profile (`*.xplane.pb`). Relies on TensorFlow's bundled
    `tensorflow.tsl.profiler.protobuf.xplane_pb2` (tensorflow 2.21.0); the public profiler API
    writes profiles but has no reader."""
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # On use: see the TensorFlow imports above.

    space = xplane_pb2.XSpace()
    with open(path, "rb") as file:
        space.ParseFromString(file.read())
    return space
