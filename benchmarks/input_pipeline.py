"""Throughput of the training input pipeline (`data.pipeline.make_dataset`), tokenization included.

Reads a corpus TSV through the same pipeline `train.py` builds (shuffled lines, SentencePiece in the
graph, BOS/EOS, over-length filter, length buckets under a token budget, repeated forever) and
counts what it delivers per second on a given number of CPU cores:

- padded target positions (`batch x length` of the labels): what a training step consumes, and what
  `train_throughput.py` counts as target tokens for the model;
- real target tokens (labels other than PAD) and sentence pairs.

Each core count runs in its own subprocess pinned to that many cores (`os.sched_setaffinity`), with
TensorFlow's inter/intra-op pools and the dataset's private thread pool of the same size, so the
figures say how many cores the pipeline needs for a given model speed.

`--cache_tokenized` times the pipeline as `train.py --cache_tokenized` builds it (tokenized pairs
kept in memory after the first pass): the first pass, which fills the cache, is read before the
timed batches and reported apart (`first_pass_seconds`).

    python benchmarks/input_pipeline.py --tsv cache/corpora/deb-en-de/train-00000-of-00001.tsv \\
        --spm cache/corpora/deb-en-de/spm-bpe-8000.model --cores 1,2 --json results/input_pipeline.json
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

from common.special_ids import PAD_ID  # noqa: E402 (after the path)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tsv", required=True, help="corpus TSV (english<TAB>foreign), e.g. one of data.prepare's train-*.tsv shards"
    )
    parser.add_argument("--spm", required=True, help="SentencePiece model file")
    parser.add_argument(
        "--batch_tokens", type=int, default=4096, help="padded tokens per batch and side (default 4096)"
    )
    parser.add_argument("--max_length", type=int, default=128, help="longest pair kept, in tokens (default 128)")
    parser.add_argument("--cores", default="1,2", help="comma-separated core counts to run (default 1,2)")
    parser.add_argument("--warmup_batches", type=int, default=50, help="batches read before timing (default 50)")
    parser.add_argument("--batches", type=int, default=500, help="timed batches (default 500)")
    parser.add_argument("--reverse", action="store_true", help="translate the TSV's second column into the first")
    parser.add_argument(
        "--cache_tokenized",
        action="store_true",
        help="cache the tokenized pairs in memory (train.py --cache_tokenized); time after one pass",
    )
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    parser.add_argument("--worker_cores", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        args.core_counts = [int(item) for item in args.cores.split(",") if item]
    except ValueError:
        parser.error(f"--cores: expected comma-separated integers, got {args.cores!r}")
    available = len(os.sched_getaffinity(0))
    bad = [count for count in args.core_counts if not 1 <= count <= available]
    if bad or not args.core_counts:
        parser.error(f"--cores: each count must be between 1 and this machine's {available} cores, got {args.cores!r}")
    for name in ("tsv", "spm"):
        if not os.path.isfile(getattr(args, name)):
            parser.error(f"--{name}: no such file {getattr(args, name)!r}")
    if args.batches < 1 or args.warmup_batches < 0:
        parser.error("--batches must be >= 1 and --warmup_batches >= 0")
    return args


def batch_counts(batch):
    """(pairs, padded target positions, real target tokens, padded source positions) of one batch."""
    (source, _), target_output = batch
    target_output = np.asarray(target_output)
    return (
        target_output.shape[0],
        target_output.size,
        int(np.count_nonzero(target_output != PAD_ID)),
        int(np.asarray(source).size),
    )


def _checked(iterator, args):
    """The iterator, ending the worker with a clear message if the pipeline yields nothing at all."""
    try:
        first = next(iterator)
    except StopIteration:
        raise SystemExit(
            f"{args.tsv}: the pipeline yields no batch (is every pair longer than --max_length={args.max_length}?)"
        ) from None
    yield first
    yield from iterator


def run_worker(args, cores):
    """Times `args.batches` batches on the first `cores` cores; returns a result dict."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(cores)
    tf.config.threading.set_intra_op_parallelism_threads(cores)
    tf.random.set_seed(0)  # The shuffles' order, as with train.py's seed (and reproducible in tests).
    from data.pipeline import make_dataset
    from data.tokenizer import Tokenizer

    dataset = make_dataset(
        args.tsv,
        Tokenizer.from_file(args.spm),
        batch_tokens=args.batch_tokens,
        max_length=args.max_length,
        shuffle=True,
        repeat=True,
        reverse=args.reverse,
        cache_tokenized=args.cache_tokenized,
    )
    options = tf.data.Options()
    options.threading.private_threadpool_size = cores
    iterator = _checked(iter(dataset.with_options(options)), args)
    first_pass_seconds = None
    if args.cache_tokenized:
        # A pass yields at most one pair per line: once that many pairs came, the cache is full.
        with open(args.tsv, encoding="utf-8") as handle:
            lines = sum(1 for _ in handle)
        start, pairs_read = time.perf_counter(), 0
        while pairs_read < lines:
            pairs_read += batch_counts(next(iterator))[0]
        first_pass_seconds = time.perf_counter() - start
    for _ in range(args.warmup_batches):
        next(iterator)
    totals = [0, 0, 0, 0]
    start = time.perf_counter()
    for _ in range(args.batches):
        for index, value in enumerate(batch_counts(next(iterator))):
            totals[index] += value
    seconds = time.perf_counter() - start
    pairs, target_positions, target_tokens, source_positions = totals
    return dict(
        cores=cores,
        batches=args.batches,
        seconds=seconds,
        pairs_per_second=pairs / seconds,
        padded_target_tokens_per_second=target_positions / seconds,
        real_target_tokens_per_second=target_tokens / seconds,
        padded_source_tokens_per_second=source_positions / seconds,
        target_padding_share=1 - target_tokens / target_positions,
        cache_tokenized=args.cache_tokenized,
        first_pass_seconds=first_pass_seconds,
    )


def main(argv=None):
    args = parse_args(argv)
    if args.worker_cores is not None:
        print(json.dumps(run_worker(args, args.worker_cores)))
        return
    results = []
    for cores in args.core_counts:
        command = [sys.executable, os.path.abspath(__file__), *sys.argv[1:], "--worker_cores", str(cores)]
        completed = subprocess.run(command, capture_output=True, text=True)
        if completed.returncode:
            sys.stderr.write(completed.stderr)
            raise SystemExit(f"the {cores}-core worker failed with exit status {completed.returncode}")
        results.append(json.loads(completed.stdout.strip().splitlines()[-1]))
    print(
        f"{args.tsv}: batch_tokens={args.batch_tokens} max_length={args.max_length}, {args.batches} timed batches"
        + (", tokenized pairs cached (first pass untimed)" if args.cache_tokenized else "")
    )
    print(f"{'cores':>5} {'pairs/s':>10} {'padded tgt tok/s':>17} {'real tgt tok/s':>15} {'padding':>8}")
    for result in results:
        print(
            f"{result['cores']:>5} {result['pairs_per_second']:>10,.0f} "
            f"{result['padded_target_tokens_per_second']:>17,.0f} {result['real_target_tokens_per_second']:>15,.0f} "
            f"{result['target_padding_share']:>8.1%}"
        )
    if args.json:
        with open(args.json, "w") as file:
            json.dump(
                dict(
                    command=sys.argv,
                    tsv=args.tsv,
                    spm=args.spm,
                    batch_tokens=args.batch_tokens,
                    max_length=args.max_length,
                    cache_tokenized=args.cache_tokenized,
                    results=results,
                ),
                file,
                indent=1,
            )


if __name__ == "__main__":
    main()
