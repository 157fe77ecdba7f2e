"""Summarise a Perfetto trace written by `train_throughput.py --profile_dir` under JAX.

    python benchmarks/jax_trace_summary.py DIR/ours --steps 3 --top 40

Finds the newest `perfetto_trace.json.gz` under the directory, and prints, per traced process,
the busy time per step, then the top events of the device processes (GPU streams) by total
duration per step, with their count per step. Names of XLA fusions are grouped as they come
(`loop_multiply_fusion.12`); `--group` strips the trailing `.N` to group fusions of one kind.
"""

import argparse
import collections
import glob
import gzip
import json
import os
import re
import sys


def newest_trace(path):
    if os.path.isfile(path):
        return path
    found = glob.glob(os.path.join(path, "**", "perfetto_trace.json.gz"), recursive=True)
    if not found:
        raise SystemExit(f"no perfetto_trace.json.gz under {path}")
    return max(found, key=os.path.getmtime)


def load_events(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:
        trace = json.load(handle)
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def summarise(events, steps, top, group):
    process_names, thread_names = {}, {}
    for event in events:
        if event.get("ph") == "M" and event.get("name") == "process_name":
            process_names[event["pid"]] = event.get("args", {}).get("name", str(event["pid"]))
        if event.get("ph") == "M" and event.get("name") == "thread_name":
            thread_names[(event["pid"], event.get("tid"))] = event.get("args", {}).get("name", "")
    busy = collections.Counter()
    by_name = collections.defaultdict(collections.Counter)
    counts = collections.defaultdict(collections.Counter)
    for event in events:
        if event.get("ph") != "X" or "dur" not in event:
            continue
        pid = event["pid"]
        process = process_names.get(pid, str(pid))
        thread = thread_names.get((pid, event.get("tid")), "")
        key = f"{process} | {thread}"
        busy[key] += float(event["dur"])
        name = event.get("name", "?")
        if group:
            name = re.sub(r"\.\d+$", "", name)
        by_name[key][name] += float(event["dur"])
        counts[key][name] += 1
    print(f"busy time per step (ms), {steps} step(s) traced:")
    for key, total in busy.most_common():
        print(f"  {total / steps / 1000:9.2f}  {key}")
    for key, total in busy.most_common():
        if not re.search(r"gpu|stream|device", key, re.IGNORECASE) or re.search(r"host|cpu", key, re.IGNORECASE):
            continue
        print(f"\n{key}: top {top} by time per step (ms, calls per step, share)")
        for name, duration in by_name[key].most_common(top):
            print(
                f"  {duration / steps / 1000:8.3f}  {counts[key][name] / steps:6.1f}  "
                f"{100 * duration / total:5.1f}%  {name[:110]}"
            )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", help="a trace file, or a directory searched for the newest trace.")
    parser.add_argument("--steps", type=int, default=3, help="steps the trace holds (default 3).")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--group", action="store_true", help="group fusions by name without the .N suffix.")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.top < 1:
        parser.error(f"--steps and --top must be >= 1, got {args.steps} and {args.top}")
    path = newest_trace(args.path)
    print(f"trace: {path}")
    summarise(load_events(path), args.steps, args.top, args.group)


if __name__ == "__main__":
    sys.exit(main())
