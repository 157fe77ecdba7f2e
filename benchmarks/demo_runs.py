"""What the quality benchmarks that train the demo's run share: one run trained (or resumed) by
`train.py` in a new process, timed, and scored by `evaluation.evaluator.evaluate` (what
`evaluate.py` runs) with the run's recorded search."""

import os
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# `make demo`'s training flags but the steps (and the evaluation period, which follows them).
DEMO_FLAGS = ("--recipe=small_data", "--checkpoint_every=200", "--keep_checkpoints=5", "--eval_sentences=100")


def add_run_arguments(parser, name):
    """The arguments every such benchmark takes: the weights scored, the corpus cache and packages,
    where its runs go (`runs/<name>`), more train.py flags, and the JSON to write."""
    parser.add_argument("--checkpoint", default="average:5", help="the weights scored (evaluate.py's --checkpoint)")
    parser.add_argument("--cache_dir", default=os.path.join(REPO_ROOT, "cache", "corpora"))
    parser.add_argument("--deb_dir", default=None, help="train.py's --deb_dir")
    parser.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "runs", name))
    parser.add_argument("--train_flags", default="", help="more train.py flags, space-separated (e.g. for a smoke run)")
    parser.add_argument("--json", default=None, help="write the results here")


def train(model_dir, corpus, cache_dir, steps, flags=(), deb_dir=None):
    """Trains (or resumes) the demo's run on `corpus` for `steps` with `flags` on top; returns its
    wall seconds. A failed train.py ends the benchmark with its stderr's tail."""
    command = [
        sys.executable,
        os.path.join(REPO_ROOT, "train.py"),
        f"--model_dir={model_dir}",
        f"--corpus={corpus}",
        f"--cache_dir={cache_dir}",
        f"--train_steps={steps}",
        *DEMO_FLAGS,
        *flags,
        *([f"--deb_dir={deb_dir}"] if deb_dir else []),
    ]
    start = time.monotonic()
    completed = subprocess.run(command, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"train.py failed for {model_dir}:\n{completed.stderr[-3000:]}")
    return time.monotonic() - start


def scores(model_dir, split, checkpoint, target_language=None):
    """BLEU, chrF, BLEU's signature and the length ratio of the run's `checkpoint` on `split` (of
    `target_language`'s pair, for a multilingual run)."""
    sys.path.insert(0, REPO_ROOT)
    from evaluation import evaluator  # noqa: PLC0415 (TensorFlow: after the training subprocesses)
    from inference.runs import RunDir  # noqa: PLC0415
    from models.search_config import DEFAULT_SEARCH  # noqa: PLC0415

    search = DEFAULT_SEARCH.override(**RunDir(model_dir).recorded_search())
    config = evaluator.EvalConfig(
        model_dir=model_dir,
        split=split,
        checkpoint=checkpoint,
        search=search,
        progress=False,
        target_language=target_language,
    )
    result = evaluator.evaluate(config)
    return {key: result[key] for key in ("bleu", "chrf", "bleu_signature", "length_ratio")}
