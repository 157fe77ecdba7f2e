"""benchmarks/documents.py: the documents' sizes and joins by hand, and a smoke run on the shared
tiny run (a few pairs of test.ding) read back from its table and JSON."""

import json

import pytest


def test_documents_are_two_to_six_consecutive_pairs_seeded(benchmark_script):
    documents, _ = benchmark_script("documents")
    for count in (2, 3, 7, 50, 101):
        sizes = documents.document_sizes(count, seed=5)
        assert sum(sizes) == count and sizes == documents.document_sizes(count, seed=5)
        assert all(2 <= size <= 7 for size in sizes) and all(size <= 6 for size in sizes[:-1])
    assert len(set(map(tuple, (documents.document_sizes(200, seed) for seed in range(4))))) > 1
    assert documents.joined(["a.", "b.", "c.", "d.", "e."], [2, 3]) == ["a. b.", "c. d. e."]


def test_a_pair_without_a_sentence_end_closes_its_line_and_joins_cut_counts_the_cuts_inside_lines(benchmark_script):
    documents, _ = benchmark_script("documents")
    sources = ["Insert Mode", "Displays the mode. Click it.", "Then go.", "OK", "Save.", "Close."]
    breaks = [not documents.SENTENCE_END.search(source) for source in sources]
    laid_out = documents.paragraphs(sources, [2, 4], breaks)
    assert laid_out == [[["Insert Mode"], ["Displays the mode. Click it."]], [["Then go.", "OK"], ["Save.", "Close."]]]
    # Inside lines, a sentence ends at the joins after "Then go." and "Save.".
    assert documents.joins_cut(laid_out) == 2 / 2
    # On one line each (--one_line), none ends after "Insert Mode" or "OK".
    assert documents.joins_cut(documents.paragraphs(sources, [2, 4], [False] * 6)) == 2 / 4
    assert documents.joins_cut(documents.paragraphs(sources[:1], [1], [True])) is None
    ends = [
        bool(documents.SENTENCE_END.search(text)) for text in ["Go.", 'Say "Yes!"', "(See below.)", "Insert Mode", "a:"]
    ]
    assert ends == [True, True, True, False, False]


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_a_smoke_run_prints_a_row_for_its_split(benchmark_script, tiny_run, tmp_path, capsys):
    documents, _ = benchmark_script("documents")
    output = tmp_path / "documents.json"
    arguments = [f"--model_dir={tiny_run[0]}", "--splits=test.ding", "--pairs=9", "--batch_size=8"]
    summary = documents.main([*arguments, f"--output={output}"])
    assert json.loads(output.read_text()) == summary
    for result in summary["results"].values():
        assert result["pairs"] == 9 and 2 <= result["documents"] <= 4 and result["documents"] <= result["lines"] <= 9
        assert set(result["bleu"]) == set(documents.KINDS)
        assert all(0 <= bleu <= 100 for bleu in [*result["bleu"].values(), result["sentence_bleu"]])
    assert list(summary["results"]) == ["test.ding"]
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| test")]
    assert [row.split(" | ")[:3] for row in rows] == [["| test.ding", "9", str(result["documents"])]]
