"""Reshape targets that cost a graph no shape ops where the sizes are static.

In a TensorFlow graph a size read with `ops.shape(x)[i]` is a `Shape` and a `StridedSlice`, and a
target built of such sizes a `Pack`, at every call: in a decoding step, a few per projection.
`leading` writes the static sizes as ints and one unknown size as -1, which the reshape infers."""

from keras import ops


def dimension(tensor, axis):
    """`tensor`'s size along `axis`: a Python int when static, else an int32 scalar tensor."""
    size = tensor.shape[axis]
    return ops.shape(tensor)[axis] if size is None else int(size)


def leading(tensor, count):
    """The first `count` sizes of `tensor` as a reshape target: static sizes as ints, a single
    unknown one as -1; with more than one unknown size (or a zero size, which leaves -1
    undetermined) each unknown size is read from `ops.shape`."""
    sizes = tuple(tensor.shape[:count])
    unknown = sum(size is None for size in sizes)
    if unknown <= 1 and 0 not in sizes:
        return tuple(-1 if size is None else size for size in sizes)
    shape = ops.shape(tensor)
    return tuple(shape[axis] if size is None else size for axis, size in enumerate(sizes))


def with_last(tensor, size):
    """`tensor`'s shape with its last size replaced by `size`, as a reshape target (`leading`)."""
    return leading(tensor, len(tensor.shape) - 1) + (size,)
