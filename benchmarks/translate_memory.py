"""translate.py's peak memory against the size of its input: flat, or growing with the lines?

For each size, an input of that many lines is written (the English side of the tests' sample
corpus, tests/fixtures/deb_en_de_sample.tsv, repeated: real sentences of the corpus's length
distribution), then translated by `translate.py --input=... --output=...` in a process of its own,
whose peak resident set size (`ru_maxrss` from `os.wait4`) and wall time are recorded; the output
is checked to have one line per input line. The target: the largest size's peak within 20% of the
smallest's (issue 49, "Large files").

The model should be cheap to run, so that the sizes are reached and the measurement is of the
tool's own memory (reading, windows, batching, writing), not of the search: e.g. the tests' tiny
run with `--beam_size=1 --max_extra_length=1`; a real model at a smaller size shows the same at its
own cost.

    python benchmarks/translate_memory.py --model_dir=runs/tiny --sizes=10000,100000,1000000 \\
        --work=/tmp/translate_memory --json=benchmarks/results/translate_memory.json \\
        -- --beam_size=1 --max_extra_length=1 --batch_size=256
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLE_TSV = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")
TARGET_RATIO = 1.2  # the largest size's peak RSS over the smallest's, at most


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="the run to translate with (translate.py --model_dir)")
    parser.add_argument("--sizes", default="10000,100000,1000000", help="comma-separated input line counts")
    parser.add_argument("--work", required=True, help="directory for the inputs and outputs")
    parser.add_argument("--json", default=None, help="write the results to this JSON file")
    parser.add_argument("translate_flags", nargs="*", help="after --: more translate.py flags (search, batch)")
    args = parser.parse_args(argv)
    try:
        args.size_list = [int(item) for item in args.sizes.split(",") if item]
    except ValueError:
        parser.error(f"--sizes: expected comma-separated integers, got {args.sizes!r}")
    if not args.size_list or min(args.size_list) < 1:
        parser.error(f"--sizes: each size must be at least 1, got {args.sizes!r}")
    return args


def sentences():
    """The sample corpus's English sentences."""
    with open(SAMPLE_TSV, encoding="utf-8") as handle:
        return [line.rstrip("\n").split("\t")[1] for line in handle if line.strip()]


def write_input(path, size, source=None):
    """`size` lines of `source` (default: `sentences()`) repeated, into `path`."""
    source = source or sentences()
    with open(path, "w", encoding="utf-8") as handle:
        for index in range(size):
            handle.write(source[index % len(source)] + "\n")


def _spawn(command):
    """In a small process of its own (`--spawn`): runs `command` (its stdout to /dev/null) and
    prints its exit code and peak RSS (MB) as JSON. Linux's `ru_maxrss` counts the RSS a process
    had when it was forked, so the command is forked from this process, not from its caller."""
    process = subprocess.Popen(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    print(json.dumps({"exit": os.waitstatus_to_exitcode(status), "peak_rss_mb": usage.ru_maxrss / 1024}))


def measured(command, stderr=subprocess.DEVNULL):
    """`(return code, peak RSS in MB, wall seconds)` of `command` run in a new process."""
    start = time.monotonic()
    spawner = [sys.executable, os.path.abspath(__file__), "--spawn", *command]
    completed = subprocess.run(spawner, stdout=subprocess.PIPE, stderr=stderr, cwd=REPO_ROOT, check=True)
    result = json.loads(completed.stdout)
    return result["exit"], result["peak_rss_mb"], time.monotonic() - start


def measure_size(args, size):
    """One size's figures: peak RSS, wall time, lines per second, the output's line count."""
    source, output = (os.path.join(args.work, f"{name}-{size}.txt") for name in ("input", "output"))
    write_input(source, size)
    command = [sys.executable, os.path.join(REPO_ROOT, "translate.py"), f"--model_dir={args.model_dir}"]
    command += [f"--input={source}", f"--output={output}", "--noresume", *args.translate_flags]
    with open(os.path.join(args.work, f"stderr-{size}.txt"), "w+") as errors:
        code, peak, seconds = measured(command, errors)
        errors.seek(0)
        tail = errors.read()[-2000:]
    if code != 0:
        raise SystemExit(f"translate.py failed with status {code} at {size} lines:\n{tail}")
    with open(output, "rb") as handle:
        written = sum(1 for _ in handle)
    for path in (source, output):
        os.remove(path)
    return dict(lines=size, output_lines=written, peak_rss_mb=round(peak, 1), seconds=round(seconds, 1),
                lines_per_second=round(size / seconds, 1))  # fmt: skip


def machine():
    """The CPU's model name and count (lscpu's), for the record."""
    try:
        lines = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        lines = []
    fields = dict(line.split(":", 1) for line in lines if ":" in line)
    keys = ("Model name", "CPU family", "Model", "CPU(s)")
    return {key: fields[key].strip() for key in keys if key in fields} | {"platform": platform.platform()}


def report(results, command):
    """The figures of every size, with the largest-to-smallest peak RSS ratio against the target,
    and the floor of every figure (`spawner_rss_mb`: a command too small to count)."""
    peaks = [result["peak_rss_mb"] for result in results]
    ratio = peaks[-1] / peaks[0]
    floor = measured([sys.executable, "-c", "pass"])[1]
    return dict(command=command, machine=machine(), spawner_rss_mb=round(floor, 1), results=results,
                peak_rss_ratio=round(ratio, 3), target_ratio=TARGET_RATIO, flat=ratio <= TARGET_RATIO)  # fmt: skip


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.work, exist_ok=True)
    results = []
    for size in sorted(args.size_list):
        results.append(measure_size(args, size))
        print(json.dumps(results[-1]), flush=True)
    summary = report(results, " ".join([os.path.basename(sys.argv[0]), *(sys.argv[1:] if argv is None else argv)]))
    print(f"peak RSS, largest over smallest: {summary['peak_rss_ratio']} (target: at most {TARGET_RATIO})")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=1)
            handle.write("\n")
    return summary


if __name__ == "__main__":
    if sys.argv[1:2] == ["--spawn"]:
        _spawn(sys.argv[2:])
    else:
        main()
