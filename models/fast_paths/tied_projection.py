"""Fast path: the pre-softmax projection with the shared embedding matrix, `hidden_states @ E^T`.

Used by `models.shared_embedding.SharedEmbedding.logits` under TensorFlow; other backends take the
plain `ops.matmul(hidden_states, ops.transpose(E))`, which it must equal.
"""

from keras import ops


def tied_projection(hidden_states, kernel):
    """Fast path: `hidden_states @ kernel^T` whose kernel gradient is computed in the kernel's own layout.

    It must equal `ops.matmul(hidden_states, ops.transpose(kernel))` in value and gradients (the
    other backends' path in `SharedEmbedding.logits`; tests/models/test_shared_embedding.py).
    TensorFlow differentiates `matmul(h, transpose(E))` into `h^T @ g` (`[d_model, V]`), then a
    transpose to E's `[V, d_model]`; here the gradient is `g^T @ h`, which is E-shaped: a cheaper
    product on CPUs, and no transpose (benchmarks/README.md).
    """

    @ops.custom_gradient
    def project(hidden_states, kernel):
        width = kernel.shape[1]
        rows = ops.reshape(hidden_states, (-1, width))
        logits = ops.matmul(rows, ops.transpose(kernel))

        def gradient(*args, upstream=None):
            upstream = ops.reshape(args[0] if upstream is None else upstream, (-1, kernel.shape[0]))
            hidden_gradient = ops.reshape(ops.matmul(upstream, kernel), ops.shape(hidden_states))
            return hidden_gradient, ops.matmul(ops.transpose(upstream), rows)

        return ops.reshape(logits, tuple(ops.shape(hidden_states)[:-1]) + (kernel.shape[0],)), gradient

    return project(hidden_states, kernel)
