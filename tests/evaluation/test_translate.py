"""translate.py: its wiring as users run it (a subprocess reading stdin or files, a pseudo-terminal
for the interactive case, real signals, exit statuses), and its modes (n-best lists, scoring,
sampling, prefixes, alignments, an export) through its `run` in this process (`translate_here`,
tests/evaluation/conftest.py); its outputs checked against the Python translator's."""

import json
import math
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import pytest
from absl import flags

from inference.protocol import AlignmentConfig
from inference.runs import RunDir
from inference.translator import Sampling, Translator
from models.search_config import SearchConfig
from tests.evaluation.conftest import LOADED_EXPORT_GROUP
from tests.helpers import REPO_ROOT, STARTUP_NOISE, run_logged

SENTENCES = [
    "Open the file.",
    "",
    "The document could not be saved because the disk is full.",
    "Print",
    "Select the cells that you want to format, and then choose a style from the list.",
]
ENVIRONMENT = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO_ROOT)
COMMAND = [sys.executable, os.path.join(REPO_ROOT, "translate.py")]
SEARCH = ["--max_extra_length=6", "--batch_size=2"]
DOCUMENT = "Open the file.  Print the page! Close"


def translate(*flags, stdin=b"", timeout=300):
    """translate.py's `(return code, stdout text, stderr text)`, its output into files (`run_logged`:
    checked plain)."""
    completed = run_logged(COMMAND + list(flags), input=stdin, env=ENVIRONMENT, cwd=REPO_ROOT, timeout=timeout)
    return completed.returncode, completed.stdout.decode("utf-8"), completed.stderr.decode("utf-8", "replace")


def lines_of(sentences):
    return "".join(sentence + "\n" for sentence in sentences).encode("utf-8")


@pytest.fixture
def python_translator(tiny_run, runs_loaded_once):
    """The Python translator of the model translate.py's runs in this module load
    (`runs_loaded_once`): they share its traces."""
    model, tokenizer, run_config = RunDir(tiny_run[0]).load_model(quiet=True)
    return Translator(
        model,
        tokenizer,
        search=SearchConfig(max_extra_length=6, max_input_length=run_config["data"]["max_length"]),
        batch_size=2,
    )


@pytest.mark.slow  # a run of the model
def test_stdin_to_a_file_in_input_order_with_bad_and_long_lines_reported(
    tiny_run, tmp_path, python_translator, translate_here
):
    """stdin read in windows to --output, in input order, sentence by sentence; a BOM dropped, CRLF
    read as LF, invalid UTF-8 reported on stderr by line number, a long line split and translated
    whole (cut with --nosplit_sentences: test_nosplit_sentences_cuts_and_reports_long_lines), and
    nothing else there. (--input's files are read as --src's are: test_score_mode_equals_forced_decoding;
    a real stdin pipe and a process's stderr: test_a_reader_that_stops_early_ends_the_run_quietly.)"""
    model_dir, _ = tiny_run
    long_line = " ".join(["Open the file."] * 10)
    stdin = lines_of(SENTENCES[:3]) + b"caf\xe9 au lait\n" + lines_of(SENTENCES[3:] + [long_line])
    output = tmp_path / "doc.de"
    lines, error, stderr = translate_here(
        f"--model_dir={model_dir}",
        "--window=3",
        f"--output={output}",
        "--max_input_length=12",
        *SEARCH,
        stdin=b"\xef\xbb\xbf" + stdin.replace(b"\n", b"\r\n", 1) + b"no newline at the end",
    )
    assert error is None, stderr
    assert lines == []
    inputs = SENTENCES[:3] + ["caf\ufffd au lait"] + SENTENCES[3:] + [long_line, "no newline at the end"]
    translator = Translator(
        python_translator.model,
        python_translator.tokenizer,
        search=SearchConfig(max_extra_length=6, max_input_length=12),
        batch_size=2,
    )
    expected, _ = translator.translate(inputs)
    written = output.read_text(encoding="utf-8")
    assert written.split("\n")[:-1] == expected and "\r" not in written
    assert written.endswith("\n") and written.split("\n")[1] == ""  # The empty line stays aligned.
    assert "<stdin> line 4: invalid UTF-8" in stderr and "U+FFFD" in stderr
    assert translator.truncated_indices == [] and "longer than the maximum input length" not in stderr
    # The progress line's last report, into a file: lines done, sentences/s (the long line's many), lines/s.
    assert re.search(rf"^translate\.py: {len(inputs)} lines, [0-9.]+ sentences/s, [0-9.]+ lines/s, in ", stderr, re.M)


@pytest.mark.slow  # a run of the model
def test_alignments_follow_their_translations_after_a_tab(tiny_run, python_translator, translate_here):
    """--alignments prints `translation<TAB>alignment` lines, the Python translator's, with the
    layer and head the flags choose. (The n-best lines: test_n_best_lists_are_the_searchs_own; an
    export's: test_export_translates_and_refuses_what_it_cannot_do.)"""
    model_dir, _ = tiny_run
    lines, error, stderr = translate_here(
        f"--model_dir={model_dir}",
        "--alignments",
        "--alignment_layer=-1",
        "--alignment_head=1",
        *SEARCH,
        "--min_length_ratio=1",  # The tiny run, left alone, ends some translations at once.
        stdin=lines_of(SENTENCES),
    )
    assert error is None, stderr
    translator = Translator(
        python_translator.model,
        python_translator.tokenizer,
        python_translator.search.override(min_length_ratio=1.0),
        batch_size=2,
    )
    texts, _, alignments = translator.translate(SENTENCES, alignments=AlignmentConfig(layer=-1, head=1))
    assert lines == [f"{text}\t{alignment}" for text, alignment in zip(texts, alignments)]
    assert alignments[1] == "" and all(alignments[:1] + alignments[2:])  # None for the empty line.


@pytest.mark.slow  # a run of the model
def test_n_best_lists_are_the_searchs_own(tiny_run, python_translator, translate_here):
    model_dir, _ = tiny_run
    lines, error, stderr = translate_here(
        f"--model_dir={model_dir}", "--n_best=3", "--alignments", *SEARCH, stdin=lines_of(SENTENCES)
    )
    assert error is None, stderr
    texts, scores, alignments = python_translator.translate(SENTENCES, n_best=3, alignments=True)
    rows = [line.split(" ||| ") for line in lines]
    assert len(rows) == 3 * len(SENTENCES)
    for number, (index, hypothesis, score_and_alignment) in enumerate(rows):
        line, rank = divmod(number, 3)
        score, alignment = score_and_alignment.split("\t")
        assert int(index) == line and hypothesis == texts[line][rank] and alignment == alignments[line][rank]
        assert abs(float(score) - scores[line][rank]) < 1e-4
    # --with_scores's lines: test_prefix_lines_start_their_translations_and_bad_ones_are_refused.


@pytest.mark.slow  # three runs of the model
def test_score_mode_equals_forced_decoding(tiny_run, tmp_path, python_translator, translate_here):
    model_dir, _ = tiny_run
    sources = ["Open the file.", "Print", ""]
    targets = ["Öffnen Sie die Datei.", "Drucken", "Leer"]
    tsv = "".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)).encode("utf-8")
    # A window of the three pairs is scored and written before the next window's line without a tab
    # ends the run: one run checks the scores and the refusal.
    lines, error, _ = translate_here(
        f"--model_dir={model_dir}", "--score", "--window=3", stdin=tsv + b"a line without a tab\n"
    )
    assert error.startswith("<stdin> line 4: no tab between the source and the target")
    expected = python_translator.score(sources, targets)
    for line, result in zip(lines, expected, strict=True):
        log_prob, average, perplexity, tokens = line.split("\t")
        assert abs(float(log_prob) - result.log_prob) < 1e-3
        assert abs(float(average) - result.average) < 1e-3
        assert abs(float(perplexity) - result.perplexity) < 1e-2 * result.perplexity
        assert int(tokens) == result.tokens
    (tmp_path / "a.en").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (tmp_path / "a.de").write_text("\n".join(targets) + "\n", encoding="utf-8")
    from_files, error, stderr = translate_here(
        f"--model_dir={model_dir}", "--score", f"--src={tmp_path / 'a.en'}", f"--tgt={tmp_path / 'a.de'}"
    )
    assert error is None and from_files == lines, stderr
    records, error, stderr = translate_here(f"--model_dir={model_dir}", "--score", "--format=jsonl", stdin=tsv)
    assert error is None, stderr
    for record, result in zip([json.loads(line) for line in records], expected, strict=True):
        assert list(record) == ["score", "confidence"]
        assert abs(record["score"] - result.log_prob) < 1e-3
        assert abs(record["confidence"] - math.exp(result.average)) < 1e-3
    (tmp_path / "short.de").write_text("Drucken\n", encoding="utf-8")
    _, error, _ = translate_here(
        f"--model_dir={model_dir}", "--score", f"--src={tmp_path / 'a.en'}", f"--tgt={tmp_path / 'short.de'}"
    )
    assert error.startswith(f"{tmp_path / 'short.de'} ends before line 2 of {tmp_path / 'a.en'}")


@pytest.mark.slow  # a run of the model
def test_sampling_is_reproducible_per_line_whatever_the_window(tiny_run, python_translator, translate_here):
    """Each line's sample is fixed by --seed and its line number (the translator's keys), so a run
    read in windows of 2 gives the Python translator's samples of all lines at once. That the
    samples follow the seed and the key, not the batch, is tests/inference/test_translator.py's."""
    model_dir, _ = tiny_run
    sample = ["--sampling_topp=0.9", "--sampling_temperature=1.0", *SEARCH]
    first, _, stderr = translate_here(
        f"--model_dir={model_dir}", "--seed=7", "--window=2", *sample, stdin=lines_of(SENTENCES)
    )
    expected, _ = python_translator.translate(
        SENTENCES, search=python_translator.search.override(sampling=Sampling(seed=7, top_p=0.9))
    )
    assert first == expected, stderr
    # Not the default seed's samples: the run read --seed.
    assert (
        expected
        != python_translator.translate(
            SENTENCES, search=python_translator.search.override(sampling=Sampling(seed=0, top_p=0.9))
        )[0]
    )
    # Back-translation: the same samples as pairs for the reverse direction, tagged as synthetic.
    # A line cut at the maximum input length (--nosplit_sentences) would pair its whole text with a
    # translation of its start: it is left out, and said so. (Split, it is translated whole.)
    long_line = " ".join(["The teacher opens the window"] * 60)
    pairs, _, stderr = translate_here(
        f"--model_dir={model_dir}",
        "--seed=7",
        "--tag=bt",
        "--nosplit_sentences",
        *sample,
        stdin=lines_of([*SENTENCES, long_line]),
    )
    assert pairs == [f"<bt> {text}\t{source}" for text, source in zip(expected, SENTENCES)], stderr
    assert f"<stdin> line {len(SENTENCES) + 1}: longer than the maximum input length" in stderr
    assert "left out of the pairs" in stderr


@pytest.mark.slow  # a run of the model
def test_prefix_lines_start_their_translations_and_bad_ones_are_refused(tiny_run, python_translator, translate_here):
    """A window of prefixed lines is translated as the Python translator does; the next window,
    which holds a prefix longer than its line's maximum output length, is refused whole. (A line
    without a tab goes through the check of --score's lines, test_score_mode_equals_forced_decoding's;
    an export's prefixes: test_export_translates_and_refuses_what_it_cannot_do.)"""
    model_dir, _ = tiny_run
    sources, prefixes = ["Open the file.", "Print", "Close"], ["Öffnen Sie", "", "Schließen"]
    tsv = "".join(f"{s}\t{p}\n" for s, p in zip(sources, prefixes)) + "Print\tDrucken\n"
    tsv += "Print\t" + " ".join(["Datei"] * 40) + "\n"
    lines, error, stderr = translate_here(
        f"--model_dir={model_dir}", "--prefix", "--with_scores", "--window=3", *SEARCH, stdin=tsv.encode()
    )
    assert error.startswith("<stdin> line 5: the target prefix has 40 SentencePiece pieces"), stderr
    expected, expected_scores = python_translator.translate(sources, prefixes=prefixes)
    assert all(text.startswith(prefix) for text, prefix in zip(expected, prefixes))
    rows = [line.rsplit(" ||| ", 1) for line in lines]
    assert [row[0] for row in rows] == expected
    assert all(abs(float(row[1]) - score) < 1e-4 for row, score in zip(rows, expected_scores))


@pytest.mark.slow  # a run of the model
def test_constraint_lines_steer_their_translations_and_bad_ones_are_refused(
    tiny_run, tmp_path, python_translator, translate_here
):
    """--constraints gives each line its tab-separated phrases (an empty line: none), as the Python
    translator does; a line whose phrases cannot all fit is translated without them with a warning;
    a constraints file of another line count is refused (before any output when --input is a file,
    at the line it lacks for stdin), and so is an empty phrase, by file and line."""
    model_dir, _ = tiny_run
    sources = ["Open the file.", "Print", "Close", "Print"]
    too_many = " ".join(["Datei"] * 5) + "\t" + " ".join(["Drucken"] * 4)  # each fits, not both
    constraints = tmp_path / "terms.tsv"
    constraints.write_text("Datei\tÖffnen\n\nSchließen\n" + too_many + "\n", encoding="utf-8")
    lines, error, stderr = translate_here(
        f"--model_dir={model_dir}", f"--constraints={constraints}", "--window=3", *SEARCH, stdin=lines_of(sources)
    )
    assert error is None, error
    phrases = [["Datei", "Öffnen"], [], ["Schließen"], too_many.split("\t")]
    expected, _ = python_translator.translate(sources, constraints=phrases)
    assert python_translator.unmet_indices == [3]
    assert lines == expected
    assert all(phrase in line for line, line_phrases in zip(lines[:3], phrases) for phrase in line_phrases)
    assert f"<stdin> line 4: the search found no translation with all the phrases of {constraints} line 4" in stderr

    _, error, _ = translate_here(
        f"--model_dir={model_dir}", f"--constraints={constraints}", stdin=lines_of(sources * 2)
    )
    assert error.startswith(f"--constraints={constraints} ends before line 5 of <stdin>"), error
    source_file = tmp_path / "doc.en"
    source_file.write_bytes(lines_of(sources[:3]))
    lines, error, _ = translate_here(
        f"--model_dir={model_dir}", f"--constraints={constraints}", f"--input={source_file}", *SEARCH
    )
    assert lines == [] and error.startswith(f"--constraints={constraints} has 4 lines and --input={source_file} 3")
    constraints.write_text("Datei\t\tÖffnen\n", encoding="utf-8")
    lines, error, _ = translate_here(f"--model_dir={model_dir}", f"--constraints={constraints}", stdin=b"Print\n")
    assert lines == [] and error.startswith(f"{constraints} line 1: phrase 2 ('') is empty"), error


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--n_best=5"], "--n_best=5 is larger than --beam_size=4"),
        (["--n_best=2", "--sampling_topk=5"], "--n_best needs a beam search"),
        (["--score", "--n_best=2"], "--score scores given translations"),
        (["--src=a.en"], "--src and --tgt go together"),
        (["--sampling_topk=1", "--sampling_temperature=0"], "--sampling_temperature must be > 0"),
        (["--sampling_topp=1.5"], "--sampling_topp must be in (0, 1], received 1.5"),
        (["--score", "--prefix"], "--prefix is for translating"),
        (["--score", "--alignments"], "--alignments is for translating"),
        (["--sampling_topk=5", "--constraints=terms.tsv"], "--constraints steer the beam search"),
        (["--sampling_topp=0.9", "--alignments"], "--alignments aligns searched translations"),
        (["--alignment_layer=0"], "--alignment_layer and --alignment_head choose the attention of --alignments"),
        (["--tag=b t", "--sampling_topk=5"], "--tag='b t' must be letters, digits or _"),
        (
            ["--tag=bt", "--n_best=2"],
            "--tag writes each line as a pair of its translation and the input line: not with",
        ),
    ],
)
def test_bad_flags_are_refused(tiny_run, flags, message):
    code, stdout, stderr = translate(f"--model_dir={tiny_run[0]}", *flags)
    assert code == 2 and stdout == ""
    # One line about the flag that is wrong, without every other flag's value before it.
    first = stderr.splitlines()[0]
    assert first.startswith("translate.py: error: --") and message in first, stderr


@pytest.mark.slow  # a load of the shared export
@pytest.mark.xdist_group(LOADED_EXPORT_GROUP)
def test_export_translates_and_refuses_what_it_cannot_do(tiny_export, translate_here, export_loaded_once):
    """The export's n-best lists and prefixes reach its signatures (alignments and constraints go
    the same way; what the signatures give, and what else the export refuses:
    tests/inference/test_saved_model_translator.py); a too-long prefix is refused by its line,
    search flags as the flags are read. The runs share one load of the export (`export_loaded_once`)."""
    lines, error, stderr = translate_here(f"--export_dir={tiny_export}", "--n_best=2", stdin=lines_of(SENTENCES[:2]))
    assert error is None, stderr
    assert [line.split(" ||| ")[0] for line in lines] == ["0", "0", "1", "1"]
    tsv = "Open the file.\tÖffnen Sie\n\tLeer\nPrint\t" + " ".join(["Datei"] * 40) + "\n"
    lines, error, stderr = translate_here(f"--export_dir={tiny_export}", "--prefix", "--window=2", stdin=tsv.encode())
    assert error.startswith("<stdin> line 3: the target prefix has 40 SentencePiece pieces"), stderr
    assert len(lines) == 2 and lines[0].startswith("Öffnen Sie") and lines[1].startswith("Leer")
    _, error, _ = translate_here(f"--export_dir={tiny_export}", "--sampling_topk=0", "--sampling_topp=0.9")
    assert error.startswith("--sampling_topk, --sampling_topp cannot be used with --export_dir")
    _, error, _ = translate_here(f"--export_dir={tiny_export}", "--beam_size=2")
    assert error.startswith("--beam_size cannot be used with --export_dir")


@pytest.mark.slow  # a process of its own; the fast tier's: test_run_search.py.
def test_a_reader_that_stops_early_ends_the_run_quietly(tiny_run):
    """stdin and stdout real pipes: the reader goes away after one line (status 141, no traceback),
    and nothing of TensorFlow's start-up on stderr."""
    model_dir, _ = tiny_run
    process = subprocess.Popen(
        COMMAND + [f"--model_dir={model_dir}", "--beam_size=1", "--max_extra_length=2", "--window=50"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENVIRONMENT,
        cwd=REPO_ROOT,
    )
    process.stdin.write(lines_of(["Open the file."] * 400))
    process.stdin.close()
    first = process.stdout.readline()  # Like `head -1`: one line, then the pipe is closed.
    process.stdout.close()
    code = process.wait(timeout=300)
    stderr = process.stderr.read().decode()
    assert first.endswith(b"\n")
    assert code == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr
    assert not [noise for noise in STARTUP_NOISE if noise in stderr], stderr


def read_until(fd, predicate, timeout):
    """Bytes read from `fd` until `predicate(bytes)` holds or `timeout` seconds pass."""
    data, deadline = b"", time.monotonic() + timeout
    while not predicate(data) and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:
                break
            if not chunk:
                break
            data += chunk
    return data


@pytest.mark.slow  # a run of the model
def test_terminal_lines_are_answered_at_once_and_ctrl_c_ends_cleanly(tiny_run, python_translator):
    """Through a pseudo-terminal: the first answer arrives while stdin is still open; Ctrl-C
    (SIGINT) then ends the run with status 130 and no traceback."""
    model_dir, _ = tiny_run
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        COMMAND + [f"--model_dir={model_dir}", *SEARCH],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENVIRONMENT,
        cwd=REPO_ROOT,
    )
    os.close(follower)
    try:
        expected, _ = python_translator.translate(["Open the file.", "Print"])
        os.write(leader, b"Open the file.\n")
        first = read_until(process.stdout.fileno(), lambda data: b"\n" in data, timeout=120)
        assert first.decode().split("\n")[0] == expected[0]
        os.write(leader, b"Print\n")
        second = read_until(process.stdout.fileno(), lambda data: b"\n" in data, timeout=60)
        assert second.decode().split("\n")[0] == expected[1]
        assert process.poll() is None  # Still waiting for the next line.
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=60)
        stderr = process.stderr.read().decode()
        assert code == 130, stderr
        assert "interrupted" in stderr and "Traceback" not in stderr
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)


@pytest.mark.slow  # runs of the model
def test_nosplit_sentences_cuts_and_reports_long_lines(tiny_run, python_translator, translate_here):
    model_dir, _ = tiny_run
    inputs = ["Print", " ".join(["Open the file."] * 20)]
    lines, error, stderr = translate_here(
        f"--model_dir={model_dir}", "--nosplit_sentences", "--max_input_length=12", *SEARCH, stdin=lines_of(inputs)
    )
    assert error is None, stderr
    translator = Translator(
        python_translator.model,
        python_translator.tokenizer,
        search=SearchConfig(max_extra_length=6, max_input_length=12),
        batch_size=2,
    )
    assert lines == translator.translate(inputs, split_sentences=False)[0] and translator.truncated_indices == [1]
    assert "<stdin> line 2: longer than the maximum input length of 12 tokens" in stderr
    assert stderr.count("longer than the maximum input length") == 1


@pytest.mark.slow  # runs of the model
def test_jsonl_records_and_markup_are_the_translators_lines(tiny_run, python_translator, translate_here):
    """--format=jsonl writes `translate_lines`' records, keys in their order; --markup puts the tags
    back (in both formats) and its notes go to stderr by line."""
    model_dir, _ = tiny_run
    inputs = [DOCUMENT, "", "<b>Open</b> the file. Print %1 now.", "<b></b><br/>"]
    flags_used = [f"--model_dir={model_dir}", "--markup", *SEARCH, "--min_length_ratio=1"]
    lines, error, stderr = translate_here(*flags_used, "--format=jsonl", "--alignments", stdin=lines_of(inputs))
    assert error is None, stderr
    translator = Translator(
        python_translator.model,
        python_translator.tokenizer,
        python_translator.search.override(min_length_ratio=1.0),
        batch_size=2,
    )
    records = translator.translate_lines(inputs, markup=True, alignments=True)
    assert any(record.notes for record in records) and records[3].text == "<b></b><br/>"
    for number, (line, record) in enumerate(zip(lines, records, strict=True), start=1):
        written = json.loads(line)
        keys = ["translation", "score", "confidence", "tokens", "token_scores", "alignment"]
        assert list(written) == keys + (["notes"] if record.notes else [])
        assert (written["translation"], written["tokens"], written["alignment"]) == (
            record.text,
            record.tokens,
            record.alignment,
        )
        assert abs(written["score"] - record.score) < 1e-3 and abs(written["confidence"] - record.confidence) < 1e-3
        assert written["token_scores"] == pytest.approx(record.token_scores, abs=1e-3)
        assert written.get("notes", []) == list(record.notes)
        for note in record.notes:
            assert f"translate.py: <stdin> line {number}: {note}" in stderr
    texts, error, _ = translate_here(*flags_used, stdin=lines_of(inputs))
    assert error is None and texts == [record.text for record in records]
    with pytest.raises(flags.IllegalFlagValueError, match="--markup puts tags back .* not with --n_best"):
        translate_here(*flags_used, "--n_best=2")


@pytest.mark.slow  # runs of the model
def test_jsonl_n_best_lists_and_lines_of_several_sentences(tiny_run, python_translator, translate_here):
    model_dir, _ = tiny_run
    inputs = ["Print", "Open the file."]
    lines, error, stderr = translate_here(
        f"--model_dir={model_dir}", "--format=jsonl", "--n_best=2", *SEARCH, stdin=lines_of(inputs)
    )
    assert error is None, stderr
    texts, scores = python_translator.translate(inputs, n_best=2)
    pairs = python_translator.score(
        [source for source in inputs for _ in range(2)], [t for line in texts for t in line]
    )
    for index, line in enumerate(lines):
        written = json.loads(line)
        assert list(written) == ["translation", "score", "confidence", "n_best"]
        assert [item["translation"] for item in written["n_best"]] == texts[index]
        assert written["translation"] == texts[index][0]
        for item, score, pair in zip(written["n_best"], scores[index], pairs[2 * index : 2 * index + 2]):
            assert abs(item["score"] - score) < 1e-3 and abs(item["confidence"] - math.exp(pair.average)) < 1e-3
    _, error, _ = translate_here(f"--model_dir={model_dir}", "--n_best=2", *SEARCH, stdin=lines_of(["Print", DOCUMENT]))
    assert error == (
        "<stdin> line 2: --n_best needs one sentence per line; this line has 3 sentences; pass --nosplit_sentences "
        "(split_sentences=False) or one sentence per line"
    )


def test_nul_bytes_are_refused_by_line_and_an_empty_file_gives_nothing(tiny_run, tmp_path, translate_here):
    """A file with a NUL byte is refused before any line is translated; stdin as it is read."""
    model_dir, _ = tiny_run
    path = tmp_path / "nul.en"
    path.write_bytes(b"Print\nOpen the file.\nOp\x00en\n")
    lines, error, _ = translate_here(f"--model_dir={model_dir}", f"--input={path}", "--window=1", *SEARCH)
    assert lines == [] and error.startswith(f"{path} line 3: a NUL byte at byte 2 of the line")
    lines, error, _ = translate_here(f"--model_dir={model_dir}", "--window=1", *SEARCH, stdin=b"Print\nOp\x00en\n")
    assert len(lines) == 1 and error.startswith("<stdin> line 2: a NUL byte at byte 2 of the line")
    (tmp_path / "empty.en").write_bytes(b"")
    lines, error, _ = translate_here(f"--model_dir={model_dir}", f"--input={tmp_path / 'empty.en'}", *SEARCH)
    assert lines == [] and error is None
