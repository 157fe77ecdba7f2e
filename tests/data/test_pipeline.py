import itertools
import threading

import numpy as np
import pytest
import tensorflow as tf

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from data import pipeline, tokenizer
from data.sources import parallel_files


def _batches(dataset):
    return [((s.numpy(), ti.numpy()), to.numpy()) for (s, ti), to in dataset]


def test_bucket_plan_hand_computed():
    plan = pipeline.bucket_plan(1000, 50)
    assert plan.lengths == (8, 16, 24, 32, 40, 48, 50)
    assert plan.batch_sizes == (125, 62, 41, 31, 25, 20, 20)
    assert plan.bucket_of(1) == 0 and plan.bucket_of(9) == 1 and plan.bucket_of(50) == 6
    with pytest.raises(ValueError, match="batch_tokens=40 cannot hold one pair of max_length=50"):
        pipeline.bucket_plan(40, 50)


def test_batches_respect_budget_and_bucket_lengths(small_tsv, small_tokenizer):
    plan = pipeline.bucket_plan(512, 96)
    batches = _batches(pipeline.make_dataset(small_tsv, small_tokenizer, batch_tokens=512, max_length=96, seed=3))
    seen = 0
    for (source, target_input), target_output in batches:
        assert source.dtype == np.int32
        assert source.shape[1] == target_input.shape[1] == target_output.shape[1]
        assert source.shape[1] in plan.lengths
        assert source.size <= 512 and target_input.size <= 512
        assert source.shape[0] <= plan.batch_sizes[plan.lengths.index(source.shape[1])]
        seen += source.shape[0]
    lengths = [b[0][0].shape[1] for b in batches]
    assert len(set(lengths)) > 3  # several buckets in use


def test_pairs_are_encoded_with_bos_eos_and_padding(small_tsv, small_tokenizer):
    dataset = pipeline.make_dataset(small_tsv, small_tokenizer, batch_tokens=4096, max_length=128, shuffle=False)
    expected = dict(parallel_files.read_tsv(small_tsv))
    (source, target_input), target_output = next(iter(dataset))
    for row in range(source.shape[0]):
        s, ti, to = source[row].numpy(), target_input[row].numpy(), target_output[row].numpy()
        n_source, n_target = int((s != PAD_ID).sum()), int((to != PAD_ID).sum())
        assert s[n_source - 1] == EOS_ID and not (s[n_source:] != PAD_ID).any()
        assert ti[0] == BOS_ID and to[n_target - 1] == EOS_ID
        assert (ti[1:n_target] == to[: n_target - 1]).all()  # the decoder input is shifted right
        english = small_tokenizer.detokenize(s[None])[0].numpy().decode()
        german = small_tokenizer.detokenize(ti[None])[0].numpy().decode()
        assert expected[english] == german


def test_over_length_pairs_are_dropped_and_reported(small_tsv, small_tokenizer, capfd):
    pairs = list(parallel_files.read_tsv(small_tsv))
    source_lengths = small_tokenizer.tokenize([en for en, _ in pairs]).row_lengths().numpy() + 1
    target_lengths = small_tokenizer.tokenize([de for _, de in pairs]).row_lengths().numpy() + 1
    too_long = int((np.maximum(source_lengths, target_lengths) > 40).sum())
    assert 0 < too_long < len(pairs)
    dataset = pipeline.make_dataset(small_tsv, small_tokenizer, batch_tokens=800, max_length=40, seed=1)
    kept = sum(b[0][0].shape[0] for b in _batches(dataset))
    assert kept == len(pairs) - too_long
    assert f"dropped {too_long} of {len(pairs)} pairs longer than max_length = 40" in capfd.readouterr().err


@pytest.mark.slow  # Two passes read by two iterators.
def test_each_iterator_of_a_repeated_stream_reads_the_same_passes(small_tsv, small_tokenizer):
    """Keras reads a fit's first batch with an iterator of its own and leaves it prefetching: the
    training's iterator reads the same batches however far that one has got, into a second pass
    (reshuffled), and so does one of a dataset made again with the same seed; another seed reads
    other batches (no seed, each iterator its own: tests/data/test_service.py)."""
    options = dict(batch_tokens=512, max_length=96, seed=7)
    one_pass = _batches(pipeline.make_dataset(small_tsv, small_tokenizer, **options))
    other = _batches(pipeline.make_dataset(small_tsv, small_tokenizer, **dict(options, seed=8)))
    assert [b[1].tolist() for b in other] != [b[1].tolist() for b in one_pass]
    steps = len(one_pass) + 2  # Into a second pass.
    dataset = pipeline.make_dataset(small_tsv, small_tokenizer, repeat=True, **options)
    ahead = iter(dataset)
    first = _batches(itertools.islice(ahead, steps))
    _batches(itertools.islice(ahead, steps))  # This iterator goes on, into passes the next one has not read.
    second = _batches(itertools.islice(iter(dataset), steps))
    again = _batches(itertools.islice(pipeline.make_dataset(small_tsv, small_tokenizer, repeat=True, **options), steps))
    for a, b, c in zip(first, second, again, strict=True):
        for x, y, z in zip(tf.nest.flatten(a), tf.nest.flatten(b), tf.nest.flatten(c)):
            np.testing.assert_array_equal(x, y)
            np.testing.assert_array_equal(x, z)


@pytest.mark.parametrize("repeat", [False, True])
def test_streams_run_without_the_autotuning_thread(small_tsv, small_tokenizer, repeat):
    """Destroying an iterator joins tf.data's autotuning thread, which can sleep up to a minute
    before it sees the cancellation: the training and dev streams run without it."""
    dataset = pipeline.make_dataset(small_tsv, small_tokenizer, batch_tokens=512, max_length=96, seed=7, repeat=repeat)
    assert dataset.options().autotune.enabled is False


def test_reverse_swaps_source_and_target(small_tsv, small_tokenizer):
    backward = pipeline.make_dataset(
        small_tsv, small_tokenizer, batch_tokens=4096, max_length=128, shuffle=False, reverse=True
    )
    (source, _), _ = next(iter(backward))
    pairs = dict((de, en) for en, de in parallel_files.read_tsv(small_tsv))
    german = small_tokenizer.detokenize(source[:1])[0].numpy().decode()
    assert german in pairs and german.endswith("Uhr (" + german.rsplit("(", 1)[1])


def test_a_source_tokenizer_of_its_own_tokenizes_the_source_side(small_tsv, small_tokenizer, tmp_path):
    """Separate vocabularies: the source side is read by `source_tokenizer`, the target's by
    `tokenizer`, as the translators read them."""
    source_tokenizer = tokenizer.Tokenizer.from_file(
        tokenizer.train_sentencepiece(small_tsv, str(tmp_path / "en"), vocab_size=350, tsv_column=0)
    )
    dataset = pipeline.make_dataset(
        small_tsv,
        small_tokenizer,
        batch_tokens=4096,
        max_length=128,
        shuffle=False,
        source_tokenizer=source_tokenizer,
    )
    (source, target_in), target_out = next(iter(dataset))
    pairs = dict(parallel_files.read_tsv(small_tsv))
    english = source_tokenizer.detokenize(source[:1])[0].numpy().decode()
    german = small_tokenizer.detokenize(target_out[:1])[0].numpy().decode()
    assert pairs[english] == german
    ids = [int(i) for i in source[0] if i != PAD_ID]
    assert ids == source_tokenizer.tokenize([english]).to_list()[0] + [EOS_ID]
    assert ids != small_tokenizer.tokenize([english]).to_list()[0] + [EOS_ID]


def _shard_files(tsv, directory, count):
    """`tsv`'s lines cut into `count` shard files (as data.prepare writes them)."""
    with open(tsv, encoding="utf-8") as handle:
        lines = handle.readlines()
    size = -(-len(lines) // count)
    paths = []
    for index in range(count):
        path = directory / f"train-{index:05d}-of-{count:05d}.tsv"
        path.write_text("".join(lines[index * size : (index + 1) * size]), encoding="utf-8")
        paths.append(str(path))
    return paths


@pytest.mark.parametrize("shards", [1, pytest.param(4, marks=pytest.mark.slow)])
def test_distributed_pipelines_read_their_own_shards(small_tsv, small_tokenizer, tmp_path, capsys, shards):
    files = _shard_files(small_tsv, tmp_path, shards)
    english_of = [{en for en, _ in parallel_files.read_tsv(path)} for path in files]
    dataset_fn = pipeline.make_distributed_dataset_fn(
        files, small_tokenizer, batch_tokens=1024, max_length=256, shuffle=False
    )
    pipelines = 2
    decoded = []
    for pipeline_id in range(pipelines):
        context = tf.distribute.InputContext(
            num_input_pipelines=pipelines, input_pipeline_id=pipeline_id, num_replicas_in_sync=pipelines
        )
        rows = set()
        for (source, _), _ in dataset_fn(context):
            assert source.shape[0] * source.shape[1] <= 1024  # the per-replica budget
            rows |= {t.decode() for t in small_tokenizer.detokenize(source).numpy()}
        decoded.append(rows)
        if shards >= pipelines:  # Whole files: those of its own, every N-th from its id.
            assert rows == set().union(*english_of[pipeline_id::pipelines])
    assert sum(len(rows) for rows in decoded) == len(set().union(*decoded)) == 600
    warning = "each pipeline reads all of them and keeps every"
    assert (warning in capsys.readouterr().err) == (shards < pipelines)
    if shards < pipelines:
        return  # Through a strategy: one pipeline, which reads every shard, once.
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    distributed = strategy.distribute_datasets_from_function(dataset_fn)
    (source, _), _ = next(iter(distributed))
    assert source.shape[0] * source.shape[1] <= 1024


def test_shards_are_read_interleaved_in_an_order_the_seed_decides_each_pass(small_tsv, tmp_path):
    files = _shard_files(small_tsv, tmp_path, 5)

    def passes(seed):
        lines = pipeline.pipeline_lines(files, 1, 0, seed).repeat(2)
        read = [line.decode() for line in lines.as_numpy_iterator()]
        return read[:600], read[600:]

    first, second = passes(seed=5)
    assert passes(seed=5) == (first, second)  # the same passes from the same seed
    assert sorted(first) == sorted(second) and first != second  # each pass all lines, in another order
    assert first[:2] != [line.rstrip("\n") for line in open(files[0], encoding="utf-8").readlines()[:2]]
    in_order = [line.decode() for line in pipeline.pipeline_lines(files, 1, 0).as_numpy_iterator()]
    assert sorted(in_order) == sorted(first) and passes(seed=6) != (first, second)


def test_malformed_tsv_is_named_before_the_graph_runs(tmp_path, small_tokenizer):
    path = tmp_path / "bad.tsv"
    path.write_text("One.\tEins.\nno tab here\n", encoding="utf-8")
    with pytest.raises(parallel_files.ParallelDataError, match=r"bad.tsv:2"):
        pipeline.make_dataset(str(path), small_tokenizer, batch_tokens=512, max_length=64)


def test_resolve_direction():
    assert pipeline.resolve_direction(("en", "de"), "en-de") is False
    assert pipeline.resolve_direction(("en", "es"), "es-en") is True
    with pytest.raises(ValueError, match="'fr-en' does not match the corpus languages"):
        pipeline.resolve_direction(("en", "de"), "fr-en")


def _padding_share(dataset, steps=None):
    pad = total = 0
    for index, ((source, target_input), _) in enumerate(dataset):
        if steps is not None and index >= steps:
            break
        for tensor in (source, target_input):
            total += int(tf.size(tensor))
            pad += int(tf.reduce_sum(tf.cast(tensor == PAD_ID, tf.int32)))
    return pad / total


@pytest.mark.slow
@pytest.mark.full
def test_padding_share_on_the_real_corpus(deb_en_de, tmp_path):
    paths, _, _ = deb_en_de
    # Every fourth pair of the training split: its lengths as the whole split has them.
    train = tmp_path / "train.tsv"
    with open(train, "w", encoding="utf-8") as sample:
        for shard in paths.train:
            with open(shard, encoding="utf-8") as pairs:
                sample.writelines(itertools.islice(pairs, 0, None, 4))
    train = str(train)
    spm = tokenizer.Tokenizer.from_file(tokenizer.train_sentencepiece(train, str(tmp_path / "spm"), vocab_size=8000))
    batch_tokens, max_length = 4096, 128
    bucketed = pipeline.make_dataset(train, spm, batch_tokens=batch_tokens, max_length=max_length, seed=0)
    plan = pipeline.bucket_plan(batch_tokens, max_length)
    # The same pairs without bucketing: shuffled, fixed batches of the average bucketed size,
    # padded to the longest pair of each batch.
    batch_size = int(np.mean(plan.batch_sizes))
    unbucketed = (
        pipeline.make_dataset(
            train,
            spm,
            batch_tokens=batch_tokens,
            max_length=max_length,
            seed=0,
            plan=pipeline.BucketPlan((max_length,), (1,), batch_tokens),
        )
        .unbatch()
        .map(
            lambda inputs, target_output: (
                (inputs[0][inputs[0] != PAD_ID], inputs[1][inputs[1] != PAD_ID]),
                target_output,
            )
        )
        .padded_batch(batch_size, padding_values=((PAD_ID, PAD_ID), PAD_ID))
    )
    bucketed_share = _padding_share(bucketed)
    unbucketed_share = _padding_share(unbucketed)
    print(
        f"\npadding share on a quarter of deb-en-de train (batch_tokens={batch_tokens}, max_length={max_length}):"
        f" bucketed {bucketed_share:.1%}, unbucketed batches of {batch_size} {unbucketed_share:.1%}"
    )
    assert bucketed_share < 0.5 * unbucketed_share
    assert bucketed_share < 0.30


def _pair_set(batches):
    """The pairs of some batches as a sorted list of (source, target_output) tuples without padding."""
    pairs = []
    for (source, _), target_output in batches:
        for s, to in zip(source, target_output):
            pairs.append((tuple(s[s != PAD_ID]), tuple(to[to != PAD_ID])))
    return sorted(pairs)


def test_cached_tokenized_pairs_are_the_same_pairs_and_are_not_read_again(small_tsv, small_tokenizer, tmp_path):
    path = str(tmp_path / "pairs.tsv")
    with open(small_tsv, encoding="utf-8") as source, open(path, "w", encoding="utf-8") as copy:
        copy.write(source.read())
    options = dict(batch_tokens=512, max_length=40, seed=5)
    uncached_dataset = pipeline.make_dataset(path, small_tokenizer, **options)
    uncached = _batches(uncached_dataset)
    dataset = pipeline.make_dataset(path, small_tokenizer, cache_tokenized=True, **options)
    first_pass = _batches(dataset)
    assert _pair_set(first_pass) == _pair_set(uncached)  # same pairs kept (and over-length dropped)
    # The second pass comes from memory: emptying the file changes nothing.
    parallel_files.write_tsv(path, [("Hallo", "Hello")])
    second_pass = _batches(dataset)
    assert _pair_set(second_pass) == _pair_set(first_pass)
    # ...reshuffled: the pairs arrive in another order.
    order = lambda batches: [tuple(s[s != PAD_ID]) for (source, _), _ in batches for s in source]  # noqa: E731
    assert order(second_pass) != order(first_pass)
    # Without the cache the same dataset reads the file again.
    assert len(_pair_set(_batches(uncached_dataset))) == 1


def test_cached_pairs_survive_into_later_passes_of_a_repeated_dataset(small_tsv, small_tokenizer, tmp_path):
    """As train.py reads it: one repeated iterator; the file changes after the first pass."""
    path = str(tmp_path / "pairs.tsv")
    pairs = list(parallel_files.read_tsv(small_tsv))
    parallel_files.write_tsv(path, pairs)
    options = dict(batch_tokens=512, max_length=40, seed=5)
    one_pass = _pair_set(_batches(pipeline.make_dataset(path, small_tokenizer, **options)))
    iterator = iter(pipeline.make_dataset(path, small_tokenizer, repeat=True, cache_tokenized=True, **options))
    batches = []
    while sum(b[0][0].shape[0] for b in batches) < len(one_pass):  # the first pass, and a little more
        batches.append(next(iterator))
    parallel_files.write_tsv(path, [(target, source) for source, target in pairs])  # other pairs, same size
    later = []
    # Twelve more passes' worth: the pipeline reads ahead of its consumer (the shuffle of 128 batches
    # holds several passes of this small corpus), so an uncached pipeline shows the swapped pairs
    # only after the passes it had already read.
    while sum(b[0][0].shape[0] for b in later) < 12 * len(one_pass):
        later.append(next(iterator))
    later_pairs = set(_pair_set(_batches(later)))
    assert later_pairs <= set(one_pass)  # nothing read from the new file
    assert len(later_pairs) > len(set(one_pass)) // 2  # (not all: a rare bucket fills only every few passes)


@pytest.mark.slow  # the uncached stream's determinism stays in the fast tier
def test_cached_pipeline_same_seed_same_batches(small_tsv, small_tokenizer):
    make = lambda seed: _batches(
        pipeline.make_dataset(  # noqa: E731
            small_tsv, small_tokenizer, batch_tokens=512, max_length=96, seed=seed, cache_tokenized=True
        )
    )
    first, again, other = make(7), make(7), make(8)
    assert [b[1].tolist() for b in first] == [b[1].tolist() for b in again]
    assert [b[1].tolist() for b in first] != [b[1].tolist() for b in other]


def _batch_key(batch):
    (source, target_input), target_output = batch
    return source.shape, source.tobytes(), target_input.tobytes(), target_output.tobytes()


def _batches_holding(dataset, pairs, most=1000):
    """The first batches of `dataset` that hold `pairs` pairs or more (at most `most` batches)."""
    batches, held = [], 0
    for batch in itertools.islice(dataset, most):
        batches.append(((batch[0][0].numpy(), batch[0][1].numpy()), batch[1].numpy()))
        held += batches[-1][1].shape[0]
        if held >= pairs:
            return batches
    raise AssertionError(f"{most} batches held {held} pairs, fewer than {pairs}")


def _reference_batches(tsv, tokenizer, plan, max_length, repeat=False):
    """tf.data's own bucketing, one pair per element, of the pipeline's pairs in file order."""
    lines = tf.data.TextLineDataset([tsv])
    pairs = pipeline._short_pair_batches(lines, tokenizer, False, max_length, "reference", pairs_per_batch=256)
    pairs = pairs.unbatch().map(lambda s, ti, to: (s, ti, to))
    if repeat:
        pairs = pairs.repeat()
    batches = pairs.bucket_by_sequence_length(
        element_length_func=lambda s, ti, to: tf.maximum(tf.shape(s)[0], tf.shape(ti)[0]),
        bucket_boundaries=[length + 1 for length in plan.lengths],
        bucket_batch_sizes=list(plan.batch_sizes) + [1],
        padding_values=(PAD_ID, PAD_ID, PAD_ID),
        pad_to_bucket_boundary=True,
    )
    return batches.map(lambda s, ti, to: ((s, ti), to))


def test_batches_are_those_of_tf_data_bucketing_pair_by_pair(small_tsv, small_tokenizer, monkeypatch):
    """The bucketing runs on batches of `chunk` tokenized pairs (pairs wait across them for their
    bucket to fill); tf.data's own bucketing, one pair per element, must give the same batches:
    with chunks of 37 pairs, with and without the cache of tokenized pairs, and with one chunk of
    all the file's pairs (nothing waits across chunks), which the cache does not change."""
    plan = pipeline.bucket_plan(512, 96)
    reference = sorted(map(_batch_key, _batches(_reference_batches(small_tsv, small_tokenizer, plan, 96))))
    assert len(reference) > 10
    for chunk, cache_tokenized in [(37, False), (37, True), (1024, False)]:
        monkeypatch.setattr(pipeline, "_TOKENIZE_BATCH", chunk)
        ours = _batches(
            pipeline.make_dataset(
                small_tsv,
                small_tokenizer,
                batch_tokens=512,
                max_length=96,
                shuffle=False,
                cache_tokenized=cache_tokenized,
            )
        )
        assert sorted(map(_batch_key, ours)) == reference, (chunk, cache_tokenized)


@pytest.mark.parametrize("cache_tokenized", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_repeated_pipeline_carries_waiting_pairs_into_the_next_pass(
    small_tsv, small_tokenizer, monkeypatch, cache_tokenized
):
    """Repeated before bucketing: the pairs left at the end of a pass wait for the next one, so
    every batch is full and no pair is lost; bucket by bucket, the batches are tf.data's."""
    monkeypatch.setattr(pipeline, "_TOKENIZE_BATCH", 64)
    plan = pipeline.bucket_plan(512, 96)
    options = dict(batch_tokens=512, max_length=96, shuffle=False, cache_tokenized=cache_tokenized)
    one_pass = _batches(pipeline.make_dataset(small_tsv, small_tokenizer, **options))
    pairs_per_pass = sum(b[1].shape[0] for b in one_pass)
    assert any(b[1].shape[0] < plan.batch_sizes[plan.lengths.index(b[1].shape[1])] for b in one_pass)
    ours = _batches_holding(
        pipeline.make_dataset(small_tsv, small_tokenizer, repeat=True, **options), 2 * pairs_per_pass
    )
    for _, target_output in ours:
        assert target_output.shape[0] == plan.batch_sizes[plan.lengths.index(target_output.shape[1])]
    reference = _batches_holding(
        _reference_batches(small_tsv, small_tokenizer, plan, 96, repeat=True), 4 * pairs_per_pass
    )
    for length in plan.lengths:
        ours_here = [_batch_key(b) for b in ours if b[1].shape[1] == length]
        reference_here = [_batch_key(b) for b in reference if b[1].shape[1] == length]
        assert len(reference_here) >= len(ours_here)
        assert ours_here == reference_here[: len(ours_here)], length


@pytest.mark.parametrize("cache_tokenized", [False, True])
def test_repeated_pipeline_without_pairs_ends(small_tsv, small_tokenizer, cache_tokenized, capfd):
    """Every pair longer than max_length: each pass is empty, and so is the repeated dataset."""
    dataset = pipeline.make_dataset(
        small_tsv, small_tokenizer, batch_tokens=512, max_length=1, repeat=True, cache_tokenized=cache_tokenized
    )
    batches = []
    reader = threading.Thread(target=lambda: batches.extend(dataset), daemon=True)
    reader.start()
    reader.join(timeout=120)
    assert not reader.is_alive(), "the repeated dataset of no pairs did not end"
    assert batches == []
    assert "dropped 600 of 600 pairs longer than max_length = 1" in capfd.readouterr().err


def test_bucket_plan_out_of_order_is_refused(small_tsv, small_tokenizer):
    plan = pipeline.BucketPlan(lengths=(16, 8, 32), batch_sizes=(4, 8, 2), batch_tokens=64)
    with pytest.raises(ValueError, match=r"increasing lengths .* got lengths \(16, 8, 32\)"):
        pipeline.make_dataset(small_tsv, small_tokenizer, batch_tokens=64, max_length=32, plan=plan)
