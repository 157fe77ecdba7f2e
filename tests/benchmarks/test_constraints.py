"""benchmarks/constraints.py on the shared tiny run: phrases drawn from the references, placed by
the constrained search far more often than by the plain one, and the table and JSON written."""

import json

import pytest


@pytest.mark.slow  # The plain and the constrained search traced on the shared run: the full tier runs it.
def test_the_constrained_search_places_the_reference_phrases(benchmark_script, tiny_run, tmp_path, capsys):
    script, _ = benchmark_script("constraints")
    model_dir, _ = tiny_run
    output = tmp_path / "constraints.json"
    summary = script.main([f"--model_dir={model_dir}", "--sentences=8", "--batch_size=8", f"--output={output}"])
    assert json.loads(output.read_text()) == summary
    assert summary["sentences"] == 8 and 8 <= summary["phrases"] <= 16
    plain, constrained = summary["results"]["unconstrained"], summary["results"]["constrained"]
    assert constrained["phrases_found"] >= 0.9 > plain["phrases_found"]
    assert constrained["unmet"] == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [line.split(" | ")[0] for line in table[1:]] == ["| unconstrained", "| constrained"]


def test_reference_phrases_are_one_or_two_spans_of_the_reference(benchmark_script):
    script, _ = benchmark_script("constraints")
    references = ["Öffnen Sie die Datei.", "Drucken", "", "„Ja“, sagte er, (nein)."] * 5
    constraints = script.reference_phrases(references, seed=3)
    assert constraints == script.reference_phrases(references, seed=3)
    for reference, phrases in zip(references, constraints):
        assert len(phrases) <= 2 and (phrases or not reference.strip())
        words = [word.strip(script.PUNCTUATION) for word in reference.split()]
        for phrase in phrases:
            assert phrase and phrase in " ".join(words) and len(phrase.split()) <= 2
    assert {len(phrases) for phrases in constraints if phrases} == {1, 2}
