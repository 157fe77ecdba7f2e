"""translate.py --score --output=FILE: a run stopped after a window goes on from it, as translations
do (the kill itself: tests/evaluation/test_translate_resume.py)."""

PAIRS = ["Open the file.\tÖffnen Sie die Datei.", "Print\tDrucken", "Save\tSpeichern", "Close\tSchließen"]


def test_a_score_run_stopped_after_a_window_goes_on_from_it(translate_here, tiny_run, tmp_path):
    def score_into(path, pairs, *flags):
        stdin = ("\n".join(pairs) + "\n").encode()
        flags = (f"--model_dir={tiny_run[0]}", "--score", f"--output={path}", "--window=2", "--noprogress", *flags)
        _, error, stderr = translate_here(*flags, stdin=stdin)
        return error, stderr

    whole = tmp_path / "whole.tsv"
    assert score_into(whole, PAIRS)[0] is None
    expected = whole.read_text().splitlines()
    assert len(expected) == 4 and not (tmp_path / "whole.tsv.progress").exists()
    # Line 3 without its tab stops the run after the first window's two scores.
    scored = tmp_path / "scored.tsv"
    assert "line 3: no tab" in score_into(scored, [*PAIRS[:2], "Save", PAIRS[3]])[0]
    assert scored.read_text().splitlines() == expected[:2]
    assert (tmp_path / "scored.tsv.progress").exists()
    # Other flags are refused with the file kept; the same flags go on after line 2.
    refused, _ = score_into(scored, PAIRS, "--format=jsonl")
    assert "with other flags" in refused and scored.read_text().splitlines() == expected[:2]
    error, stderr = score_into(scored, PAIRS)
    assert error is None and "going on after line 2" in stderr
    assert scored.read_text().splitlines() == expected
    assert not (tmp_path / "scored.tsv.progress").exists()
