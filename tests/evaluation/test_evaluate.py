"""evaluate.py end to end (as a subprocess, the way users run it), its `main` in this process
(`evaluate_here`, tests/evaluation/conftest.py) for its refusal of search flags with an export, and
its bad-input errors."""

import io
import json
import os
import re
import shutil
import sys

import pytest
import sacrebleu

from common.errors import UserError
from evaluation import evaluator, reference_sets
from inference.runs import ModelDirError, RunDir
from inference.saved_model_translator import ExportDirError, SavedModelTranslator
from models.search_config import SearchConfig
from tests.evaluation.conftest import LOADED_EXPORT_GROUP
from tests.helpers import EXPORT_SETTINGS, REPO_ROOT, STARTUP_NOISE, run_logged

# The search settings an export records: the direct evaluation is given the shared export's.
SEARCH_KEYS = ("beam_size", "alpha", "max_extra_length", "max_input_length")
BLEU_SIGNATURE = re.compile(r"^signature: nrefs:1\|case:mixed\|eff:no\|tok:13a\|smooth:exp\|version:\S+$", re.M)
CHRF_SIGNATURE = re.compile(r"^signature: nrefs:1\|case:mixed\|eff:yes\|nc:6\|nw:0\|space:no\|version:\S+$", re.M)


def run_evaluate(*flags, timeout=300, progress=False):
    """evaluate.py in a new process, its output into files (`run_logged`: checked plain)."""
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONPATH=REPO_ROOT)
    return run_logged(
        [sys.executable, os.path.join(REPO_ROOT, "evaluate.py"), "--progress" if progress else "--noprogress", *flags],
        cwd=REPO_ROOT,
        env=environment,
        text=True,
        timeout=timeout,
    )


@pytest.mark.slow
def test_evaluate_scores_the_tiny_run_on_its_test_split_averaging_and_plotting(tiny_run, tmp_path):
    """The one run of evaluate.py that translates: a per-source test file of the run's corpus
    (--split=test.libreoffice-ui, 414 lines, 8 of them beyond the run's 64 tokens; the whole test
    split, the default, is five times as many), with the mean of its two checkpoints, a small search
    and an attention plot. Source files with empty and overlong lines:
    test_export_dir_evaluates_like_the_model_dir, in this process."""
    model_dir, summary = tiny_run
    output, plots = tmp_path / "hypotheses.txt", tmp_path / "plots"
    completed = run_evaluate(
        f"--model_dir={model_dir}",
        "--split=test.libreoffice-ui",
        f"--output={output}",
        "--checkpoint=average:2",
        "--beam_size=2",
        "--max_extra_length=5",
        "--plot_attention=Open the file.",
        f"--plot_dir={plots}",
        progress=True,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    assert "loaded the mean of 2 checkpoint(s), of steps 100, 200" in completed.stderr
    # In a file, progress is plain lines (`run_logged` checks: no \r), the last one the whole set.
    assert re.search(r"^translated (\d+)/\1 sentences \(\d+\.\d/s\)$", completed.stderr, re.M), completed.stderr
    assert not [noise for noise in STARTUP_NOISE if noise in completed.stderr], completed.stderr
    stdout = completed.stdout
    bleu = re.search(r"^sacreBLEU: BLEU = (\d+\.\d+) ", stdout, re.M)
    chrf = re.search(r"^chrF: chrF2 = (\d+\.\d+)", stdout, re.M)
    assert bleu and chrf, stdout
    assert BLEU_SIGNATURE.search(stdout) and CHRF_SIGNATURE.search(stdout), stdout
    assert f"wrote 1 attention heatmap(s) to {plots}" in stdout

    test_tsv = os.path.join(os.path.dirname(summary["corpus"]["test"]), "test.libreoffice-ui.tsv")
    _, references = reference_sets.read_tsv_pairs(test_tsv)
    hypotheses = output.read_text(encoding="utf-8").split("\n")[:-1]
    assert len(hypotheses) == len(references)
    # The printed scores are sacreBLEU's on the written, detokenized output.
    assert float(bleu.group(1)) == pytest.approx(sacrebleu.corpus_bleu(hypotheses, [references]).score, abs=0.01)
    assert float(chrf.group(1)) == pytest.approx(sacrebleu.corpus_chrf(hypotheses, [references]).score, abs=0.01)
    # Lines over the run's max_length (64 tokens) are cut and reported.
    assert re.search(r"source lines are longer than the maximum input length of 64 tokens", stdout), stdout
    from PIL import Image

    with Image.open(plots / "attention-1.png") as image:
        assert image.width > 50 and image.height > 50


def test_plot_attention_alone_draws_without_translating_a_test_set(tiny_run, tmp_path, evaluate_here):
    """In this process (evaluate.py's printed lines: its process with --plot_attention and a test
    set, test_evaluate_scores_the_tiny_run_on_its_test_split_averaging_and_plotting)."""
    model_dir, _ = tiny_run
    plots = tmp_path / "plots"
    status, _, stderr = evaluate_here(
        f"--model_dir={model_dir}", "--plot_attention=Open the file.", f"--plot_dir={plots}"
    )
    assert status == 0, stderr[-4000:]
    assert "evaluating on" not in stderr
    assert os.listdir(plots) == ["attention-1.png"] and (plots / "attention-1.png").stat().st_size > 1000


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
    with pytest.raises(reference_sets.TestSetError, match=r"test\.ding"):
        evaluator.evaluate(evaluator.EvalConfig(model_dir=model_dir, split="test.nowhere", progress=False))


def test_per_source_split_resolves_from_the_run_config(tiny_run):
    model_dir, summary = tiny_run
    config = evaluator.EvalConfig(model_dir=model_dir, split="test.ding", progress=False)
    sources, references, description, target_language = evaluator.load_test_set(config, evaluator._run_config(config))
    assert description.startswith(summary["corpus"]["test_by_source"]["ding"])
    assert len(sources) == len(references) > 0
    assert target_language == "de"


@pytest.mark.slow  # a load of the shared export
@pytest.mark.xdist_group(LOADED_EXPORT_GROUP)
def test_export_dir_evaluates_like_the_model_dir(tiny_run, tiny_export, tmp_path, export_loaded_once):
    model_dir, _ = tiny_run
    src, ref = tmp_path / "src.en", tmp_path / "ref.de"
    long_line = " ".join(["Open the file and print it."] * 10)
    # Line 5 has no tokens (U+200B ZERO WIDTH SPACE); line 6 is longer than the export's 48 tokens.
    src.write_text(
        f"Open the file.\n\nPrint\nThe document could not be saved.\n\u200b\n{long_line}\n", encoding="utf-8"
    )
    ref.write_text(
        "Öffnen Sie die Datei.\n\nDrucken\nDas Dokument konnte nicht gespeichert werden.\n\nÖffnen Sie die Datei.\n",
        encoding="utf-8",
    )
    exported_out, direct_out = io.StringIO(), io.StringIO()
    exported = evaluator.evaluate(
        evaluator.EvalConfig(
            export_dir=tiny_export, src=str(src), ref=str(ref), output=str(tmp_path / "a"), progress=False
        ),
        out=exported_out,
    )
    direct = evaluator.evaluate(
        evaluator.EvalConfig(
            model_dir=model_dir,
            src=str(src),
            ref=str(ref),
            output=str(tmp_path / "b"),
            search=SearchConfig(**{k: EXPORT_SETTINGS[k] for k in SEARCH_KEYS}),
            progress=False,
        ),
        out=direct_out,
    )
    assert (tmp_path / "a").read_text(encoding="utf-8") == (tmp_path / "b").read_text(encoding="utf-8")
    assert (tmp_path / "a").read_text(encoding="utf-8").split("\n")[4] == ""
    assert exported["bleu"] == pytest.approx(direct["bleu"])
    assert exported["truncated_lines"] == direct["truncated_lines"] == [6]
    assert exported["empty_lines"] == direct["empty_lines"] == [2, 5]
    assert (
        "1 of 6 source lines are longer than the maximum input length of 48 tokens (the export's max_input_length"
        in exported_out.getvalue()
    )
    assert (
        "1 of 6 source lines are longer than the maximum input length of 48 tokens (--max_input_length"
        in direct_out.getvalue()
    )
    for printed in (exported_out.getvalue(), direct_out.getvalue()):
        assert "2 empty source line(s) translated to empty lines" in printed and "lines 2, 5" in printed


@pytest.mark.slow  # the shared export
def test_search_flags_with_export_dir_are_refused_naming_the_exports_values(tiny_export, tmp_path, evaluate_here):
    src = tmp_path / "src.en"
    src.write_text("Open the file.\n", encoding="utf-8")
    status, stdout, stderr = evaluate_here(
        f"--export_dir={tiny_export}",
        f"--src={src}",
        "--beam_size=8",
        "--max_input_length=300",
        "--no_repeat_ngram_size=2",
    )
    assert status == 2 and stdout == "", stderr[-4000:]
    assert "evaluating on" not in stderr
    message = stderr.strip().splitlines()[-1]
    refused = "--beam_size, --max_input_length, --no_repeat_ngram_size cannot be used with --export_dir"
    assert message.startswith(f"evaluate.py: error: {refused}")
    config = os.path.join(tiny_export, "1", "assets.extra", "export_config.json")
    assert (
        f"beam_size=4, alpha=0.6, max_extra_length=12, min_length_ratio=0.0, max_input_length=48, "
        f"no_repeat_ngram_size=0, shortlist=0, stopping=exact (from {config})" in message
    )


def write_source(tmp_path, text="Open the file.\n", name="src.en"):
    src = tmp_path / name
    src.write_text(text, encoding="utf-8")
    return str(src)


# evaluate.py's flags as EvalConfig fields, and the start of the error.
CLEAN_ERRORS = {
    "unknown_corpus": (
        lambda tmp_path: dict(corpus="nonexistent"),
        "--corpus=nonexistent: Unknown corpus 'nonexistent'",
    ),
    "unknown_direction": (
        lambda tmp_path: dict(direction="xx-yy"),
        "--direction=xx-yy: Direction 'xx-yy' does not match",
    ),
    "blank_plot_sentence": (
        lambda tmp_path: dict(src=write_source(tmp_path), plot_attention=(" ",)),
        "--plot_attention sentence 1 (' ') is empty",
    ),
    "output_is_a_directory": (
        lambda tmp_path: dict(src=write_source(tmp_path), output=str(tmp_path)),
        "--output={tmp_path} is a directory",
    ),
    "output_under_a_file": (
        lambda tmp_path: dict(src=write_source(tmp_path), output=f"{write_source(tmp_path)}/hyp.de"),
        "--output={tmp_path}/src.en/hyp.de: cannot create its directory {tmp_path}/src.en",
    ),
    "empty_source_file": (
        lambda tmp_path: dict(src=write_source(tmp_path, ""), ref=write_source(tmp_path, "", "ref.de")),
        "--src {tmp_path}/src.en is empty",
    ),
    "different_line_counts": (
        lambda tmp_path: dict(src=write_source(tmp_path, "a\nb\nc\n"), ref=write_source(tmp_path, "a\nb\n", "ref.de")),
        "--src {tmp_path}/src.en has 3 lines but --ref {tmp_path}/ref.de has 2",
    ),
}


@pytest.mark.parametrize("case", sorted(CLEAN_ERRORS))
def test_bad_input_fails_cleanly_before_translating(tiny_run, tmp_path, capsys, case):
    model_dir, _ = tiny_run
    fields, expected = CLEAN_ERRORS[case]
    with pytest.raises(UserError) as refused:
        evaluator.evaluate(evaluator.EvalConfig(model_dir=model_dir, progress=False, **fields(tmp_path)))
    assert str(refused.value).startswith(expected.format(tmp_path=tmp_path)), str(refused.value)
    assert "evaluating on" not in capsys.readouterr().err


def test_bad_input_is_one_line_and_status_2_from_evaluate_py(tiny_run, tmp_path, evaluate_here):
    """The wiring of the refusals above: evaluate.py's main prints the error as its last line and
    returns 2, its exit status (a process of evaluate.py refused with status 2 and one line:
    tests/evaluation/test_checkpoint_flag.py; main's status through `run_tool`: translate.py's
    refusal in tests/evaluation/test_run_search.py)."""
    model_dir, _ = tiny_run
    status, stdout, stderr = evaluate_here(
        f"--model_dir={model_dir}", f"--src={write_source(tmp_path)}", f"--output={tmp_path}"
    )
    assert status == 2 and stdout == "", stderr[-4000:]
    assert "Traceback" not in stderr and "evaluating on" not in stderr, stderr[-4000:]
    message = stderr.strip().splitlines()[-1]
    assert message.startswith(f"evaluate.py: error: --output={tmp_path} is a directory"), message


def test_a_truncated_checkpoint_is_named_when_averaging(tiny_run, tmp_path):
    model_dir, _ = tiny_run
    copy = shutil.copytree(model_dir, tmp_path / "run")
    newest = sorted((copy / "checkpoints").glob("ckpt-*.weights.h5"))[-1]
    with open(newest, "r+b") as handle:
        handle.truncate(1000)  # A run killed while writing it.
    with pytest.raises(ModelDirError, match=re.escape(f"--checkpoint=average:2: checkpoint {newest} cannot be read")):
        RunDir(str(copy)).load_model("average:2")


@pytest.mark.parametrize("content", [b"", b"not a protocol buffer \xff"], ids=["empty", "corrupt"])
def test_an_unloadable_saved_model_is_an_export_dir_error(tmp_path, content):
    version = tmp_path / "export" / "1"
    version.mkdir(parents=True)
    (version / "saved_model.pb").write_bytes(content)
    with pytest.raises(ExportDirError, match=re.escape(f"{version} could not be loaded as a SavedModel")):
        SavedModelTranslator(str(tmp_path / "export"))


@pytest.mark.slow  # a translation of the test split, for the tokenizer choice
def test_bleu_uses_the_zh_tokenizer_for_a_chinese_target(tiny_run, tmp_path):
    model_dir, _ = tiny_run
    # Without its checkpoints: model.keras is the run's only (last) model.
    copy = shutil.copytree(model_dir, tmp_path / "run", ignore=shutil.ignore_patterns("checkpoints"))
    config = json.loads((copy / "config.json").read_text(encoding="utf-8"))
    config["data"].update(corpus="files", languages="en-zh")  # A run trained on user files, en -> zh.
    (copy / "config.json").write_text(json.dumps(config), encoding="utf-8")
    src, ref = tmp_path / "src.en", tmp_path / "ref.zh"
    src.write_text("Open the file.\n", encoding="utf-8")
    ref.write_text("打开文件。\n", encoding="utf-8")
    last = dict(checkpoint="last", progress=False)
    chinese = evaluator.evaluate(evaluator.EvalConfig(model_dir=str(copy), src=str(src), ref=str(ref), **last))
    assert "|tok:zh|" in chinese["bleu_signature"]
    chosen = evaluator.evaluate(
        evaluator.EvalConfig(model_dir=str(copy), src=str(src), ref=str(ref), bleu_tokenize="char", **last)
    )
    assert "|tok:char|" in chosen["bleu_signature"]
    german = evaluator.evaluate(evaluator.EvalConfig(model_dir=model_dir, src=str(src), ref=str(ref), progress=False))
    assert "|tok:13a|" in german["bleu_signature"]
