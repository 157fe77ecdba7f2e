"""benchmarks/cpu_inference.py end to end at the smallest size (tiny, random weights, a small
vocabulary, four sentences, one repeat), and its refusals of bad input."""

import json
import os
import subprocess
import sys

import pytest
import sentencepiece

from data.tokenizer import train_sentencepiece

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "benchmarks", "cpu_inference.py")
SAMPLE_TSV = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")
SENTENCES = ["Open the file.", "Click OK to close the dialog.", "Select the cells.", "Save the document as PDF."]
SYSTEMS = ("saved_model_float32", "saved_model_int8", "ct2_float32", "ct2_int8", "keras_hub")
LABELS = ("SavedModel float32", "SavedModel int8", "CTranslate2 float32", "CTranslate2 int8", "keras-hub")


def _run(*arguments, timeout=300):
    environment = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, SCRIPT, *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO_ROOT,
        env=environment,
    )


@pytest.mark.slow
def test_every_system_and_mode_is_measured_at_matching_output_lengths(tmp_path):
    vocabulary = train_sentencepiece(SAMPLE_TSV, str(tmp_path / "spm"), vocab_size=400)
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    output = tmp_path / "result.json"
    arguments = ["--sizes=tiny", f"--vocabulary={vocabulary}", f"--sentences={sentences}", "--count=4"]
    arguments += ["--batch=3", "--repeats=1", "--length_buckets=", "--max_input_length=24", "--profile"]
    finished = _run(*arguments, f"--output={output}")
    assert finished.returncode == 0, finished.stderr[-3000:]

    result = json.loads(output.read_text())
    assert list(result["sizes"]) == ["tiny"]
    tiny = result["sizes"]["tiny"]
    assert tiny["weights"] == "random" and tiny["output_length"]["forced"]
    assert list(tiny["results"]) == list(SYSTEMS)
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
    for name in SYSTEMS:
        assert abs(tiny["results"][name]["single"]["mean_output_tokens"] - one_by_one) <= 1.0, name
    # In batches (3 + 1 sentences, in order of length) the SavedModels still stop each sentence at its
    # own length; CTranslate2 and keras-hub take one bound per call, the batch's longest.
    by_length = sorted(n)
    batch_longest = (3 * (by_length[2] + 1) + by_length[3] + 1) / 4
    for name in SYSTEMS:
        expected = one_by_one if name.startswith("saved_model") else batch_longest
        assert abs(tiny["results"][name]["batch"]["mean_output_tokens"] - expected) <= 1.0, name

    assert set(tiny["ratios"]) == {"single", "batch"}
    for found in tiny["ratios"].values():
        assert set(found) == {"saved_model_int8 / saved_model_float32", "saved_model_float32 / ct2_float32"}
        assert all(entry["ratio"] > 0 for entry in found.values())
    assert set(tiny["profile"]) == {"saved_model_float32", "saved_model_int8"}
    for profile in tiny["profile"].values():
        assert profile["top"] and profile["op_ms"] > 0
        assert 0 < sum(entry["share"] for entry in profile["top"]) <= 1 + 1e-6

    table = [line for line in finished.stdout.splitlines() if line.startswith("| ") and "tiny" in line]
    assert len(table) == 2 * len(SYSTEMS)
    for label in LABELS:
        rows = [line.split(" | ") for line in table if line.startswith(f"| {label}")]
        assert [row[2] for row in rows] == ["1 sentence", "batch 3"], label
        assert all(float(value) > 0 for row in rows for value in (row[3], row[4], row[5], row[6].rstrip(" |"))), label
    assert "saved_model_float32 / ct2_float32" in finished.stdout


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--sizes=tiny,huge"], "--sizes=tiny,huge: expected presets among"),
        (["--model_dir={tmp_path}"], "holds no model: it has no model.keras"),
        (["--systems=saved_model_float32,onnx"], "--systems=saved_model_float32,onnx: expected some of"),
        (["--sentences={tmp_path}/missing.txt"], "/missing.txt: no such file (a text file, or a TSV"),
    ],
)
def test_bad_input_is_refused_with_what_was_expected(tmp_path, arguments, message):
    # A sentences file of its own: the default one lives in the corpus cache, absent on a clean clone.
    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    arguments = [f"--sentences={sentences}", *(argument.format(tmp_path=tmp_path) for argument in arguments)]
    finished = _run(*arguments, timeout=120)
    assert finished.returncode == 2
    assert message in finished.stderr
    assert "Traceback" not in finished.stderr


def test_equal_lengths_takes_sentences_of_the_median_length_or_the_nearest_with_enough(tmp_path):
    sys.path.insert(0, os.path.dirname(SCRIPT))
    import cpu_inference

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
