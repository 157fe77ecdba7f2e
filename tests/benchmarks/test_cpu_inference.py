"""benchmarks/cpu_inference.py end to end at the smallest size (tiny, random weights, a small
vocabulary, four sentences, one repeat), in this process: the two CTranslate2 systems measured
here, and in the full tier one system of each kind with the profile and the floor step, each
measured by a process of its own; and its refusals of bad input."""

import json
import os
import subprocess
import sys

import pytest
import sentencepiece

from data.tokenizer import train_sentencepiece
from tests.helpers import REPO_ROOT, SAMPLE_TSV

SCRIPT = os.path.join(REPO_ROOT, "benchmarks", "cpu_inference.py")
# 8 to 13 pieces (the vocabulary of 400): every call pads to 16 positions, two keras-hub traces.
SENTENCES = ["Open the file.", "Select the cells.", "Print it.", "Close the dialog."]
LABELS = {
    "saved_model_float32": "SavedModel float32",
    "saved_model_int8": "SavedModel int8",
    "ct2_float32": "CTranslate2 float32",
    "ct2_int8": "CTranslate2 int8",
    "keras_hub": "keras-hub",
}


def _measure(benchmark_script, tmp_path, capsys, systems, *flags):
    """main() on SENTENCES with `systems`: `(the tiny size's results, stdout, the vocabulary)`."""
    bench, _ = benchmark_script("cpu_inference")
    vocabulary = train_sentencepiece(SAMPLE_TSV, str(tmp_path / "spm"), vocab_size=400)
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    output = tmp_path / "result.json"
    arguments = ["--sizes=tiny", f"--vocabulary={vocabulary}", f"--sentences={sentences}", "--count=4"]
    arguments += ["--batch=3", "--repeats=1", "--length_buckets=", "--max_input_length=24", f"--output={output}"]
    bench.main([*arguments, f"--systems={','.join(systems)}", *flags])
    result = json.loads(output.read_text())
    assert list(result["sizes"]) == ["tiny"]
    return result["sizes"]["tiny"], capsys.readouterr().out, vocabulary


def _check_measured(tiny, stdout, vocabulary, systems):
    """Every system in both modes, at the output lengths the module docstring gives, and its table rows."""
    assert tiny["weights"] == "random" and tiny["output_length"]["forced"]
    assert list(tiny["results"]) == list(systems)
    for name, by_mode in tiny["results"].items():
        assert list(by_mode) == ["single", "batch"], name
        for mode, measured in by_mode.items():
            assert measured["sentences_per_second"] > 0 and measured["mean_output_tokens"] > 0, (name, mode)
            assert 0 < measured["p50_ms"] <= measured["p95_ms"], (name, mode)
        assert by_mode["single"]["calls"] == 4 and by_mode["batch"]["calls"] == 2, name

    # n = pieces + EOS; every system decodes n + 1 tokens (the SavedModels n or n + 1 with EOS).
    processor = sentencepiece.SentencePieceProcessor(model_file=vocabulary)
    n = [len(pieces) + 1 for pieces in processor.encode(SENTENCES)]
    one_by_one = sum(n) / len(n) + 1
    for name in systems:
        assert abs(tiny["results"][name]["single"]["mean_output_tokens"] - one_by_one) <= 1.0, name
    # In batches (3 + 1 sentences, in order of length) the SavedModels still stop each sentence at its
    # own length; CTranslate2 and keras-hub take one bound per call, the batch's longest.
    by_length = sorted(n)
    batch_longest = (3 * (by_length[2] + 1) + by_length[3] + 1) / 4
    for name in systems:
        expected = one_by_one if name.startswith("saved_model") else batch_longest
        assert abs(tiny["results"][name]["batch"]["mean_output_tokens"] - expected) <= 1.0, name

    table = [line for line in stdout.splitlines() if line.startswith("| ") and "tiny" in line]
    assert len(table) == 2 * len(systems)
    for name in systems:
        rows = [line.split(" | ") for line in table if line.startswith(f"| {LABELS[name]}")]
        assert [row[2] for row in rows] == ["1 sentence", "batch 3"], name
        assert all(float(value) > 0 for row in rows for value in (row[3], row[4], row[5], row[6].rstrip(" |"))), name


def _check_floor(tiny, stdout, systems):
    """`--floor`: the floor step of each attention form at each mode's sentences, and each system's
    call time per decoding step (its output tokens and the EOS), printed with the faster form."""
    assert list(tiny["floor"]) == ["single", "batch"]
    for mode, sentences in (("single", 1), ("batch", 3)):
        found = tiny["floor"][mode]
        assert found["sentences"] == sentences
        assert set(found["floor_ms_per_step"]) == {"stacked", "broadcast"}
        assert all(ms > 0 for ms in found["floor_ms_per_step"].values())
        assert list(found["systems_ms_per_step"]) == list(systems)
        for name in systems:
            result = tiny["results"][name][mode]
            call_ms = 1000 * result["sentences_per_call"] / result["sentences_per_second"]
            assert found["systems_ms_per_step"][name] == pytest.approx(call_ms / (result["mean_output_tokens"] + 1))
        floor = min(found["floor_ms_per_step"].values())
        line = next(line for line in stdout.splitlines() if line.startswith(f"tiny, {sentences} sentence(s) a call"))
        assert f"the core-op floor step {floor:.3f} ms" in line
        assert all(f"{LABELS[name]}" in line for name in systems)


def test_ctranslate2_systems_are_measured_at_matching_output_lengths(benchmark_script, tmp_path, capsys):
    """The script's whole path with its two cheapest systems (no export to trace), both measured in
    this process (`--no-isolate`), at CTranslate2's own thread count."""
    systems = ("ct2_float32", "ct2_int8")
    tiny, stdout, vocabulary = _measure(benchmark_script, tmp_path, capsys, systems, "--no-isolate", "--ct2_threads=1")
    _check_measured(tiny, stdout, vocabulary, systems)
    assert "threads (CTranslate2 1), beam" in stdout
    assert tiny["isolated"] is False
    assert tiny["ratios"] == {}  # Each of RATIOS needs a SavedModel.
    assert "profile" not in tiny


@pytest.mark.slow  # A SavedModel export and keras-hub's sampler traced.
def test_every_kind_of_system_and_mode_is_measured_at_matching_output_lengths(benchmark_script, tmp_path, capsys):
    """A SavedModel, CTranslate2 and keras-hub, each measured by a process of its own (the
    default), the SavedModel's profile sent back from its process, and the floor step beside them. The int8 SavedModel, left out
    for the time its export takes, is the same export with `quantize="int8"`, whose translations
    equal the Python translator's with the same weights (tests/export/test_fresh_process.py);
    CTranslate2 int8, left out for its conversion, is measured by the test above."""
    systems = ("saved_model_float32", "ct2_float32", "keras_hub")
    tiny, stdout, vocabulary = _measure(
        benchmark_script, tmp_path, capsys, systems, "--profile", "--stopping=heuristic", "--floor"
    )
    _check_measured(tiny, stdout, vocabulary, systems)
    _check_floor(tiny, stdout, systems)
    assert tiny["isolated"] is True
    assert set(tiny["ratios"]) == {"single", "batch"}
    for found in tiny["ratios"].values():
        assert set(found) == {"saved_model_float32 / ct2_float32"}
        assert all(entry["ratio"] > 0 for entry in found.values())
    assert set(tiny["profile"]) == {"saved_model_float32"}
    for profiles in tiny["profile"].values():
        assert set(profiles) == {"single", "batch"}
        for profile in profiles.values():
            assert profile["top"] and profile["op_ms"] > 0
            assert 0 < sum(entry["share"] for entry in profile["top"]) <= 1 + 1e-6
            step = profile["step"]  # The tiny preset's decoder has two layers.
            assert step["steps"] >= 2 and list(step["traced_ops_per_layer"]) == ["0", "1"]
            assert 0 < step["products"] < step["traced_ops"] and 0 < step["product_ms"] < step["op_ms"]
            assert sum(step["traced_ops_per_layer"].values()) < step["traced_ops"]
    assert "saved_model_float32 / ct2_float32" in stdout


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--sizes=tiny,huge"], "--sizes=tiny,huge: expected presets among"),
        (["--model_dir={tmp_path}"], "holds no model: it has no model.keras"),
        (["--systems=saved_model_float32,onnx"], "--systems=saved_model_float32,onnx: expected some of"),
        (["--sentences={tmp_path}/missing.txt"], "/missing.txt: no such file (a text file, or a TSV"),
        (["--shortlist=50"], "--shortlist=50: expected 0 (off), or K > 0 with --model_dir and --sizes of its preset"),
        (["--ct2_threads=0"], "--ct2_threads=0: expected a positive integer"),
        (
            ["--floor", "--shortlist=50"],
            "--floor with --shortlist=50: the floor step projects onto the whole vocabulary",
        ),
        (["--stopping=early"], "argument --stopping: invalid choice: 'early' (choose from 'exact', 'heuristic')"),
        (["--baseline_tree={tmp_path}"], "not a checkout of this repository (no export/__main__.py)"),
    ],
)
def test_bad_input_is_refused_with_what_was_expected(benchmark_script, tmp_path, capsys, arguments, message):
    """In this process; how a refusal leaves the script (exit 2, one message, no traceback): the
    process of the test below."""
    bench, _ = benchmark_script("cpu_inference")
    with pytest.raises(SystemExit) as exited:
        bench.main(_refused_arguments(tmp_path, arguments))
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_a_shortlist_needs_the_runs_lexical_table(benchmark_script, tiny_run, tmp_path, capsys):
    bench, _ = benchmark_script("cpu_inference")
    arguments = [f"--model_dir={tiny_run[0]}", "--sizes=tiny", "--shortlist=50"]
    with pytest.raises(SystemExit) as exited:
        bench.main(_refused_arguments(tmp_path, arguments))
    assert exited.value.code == 2
    assert f"{tiny_run[0]} has no shortlist.tsv; build it with python -m training.shortlist" in capsys.readouterr().err


def test_the_script_exits_2_on_bad_input_without_a_traceback(tmp_path):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    finished = subprocess.run(
        [sys.executable, SCRIPT, *_refused_arguments(tmp_path, ["--sizes=tiny,huge"])],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
        env=environment,
    )
    assert finished.returncode == 2
    assert "--sizes=tiny,huge: expected presets among" in finished.stderr
    assert "Traceback" not in finished.stderr


def _refused_arguments(tmp_path, arguments):
    """`arguments` ({tmp_path} filled in) after a sentences file of their own: the default one lives
    in the corpus cache, absent on a clean clone."""
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return [f"--sentences={sentences}", *(argument.format(tmp_path=tmp_path) for argument in arguments)]


def test_equal_lengths_takes_sentences_of_the_median_length_or_the_nearest_with_enough(benchmark_script, tmp_path):
    cpu_inference, _ = benchmark_script("cpu_inference")

    vocabulary = train_sentencepiece(SAMPLE_TSV, str(tmp_path / "spm"), vocab_size=400)
    processor = sentencepiece.SentencePieceProcessor(model_file=vocabulary)
    # The first sentence three times, then the others once: only its length has three sentences.
    lines = [SENTENCES[0]] * 3 + SENTENCES[1:]
    lengths = cpu_inference.source_tokens(processor, lines)
    assert lengths.count(lengths[0]) == 3, lengths  # The sample's sentences differ in length.
    path = tmp_path / "sentences.tsv"
    path.write_text("".join(f"{line}\tignored\n" for line in lines), encoding="utf-8")

    median = sorted(lengths)[len(lengths) // 2]
    assert cpu_inference.equal_length_sentences(str(path), processor, 1) == [lines[lengths.index(median)]]
    assert cpu_inference.equal_length_sentences(str(path), processor, 3) == [SENTENCES[0]] * 3
    with pytest.raises(SystemExit, match="no SentencePiece length has --count=4 of the 6 sentences"):
        cpu_inference.equal_length_sentences(str(path), processor, 4)
