"""Two mirrored replicas over two logical CPU devices against one device, and `train.py`'s fused
Adam beside Keras's Adam, both mirrored: `results()`. Imported, before TensorFlow initialises its
devices (the import splits the CPU in two), by tests/training/accumulation_step.py, whose
TensorFlow process runs these checks for tests/training/test_accumulation.py on its union-batch
runs: the updates of one device, and of two replicas with the global-token loss and with the
per-replica one, with the fused Adam and with Keras's.
"""

from training.distribution import split_cpu

split_cpu(2)

import numpy as np  # noqa: E402


def replica_spread(strategy, model):
    """The largest difference between the two replicas' copies of any weight or optimizer variable."""
    spread = 0.0
    for variable in model.weights + model.optimizer.variables:
        copies = [np.asarray(c) for c in strategy.experimental_local_results(variable.value)]
        spread = max([spread] + [float(np.max(np.abs(c - copies[0]))) for c in copies[1:]])
    return spread


def results(mirrored, runs):
    """The three checks' numbers, by name: "global", "per_replica" and "adam". `mirrored`: the
    process's `MirroredStrategy` over two CPU devices; `runs`: accumulation_step.py's runs on the
    union batches from the same initial weights, as {"initial", "one_device", "global",
    "per_replica", "keras_adam"} (each run's "weights", "loss" and "model"); all but "one_device"
    mirrored, all but "keras_adam" with the fused Adam."""
    assert mirrored.num_replicas_in_sync == 2
    one = runs["one_device"]
    found = {}
    # On one device the global-token loss is the per-replica one: its run is the reference for both.
    update = _largest(one["weights"], runs["initial"])
    for name in ("global", "per_replica"):
        found[name] = {
            "loss_one_device": one["loss"],
            "loss_two_replicas": runs[name]["loss"],
            "largest_update": update,
            "weight_difference": _largest(one["weights"], runs[name]["weights"]),
        }
    fused = runs["global"]
    found["adam"] = {
        "optimizer": type(fused["model"].optimizer).__name__,
        "steps": fused["iterations"],
        "largest_update": _largest(fused["weights"], runs["initial"]),
        "fused_minus_keras": _largest(fused["weights"], runs["keras_adam"]["weights"]),
        "replica_spread": replica_spread(mirrored, fused["model"]),
    }
    return found


def _largest(first, second):
    return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second))
