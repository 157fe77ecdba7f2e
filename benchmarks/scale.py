"""What a corpus ten or a hundred times larger costs: preparation, vocabulary, start and training.

For each size, a synthetic corpus is made from a prepared corpus's training pairs (deb-en-de):
pair k joins base pairs i and j (`i = k mod B`, `j = (i + 1 + k div B) mod B`, B the base's
size), so every size has the same length distribution and its pairs are unique by construction.
It is written as four TSV files, read through a glob, with the base corpus's dev and test files as
the evaluation sets. Then, each in its own process (wall time and peak RSS from `os.wait4`):

- `python -m data.prepare --corpus=user`: preparation (the pairs read per second);
- the same with `--vocab_size`: the vocabulary alone (the corpus is cached by then);
- `train.py --corpus=files` on the prepared corpus, `--recipe=small_data` without the token cache
  (its memory grows with the corpus): the time from the start to the first step, steady training
  target tokens/s (the epochs after the first, from training_log.csv) and the peak RSS;
- the same run fed by a tf.data service (`python -m data.service`, a dispatcher and
  `--service_workers` workers on loopback, sharing this machine's cores): the `served_` figures.

The time to the first step is the time to the first epoch's row in training_log.csv less the
epoch's later steps, timed at the second epoch's pace. Steady tokens/s are those of the epochs
between the first (which compiles) and the last (which also scores the dev set).

Peak RSS is `ru_maxrss` from `os.wait4`. Linux counts in it the RSS the parent had at the fork,
so each command is forked from a small process of its own (`--spawn`), whose size
(`spawner_rss_mb`) is the floor of every figure.

    python benchmarks/scale.py --base cache/corpora/deb-en-de --sizes 60000,600000,6000000 \\
        --work /tmp/scale --json benchmarks/results/scale.json
"""

import argparse
import contextlib
import csv
import json
import os
import platform
import subprocess
import sys
import threading
import time
import types

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

_PARTS = 4  # input files per synthetic corpus


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="a prepared corpus directory (its training shards, dev, test)")
    parser.add_argument("--sizes", default="60000,600000,6000000", help="comma-separated pair counts")
    parser.add_argument("--work", required=True, help="directory for the corpora, cache and runs")
    parser.add_argument("--vocab_size", type=int, default=4000, help="SentencePiece vocabulary (default 4000)")
    parser.add_argument(
        "--train_steps", type=int, default=60, help="training steps per size (default 60; 0: prepare only)"
    )
    parser.add_argument("--epoch_steps", type=int, default=20, help="steps per epoch (checkpoint_every, default 20)")
    parser.add_argument(
        "--service_workers",
        type=int,
        default=2,
        help="also train fed by a tf.data service of this many workers on loopback (default 2; 0: not)",
    )
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    args = parser.parse_args(argv)
    try:
        args.size_list = [int(item) for item in args.sizes.split(",") if item]
    except ValueError:
        parser.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if not args.size_list or min(args.size_list) < 1:
        parser.error(f"--sizes: each size must be at least 1, got {args.sizes!r}")
    if not os.path.isfile(os.path.join(args.base, "manifest.json")):
        parser.error(f"--base: {args.base!r} is not a prepared corpus (no manifest.json)")
    if args.train_steps and (args.train_steps < 3 * args.epoch_steps or args.train_steps % args.epoch_steps):
        parser.error("--train_steps must be a multiple of --epoch_steps, at least three epochs")
    return args


def base_pairs(base):
    """The base corpus's training pairs, as lines without their newline."""
    from data.sources import corpus_cache

    lines = []
    for shard in corpus_cache.check_corpus(base).train:
        with open(shard, encoding="utf-8") as handle:
            lines += handle.read().splitlines()
    return [line.split("\t") for line in lines]


def write_synthetic(pairs, size, directory):
    """Writes `size` joined pairs into `_PARTS` TSV files in `directory`; returns their glob."""
    os.makedirs(directory, exist_ok=True)
    count = len(pairs)
    if size > count * (count - 1):
        raise SystemExit(f"--sizes: {size} is more than the {count * (count - 1)} pairs {count} base pairs give")
    per_part = -(-size // _PARTS)
    for part in range(_PARTS):
        with open(os.path.join(directory, f"part-{part}.tsv"), "w", encoding="utf-8") as out:
            rows = []
            for k in range(part * per_part, min(size, (part + 1) * per_part)):
                i = k % count
                (en_a, de_a), (en_b, de_b) = pairs[i], pairs[(i + 1 + k // count) % count]
                rows.append(f"{en_a} {en_b}\t{de_a} {de_b}\n")
                if len(rows) == 65536:
                    out.writelines(rows)
                    rows.clear()
            out.writelines(rows)
    return os.path.join(directory, "part-*.tsv")


def _spawn(result_path, command):
    """In a small process of its own: runs `command` and writes its exit code and peak RSS (MB) to
    `result_path`. Linux's `ru_maxrss` counts the RSS a process had when it was forked, so the
    command is forked from this process, not from the benchmark's."""
    process = subprocess.Popen(command, cwd=REPO_ROOT)
    _, status, usage = os.wait4(process.pid, 0)
    with open(result_path, "w", encoding="utf-8") as handle:
        json.dump({"exit": os.waitstatus_to_exitcode(status), "peak_rss_mb": usage.ru_maxrss / 1024}, handle)


def run_measured(command, log_path, watch=None):
    """Runs `command` (its output to `log_path`); returns `(wall seconds, peak RSS MB)`.
    `watch(start, process)` runs in a thread meanwhile (the caller's poll of the run's files)."""
    result_path = f"{log_path}.rss.json"
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--spawn", result_path, *command],
            cwd=REPO_ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        thread = None
        if watch is not None:
            thread = threading.Thread(target=watch, args=(start, process), daemon=True)
            thread.start()
        process.wait()
    wall = time.monotonic() - start
    if thread is not None:
        thread.join()
    with open(result_path, encoding="utf-8") as handle:
        result = json.load(handle)
    if result["exit"] != 0:
        with open(log_path, encoding="utf-8") as handle:
            tail = handle.read()[-3000:]
        raise SystemExit(f"{' '.join(command)} failed ({result['exit']}):\n{tail}")
    return wall, result["peak_rss_mb"]


def _epoch_rows(log_path):
    if not os.path.exists(log_path):
        return []
    with open(log_path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def measure_size(args, pairs, size):
    """One size's figures."""
    from data.sources import user_corpus

    work = os.path.join(args.work, str(size))
    pattern = write_synthetic(pairs, size, os.path.join(work, "input"))
    cache, model_dir = os.path.join(work, "cache"), os.path.join(work, "run")
    dev, test = os.path.join(args.base, "dev.tsv"), os.path.join(args.base, "test.tsv")
    files = types.SimpleNamespace(languages="en-de", train_files=(pattern,), dev_files=(dev,), test_files=(test,))
    corpus = [
        "--languages=en-de",
        f"--train_tsv={pattern}",
        f"--dev_tsv={dev}",
        f"--test_tsv={test}",
        f"--cache_dir={cache}",
    ]
    prepare = [sys.executable, "-m", "data.prepare", "--corpus=user", f"--name={user_corpus.cache_name(files)}"]
    result = {"pairs": size}
    result["prepare_seconds"], result["prepare_peak_rss_mb"] = run_measured(
        prepare + corpus, os.path.join(work, "prepare.log")
    )
    result["prepare_pairs_per_second"] = size / result["prepare_seconds"]
    with open(os.path.join(cache, user_corpus.cache_name(files), "manifest.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    result["train_pairs"] = manifest["splits"]["train"]
    result["train_shards"] = len(manifest["train_shards"])
    result["dropped"] = manifest["sources"]["train"]["dropped"]
    result["vocabulary_seconds"], result["vocabulary_peak_rss_mb"] = run_measured(
        prepare + corpus + [f"--vocab_size={args.vocab_size}"], os.path.join(work, "vocabulary.log")
    )
    if args.train_steps:
        result.update(measure_training(args, corpus, model_dir, os.path.join(work, "train.log")))
    if args.train_steps and args.service_workers:
        with data_service(args.service_workers, os.path.join(work, "service")) as address:
            served = measure_training(
                args, corpus + [f"--data_service={address}"], f"{model_dir}-served", os.path.join(work, "served.log")
            )
        result.update({f"served_{key}": value for key, value in served.items()})
    return result


@contextlib.contextmanager
def data_service(workers, log_prefix):
    """The address of a tf.data service dispatcher and `workers` workers on loopback, stopped on exit."""
    processes = []

    def start(role, *flags):
        log = open(f"{log_prefix}-{role}-{len(processes)}.log", "w+", encoding="utf-8")
        command = [sys.executable, "-m", "data.service", role, *flags]
        processes.append((subprocess.Popen(command, cwd=REPO_ROOT, stderr=log), log))
        return _announced(log, " at ")

    try:
        address = start("dispatcher", "--port=0")
        for _ in range(workers):
            start("worker", f"--dispatcher={address.split('://')[1]}")
        yield address
    finally:
        for process, log in processes:
            process.kill()
            process.wait()
            log.close()


def _announced(log, marker, timeout=120):
    """The last word of the first line of `log` (being written by a process) that holds `marker`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.seek(0)
        for line in log.read().splitlines():
            if marker in line and "tf.data service" in line:
                return line.split()[-1]
        time.sleep(0.1)
    raise SystemExit(f"{log.name}: no line with {marker!r} after {timeout} s")


def measure_training(args, corpus, model_dir, log):
    """The training figures of one size: wall time, peak RSS, time to the first step, tokens/s."""
    log_path = os.path.join(model_dir, "training_log.csv")
    row_times = []

    def watch(start, process):
        while process.poll() is None:
            rows = len(_epoch_rows(log_path))
            while len(row_times) < rows:
                row_times.append(time.monotonic() - start)
            time.sleep(0.05)

    train = [
        sys.executable,
        "train.py",
        "--corpus=files",
        *corpus,
        f"--vocab_size={args.vocab_size}",
        f"--model_dir={model_dir}",
        "--recipe=small_data",
        "--nocache_tokenized",
        f"--train_steps={args.train_steps}",
        f"--checkpoint_every={args.epoch_steps}",
        f"--eval_every={args.train_steps}",
        "--eval_sentences=20",
    ]
    result = {}
    result["train_seconds"], result["train_peak_rss_mb"] = run_measured(train, log, watch)
    rows = _epoch_rows(log_path)
    pace = (row_times[1] - row_times[0]) / args.epoch_steps if len(row_times) > 1 else float("nan")
    result["seconds_to_first_step"] = row_times[0] - (args.epoch_steps - 1) * pace if row_times else float("nan")
    # The first epoch compiles; the last also scores the dev set.
    later = [float(row["target_tokens_per_second"]) for row in rows[1:-1] if row.get("target_tokens_per_second")]
    result["steady_target_tokens_per_second"] = sum(later) / len(later) if later else float("nan")
    return result


def _spawner_rss_mb(work):
    """The peak RSS a command too small to count shows through `run_measured`: its floor."""
    return run_measured([sys.executable, "-c", "pass"], os.path.join(work, "floor.log"))[1]


def main(argv=None):
    args = parse_args(argv)
    pairs = base_pairs(args.base)
    results = []
    for size in args.size_list:
        figures = measure_size(args, pairs, size)
        results.append(figures)
        print(json.dumps(figures), flush=True)
    report = {
        "machine": {"cores": len(os.sched_getaffinity(0)), "platform": platform.platform()},
        "spawner_rss_mb": _spawner_rss_mb(args.work),
        "command": " ".join(sys.argv),
        "base": os.path.abspath(args.base),
        "results": results,
    }
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2)
            handle.write("\n")
    return report


if __name__ == "__main__":
    if sys.argv[1:2] == ["--spawn"]:
        _spawn(sys.argv[2], sys.argv[3:])
    else:
        main()
