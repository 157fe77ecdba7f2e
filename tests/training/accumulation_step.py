"""Two optimizer updates of a small Transformer, each from K=3 batches of different sizes
accumulated by `train.py`'s optimizer, beside two updates from single batches that hold the same
pairs (the K batches' union), and under JAX beside Keras's own `gradient_accumulation_steps` (the
mean of the K batches' per-token means). Prints a JSON list, one result per device count; with
--mirrored_step (TensorFlow, N = 2), a JSON object of that list ("accumulation") and the results of
tests/training/mirrored_step.py ("mirrored"), which the same process runs on the union runs of
both counts and two more of two replicas: with the per-replica loss, and with Keras's Adam.

    python tests/training/accumulation_step.py [--devices=1,N] [--mirrored_step]

One device by default; with N > 1 the same global batches are split over N replicas: under
TensorFlow by `MirroredStrategy` over N logical CPU devices, under JAX (KERAS_BACKEND=jax, with
XLA_FLAGS=--xla_force_host_platform_device_count=N for the largest N) by `training.distribution`'s
DataParallel over all the host's devices. The host is set up for the largest count; one device
runs on the first (TensorFlow's `OneDeviceStrategy`, JAX before a distribution is set), so one
process serves both counts. Run as a script (the devices must be set up before the backend
initialises them): tests/training/test_accumulation.py.

Under JAX, --train_py=JSON (a list of two argument lists) also runs train.py's `main` in this
process: the first list's run before any distribution is set (one device), the second's after
the accumulation checks set train.py's "auto" one (tests/training/test_jax_data_parallel.py).
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

ACCUMULATE = 3
UPDATES = 2
SMALL = dict(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32, dropout=0.0)
VOCABULARY = 30
LENGTH = 8  # Target positions of every batch.


def batches(rng):
    """`UPDATES * ACCUMULATE` batches of 4 pairs with their own numbers of target tokens (from 1 to
    8 per pair, 10 or 26 per batch, so that the mean of per-batch means weighs tokens unequally), and
    the `UPDATES` union batches. All share one shape, padding included: under JAX each new shape
    compiles the train step again."""
    from common.special_ids import BOS_ID, PAD_ID

    micro = []
    for index in range(UPDATES * ACCUMULATE):
        source = rng.integers(4, VOCABULARY, size=(4, 6)).astype("int32")
        source[:, 5 + index % 2 :] = PAD_ID  # 5 or 6 source tokens
        target = rng.integers(4, VOCABULARY, size=(4, LENGTH)).astype("int32")
        target[:, 0] = BOS_ID
        labels = rng.integers(4, VOCABULARY, size=(4, LENGTH)).astype("int32")
        for row in range(4):
            real = 1 + (index * 4 + row) % LENGTH
            labels[row, real:] = PAD_ID
            target[row, real:] = PAD_ID
        micro.append(((source, target), labels))
    unions = []
    for update in range(UPDATES):
        group = micro[update * ACCUMULATE : (update + 1) * ACCUMULATE]
        unions.append(tuple(_stack([part(batch) for batch in group]) for part in _PARTS))
        unions[-1] = ((unions[-1][0], unions[-1][1]), unions[-1][2])
    return micro, unions


_PARTS = (lambda b: b[0][0], lambda b: b[0][1], lambda b: b[1])


def _stack(arrays):
    import numpy as np

    width = max(a.shape[1] for a in arrays)
    return np.concatenate([np.pad(a, ((0, 0), (0, width - a.shape[1]))) for a in arrays])


def dataset(elements):
    import tensorflow as tf

    data = None
    for element in elements:
        one = tf.data.Dataset.from_tensors(element)
        data = one if data is None else data.concatenate(one)
    return data


def train(initial, elements, strategy, accumulate_steps=1, keras_accumulation=None, loss=None, keras_adam=False):
    import contextlib

    import keras
    import numpy as np

    from models.learning_rate_schedule import transformer_optimizer
    from models.transformer import Transformer
    from training.global_token_loss import GlobalTokenLabelSmoothedCrossEntropy
    from training.optimizers import FusedAdam, count_update_tokens

    with strategy.scope() if strategy is not None else contextlib.nullcontext():
        model = Transformer(VOCABULARY, **SMALL)
        model.build()
        model.set_weights(initial)
        # epsilon 1: an update about proportional to the gradient, so that a gradient that is rounding
        # noise (the key projection's bias) stays noise instead of becoming a step of the learning rate.
        options = dict(hidden_dim=SMALL["hidden_dim"], warmup_steps=2, scale=4.0, epsilon=1.0)
        if keras_accumulation:
            optimizer = transformer_optimizer(**options, gradient_accumulation_steps=keras_accumulation)
        elif keras_adam:
            optimizer = transformer_optimizer(**options)
        else:
            optimizer = transformer_optimizer(**options, optimizer_class=FusedAdam, accumulate_steps=accumulate_steps)
        # XLA under JAX: op by op, a step over sharded arrays dispatches slowly.
        jit_compile = keras.backend.backend() == "jax"
        loss = loss or GlobalTokenLabelSmoothedCrossEntropy()
        model.compile(optimizer=optimizer, loss=loss, jit_compile=jit_compile)
        model.optimizer.build(model.trainable_variables)
        if accumulate_steps > 1:
            count_update_tokens(model)
    history = model.fit(dataset(elements), epochs=1, verbose=0, shuffle=False)
    return {
        "weights": [np.asarray(keras.ops.convert_to_numpy(w)) for w in model.get_weights()],
        "iterations": int(keras.ops.convert_to_numpy(model.optimizer.iterations)),
        "loss": float(history.history["loss"][-1]),
        "model": model,
    }


def check(devices, strategy, replicas, runs=None):
    """Accumulated, union and Keras-mean updates on `devices` replicas under `strategy` (None under
    JAX, whose distribution is set globally); the result for one device count. `runs`: a dict that
    gets the initial weights, the union batches and their run, under `devices`."""
    import keras
    import numpy as np

    from models.transformer import Transformer

    keras.utils.set_random_seed(0)
    reference = Transformer(VOCABULARY, **SMALL)
    reference.build()
    initial = reference.get_weights()
    micro, unions = batches(np.random.default_rng(0))
    accumulated = train(initial, micro, strategy, accumulate_steps=ACCUMULATE)
    union = train(initial, unions, strategy)
    if runs is not None:
        runs[devices] = {"initial": initial, "unions": unions, "union": union}
    # Keras's accumulation, the wrong update the checks must tell apart, under JAX only: it does not
    # run under MirroredStrategy (its conditional update synchronises the replicas from the replica
    # context, which tf.distribute refuses), and how far it ends from the union is the batches' doing,
    # which are the same in both backends' processes.
    keras_mean = None
    if keras.backend.backend() == "jax":
        keras_mean = train(initial, micro, strategy, keras_accumulation=ACCUMULATE)

    def largest(first, second):
        return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second))

    return {
        "backend": keras.backend.backend(),
        "devices": devices,
        "replicas": replicas,
        "iterations": [accumulated["iterations"], union["iterations"]],
        "largest_update": largest(union["weights"], initial),
        "accumulated_minus_union": largest(accumulated["weights"], union["weights"]),
        "keras_mean_minus_union": keras_mean and largest(keras_mean["weights"], union["weights"]),
        "losses": [accumulated["loss"], union["loss"]],
    }


def assert_accumulated_updates(results, backend, devices):
    """The checks of a process's results for `devices` (its device counts), for the tests."""
    assert [(result["backend"], result["replicas"]) for result in results] == [(backend, count) for count in devices]
    for result in results:
        assert result["iterations"] == [2, 2], result  # Six batches made two updates, as the two unions did.
        assert result["largest_update"] > 1e-2, result
        assert result["accumulated_minus_union"] < 1e-6 + 1e-5 * result["largest_update"], result
        # The check has teeth: Keras's accumulation (the mean of per-batch means, its schedule stepped
        # per batch) ends elsewhere. Run under JAX only (`check`), hence None under TensorFlow.
        assert (result["keras_mean_minus_union"] is None) == (backend == "tensorflow"), result
        if result["keras_mean_minus_union"] is not None:
            assert result["keras_mean_minus_union"] > 100 * max(result["accumulated_minus_union"], 1e-7), result


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--devices", default="1", help="device counts, comma-separated, smallest first")
    parser.add_argument("--mirrored_step", action="store_true", help="also mirrored_step.py's checks")
    parser.add_argument("--train_py", default="[]", help="JAX: train.py's arguments of a run before, one after")
    arguments = parser.parse_args()
    counts = [int(count) for count in arguments.devices.split(",")]
    import keras

    results = []
    if keras.backend.backend() == "tensorflow":
        from training.distribution import split_cpu

        if arguments.mirrored_step:
            import mirrored_step  # noqa: F401  (splits the CPU in two; one process for both scripts' checks)
        elif max(counts) > 1:
            split_cpu(max(counts))
        import tensorflow as tf

        names = [d.name for d in tf.config.list_logical_devices("CPU")]
        runs = {}
        for devices in counts:
            if devices == 1:
                strategy = tf.distribute.OneDeviceStrategy(names[0])
            else:
                strategy = tf.distribute.MirroredStrategy(names[:devices])
            results.append(check(devices, strategy, strategy.num_replicas_in_sync, runs))
        if arguments.mirrored_step:
            # The last count's strategy: two mirrored devices.
            results = {"accumulation": results, "mirrored": _mirrored_step(strategy, runs)}
    else:
        from training.distribution import make_strategy, num_replicas

        train_runs = json.loads(arguments.train_py)
        if train_runs:
            train_py(train_runs[0])
        for devices in counts:
            # Before any distribution is set, JAX runs on its first device; then train.py's "auto"
            # spreads the batches over all the host's devices.
            if devices > 1:
                make_strategy("auto")
            results.append(check(devices, None, num_replicas(None)))
        if train_runs:
            make_strategy("auto")
            train_py(train_runs[1])
    print()
    json.dump(results, sys.stdout)


def _mirrored_step(mirrored, runs):
    """mirrored_step.py's results on the union runs of one device and of two mirrored replicas
    (`mirrored`), beside two more runs of two replicas: with the per-replica loss, with Keras's Adam."""
    import mirrored_step

    from models.losses import LabelSmoothedCrossEntropy

    one, two = runs[1], runs[2]
    per_replica = train(two["initial"], two["unions"], mirrored, loss=LabelSmoothedCrossEntropy())
    keras_adam = train(two["initial"], two["unions"], mirrored, keras_adam=True)
    runs = {"initial": one["initial"], "one_device": one["union"], "global": two["union"]}
    return mirrored_step.results(mirrored, dict(runs, per_replica=per_replica, keras_adam=keras_adam))


def train_py(argv):
    """train.py's `main` on `argv` (its flags), in this process."""
    from absl import flags

    import train

    flags.FLAGS.unparse_flags()
    train.main(flags.FLAGS(["train.py", *argv]))


if __name__ == "__main__":
    main()
