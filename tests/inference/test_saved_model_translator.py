"""`inference.saved_model_translator.SavedModelTranslator` on the shared export: target prefixes,
terminology constraints and word alignments through the export's `prefix`, `constrain` and `align`
signatures, as the Python translator gives them, and what it refuses, before the graph runs."""

import json
import os
import shutil

import numpy as np
import pytest
from tensorflow.core.protobuf import saved_model_pb2

from inference.protocol import AlignmentConfig, AlignmentError, ConstraintError, PrefixError
from inference.saved_model_translator import (
    ExportDirError,
    ExportRequestError,
    SavedModelTranslator,
    describe_search_settings,
)
from inference.translator import Translator
from models.search_config import SearchConfig
from tests.helpers import EXPORT_SETTINGS

pytestmark = pytest.mark.slow  # the shared export loaded and run in this process

# No prefix (None and ""), and an empty source with one, which is translated.
SENTENCES = ["Open the file.", "", "Click OK to save your changes.", "Help"]
PREFIXES = ["Öffnen Sie", "Leer", None, ""]
SEARCH_SETTINGS = ("beam_size", "alpha", "max_extra_length", "max_input_length")


@pytest.fixture(scope="module")
def exported(tiny_export):
    return SavedModelTranslator(tiny_export, batch_size=2)


@pytest.fixture(scope="module")
def python_translator(tiny_model):
    model, tokenizer, _, _ = tiny_model
    return Translator(
        model, tokenizer, SearchConfig(**{name: EXPORT_SETTINGS[name] for name in SEARCH_SETTINGS}), batch_size=2
    )


def test_prefixes_and_alignments_are_the_python_translators(exported, python_translator):
    texts, scores = exported.translate(SENTENCES, prefixes=PREFIXES)
    expected, expected_scores = python_translator.translate(SENTENCES, prefixes=PREFIXES)
    assert texts == expected and texts[1].startswith("Leer")
    np.testing.assert_allclose(scores, expected_scores, atol=1e-4)
    assert exported.empty_indices == python_translator.empty_indices == []
    texts, scores, alignments = exported.translate(SENTENCES, alignments=True)
    expected, expected_scores, expected_alignments = python_translator.translate(SENTENCES, alignments=True)
    assert (texts, alignments) == (expected, expected_alignments)
    np.testing.assert_allclose(scores, expected_scores, atol=1e-4)
    assert exported.empty_indices == [1] and alignments[1] == ""
    # The penultimate of the tiny model's two layers, named: the attention the export reads.
    assert exported.translate(SENTENCES, alignments=AlignmentConfig(layer=0))[2] == alignments
    # No prefix with text: the plain search.
    assert exported.translate(SENTENCES, prefixes=["", None, "", ""]) == exported.translate(SENTENCES)


def test_what_the_export_cannot_do_is_refused(exported, python_translator):
    sentences, prefixes = ["Open the file.", "Help"], ["", " ".join(["Datei"] * 40)]
    with pytest.raises(PrefixError) as python_error:
        python_translator.translate(sentences, prefixes=prefixes)
    with pytest.raises(PrefixError) as export_error:
        exported.translate(sentences, prefixes=prefixes)
    assert export_error.value.index == 1 and str(export_error.value) == str(python_error.value)
    for config in (AlignmentConfig(layer=-1), AlignmentConfig(head=1)):
        with pytest.raises(AlignmentError, match=r"reads \(decoder layer 0, the mean over heads, built in at export\)"):
            exported.translate(sentences, alignments=config)
    with pytest.raises(AlignmentError, match="alignment layer 5 is out of range: the decoder has 2 layers"):
        exported.translate(sentences, alignments=AlignmentConfig(layer=5))
    with pytest.raises(AlignmentError, match="word alignments of n-best lists"):
        exported.translate(sentences, n_best=2, alignments=True)
    with pytest.raises(AlignmentError, match="word alignments of prefixed translations"):
        exported.translate(sentences, prefixes=["Öffnen", ""], alignments=True)
    with pytest.raises(ExportRequestError, match="n-best lists with prefixes"):
        exported.translate(sentences, prefixes=["Öffnen", ""], n_best=2)
    with pytest.raises(ExportRequestError, match="n-best lists with constraints"):
        exported.translate(sentences, constraints=[["Datei"], None], n_best=2)
    with pytest.raises(ExportRequestError, match="prefixes and constraints together"):
        exported.translate(sentences, prefixes=["Öffnen", ""], constraints=[["Datei"], None])
    with pytest.raises(AlignmentError, match="word alignments of constrained translations"):
        exported.translate(sentences, constraints=[["Datei"], None], alignments=True)
    for phrases in (["Datei", ""], ["Datei", " ".join(["Datei"] * 40)]):
        with pytest.raises(ConstraintError) as python_error:
            python_translator.translate(sentences, constraints=[None, phrases])
        with pytest.raises(ConstraintError) as export_error:
            exported.translate(sentences, constraints=[None, phrases])
        assert export_error.value.index == 1 and str(export_error.value) == str(python_error.value)
    with pytest.raises(ConstraintError, match=r"constraints\[0\]: a phrase holds a tab"):
        exported.translate(sentences, constraints=[["Datei\tÖffnen"], None])


def test_constraints_are_the_python_translators(exported, python_translator):
    # Two phrases; one on an empty source; none; two that each fit "Help"'s maximum output but not both.
    constraints = [["Datei", "Öffnen"], ["Leer"], None, [" ".join(["Datei"] * 8), " ".join(["Drucken"] * 6)]]
    texts, scores = exported.translate(SENTENCES, constraints=constraints)
    expected, expected_scores = python_translator.translate(SENTENCES, constraints=constraints)
    assert texts == expected and "Datei" in texts[0] and "Leer" in texts[1]
    np.testing.assert_allclose(scores, expected_scores, atol=1e-4)
    assert exported.unmet_indices == python_translator.unmet_indices == [3]
    assert exported.empty_indices == python_translator.empty_indices == []
    # No phrase at all: the plain search.
    assert exported.translate(SENTENCES, constraints=[None, [], None, []]) == exported.translate(SENTENCES)


def test_an_export_written_before_the_steering_signatures_is_told_to_export_again(exported, tiny_export, tmp_path):
    """A copy of the shared export without the three signatures, as an older export has none, and
    without the repetition guard in its settings: it has none built in."""
    old = tmp_path / "transformer" / "1"
    shutil.copytree(os.path.join(tiny_export, "1"), old)
    settings_path = old / "assets.extra" / "export_config.json"
    settings = json.loads(settings_path.read_text())
    assert settings["export"].pop("no_repeat_ngram_size") == 0 == exported.search.no_repeat_ngram_size
    settings_path.write_text(json.dumps(settings))
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((old / "saved_model.pb").read_bytes())
    for meta_graph in saved_model.meta_graphs:
        for name in ("prefix", "align", "constrain"):
            del meta_graph.signature_def[name]
        objects = meta_graph.object_graph_def.nodes
        [signatures] = [child.node_id for child in objects[0].children if child.local_name == "signatures"]
        removed = ("prefix", "align", "constrain")
        kept = [child for child in objects[signatures].children if child.local_name not in removed]
        del objects[signatures].children[:]
        objects[signatures].children.extend(kept)
    (old / "saved_model.pb").write_bytes(saved_model.SerializeToString())
    translator = SavedModelTranslator(str(old.parent))
    assert translator.search.no_repeat_ngram_size == 0
    assert "max_input_length=48, no_repeat_ngram_size=0 (from" in describe_search_settings(str(old.parent))
    with pytest.raises(
        ValueError, match="no_repeat_ngram_size=2 differs from the export's built-in no_repeat_ngram_size=0"
    ):
        translator.translate(SENTENCES, search=translator.search.override(no_repeat_ngram_size=2))
    texts, scores = translator.translate(SENTENCES)
    expected, expected_scores = exported.translate(SENTENCES)
    assert texts == expected
    np.testing.assert_allclose(scores, expected_scores, atol=1e-5)
    with pytest.raises(
        ExportDirError, match="has no 'prefix' signature .* before target prefixes were exported; export"
    ):
        translator.translate(["Help"], prefixes=["Hilfe"])
    with pytest.raises(
        ExportDirError, match="has no 'align' signature .* before word alignments were exported; export"
    ):
        translator.translate(["Help"], alignments=True)
    with pytest.raises(
        ExportDirError, match="has no 'constrain' signature .* before terminology constraints were exported"
    ):
        translator.translate(["Help"], constraints=[["Hilfe"]])
