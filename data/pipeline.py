"""The tf.data input pipeline: TSV pairs -> token-budgeted, length-bucketed batches for `model.fit`.

Elements are `((source_ids, target_input_ids), target_output_ids)`, int32 `[batch, length]`, padded
with PAD_ID to a bucket length. docs/data.md, "The input pipeline", gives the stages and options."""

import dataclasses
import math
import sys
from collections.abc import Callable, Sequence

import tensorflow as tf

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from data.sources import parallel_files

_TOKENIZE_BATCH = 1024  # lines per tokenized batch, at least
_SHUFFLE_BUFFER = 200_000
_CYCLE = 4  # shard files read at once, their lines interleaved


@dataclasses.dataclass(frozen=True)
class BucketPlan:
    """Bucket lengths (increasing, the last `max_length`) and pairs per batch in each
    (`batch_tokens // length`) under a budget of padded tokens per batch and side."""

    lengths: tuple
    batch_sizes: tuple
    batch_tokens: int

    def bucket_of(self, length: int) -> int:
        """Index of the bucket a sequence of `length` tokens goes to."""
        for index, bucket_length in enumerate(self.lengths):
            if length <= bucket_length:
                return index
        raise ValueError(f"Length {length} exceeds the largest bucket {self.lengths[-1]}.")


def bucket_plan(
    batch_tokens: int,
    max_length: int,
    *,
    min_length: int = 8,
    length_multiple: int = 8,
    growth: float = 1.2,
) -> BucketPlan:
    """Bucket lengths from `min_length` to `max_length`, each >= `growth` x the previous and a
    multiple of `length_multiple` (except the last). Raises `ValueError` on `max_length` not
    positive, or `batch_tokens` < `max_length`."""
    if max_length < 1:
        raise ValueError(f"max_length must be positive, got {max_length}.")
    if batch_tokens < max_length:
        raise ValueError(
            f"batch_tokens={batch_tokens} cannot hold one pair of max_length={max_length}; "
            f"raise batch_tokens or lower max_length."
        )
    lengths = []
    length = min(min_length, max_length)
    while length < max_length:
        lengths.append(length)
        length = max(length + 1, math.ceil(length * growth))
        length = math.ceil(length / length_multiple) * length_multiple
    lengths.append(max_length)
    return BucketPlan(
        lengths=tuple(lengths),
        batch_sizes=tuple(batch_tokens // length for length in lengths),
        batch_tokens=batch_tokens,
    )


def _as_paths(tsv_path_or_paths: str | Sequence[str]) -> list[str]:
    paths = [tsv_path_or_paths] if isinstance(tsv_path_or_paths, str) else list(tsv_path_or_paths)
    if not paths:
        raise ValueError("No TSV files given.")
    return paths


def validate_tsv(tsv_path_or_paths: str | Sequence[str]) -> int:
    """Checks that every line is UTF-8 `source<TAB>target`, both sides non-empty, in Python (the
    graph cannot name the file and line); returns the number of pairs. Raises
    `parallel_files.ParallelDataError` naming the file and line."""
    total = 0
    for path in _as_paths(tsv_path_or_paths):
        stats = parallel_files.ReadStats()
        for _ in parallel_files.read_tsv(path, stats):
            pass
        if stats.empty_lines_skipped:
            raise parallel_files.ParallelDataError(
                f"{path}: {stats.empty_lines_skipped} empty lines or sides; the pipeline reads "
                f"corpus TSVs as written by data.prepare, which has none."
            )
        total += stats.pairs
    return total


def _pair_length(source_length, target_input_length):
    """The length a pair is filtered and bucketed by: its longer side, BOS/EOS included."""
    return tf.maximum(source_length, target_input_length)


# The ragged tensors this module builds from row lengths it computed itself skip RaggedTensor's
# validation (`validate=False`): its checks are ops that run on every batch and add to every
# dataset's graph.


def _no_pairs():
    """An empty ragged `[0, None]` int32 batch of sequences."""
    return tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), tf.zeros([0], tf.int64), validate=False)


def _pairs_per_batch(plan: BucketPlan) -> int:
    """Pairs per batch into the bucketing: `_TOKENIZE_BATCH`, or more for large token budgets
    (the bucketing's cost per input batch grows with the pairs waiting)."""
    return max(_TOKENIZE_BATCH, sum(size - 1 for size in plan.batch_sizes) // 8)


def _tokenized_batches(
    lines: tf.data.Dataset, tokenizer, reverse: bool, max_length: int, pairs_per_batch: int
) -> tf.data.Dataset:
    """Lines -> ragged `[pairs, None]` batches (source_ids, target_input_ids, target_output_ids)
    without pairs over `max_length`, each with its (seen, dropped) counts. `tokenizer` may be a
    `(source, target)` pair."""
    source_tokenizer, target_tokenizer = tokenizer if isinstance(tokenizer, tuple) else (tokenizer, tokenizer)

    def tokenize(batch_lines):
        columns = tf.strings.split(batch_lines, "\t", maxsplit=1).to_tensor(shape=[None, 2])
        english, foreign = columns[:, 0], columns[:, 1]
        source, target = (foreign, english) if reverse else (english, foreign)
        source_ids = source_tokenizer.tokenize(source)
        target_ids = target_tokenizer.tokenize(target)
        rows = tf.shape(batch_lines, out_type=tf.int64)[:1]
        eos = tf.RaggedTensor.from_row_lengths(tf.fill(rows, EOS_ID), tf.ones(rows, tf.int64), validate=False)
        bos = tf.RaggedTensor.from_row_lengths(tf.fill(rows, BOS_ID), tf.ones(rows, tf.int64), validate=False)
        sequences = (
            tf.concat([source_ids, eos], axis=1),
            tf.concat([bos, target_ids], axis=1),
            tf.concat([target_ids, eos], axis=1),
        )
        # The over-length filter on the whole batch: a per-pair dataset stage costs more per pair
        # than tokenizing it (benchmarks/README.md, input pipeline).
        keep = _pair_length(sequences[0].row_lengths(), sequences[1].row_lengths()) <= max_length
        seen = tf.size(keep, out_type=tf.int64)
        dropped = seen - tf.reduce_sum(tf.cast(keep, tf.int64))
        return tuple(tf.ragged.boolean_mask(ids, keep) for ids in sequences) + (seen, dropped)

    return lines.batch(pairs_per_batch).map(tokenize, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def _short_pair_batches(
    lines: tf.data.Dataset, tokenizer, reverse: bool, max_length: int, label: str, pairs_per_batch: int
) -> tf.data.Dataset:
    """`_tokenized_batches` without the counts, which are printed to stderr at the end of each pass."""
    batches = _tokenized_batches(lines, tokenizer, reverse, max_length, pairs_per_batch)
    zero = tf.constant(0, tf.int64)
    flagged = batches.map(lambda s, ti, to, seen, dropped: (s, ti, to, seen, dropped, False)).concatenate(
        tf.data.Dataset.from_tensors((_no_pairs(), _no_pairs(), _no_pairs(), zero, zero, True))
    )

    def count(state, element):
        seen, dropped = state
        source, target_input, target_output, batch_seen, batch_dropped, is_end = element
        seen, dropped = seen + batch_seen, dropped + batch_dropped
        report = tf.cond(
            is_end,
            lambda: tf.print(
                "data.pipeline:",
                label,
                ": dropped",
                dropped,
                "of",
                seen,
                "pairs longer than max_length =",
                max_length,
                "tokens",
                output_stream=sys.stderr,
            ),
            tf.no_op,
        )
        with tf.control_dependencies([report]):
            seen = tf.where(is_end, zero, seen)
        return (seen, tf.where(is_end, zero, dropped)), (source, target_input, target_output)

    # Batches left with no pair (the sentinel, and batches whose pairs were all too long) go: a
    # repeated pass that yields nothing must stay empty, or `repeat` would never end.
    return flagged.scan((zero, zero), count).filter(lambda source, target_input, target_output: source.nrows() > 0)


def _cached_pairs(batches: tf.data.Dataset, shuffle: bool, seed: int) -> tf.data.Dataset:
    """Pair batches -> single pairs `(source, target_input, target_output, source length, target
    length)`, kept in memory after the first pass and (with `shuffle`) shuffled after the cache."""
    # One pair per element from here to the cache, so that the shuffle mixes pairs, not batches.
    # Unbatched ragged rows come out as rank-0 ragged specs; the map makes them tensors.
    pairs = batches.unbatch().map(lambda s, ti, to: (s, ti, to, tf.shape(s)[0], tf.shape(ti)[0])).cache()
    if shuffle:
        pairs = pairs.shuffle(_SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    return pairs


def _pair_batches(pairs: tf.data.Dataset, pairs_per_batch: int) -> tf.data.Dataset:
    """`_cached_pairs`' single pairs -> ragged batches of `pairs_per_batch` for the bucketing."""
    # A padded batch costs less per pair than `ragged_batch` (benchmarks/README.md, input pipeline).
    return pairs.padded_batch(pairs_per_batch, padding_values=PAD_ID).map(
        lambda s, ti, to, ls, lt: (
            tf.RaggedTensor.from_tensor(s, lengths=ls),
            tf.RaggedTensor.from_tensor(ti, lengths=lt),
            tf.RaggedTensor.from_tensor(to, lengths=lt),
        ),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )


def _mix_probabilities(paths: Sequence[str], weights: Sequence[float], repeat: bool) -> list[float]:
    """Each corpus's sampling probability: its weight over the sum. Raises `ValueError` without one
    positive finite weight per path, or for a mix that is not repeated."""
    weights = list(weights)
    if len(weights) != len(paths) or not all(math.isfinite(w) and w > 0 for w in weights):
        raise ValueError(f"weights must be one positive number per path ({len(paths)}), got {weights}.")
    if not repeat:
        raise ValueError("A weighted mix of corpora has no end: pass repeat=True.")
    return [w / sum(weights) for w in weights]


def _bucketed(pair_batches: tf.data.Dataset, plan: BucketPlan) -> tf.data.Dataset:
    """Ragged pair batches (with a flush flag) -> `(source, target_input, target_output)` batches
    padded to a bucket length. `bucket_by_sequence_length` one input batch at a time instead of one
    pair at a time: a `scan` carries the pairs waiting for their bucket to fill; each bucket emits
    its full batches in arrival order; a flush emits what is left. Every pair must fit the last
    bucket."""
    lengths = tf.constant(plan.lengths, tf.int64)
    sizes = tf.constant(plan.batch_sizes, tf.int64)
    buckets = len(plan.lengths)

    def step(pending, element):
        # The waiting pairs as (values, row lengths) per sequence: `scan` keeps no ragged state.
        *new, flush = element
        sequences = [
            tf.concat([tf.RaggedTensor.from_row_lengths(values, row_lengths, validate=False), more], axis=0)
            for (values, row_lengths), more in zip(pending, new)
        ]
        bucket = tf.searchsorted(
            lengths, _pair_length(sequences[0].row_lengths(), sequences[1].row_lengths()), out_type=tf.int64
        )
        in_bucket = tf.one_hot(bucket, buckets, dtype=tf.int64)  # [pairs, buckets]
        rank = tf.reduce_sum(tf.cumsum(in_bucket, axis=0, exclusive=True) * in_bucket, axis=1)
        counts = tf.reduce_sum(in_bucket, axis=0)
        batches_per_bucket = tf.where(flush, (counts + sizes - 1) // sizes, counts // sizes)
        batched = rank < tf.gather(batches_per_bucket * sizes, bucket)
        # Pairs that leave, bucket by bucket and in arrival order within a bucket.
        order = tf.argsort(bucket * tf.size(rank, out_type=tf.int64) + rank, stable=True)
        leaving = tf.boolean_mask(order, tf.gather(batched, order))
        staying = tf.where(tf.logical_not(batched))[:, 0]
        index = tf.ragged.range(batches_per_bucket)  # [buckets, (batches)]: a batch's index in its bucket
        batch_bucket = index.value_rowids()
        batch_size = tf.gather(sizes, batch_bucket)
        batch_sizes = tf.minimum(batch_size, tf.gather(counts, batch_bucket) - index.values * batch_size)
        out = tuple(
            tf.RaggedTensor.from_row_lengths(tf.gather(ids, leaving), batch_sizes, validate=False) for ids in sequences
        )
        waiting = tuple((rows.values, rows.row_lengths()) for rows in (tf.gather(ids, staying) for ids in sequences))
        return waiting, out + (tf.gather(lengths, batch_bucket),)

    def pad(source, target_input, target_output, length):
        return tuple(
            ids.to_tensor(PAD_ID, shape=tf.stack([ids.nrows(), length]))
            for ids in (source, target_input, target_output)
        )

    nothing = (tf.zeros([0], tf.int32), tf.zeros([0], tf.int64))
    batches = pair_batches.scan((nothing, nothing, nothing), step).unbatch()
    return batches.map(pad, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)


def make_dataset(
    tsv_path_or_paths: str | Sequence[str],
    tokenizer,
    *,
    batch_tokens: int,
    max_length: int,
    shuffle: bool = True,
    seed: int | None = 0,
    reverse: bool = False,
    repeat: bool = False,
    num_shards: int = 1,
    shard_index: int = 0,
    plan: BucketPlan | None = None,
    validate: bool = True,
    cache_tokenized: bool = False,
    weights: Sequence[float] | None = None,
    data_service: str | None = None,
    source_tokenizer=None,
) -> tf.data.Dataset:
    """A dataset of `((source_ids, target_input_ids), target_output_ids)` batches for `model.fit`:
    int32 `[batch, length]`, `length` a bucket length, `batch <= batch_tokens // length`.

    Args:
        tsv_path_or_paths: `english<TAB>foreign` TSV files (data.prepare's output).
        tokenizer: the target's `Tokenizer` (both sides' without `source_tokenizer`).
        batch_tokens: padded tokens per batch and side (per replica when distributed).
        max_length: longest sequence kept, BOS/EOS included.
        shuffle, seed: seed None lets each iterator draw its own (tf.data service workers).
        reverse: the TSV's second column is the source.
        repeat: repeat forever, before bucketing.
        weights: one per path: draw from the paths in proportion (needs `repeat`); None reads
            them one after the other.
        data_service: "grpc://HOST:PORT" of a tf.data service dispatcher.
    """
    paths = _as_paths(tsv_path_or_paths)
    if validate:
        validate_tsv(paths)
    tokenizers = (source_tokenizer or tokenizer, tokenizer)
    for side in tokenizers:
        if hasattr(side, "ensure_resource"):
            side.ensure_resource()
    plan = plan or bucket_plan(batch_tokens, max_length)
    probabilities = None if weights is None else _mix_probabilities(paths, weights, repeat)
    _check_plan(plan, max_length)
    reader = _ShardReader(tokenizers, reverse, max_length, _pairs_per_batch(plan), num_shards, shard_index)
    fixed_seed = seed

    def build(_=None):
        seed = fixed_seed if fixed_seed is not None else _drawn_seed()
        if weights is None:
            batches = _one_corpus_batches(reader, paths, shuffle=shuffle, seed=seed, cache_tokenized=cache_tokenized)
        else:
            batches = _mixed_corpus_batches(
                reader, paths, probabilities, shuffle=shuffle, seed=seed, cache_tokenized=cache_tokenized
            )
        batches = _with_end_of_data(batches, repeat=repeat, mixed=weights is not None)
        batches = _bucketed(batches, plan).map(lambda s, ti, to: ((s, ti), to))
        if shuffle:
            batches = batches.shuffle(128, seed=seed + 1, reshuffle_each_iteration=True)
        return batches

    if not (repeat or seed is None or data_service):
        return _prefetched(build())
    # Inside `flat_map` each iterator builds its own stream and shuffle seed generators: shared ones
    # would let another iterator (Keras's first-batch peek before a fit) change, by how far it
    # prefetched, the batches a fit or a resumed fit reads at the same seed.
    dataset = tf.data.Dataset.range(1).flat_map(build)
    if data_service:
        dataset = dataset.apply(tf.data.experimental.service.distribute("parallel_epochs", data_service))
    return _prefetched(dataset)


def _prefetched(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset` prefetched, without tf.data's autotuning thread. Destroying an iterator joins that
    thread, and in TensorFlow 2.21 it can sleep out its period (up to a minute) before it sees the
    cancellation: a fit's or a dev pass's end stalled that long. Without it, the parallel stages run
    as many calls as there are cores (at most 16) and the prefetch buffer grows while the consumer
    waits."""
    options = tf.data.Options()
    options.autotune.enabled = False
    return dataset.prefetch(tf.data.AUTOTUNE).with_options(options)


def _drawn_seed() -> tf.Tensor:
    """A shuffle seed drawn from the clock when the dataset function runs: each iterator its own."""
    return tf.cast(tf.timestamp() * 1e6, tf.int64) % (2**31 - 1)


def _check_plan(plan: BucketPlan, max_length: int) -> None:
    """Raises ValueError unless `plan` ends at `max_length`, increasing, each batch size >= 1."""
    if plan.lengths[-1] != max_length:
        raise ValueError(f"The bucket plan ends at {plan.lengths[-1]}, max_length is {max_length}.")
    increasing = all(a < b for a, b in zip(plan.lengths, plan.lengths[1:]))
    if not increasing or len(plan.batch_sizes) != len(plan.lengths) or min(plan.batch_sizes) < 1:
        raise ValueError(
            f"The bucket plan needs increasing lengths and one batch size >= 1 for each, got lengths "
            f"{plan.lengths} and batch sizes {plan.batch_sizes}."
        )


@dataclasses.dataclass(frozen=True)
class _ShardReader:
    """How this input pipeline reads TSV files: its shard of their lines (every `num_shards`-th from
    `shard_index`), tokenized into `_short_pair_batches` of `pairs_per_batch`."""

    tokenizer: tuple  # (source's, target's): one object twice with a shared vocabulary.
    reverse: bool
    max_length: int
    pairs_per_batch: int
    num_shards: int
    shard_index: int

    def lines(self, files: Sequence[str], seed: int | None = None) -> tf.data.Dataset:
        """This pipeline's lines of `files` (`pipeline_lines`)."""
        return pipeline_lines(files, self.num_shards, self.shard_index, seed)

    def short_pair_batches(self, lines: tf.data.Dataset, files: Sequence[str]) -> tf.data.Dataset:
        """`_short_pair_batches` of `lines`, read from `files` (named in the over-length report)."""
        label = f"{','.join(files)} shard {self.shard_index}/{self.num_shards}"
        return _short_pair_batches(lines, self.tokenizer, self.reverse, self.max_length, label, self.pairs_per_batch)


def pipeline_lines(files: Sequence[str], num_shards: int, shard_index: int, seed: int | None = None) -> tf.data.Dataset:
    """The lines that pipeline `shard_index` of `num_shards` reads: every `num_shards`-th whole
    file when there are enough files, else every `num_shards`-th line of all of them. Files are
    interleaved `_CYCLE` at a time, their order shuffled with `seed` (None: in order)."""
    by_lines = sharded_by_lines(files, num_shards)
    by_files = num_shards > 1 and not by_lines
    own = list(files[shard_index::num_shards]) if by_files else list(files)
    if len(own) == 1:
        lines = tf.data.TextLineDataset(own)
    else:
        names = tf.data.Dataset.from_tensor_slices(own)
        if seed is not None and (by_files or num_shards == 1):  # Line sharding needs one order everywhere.
            names = names.shuffle(len(own), seed=seed, reshuffle_each_iteration=True)
        lines = names.interleave(
            tf.data.TextLineDataset,
            cycle_length=min(len(own), _CYCLE),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
    return lines.shard(num_shards, shard_index) if by_lines else lines


def sharded_by_lines(files: Sequence[str], num_shards: int) -> bool:
    """Whether `num_shards` input pipelines read `files` by lines (fewer files than pipelines)."""
    return 1 < num_shards and len(files) < num_shards


def _one_corpus_batches(
    reader: _ShardReader, paths: Sequence[str], *, shuffle: bool, seed: int, cache_tokenized: bool
) -> tf.data.Dataset:
    """Without weights: ragged pair batches of `paths` read one after the other as one corpus, its
    lines shuffled before tokenizing (with `cache_tokenized`, its pairs after the cache)."""
    lines = reader.lines(paths, seed + 3 if shuffle else None)
    if shuffle and not cache_tokenized:
        lines = lines.shuffle(_SHUFFLE_BUFFER, seed=seed, reshuffle_each_iteration=True)
    batches = reader.short_pair_batches(lines, paths)
    if cache_tokenized:
        batches = _pair_batches(_cached_pairs(batches, shuffle, seed), reader.pairs_per_batch)
    return batches


def _mixed_corpus_batches(
    reader: _ShardReader,
    paths: Sequence[str],
    probabilities: Sequence[float],
    *,
    shuffle: bool,
    seed: int,
    cache_tokenized: bool,
) -> tf.data.Dataset:
    """With weights: ragged pair batches drawn from the corpora `paths` with `probabilities`, each
    corpus shuffled (with its own seed) and repeated on its own: an endless stream."""
    if cache_tokenized:
        # Each corpus's pairs are cached on their own and repeat on their own; the mix draws pairs.
        streams = [
            _cached_pairs(reader.short_pair_batches(reader.lines([path]), [path]), shuffle, seed + 2 + index).repeat()
            for index, path in enumerate(paths)
        ]
        return _pair_batches(
            tf.data.Dataset.sample_from_datasets(streams, probabilities, seed=seed), reader.pairs_per_batch
        )
    # The mix draws lines, before tokenizing: an endless stream, so the over-length count,
    # printed at the end of a pass, is not printed.
    streams = []
    for index, path in enumerate(paths):
        lines = reader.lines([path])
        if shuffle:
            lines = lines.shuffle(_SHUFFLE_BUFFER, seed=seed + 2 + index, reshuffle_each_iteration=True)
        streams.append(lines.repeat())
    lines = tf.data.Dataset.sample_from_datasets(streams, probabilities, seed=seed)
    return reader.short_pair_batches(lines, paths)


def _with_end_of_data(batches: tf.data.Dataset, *, repeat: bool, mixed: bool) -> tf.data.Dataset:
    """Ragged pair batches -> `(..., is_end)`: one pass ending with a flush, or repeated forever."""
    batches = batches.map(lambda s, ti, to: (s, ti, to, False))
    if not repeat:  # the end: the pairs still waiting for their batch to fill leave in partial batches
        flush = tf.data.Dataset.from_tensors((_no_pairs(), _no_pairs(), _no_pairs(), True))
        batches = batches.concatenate(flush)
    elif not mixed:
        batches = batches.repeat()
    return batches


def data_parallel_plan(batch_tokens: int, max_length: int, replicas: int) -> BucketPlan:
    """`bucket_plan` of one global batch split in equal per-replica shares (JAX data parallelism)."""
    plan = bucket_plan(batch_tokens, max_length)
    return dataclasses.replace(
        plan, batch_sizes=tuple(replicas * size for size in plan.batch_sizes), batch_tokens=replicas * batch_tokens
    )


def pad_batch_rows(dataset: tf.data.Dataset, multiple: int) -> tf.data.Dataset:
    """Pads each batch with all-padding pairs to a multiple of `multiple` rows so a data-parallel
    split is even; the loss ignores pairs without target tokens."""

    def pad(inputs, target_output):
        extra = tf.math.floormod(-tf.shape(target_output)[0], multiple)
        rows = lambda ids: tf.pad(ids, [[0, extra], [0, 0]], constant_values=PAD_ID)
        return (rows(inputs[0]), rows(inputs[1])), rows(target_output)

    return dataset.map(pad)


def make_distributed_dataset_fn(
    tsv_path_or_paths: str | Sequence[str], tokenizer, **kwargs
) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """A `dataset_fn` for `strategy.distribute_datasets_from_function`: each input pipeline reads
    its share (`pipeline_lines`) with the per-replica `batch_tokens`, its shuffle seed offset by
    its id. `kwargs` are `make_dataset`'s."""
    paths = _as_paths(tsv_path_or_paths)
    if kwargs.get("validate", True):
        validate_tsv(paths)
    kwargs["validate"] = False
    warned = []

    def dataset_fn(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        pipelines = input_context.num_input_pipelines
        if sharded_by_lines(paths, pipelines) and not warned and not kwargs.get("weights"):
            warned.append(True)
            print(
                f"{len(paths)} training shard file(s) for {pipelines} input pipelines: each pipeline reads all "
                "of them and keeps every "
                f"{pipelines}th line; prepare the corpus with at least {pipelines} shards "
                "(python -m data.prepare --shard_pairs) for each to read only its own",
                file=sys.stderr,
            )
        options = dict(kwargs)
        if options.get("seed", 0) is not None:
            options["seed"] = options.get("seed", 0) + input_context.input_pipeline_id
        return make_dataset(
            paths,
            tokenizer,
            num_shards=input_context.num_input_pipelines,
            shard_index=input_context.input_pipeline_id,
            **options,
        )

    return dataset_fn


def resolve_direction(languages: Sequence[str], direction: str) -> bool:
    """Whether to reverse a corpus with columns `languages` (("en", "de")) for `direction` ("de-en":
    True). Raises `ValueError` on a direction that is not the corpus's languages in either order."""
    languages = tuple(languages)
    if direction == f"{languages[0]}-{languages[1]}":
        return False
    if direction == f"{languages[1]}-{languages[0]}":
        return True
    raise ValueError(
        f"Direction {direction!r} does not match the corpus languages {languages}; expected "
        f"'{languages[0]}-{languages[1]}' or '{languages[1]}-{languages[0]}'."
    )
