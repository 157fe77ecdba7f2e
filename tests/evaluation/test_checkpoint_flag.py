"""`--checkpoint=best|last|average:N`, one flag of evaluate.py, translate.py, `python -m export` and
the averaging tool, on a run whose best checkpoint is not its newest one."""

import dataclasses
import io
import json
import os
import re
import shutil
import subprocess
import sys

import keras
import numpy as np
import pytest

from tests.helpers import REPO_ROOT, tool_flags

ENVIRONMENT = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO_ROOT)


def _run(*command, stdin=None):
    return subprocess.run(
        [sys.executable, *command],
        input=stdin,
        cwd=REPO_ROOT,
        env=ENVIRONMENT,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def best_at_100(tiny_run, tmp_path_factory):
    """A copy of the shared run whose best evaluation was at step 100 (of 200): the files train.py
    writes when step 100 scores best, its checkpoint copied as the best one."""
    from inference.runs import RunDir

    run = RunDir(str(shutil.copytree(tiny_run[0], tmp_path_factory.mktemp("best") / "run")))
    shutil.copyfile(dict(run.checkpoints())[100], run.best_weights_path)
    record = dict(run.read_best(), step=100, score=1.5, dev_bleu=1.5)
    with open(run.best_record_path, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    return run


def _weights(model):
    return [np.array(keras.ops.convert_to_numpy(weight)) for weight in model.weights]


def test_each_choice_loads_its_own_weights(best_at_100):
    run = best_at_100
    best, _, _ = run.load_model("best", quiet=True)
    last, _, _ = run.load_model("last", quiet=True)
    mean, _, _ = run.load_model("average:2", quiet=True)
    steps = dict(run.checkpoints())
    reference = keras.saving.load_model(run.model_path, compile=False)  # The weights of step 200.
    for a, b in zip(_weights(last), _weights(reference), strict=True):
        np.testing.assert_array_equal(a, b)
    reference.load_weights(steps[100])
    at_100 = _weights(reference)
    for a, b in zip(_weights(best), at_100, strict=True):
        np.testing.assert_array_equal(a, b)
    assert max(np.max(np.abs(a - b)) for a, b in zip(_weights(best), _weights(last))) > 1e-4
    for m, a, b in zip(_weights(mean), at_100, _weights(last), strict=True):
        np.testing.assert_allclose(m, (a.astype("float64") + b) / 2, rtol=0, atol=1e-6)


@pytest.mark.slow  # runs of the model
def test_evaluate_and_translate_say_what_they_loaded_and_refuse_what_the_run_lacks(
    best_at_100, tmp_path, capsys, translate_here
):
    """Without --checkpoint, the best checkpoint: what evaluate.py calls (evaluator.evaluate) loads
    it, and translate.py's `run` (tests/evaluation/conftest.py), whose flag is evaluate.py's, gives
    the same translations; it takes --checkpoint=last as evaluate does, and both refuse average:3;
    average:0 is refused by the flag, in a new process of evaluate.py and in translate.py's `run`.
    (That evaluate.py passes its flag on: test_evaluate.py's run with --checkpoint=average:2.)"""
    from absl import flags

    from common.errors import UserError
    from evaluation import evaluator
    from models.search_config import SearchConfig

    run = best_at_100
    src = tmp_path / "src.en"
    sentences = ["Open the file.", "Print", "Select the cells that you want to format."]
    src.write_text("".join(f"{sentence}\n" for sentence in sentences), encoding="utf-8")
    evaluate = [os.path.join(REPO_ROOT, "evaluate.py"), f"--model_dir={run.path}", f"--src={src}", "--noprogress"]
    translate = [f"--model_dir={run.path}", "--beam_size=1"]
    greedy = SearchConfig(beam_size=1)

    best = tmp_path / "best.de"
    config = evaluator.EvalConfig(model_dir=run.path, src=str(src), search=greedy, progress=False)
    evaluator.evaluate(dataclasses.replace(config, output=str(best)), out=io.StringIO())  # best: the default
    assert "loaded the best checkpoint, of step 100 (dev BLEU 1.50)" in capsys.readouterr().err
    # translate.py resolves its flag's default by the same rule: the same weights, the same translations.
    translated, error, stderr = translate_here(*translate, stdin=src.read_bytes())
    assert error is None, stderr
    assert "".join(f"{line}\n" for line in translated) == best.read_text(encoding="utf-8")

    last = tmp_path / "last.de"
    # Scored against its own source: the scores go to the sys.stdout of the call (here the capture).
    evaluator.evaluate(dataclasses.replace(config, output=str(last), checkpoint="last", ref=str(src)))
    printed = capsys.readouterr()
    assert "loaded the newest checkpoint, of step 200" in printed.err and "sacreBLEU: " in printed.out
    translated, error, stderr = translate_here(*translate, "--checkpoint=last", stdin=src.read_bytes())
    assert error is None, stderr
    assert "".join(f"{line}\n" for line in translated) == last.read_text(encoding="utf-8")

    has = "It has: last (step 200); best (step 100, dev BLEU 1.50); average:1 to average:2 (checkpoints of steps 100, 200)"
    fewer = f"--checkpoint=average:3: {run.path} keeps 2 checkpoint(s), fewer than the 3 asked for. {has}"
    with pytest.raises(UserError) as refused:
        evaluator.evaluate(dataclasses.replace(config, checkpoint="average:3"))
    assert fewer in str(refused.value)
    translated, error, _ = translate_here(*translate, "--checkpoint=average:3", stdin=b"Print\n")
    assert translated == [] and fewer in error
    # The flag's own check, the same in both tools.
    expected = "--checkpoint='average:0' is not a checkpoint choice: expected best, last, ema or average:N"
    refused = _run(*evaluate, "--checkpoint=average:0")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert expected in refused.stderr, refused.stderr[-3000:]
    assert refused.stdout == ""
    with pytest.raises(flags.IllegalFlagValueError, match=re.escape(expected)):
        translate_here(*translate, "--checkpoint=average:0")


@pytest.mark.slow  # a run of the averaging tool
def test_export_records_the_choice_and_the_averaging_tool_shares_it(best_at_100, tmp_path):
    from common.errors import UserError
    from export import exporter
    from training import average_checkpoints

    run = best_at_100
    assert exporter.check_model_dir(run.path).steps == (100,)
    assert exporter.check_model_dir(run.path, "average:2").steps == (100, 200)
    refused = _run("-m", "export", f"--model_dir={run.path}", f"--export_dir={tmp_path / 'exports'}", "--checkpoint=x")
    assert refused.returncode == 2 and "--checkpoint='x' is not a checkpoint choice" in refused.stderr
    assert not (tmp_path / "exports").exists()

    output = tmp_path / "best.keras"
    written = _run(
        "-m", "training.average_checkpoints", f"--model_dir={run.path}", "--checkpoint=best", f"--output={output}"
    )
    assert written.returncode == 0, written.stderr[-3000:]
    assert f"wrote the best checkpoint, of step 100 (dev BLEU 1.50) to {output}" in written.stdout
    best, _, _ = run.load_model("best", quiet=True)
    for a, b in zip(_weights(keras.saving.load_model(str(output), compile=False)), _weights(best), strict=True):
        np.testing.assert_array_equal(a, b)
    # The tool's default, refused by its main in this process (`run_tool` prints such an error as
    # one line and exits with its status: translate.py's in tests/evaluation/test_run_search.py).
    # --verbosity=0 keeps main from filtering this process's stderr.
    with tool_flags() as flag_values:
        average_checkpoints.define_flags()
        flag_values(
            ["average_checkpoints", "--verbosity=0", f"--model_dir={run.path}", f"--output={tmp_path / 'five.keras'}"]
        )
        with pytest.raises(UserError) as refused:
            average_checkpoints.main(["average_checkpoints"])
    assert str(refused.value).startswith("--checkpoint=average:5: ") and refused.value.exit_status == 2
    assert not (tmp_path / "five.keras").exists()
