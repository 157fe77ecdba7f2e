"""benchmarks/jax_trace_summary.py on a hand-made Perfetto trace: busy time per step of every traced
thread, the top events of the device streams only, grouped fusion names; and the script run without
TensorFlow, as on a GPU machine with JAX only. (test_train_throughput.py runs it on a real trace.)"""

import gzip
import json
import os
import subprocess
import sys

import pytest

from tests import no_tensorflow


def _write_trace(path):
    """Two traced steps: a GPU stream with three fusions (two of one kind) and a host thread."""
    metadata = [
        dict(ph="M", name="process_name", pid=1, args=dict(name="/device:GPU:0")),
        dict(ph="M", name="thread_name", pid=1, tid=7, args=dict(name="Stream #13")),
        dict(ph="M", name="process_name", pid=2, args=dict(name="/host:CPU")),
        dict(ph="M", name="thread_name", pid=2, tid=1, args=dict(name="python")),
    ]
    events = [  # Durations in microseconds.
        dict(ph="X", pid=1, tid=7, ts=0, dur=3000, name="loop_multiply_fusion.12"),
        dict(ph="X", pid=1, tid=7, ts=4000, dur=1500, name="loop_multiply_fusion.3"),
        dict(ph="X", pid=1, tid=7, ts=6000, dur=2000, name="gemm_fusion"),
        dict(ph="X", pid=1, tid=7, ts=9000, dur=2000, name="gemm_fusion"),
        dict(ph="X", pid=2, tid=1, ts=0, dur=10000, name="PjitFunction(train_step)"),
        dict(ph="i", pid=1, tid=7, ts=0, name="an instant, no duration"),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        json.dump(dict(traceEvents=metadata + events), handle)


def test_busy_time_and_top_device_events_per_step(benchmark_script, tmp_path, capsys):
    summary, _ = benchmark_script("jax_trace_summary")
    older, newer = tmp_path / "a" / "perfetto_trace.json.gz", tmp_path / "b" / "perfetto_trace.json.gz"
    older.parent.mkdir()
    older.write_bytes(b"not read: an older trace")
    os.utime(older, (0, 0))
    _write_trace(newer)
    summary.main([str(tmp_path), "--steps=2", "--top=2", "--group"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == [
        f"trace: {newer}",
        "busy time per step (ms), 2 step(s) traced:",
        "       5.00  /host:CPU | python",
        "       4.25  /device:GPU:0 | Stream #13",
    ]
    # The device stream only (the hand-made events above, halved over the 2 steps); the two loop fusions grouped as one name.
    assert lines[4:] == [
        "",
        "/device:GPU:0 | Stream #13: top 2 by time per step (ms, calls per step, share)",
        "     2.250     1.0   52.9%  loop_multiply_fusion",
        "     2.000     1.0   47.1%  gemm_fusion",
    ]
    summary.main([str(newer), "--steps=1", "--top=3"])  # A file is read as it is; fusions kept apart.
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3:] == [
        "     4.000     2.0   47.1%  gemm_fusion",
        "     3.000     1.0   35.3%  loop_multiply_fusion.12",
        "     1.500     1.0   17.6%  loop_multiply_fusion.3",
    ]


def test_bad_input_is_refused(benchmark_script, tmp_path, capsys):
    summary, _ = benchmark_script("jax_trace_summary")
    with pytest.raises(SystemExit, match=f"no perfetto_trace.json.gz under {tmp_path}"):
        summary.main([str(tmp_path)])
    with pytest.raises(SystemExit):
        summary.main([str(tmp_path), "--steps=0"])
    assert "--steps and --top must be >= 1, got 0 and 40" in capsys.readouterr().err


def test_runs_without_tensorflow(benchmark_script, tmp_path):
    _, script = benchmark_script("jax_trace_summary")
    trace, site = tmp_path / "trace" / "perfetto_trace.json.gz", tmp_path / "site"
    _write_trace(trace)
    command = [sys.executable, script, str(trace.parent), "--steps=2"]
    env = no_tensorflow.environment(site)
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "/device:GPU:0 | Stream #13: top 40" in finished.stdout
    assert no_tensorflow.started(site) == [" ".join(command[1:])]
    assert no_tensorflow.refused(site) == []
