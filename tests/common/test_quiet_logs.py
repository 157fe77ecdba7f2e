"""common/quiet_logs.py: TensorFlow's start-up lines dropped from a tool's stderr, everything else
kept, and nothing filtered under --verbosity=0; checked in fresh processes with real descriptors."""

import os
import subprocess
import sys

from common.quiet_logs import is_noise
from tests.helpers import REPO_ROOT

NOISE = [
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    b"I0000 00:00:1795554413.644567     798 port.cc:153] oneDNN custom operations are on. You may see slightly",
    b"I0000 00:00:1795554413.645085     798 cudart_stub.cc:31] Could not find cuda drivers on your machine.",
    b"W0000 00:00:1795551334.868603   16218 cpu_feature_guard.cc:227] This TensorFlow binary is optimized",
    b"To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations,",
    b"E0000 00:00:1795554414.818285     798 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error",
    b"E0000 00:00:1795553826.188326   27553 util.cc:131] oneDNN supports DT_INT64 only on platforms with AVX-512.",
]
KEPT = [
    b"translate.py: error: <stdin> line 2: no tab between the source and the target",
    b"E0000 00:00:1795554414.818285     798 op_kernel.cc:1848] OP_REQUIRES failed at save_restore: No space left",
    b"Epoch 1/3",
    b"I wrote 3 files",
    b"",
]

PROGRAM = r"""
import os, sys, time
from absl import app, flags
from common import quiet_logs
from common.errors import run_tool

def main(argv):
    quiet_logs.quiet_tool_output()  # As the tools do: run_tool has already filtered, before parsing.
    for line in sys.argv[-1].split("|"):
        os.write(2, line.encode() + b"\n")  # As TensorFlow's C++ code writes: to the descriptor.
    os.write(2, b"\rprogress 1/2")  # An unfinished line goes through at once.
    time.sleep(0.5)
    os.write(2, b"\rprogress 2/2\n")
    print("python's own stderr", file=sys.stderr)

run_tool(main, "program")
"""


def test_known_start_up_lines_are_noise_and_the_rest_is_not():
    assert all(is_noise(line) for line in NOISE)
    assert not any(is_noise(line) for line in KEPT)


def run(*flags):
    lines = "|".join(line.decode() for line in NOISE + KEPT[:4])
    return subprocess.run(
        [sys.executable, "-c", PROGRAM, *flags, "--", lines],
        cwd=REPO_ROOT,
        env=dict(os.environ, PYTHONPATH=REPO_ROOT),
        capture_output=True,
        timeout=60,
    )


def test_a_tool_shows_its_own_lines_and_not_the_start_up_noise():
    result = run()
    assert result.returncode == 0, result.stderr
    expected = b"".join(line + b"\n" for line in KEPT[:4]) + b"\rprogress 1/2\rprogress 2/2\npython's own stderr\n"
    assert result.stderr == expected


def test_verbosity_brings_the_start_up_lines_back():
    result = run("--verbosity=0")
    assert result.returncode == 0, result.stderr
    assert all(line in result.stderr for line in NOISE)
