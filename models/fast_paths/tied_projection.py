"""Fast path: the pre-softmax projection `hidden_states @ E^T` under TensorFlow (`SharedEmbedding.logits`)."""

from keras import ops

from models.shapes import with_last


def tied_projection(hidden_states, kernel):
    """Fast path: `hidden_states @ kernel^T` with the kernel gradient `g^T @ h` in the kernel's own
    layout (no transpose); it must equal `ops.matmul(hidden_states, ops.transpose(kernel))` in value
    and gradients (tests/models/test_shared_embedding.py)."""

    @ops.custom_gradient
    def project(hidden_states, kernel):
        width = kernel.shape[1]
        rows = ops.reshape(hidden_states, (-1, width))
        logits = ops.matmul(rows, ops.transpose(kernel))

        def gradient(*args, upstream=None):
            upstream = ops.reshape(args[0] if upstream is None else upstream, (-1, kernel.shape[0]))
            hidden_gradient = ops.reshape(ops.matmul(upstream, kernel), ops.shape(hidden_states))
            return hidden_gradient, ops.matmul(ops.transpose(upstream), rows)

        return ops.reshape(logits, with_last(hidden_states, kernel.shape[0])), gradient

    return project(hidden_states, kernel)
