"""evaluate.py end to end (as a subprocess, the way users run it) and its bad-input errors."""

import os
import re
import subprocess
import sys

import pytest
import sacrebleu

from evaluation import evaluator, test_sets
from evaluation.model_loading import ModelDirError
from tests.conftest import REPO_ROOT

BLEU_SIGNATURE = re.compile(r"^signature: nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:\S+$", re.M)
CHRF_SIGNATURE = re.compile(r"^signature: nrefs:1\|case:mixed\|eff:yes\|nc:6\|nw:0\|space:no\|version:\S+$", re.M)


def run_evaluate(*flags, timeout=300):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO_ROOT)
    return subprocess.run(
        [sys.executable, os.path.join(REPO_ROOT, "evaluate.py"), "--noprogress", *flags],
        cwd=REPO_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_evaluate_scores_the_tiny_run_on_its_test_split(tiny_run, tmp_path):
    model_dir, summary = tiny_run
    output = tmp_path / "hypotheses.txt"
    completed = run_evaluate(f"--model_dir={model_dir}", f"--output={output}")
    assert completed.returncode == 0, completed.stderr[-4000:]
    stdout = completed.stdout
    bleu = re.search(r"^sacreBLEU: BLEU = (\d+\.\d+) ", stdout, re.M)
    chrf = re.search(r"^chrF: chrF2 = (\d+\.\d+)", stdout, re.M)
    assert bleu and chrf, stdout
    assert BLEU_SIGNATURE.search(stdout) and CHRF_SIGNATURE.search(stdout), stdout

    test_tsv = summary["corpus"]["test"]
    _, references = test_sets.read_tsv_pairs(test_tsv)
    hypotheses = output.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hypotheses) == len(references)
    # The printed scores are sacreBLEU's on the written, detokenized output.
    assert float(bleu.group(1)) == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score, abs=0.01)
    assert float(chrf.group(1)) == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score, abs=0.01)
    # Lines over the run's max_length (64 tokens) are cut and reported.
    assert re.search(r"source lines are longer than the maximum input length of 64 tokens", stdout), stdout


@pytest.mark.slow
def test_evaluate_files_with_empty_and_overlong_lines_averaging_and_plots(tiny_run, tmp_path):
    model_dir, _ = tiny_run
    src, ref, output, plots = tmp_path / "src.en", tmp_path / "ref.de", tmp_path / "out.de", tmp_path / "plots"
    long_line = " ".join(["Open the file and print it."] * 40)
    src.write_text(f"Open the file.\n\n{long_line}\nPrint\n", encoding="utf-8")
    ref.write_text("Öffnen Sie die Datei.\n\nÖffnen Sie die Datei.\nDrucken\n", encoding="utf-8")
    completed = run_evaluate(
        f"--model_dir={model_dir}",
        f"--src={src}",
        f"--ref={ref}",
        f"--output={output}",
        "--average_last=2",
        "--beam_size=2",
        "--max_extra_length=5",
        "--plot_attention=Open the file.",
        f"--plot_dir={plots}",
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "averaged 2 checkpoint(s)" in completed.stderr
    assert "1 of 4 source lines are longer than the maximum input length of 64 tokens" in completed.stdout
    assert "lines 3" in completed.stdout
    assert "1 empty source line(s) translated to empty lines" in completed.stdout
    assert "sacreBLEU: BLEU = " in completed.stdout
    lines = output.read_text(encoding="utf-8").split("\n")
    assert len(lines) == 5 and lines[1] == "" and lines[4] == ""
    from PIL import Image

    with Image.open(plots / "attention-1.png") as image:
        assert image.width > 50 and image.height > 50


def test_source_and_reference_with_different_line_counts_fail_clearly(tiny_run, tmp_path):
    model_dir, _ = tiny_run
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("a\nb\nc\n", encoding="utf-8")
    ref.write_text("a\nb\n", encoding="utf-8")
    completed = run_evaluate(f"--model_dir={model_dir}", f"--src={src}", f"--ref={ref}")
    assert completed.returncode == 2
    assert f"--src {src} has 3 lines but --ref {ref} has 2" in completed.stderr


def test_model_dir_without_a_model_fails_clearly(tiny_run, tmp_path):
    empty = tmp_path / "empty_run"
    empty.mkdir()
    src = tmp_path / "src.en"
    src.write_text("Open the file.\n", encoding="utf-8")
    with pytest.raises(ModelDirError, match=re.escape(str(empty)) + ".*holds no model"):
        evaluator.evaluate(evaluator.EvalConfig(model_dir=str(empty), src=str(src), progress=False))
    with pytest.raises(ModelDirError, match="is not a directory"):
        evaluator.evaluate(evaluator.EvalConfig(model_dir=str(tmp_path / "missing"), src=str(src), progress=False))


def test_unknown_split_lists_the_available_ones(tiny_run):
    model_dir, _ = tiny_run
    with pytest.raises(test_sets.TestSetError, match=r"test\.ding"):
        evaluator.evaluate(evaluator.EvalConfig(model_dir=model_dir, split="test.nowhere", progress=False))


def test_per_source_split_resolves_from_the_run_config(tiny_run):
    model_dir, summary = tiny_run
    config = evaluator.EvalConfig(model_dir=model_dir, split="test.ding", progress=False)
    sources, references, description = evaluator.load_test_set(config, evaluator._run_config(config))
    assert description.startswith(summary["corpus"]["test_by_source"]["ding"])
    assert len(sources) == len(references) > 0


def test_export_dir_evaluates_like_the_model_dir(tiny_run, tmp_path):
    exporter = pytest.importorskip("export.exporter")
    model_dir, _ = tiny_run
    export_dir = tmp_path / "export"
    exporter.export_model(model_dir, str(export_dir), max_input_length=16, length_buckets=())
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    src.write_text("Open the file.\n\nPrint\nThe document could not be saved.\n", encoding="utf-8")
    ref.write_text("Öffnen Sie die Datei.\n\nDrucken\nDas Dokument konnte nicht gespeichert werden.\n", encoding="utf-8")
    exported = evaluator.evaluate(
        evaluator.EvalConfig(export_dir=str(export_dir), src=str(src), ref=str(ref), output=str(tmp_path / "a"), progress=False)
    )
    direct = evaluator.evaluate(
        evaluator.EvalConfig(
            model_dir=model_dir, src=str(src), ref=str(ref), output=str(tmp_path / "b"), max_input_length=16, progress=False
        )
    )
    assert (tmp_path / "a").read_text(encoding="utf-8") == (tmp_path / "b").read_text(encoding="utf-8")
    assert exported["bleu"] == pytest.approx(direct["bleu"])
