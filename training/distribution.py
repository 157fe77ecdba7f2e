"""Choosing where training runs: one device, mirrored replicas, several workers (TensorFlow), or
`keras.distribution.DataParallel` (JAX)."""

import json
import os

from common import compat
from common.errors import UserError

# Keras is imported where used: train.py checks its flags, DISTRIBUTIONS among them, before any
# framework loads.
DISTRIBUTIONS = ("auto", "one_device", "mirrored", "multi_worker")


def split_cpu(num_devices):
    """Splits the host CPU into `num_devices` logical devices (before TensorFlow initialises them),
    so `MirroredStrategy` can run replicas on a machine without GPUs (tests, demonstrations)."""
    # TensorFlow backend only: the JAX path never imports it.
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(cpus[0], [tf.config.LogicalDeviceConfiguration()] * num_devices)


class DistributionError(UserError, ValueError):
    """A distribution the flags, the environment (TF_CONFIG, KERAS_BACKEND) or the devices cannot give."""


def worker_info():
    """`(task_type, task_index, num_workers)` from the TF_CONFIG environment variable."""
    raw = os.environ.get("TF_CONFIG")
    if not raw:
        return None, 0, 1
    try:
        config = json.loads(raw)
        task = config["task"]
        workers = config["cluster"]["worker"]
        return task["type"], int(task["index"]), len(workers)
    except (ValueError, KeyError, TypeError) as error:
        raise DistributionError(
            f"TF_CONFIG must be JSON with cluster.worker (a list of host:port) and task.type/index, "
            f"received {raw!r} ({error})"
        ) from error


def is_chief():
    task_type, task_index, _ = worker_info()
    return task_type in (None, "chief") or (task_type == "worker" and task_index == 0)


def make_strategy(distribution, cpu_replicas=0):
    """The `tf.distribute` strategy (TensorFlow) or None (JAX: `set_jax_distribution`).
    `distribution` "auto" mirrors over several GPUs; `cpu_replicas` splits the CPU into that many
    devices for "mirrored" (0: the visible GPUs)."""
    if distribution not in DISTRIBUTIONS:
        raise DistributionError(f"Unknown distribution {distribution!r}; expected one of {DISTRIBUTIONS}")
    # Loads the backend: train.py imports this module before its flag checks.
    import keras

    backend = keras.backend.backend()
    if backend == "jax":
        set_jax_distribution(distribution)
        return None
    if backend != "tensorflow":
        raise DistributionError(
            f"train.py supports the tensorflow and jax backends, received KERAS_BACKEND={backend!r}"
        )
    # TensorFlow backend only: the JAX path never imports it.
    import tensorflow as tf

    if distribution == "multi_worker":
        if not os.environ.get("TF_CONFIG"):
            raise DistributionError(
                "--distribution=multi_worker needs the TF_CONFIG environment variable (docs/training.md, 'Several GPUs, several machines, JAX')"
            )
        worker_info()  # Validates it.
        return tf.distribute.MultiWorkerMirroredStrategy()
    if cpu_replicas:
        split_cpu(cpu_replicas)
    gpus = tf.config.list_logical_devices("GPU")
    if distribution == "mirrored":
        devices = None if not cpu_replicas else [d.name for d in tf.config.list_logical_devices("CPU")]
        if devices is None and len(gpus) < 1:
            raise DistributionError(
                "--distribution=mirrored found no GPU; pass --cpu_replicas=N to mirror over CPU devices"
            )
        return tf.distribute.MirroredStrategy(devices=devices)
    if distribution == "auto" and len(gpus) > 1:
        return tf.distribute.MirroredStrategy()
    if not gpus:
        # TensorFlow's default strategy: `fit` iterates the stream itself. A OneDeviceStrategy would
        # feed it through a MultiDeviceIterator, whose per-device iterators run tf.data's autotuning
        # thread, and destroying them can wait up to a minute for it (data/pipeline.py).
        return tf.distribute.get_strategy()
    return tf.distribute.OneDeviceStrategy(gpus[0].name)


def set_jax_distribution(distribution):
    """Data parallelism over all local JAX devices for "auto"/"mirrored" when there are several."""
    # JAX backend only.
    import jax
    import keras

    if distribution == "multi_worker":
        raise DistributionError("--distribution=multi_worker uses tf.distribute: run it with the tensorflow backend")
    if distribution in ("auto", "mirrored") and len(jax.devices()) > 1:
        keras.distribution.set_distribution(keras.distribution.DataParallel(devices=jax.devices()))


def num_replicas(strategy):
    if strategy is not None:
        return strategy.num_replicas_in_sync
    # Loads the backend: train.py imports this module before its flag checks.
    import keras

    distribution = keras.distribution.distribution()
    return 1 if distribution is None else len(distribution.device_mesh.devices.flatten())


def reduce_logs_across_workers(model):
    """Lets `fit` and `evaluate` log scalars under multi-worker `MultiWorkerMirroredStrategy`:
    Keras's cross-worker `strategy.reduce("MEAN", axis=0)` fails on scalars, so this instance's
    `train_step` and `test_step` return each as a one-element vector (same mean). The class, what
    `model.save` writes, is unchanged.
    """
    # TensorFlow backend only: the JAX path never imports it.
    import tensorflow as tf

    def as_vectors(logs):
        return {name: tf.reshape(value, [1]) if value.shape.rank == 0 else value for name, value in logs.items()}

    for step_name in ("train_step", "test_step"):
        compat.wrap_step(model, step_name, lambda step: lambda data: as_vectors(step(data)))
