"""Every use of private Keras and TensorFlow API in the project, each a small named function.

Each entry says what it relies on, why the public API does not suffice, and the version it was
checked against (`CHECKED`); tests/common/test_compat.py tests each one and fails when the
installed version differs, so an upgrade re-checks them all; tests/test_private_api.py keeps such
API out of every other module. Neither library is imported at module level (TensorFlow entries
import it when called), so `models/` and the JAX paths can use this module. A raw op used for its
documented semantics is public API and stays where it is used; the two here (`InplaceUpdate`,
`Empty`) are used for behaviour their documentation does not state.
"""

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
    """Builds `model`'s layers, compiled loss and compiled metrics from one `data_batch` `(x, y)`
    of NumPy arrays, symbolically (no step runs), in the current distribution scope.

    Relies on `Model._symbolic_build(data_batch=...)`, the method `fit` and `evaluate` call before
    their first step (keras 3.15.1). Public API builds the layers (`Model.build`) and the optimizer
    (`Optimizer.build`), but not the compiled loss and metrics: they are built only inside `fit`,
    `evaluate` or `train_on_batch`, which would run a step.
    """
    model._symbolic_build(data_batch=data_batch)


@_entry("keras")
def skip_build_before_fit(model):
    """Turns off, on this instance, the build that the TensorFlow trainer's `fit` and `evaluate`
    run from the first batch under a distribution strategy; call `build_compiled_metrics` first.

    Relies on the TensorFlow trainer calling `self._maybe_symbolic_build(iterator=..., data_batch=...)`
    at the start of `fit`, `evaluate`, `train_on_batch` and `test_on_batch`, looked up on the instance
    (keras 3.15.1). Under tf.distribute that method averages the replicas' first batches
    (`strategy.reduce("MEAN", ...)`), which fails when replicas hold bucketed batches of different
    shapes; no public option skips it.
    """
    model._maybe_symbolic_build = lambda iterator=None, data_batch=None: None


@_entry("keras")
def wrap_step(model, step_name, wrapper):
    """Replaces `model.<step_name>` (`"train_step"` or `"test_step"`) on this instance by
    `wrapper(original)`, where `original` is the bound method; the model's class, and so what
    `model.save` writes, is unchanged. Call it before the first `fit` / `evaluate`, which cache the
    traced step (`model.train_function`).

    Relies on the trainers of every backend calling `self.train_step(...)` / `self.test_step(...)`
    when they make their step function, looked up on the instance (keras 3.15.1). The public way
    to change a step is a subclass overriding it, which would change the saved model's class.
    """
    if step_name not in ("train_step", "test_step"):
        raise ValueError(f"step_name must be 'train_step' or 'test_step', received {step_name!r}")
    setattr(model, step_name, wrapper(getattr(model, step_name)))


@_entry("keras")
def optimizer_variable_index(optimizer, variable):
    """The position of `variable` among the variables `optimizer` was built with: the index of its
    slot in the optimizer's per-variable lists (Adam's moments, accumulators an optimizer adds).

    Relies on `BaseOptimizer._get_variable_index(variable)` (keras 3.15.1), which maps the
    variable (or, under tf.distribute, its replica's copy) to that position. Public API has no
    lookup; matching `optimizer.variables` by name or shape is ambiguous.
    """
    return optimizer._get_variable_index(variable)


@_entry("keras")
def optimizer_built_variables(optimizer):
    """The trainable variables `optimizer` was built with, in order: what `Optimizer.apply` updates
    when it is given no variables.

    Relies on `BaseOptimizer._trainable_variables`, set by `build` (keras 3.15.1). Public API
    exposes only the optimizer's own variables (`optimizer.variables`), not the model's it updates.
    """
    return optimizer._trainable_variables


@_entry("keras")
def adam_moments(optimizer, variable):
    """Adam's first and second moment variables `(m, v)` for `variable` (`keras.Variable`s).

    Relies on `Adam._momentums` and `Adam._velocities`, lists in the order of the built variables
    (`optimizer_variable_index`) (keras 3.15.1). Public API has no per-variable access to an
    optimizer's slots; a fused update that reads and writes Adam's own moments keeps checkpoints
    interchangeable with `keras.optimizers.Adam`.
    """
    index = optimizer_variable_index(optimizer, variable)
    return optimizer._momentums[index], optimizer._velocities[index]


@_entry("keras")
def moving_averages(optimizer):
    """`[(variable, average)]`: each trainable variable `optimizer` was built with, beside the
    exponential moving average of it that the optimizer keeps (`use_ema=True`); [] when it keeps
    none. A `LossScaleOptimizer` answers for its inner optimizer.

    Relies on `BaseOptimizer._model_variables_moving_average`, the averages `build` creates when
    `use_ema` is set, in the order of the built variables (keras 3.15.1). Public API holds them only
    among `optimizer.variables`, where matching them to the model's by name or shape is ambiguous,
    and brings them into the model only through `finalize_variable_values`, which overwrites the
    live weights.
    """
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if not getattr(inner, "use_ema", False) or not inner.built:
        return []
    pairs = zip(optimizer_built_variables(inner), inner._model_variables_moving_average)
    return [(variable, average) for variable, average in pairs if average is not None]


# TensorFlow 2.21.0: TensorFlow is imported inside each function.


@_entry("tensorflow")
def strategy_supports_no_merge_call():
    """Whether the current tf.distribute strategy runs without `merge_call` (in a replica context):
    then a conditional update may run directly where the optimizer is called.

    Relies on `tf.__internal__.distribute.strategy_supports_no_merge_call()` (tensorflow 2.21.0),
    which Keras's and TensorFlow's own optimizers use for this question. Public API offers no way to
    ask it.
    """
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.__internal__.distribute.strategy_supports_no_merge_call()


@_entry("tensorflow")
def maybe_merge_call(function, strategy, *args):
    """`function(strategy, *args)`: through the replica context's `merge_call` where the current
    strategy uses merge calls, else directly (also with no strategy, the default one).

    Relies on `tf.__internal__.distribute.interim.maybe_merge_call(fn, strategy, *args)`
    (tensorflow 2.21.0), which Keras's and TensorFlow's own optimizers use. Which strategies need a
    merge call is internal to tf.distribute (`strategy_supports_no_merge_call`); the public
    `ReplicaContext.merge_call` alone would synchronise where the strategy does not need it.
    """
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.__internal__.distribute.interim.maybe_merge_call(function, strategy, *args)


@_entry("keras")
@contextlib.contextmanager
def one_garbage_collection():
    """A block in which `gc.collect()` does nothing; one full collection runs when it ends.

    Relies on Keras's `Layer.__delattr__` calling `gc.collect()` each time it deletes a variable
    attribute, as `Dense.quantize` does for every float kernel it replaces (keras 3.15.1): a full
    collection walks every Python object of the process, so quantizing a model costs one walk per
    layer, tens of seconds in a process holding TensorFlow graphs and loaded models. The public
    `Model.quantize` has no option to skip it, and `gc.disable()` does not stop an explicit
    `gc.collect()`. Not thread-safe: another thread's `gc.collect()` in the block does nothing too.
    """

    collect = gc.collect
    gc.collect = lambda generation=2: 0
    try:
        yield
    finally:
        gc.collect = collect
        collect()


@_entry("tensorflow")
def fresh_buffer(shape, dtype):
    """A zero-filled tensor of `shape` (a list of scalars) and `dtype`, allocated anew at every run
    of the graph, never shared with another run or another call.

    Relies on `tf.raw_ops.Empty(init=True)` being a stateful op, which Grappler's constant folding
    never turns into a constant (tensorflow 2.21.0). The public `tf.zeros` of a static shape is
    folded into one constant that every run shares, and `write_rows_in_place` would write into it.
    """
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.raw_ops.Empty(shape=tf.stack(shape), dtype=tf.as_dtype(dtype), init=True)


@_entry("tensorflow")
def write_rows_in_place(buffer, indices, rows):
    """`buffer` (a tensor, at least 2-D) with `buffer[indices[k]] = rows[k]`, written into the
    buffer's own memory: the result aliases `buffer`, which is changed too.

    Relies on the kernel of `tf.raw_ops.InplaceUpdate` writing into its input's buffer without
    copying it (tensorflow 2.21.0), although its documentation says it works on a copy. The public
    `tf.tensor_scatter_nd_update` copies the whole buffer whenever it is still referenced, as a
    search loop's cache always is.
    """
    import tensorflow as tf  # On use: models/ and the JAX paths import this module.

    return tf.raw_ops.InplaceUpdate(x=buffer, i=indices, v=rows)


@_entry("tensorflow")
def read_profile(path):
    """The `XSpace` protocol buffer of a TensorFlow profile (`*.xplane.pb`, as
    `tf.profiler.experimental.stop` writes it): its planes, lines and op events.

    Relies on TensorFlow's bundled `tensorflow.tsl.profiler.protobuf.xplane_pb2` (tensorflow 2.21.0).
    TensorFlow's public profiler API writes profiles but offers no reader; the TensorBoard profile
    plugin that reads them is not among the project's packages.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # On use: see the TensorFlow imports above.

    space = xplane_pb2.XSpace()
    with open(path, "rb") as file:
        space.ParseFromString(file.read())
    return space
