"""Two mirrored replicas over two logical CPU devices against one device, and `train.py`'s fused
Adam beside Keras's Adam, both mirrored: `results()`. Imported, before TensorFlow initialises its
devices (the import splits the CPU in two), by tests/training/accumulation_step.py, whose
TensorFlow process runs these checks for tests/training/test_accumulation.py: the replicas' runs
are its union-batch runs (the update of one device, and of two replicas with the global-token loss
and with the per-replica one), the Adam steps are taken here.
"""

from training.distribution import split_cpu

split_cpu(2)

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from common.special_ids import BOS_ID, PAD_ID  # noqa: E402
from models.learning_rate_schedule import transformer_optimizer  # noqa: E402
from models.transformer import Transformer  # noqa: E402
from training.global_token_loss import GlobalTokenLabelSmoothedCrossEntropy  # noqa: E402
from training.optimizers import FusedAdam  # noqa: E402

SMALL = dict(num_layers=1, hidden_dim=16, num_heads=2, intermediate_dim=32, dropout=0.0)


def global_batch():
    """Four pairs; the first two (replica 0) have 7 target tokens each, the last two 2 each."""
    rng = np.random.default_rng(0)
    source = rng.integers(4, 30, size=(4, 6)).astype("int32")
    target = rng.integers(4, 30, size=(4, 8)).astype("int32")
    target[:, 0] = BOS_ID
    labels = np.roll(target, -1, axis=1)
    labels[:, -1] = PAD_ID
    labels[2:, 2:] = PAD_ID
    return (source, target), labels


def one_step(strategy, loss, initial_weights, optimizer, model_out=None):
    with strategy.scope():
        model = Transformer(30, **SMALL)
        model.build()
        model.set_weights(initial_weights)
        model.compile(optimizer=optimizer, loss=loss)
    (source, target), labels = global_batch()
    dataset = tf.data.Dataset.from_tensors(((source, target), labels))
    history = model.fit(dataset, epochs=1, verbose=0)
    if model_out is not None:
        model_out.append(model)
    return history.history["loss"][0], [np.asarray(w) for w in model.get_weights()]


def replica_spread(strategy, model):
    """The largest difference between the two replicas' copies of any weight or optimizer variable."""
    spread = 0.0
    for variable in model.weights + model.optimizer.variables:
        copies = [np.asarray(c) for c in strategy.experimental_local_results(variable.value)]
        spread = max([spread] + [float(np.max(np.abs(c - copies[0]))) for c in copies[1:]])
    return spread


def results(mirrored, replicas):
    """The three checks' numbers, by name: "global", "per_replica" and "adam". `mirrored`: the
    process's `MirroredStrategy` over two CPU devices (another strategy's collective ops would reuse
    its keys); `replicas`: accumulation_step.py's union runs from the same initial weights, as
    {"initial", "one_device", "global", "per_replica"} (each run's "weights" and "loss")."""
    assert mirrored.num_replicas_in_sync == 2
    one = replicas["one_device"]
    found = {}
    # On one device the global-token loss is the per-replica one: its run is the reference for both.
    update = _largest(one["weights"], replicas["initial"])
    for name in ("global", "per_replica"):
        found[name] = {
            "loss_one_device": one["loss"],
            "loss_two_replicas": replicas[name]["loss"],
            "largest_update": update,
            "weight_difference": _largest(one["weights"], replicas[name]["weights"]),
        }
    keras.utils.set_random_seed(0)
    reference = Transformer(30, **SMALL)
    reference.build()
    initial = reference.get_weights()
    models = []
    options = dict(hidden_dim=SMALL["hidden_dim"], warmup_steps=2)
    with mirrored.scope():
        keras_adam, fused_adam = (
            transformer_optimizer(**options),
            transformer_optimizer(**options, optimizer_class=FusedAdam),
        )
    _, weights_keras = one_step(mirrored, GlobalTokenLabelSmoothedCrossEntropy(), initial, keras_adam)
    _, weights_fused = one_step(mirrored, GlobalTokenLabelSmoothedCrossEntropy(), initial, fused_adam, models)
    found["adam"] = {
        "optimizer": type(models[0].optimizer).__name__,
        "steps": int(np.asarray(models[0].optimizer.iterations)),
        "largest_update": _largest(weights_fused, initial),
        "fused_minus_keras": _largest(weights_fused, weights_keras),
        "replica_spread": replica_spread(mirrored, models[0]),
    }
    return found


def _largest(first, second):
    return max(float(np.max(np.abs(a - b))) for a, b in zip(first, second))
