"""The vocabulary shortlist (Marian's `--shortlist`, CTranslate2's `vmap`, Sockeye's
`--restrict-lexicon`): a batch is searched over a subset of the target vocabulary, its columns:
the union of its source pieces' candidates in a lexical table, the table's most frequent target
pieces, the special ids and the pieces the batch's prefixes and constraints force. The output
projection is computed over those columns only (their rows of the embedding gathered once per
batch), and the search loop runs over column indices, which map to vocabulary ids on the way into
the decoder and out of the search; log-probabilities are normalised over the columns, as in Marian
and CTranslate2. docs/translating.md, "Vocabulary shortlist", says how it is used."""

from typing import Any, NamedTuple

import keras
from keras import ops

from common.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from models.search_part import LARGE_NEGATIVE

# Always columns: the first ids of every vocabulary the project trains (common/special_ids.py), so
# with the columns sorted each keeps its id as its column index.
SPECIAL_IDS = (PAD_ID, BOS_ID, EOS_ID, UNK_ID)


class LexicalTable(NamedTuple):
    """A lexical table as the search reads it: `candidates` int32 `[source_vocabulary, K]`, each
    source piece's target pieces best first (padded with the pad id, which is always a column), and
    `frequent` int32 `[N]`, the target pieces always kept."""

    candidates: Any
    frequent: Any


class BatchShortlist(NamedTuple):
    """One batch's columns: `columns` int32 `[S]`, vocabulary ids in ascending order; `positions`
    int32 `[vocabulary]`, each id's column (-1 for an id that is none); `bias` float32 `[S]` added
    to the logits (`LARGE_NEGATIVE` bars a column), or None."""

    columns: Any
    positions: Any
    bias: Any = None

    def to_vocabulary(self, column_ids):
        """Vocabulary ids of column indices (any shape)."""
        return ops.take(self.columns, ops.cast(column_ids, "int32"), axis=0)

    def to_columns(self, *ids):
        """Column indices of tensors of vocabulary ids (any shape) that are columns, a tuple (None stays None)."""
        return tuple(None if one is None else ops.take(self.positions, ops.cast(one, "int32"), axis=0) for one in ids)


def batch_shortlist(table, source_ids, candidates, vocabulary_size, forced_ids=(), static=False):
    """The `BatchShortlist` of a batch.

    Args:
        table: a `LexicalTable`.
        source_ids: int `[batch, source_length]`; every id indexes a row of `table.candidates`.
        candidates: int >= 1, how many of each source piece's candidates are columns.
        vocabulary_size: the target vocabulary's size.
        forced_ids: int tensors (any shape) of target ids that must be columns (prefixes,
            constraint phrases; their padding is the pad id, a column anyway).
        static: a fixed shape (every id a column, those not in the shortlist barred by `bias`),
            for `jax.jit`, which cannot trace a shape that depends on the data. It is the
            shortlist's search, not its speed.
    """
    source_ids = ops.reshape(ops.cast(source_ids, "int32"), [-1])
    rows = ops.take(ops.convert_to_tensor(table.candidates, "int32")[:, :candidates], source_ids, axis=0)
    pieces = [ops.reshape(rows, [-1]), ops.convert_to_tensor(table.frequent, "int32")]
    pieces += [ops.convert_to_tensor(SPECIAL_IDS, "int32")]
    pieces += [ops.reshape(ops.cast(ids, "int32"), [-1]) for ids in forced_ids if ids is not None]
    ids = ops.concatenate(pieces, axis=0)
    counts = ops.scatter(ids[:, None], ops.ones_like(ids), (vocabulary_size,))  # [vocabulary]
    if static:
        columns = ops.arange(vocabulary_size, dtype="int32")
        bias = ops.where(counts > 0, 0.0, LARGE_NEGATIVE)
        return BatchShortlist(columns, columns, ops.cast(bias, "float32"))
    columns = ops.cast(ops.nonzero(counts > 0)[0], "int32")  # [S], ascending
    positions = ops.scatter(
        columns[:, None], ops.arange(1, ops.shape(columns)[0] + 1, dtype="int32"), (vocabulary_size,)
    )
    return BatchShortlist(columns, positions - 1)


def needs_static_shapes():
    """Whether searches are compiled with fixed shapes (JAX), where `batch_shortlist` needs `static`."""
    return keras.backend.backend() == "jax"
