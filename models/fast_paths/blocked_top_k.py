"""Fast path: `ops.top_k(x, k)` over a wide last axis (a vocabulary) under TensorFlow; it must equal
it, ties included (tests/models/fast_paths/test_blocked_top_k.py).

TensorFlow's CPU `TopKV2` costs a few nanoseconds for every entry of a row: over a vocabulary at
every decoding step, the search's costliest op after the products (benchmarks/README.md, "CPU
inference beside CTranslate2"). Here the row is cut into blocks of `BLOCK` entries; a vectorised max
gives each block's best, `TopKV2` picks the `k` best blocks over those maxima, and `TopKV2` again
picks the `k` best entries of those `k` blocks. Each of the row's `k` best entries lies in one of
them: a block that holds one and is not picked has `k` picked blocks whose maxima are at least that
entry, which would then not be among the `k` best. The picked blocks are gathered in their order in
the row, so that equal entries come out lower index first, as `TopKV2` returns them. Other backends
(XLA has its own top-k) and narrow rows of a known width use Keras's op; a width known only at run
time (a shortlist's columns) is always blocked, padded to at least `k` blocks."""

import keras
from keras import ops

from models.fast_paths.narrow_gather import take_along_last

# Entries per block; the blocked search runs on rows of at least `MIN_BLOCKS` blocks per entry asked.
BLOCK = 32
MIN_BLOCKS = 4


def top_k(x, k):
    """`ops.top_k(x, k)` (sorted, ties lower index first) for a float `x` of rank 2 `[rows, n]`, n >= k."""
    width = x.shape[-1]
    if keras.backend.backend() != "tensorflow" or len(x.shape) != 2:
        return ops.top_k(x, k)
    if width is None:  # Known at run time only (a shortlist's columns): blocked, at least k blocks.
        width = ops.shape(x)[1]
        blocks = ops.maximum(-(-width // BLOCK), k)
    elif width < MIN_BLOCKS * k * BLOCK:
        return ops.top_k(x, k)
    else:
        blocks = -(-width // BLOCK)
    if not isinstance(blocks, int) or blocks * BLOCK != width:
        # Padding at the end loses every tie, so it is never picked before a real entry.
        x = ops.pad(x, [[0, 0], [0, blocks * BLOCK - width]], constant_values=float("-inf"))
    # A static row count stays static (a search's loop keeps its variables' shapes).
    rows = x.shape[0]
    grid = (-1, blocks, BLOCK) if rows is None else (rows, -1, BLOCK)
    _, best_blocks = ops.top_k(ops.max(ops.reshape(x, grid), axis=-1), k)  # [rows, k]
    best_blocks = ops.sort(best_blocks, axis=-1)  # In row order: ties keep TopKV2's order.
    flat = ops.arange(ops.shape(x)[0], dtype=best_blocks.dtype)[:, None] * blocks + best_blocks
    picked = ops.take(ops.reshape(x, (-1, BLOCK)), ops.reshape(flat, (-1,)), axis=0)  # [rows * k, BLOCK]
    values, index = ops.top_k(ops.reshape(picked, (-1 if rows is None else rows, k * BLOCK)), k)
    return values, take_along_last(best_blocks, index // BLOCK) * BLOCK + index % BLOCK
