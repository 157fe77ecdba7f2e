"""benchmarks/markup.py: completeness and tag placement on hand-made outputs, and a smoke run on the
shared tiny run over a small hand-made test set."""

import json

import pytest

SOURCE = 'Choose <span class="menuitem">File - New</span> and <b>Save</b> in $[officename] (%1).'
REFERENCE = 'Wählen Sie <span class="menuitem">Datei – Neu</span> und <b>Speichern</b> in $[officename] (%1).'


def test_outputs_are_complete_when_well_formed_with_every_tag_and_placeholder(benchmark_script):
    markup, _ = benchmark_script("markup")
    outputs = [
        REFERENCE,  # as the reference: complete, both tags placed
        'Wählen Sie <span class="menuitem">Datei</span> – Neu und <b>Speichern</b> in $[officename] (%1).',
        'Wählen Sie <span class="menuitem">Datei – Neu und <b>Speichern</span></b> in $[officename] (%1).',
        'Wählen Sie <span class="menuitem">Datei – Neu</span> und Speichern in $[officename] (%1).',
        'Wählen Sie <span class="menuitem">Datei – Neu</span> und <b>Speichern</b> in LibreOffice (%1).',
    ]
    found = markup.measure([SOURCE] * 5, [REFERENCE] * 5, outputs, ["Wählen Sie Datei – Neu"] * 5, "de")
    assert found["pairs"] == 5 and found["tags"] == 10
    # Not complete: the crossed tags, the missing <b>, the placeholder written out.
    assert found["complete"] == pytest.approx(2 / 5)
    # Placed: 2 + 1 (menuitem encloses {datei}) + 0 (not paired) + 1 (<b> missing) + 2.
    assert found["placed"] == pytest.approx(6 / 10)
    assert found["overlap"] == pytest.approx((2 + 1.5 + 0 + 1 + 2) / 10)
    extra = markup.measure([SOURCE], [REFERENCE], [REFERENCE + " %CSS"], ["x"], "de")
    assert extra["complete"] == 1.0 and extra["invented"] == 1 and found["invented"] == 0
    assert markup.strip_tags(REFERENCE) == "Wählen Sie Datei – Neu und Speichern in LibreOffice (%1)."
    assert found["bleu_markup"] > found["bleu_plain"]


def test_tagged_reads_pairs_and_counts(benchmark_script):
    markup, _ = benchmark_script("markup")
    paired, counts = markup.tagged('<a href="x.html">Ein <b>Wort</b></a><br/> %1')
    assert paired == [('<a href="x.html">', frozenset({"ein", "wort"})), ("<b>", frozenset({"wort"}))]
    assert counts == {'<a href="x.html">': 1, "<b>": 1, "</b>": 1, "</a>": 1, "<br/>": 1, "%1": 1}
    assert markup.tagged("<b>offen")[0] is None and markup.tagged("<b><i>x</b></i>")[0] is None


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_a_smoke_run_translates_the_test_set_with_markup(benchmark_script, tiny_run, tmp_path, capsys):
    markup, _ = benchmark_script("markup")
    test_set = tmp_path / "markup.tsv"
    rows = [("a#1", SOURCE, REFERENCE), ("a#2", "Click <b>OK</b>.", "Klicken Sie auf <b>OK</b>.")]
    test_set.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")
    output = tmp_path / "markup.json"
    summary = markup.main([f"--model_dir={tiny_run[0]}", f"--test_set={test_set}", f"--output={output}"])
    assert json.loads(output.read_text()) == summary
    result = summary["results"]
    assert result["pairs"] == 2 and result["tags"] == 3
    assert result["complete"] == 1.0  # markup restoration puts back every tag and placeholder
    assert 0 <= result["placed"] <= result["overlap"] <= 1 and 0 <= result["bleu_markup"] <= 100
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("| 2 | 3 |")]
