"""`inference.saved_model_translator.SavedModelTranslator` on the shared export: target prefixes,
terminology constraints and word alignments through the export's `prefix`, `constrain` and `align`
signatures, as the Python translator gives them, and what it refuses, before the graph runs."""

import json
import os
import random
import shutil

import keras
import numpy as np
import pytest
from tensorflow.core.protobuf import saved_model_pb2

from inference.protocol import AlignmentConfig, AlignmentError, ConstraintError, DocumentError, PrefixError
from inference.saved_model_translator import (
    ExportDirError,
    ExportRequestError,
    SavedModelTranslator,
    describe_search_settings,
)
from inference.translator import Translator
from models.search_config import SearchConfig
from tests.helpers import EXPORT_SETTINGS, SHARED_EXPORT_GROUP

# The shared export loaded and run in this process: the load of tests/export/test_serving_module.py,
# in its process (`tiny_export_translator`).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(SHARED_EXPORT_GROUP)]

# No prefix (None and ""), and an empty source with one, which is translated.
SENTENCES = ["Open the file.", "", "Click OK to save your changes.", "Help"]
PREFIXES = ["Öffnen Sie", "Leer", None, ""]
SEARCH_SETTINGS = ("beam_size", "alpha", "max_extra_length", "max_input_length")


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Overrides tests/conftest.py's, as tests/export/conftest.py's does: seeds Python and NumPy only,
    so that the SentencePiece resources of the shared loaded export stay for the tests of the other
    modules of its group. These tests draw no TensorFlow random numbers."""
    random.seed(1234)
    np.random.seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture
def exported(tiny_export_translator):
    return tiny_export_translator


@pytest.fixture(scope="module")
def python_translator(tiny_model):
    model, tokenizer, _, _ = tiny_model
    return Translator(
        model, tokenizer, SearchConfig(**{name: EXPORT_SETTINGS[name] for name in SEARCH_SETTINGS}), batch_size=2
    )


def test_prefixes_and_alignments_are_the_python_translators(exported, python_translator):
    texts, scores = exported.translate(SENTENCES, prefixes=PREFIXES)
    expected, expected_scores = python_translator.translate(SENTENCES, prefixes=PREFIXES)
    assert texts == expected and all(text.startswith(prefix or "") for text, prefix in zip(texts, PREFIXES))
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
    assert texts == expected and all(
        phrase in text for text, phrases in zip(texts[:3], constraints) for phrase in phrases or []
    )
    np.testing.assert_allclose(scores, expected_scores, atol=1e-4)
    assert exported.unmet_indices == python_translator.unmet_indices == [3]
    assert texts[3] == exported.translate(SENTENCES[3:])[0][0]  # not all placed: the plain translation
    assert exported.empty_indices == python_translator.empty_indices == []
    # No phrase at all: the plain search.
    assert exported.translate(SENTENCES, constraints=[None, [], None, []]) == exported.translate(SENTENCES)


def test_an_export_written_before_the_steering_signatures_is_told_to_export_again(exported, tiny_export, tmp_path):
    """A copy of the shared export without the four signatures, as an older export has none, and
    without the repetition guard, sentence splitting, the stopping rule and the signature list in
    its settings: it has neither of the first two built in, and stops as the exact rule does."""
    from export.serving_module import SIGNATURES

    old = tmp_path / "transformer" / "1"
    shutil.copytree(os.path.join(tiny_export, "1"), old)
    settings_path = old / "assets.extra" / "export_config.json"
    settings = json.loads(settings_path.read_text())
    assert settings["export"].pop("no_repeat_ngram_size") == 0 == exported.search.no_repeat_ngram_size
    assert settings["export"].pop("split_sentences") is True
    assert settings["export"].pop("stopping") == "exact"
    assert settings["export"].pop("signatures") == list(SIGNATURES)
    settings_path.write_text(json.dumps(settings))
    saved_model = saved_model_pb2.SavedModel()
    saved_model.ParseFromString((old / "saved_model.pb").read_bytes())
    for meta_graph in saved_model.meta_graphs:
        removed = ("prefix", "align", "constrain", "markup")
        for name in removed:
            del meta_graph.signature_def[name]
        objects = meta_graph.object_graph_def.nodes
        [signatures] = [child.node_id for child in objects[0].children if child.local_name == "signatures"]
        kept = [child for child in objects[signatures].children if child.local_name not in removed]
        del objects[signatures].children[:]
        objects[signatures].children.extend(kept)
    (old / "saved_model.pb").write_bytes(saved_model.SerializeToString())
    translator = SavedModelTranslator(str(old.parent))
    assert (translator.search.no_repeat_ngram_size, translator.search.stopping) == (0, "exact")
    assert "no_repeat_ngram_size=0, shortlist=0, stopping=exact (from" in describe_search_settings(str(old.parent))
    with pytest.raises(
        ValueError, match="no_repeat_ngram_size=2 differs from the export's built-in no_repeat_ngram_size=0"
    ):
        translator.translate(
            SENTENCES, search=translator.search.override(no_repeat_ngram_size=2), split_sentences=False
        )
    # One sentence per input: the same translations, whole or split.
    texts, scores = translator.translate(SENTENCES, split_sentences=False)
    expected, expected_scores = exported.translate(SENTENCES)
    assert texts == expected
    np.testing.assert_allclose(scores, expected_scores, atol=1e-5)
    with pytest.raises(ExportRequestError, match=r"translates each input whole \(split_sentences=false in .*1/assets"):
        translator.translate(SENTENCES)
    with pytest.raises(ExportRequestError, match=r"--nosplit_sentences \(split_sentences=False\) with alignments"):
        exported.translate(SENTENCES, split_sentences=False, alignments=True)
    with pytest.raises(ExportDirError, match="has no 'markup' signature .* before inline tags and placeholders"):
        translator.translate(["Help"], markup=True, split_sentences=False)
    with pytest.raises(
        ExportDirError, match="has no 'prefix' signature .* before target prefixes were exported; export"
    ):
        translator.translate(["Help"], prefixes=["Hilfe"], split_sentences=False)
    with pytest.raises(
        ExportDirError, match="has no 'align' signature .* before word alignments were exported; export"
    ):
        translator.translate(["Help"], alignments=True, split_sentences=False)
    with pytest.raises(
        ExportDirError, match="has no 'constrain' signature .* before terminology constraints were exported"
    ):
        translator.translate(["Help"], constraints=[["Hilfe"]], split_sentences=False)


# Documents: two sentences, one, none.
LINES = ["Open the file. Click OK to save your changes.", "Help", "", "Click <b>OK</b> to save %1 changes."]


def test_documents_n_best_and_constraints_while_splitting(exported):
    with pytest.raises(
        DocumentError, match=r"^line 1: --n_best needs one sentence per line; this line has 2 sentences"
    ):
        exported.translate(LINES, n_best=2)
    with pytest.raises(DocumentError, match=r"^line 1: --constraints needs one sentence per line") as error:
        exported.translate(LINES, constraints=[None, ["Hilfe"], None, None])
    assert error.value.index == 0
    texts, scores = exported.translate(LINES[1:], n_best=2)  # one sentence a line: the n_best signature
    assert len(texts[0]) == 2 and texts[1] == ["", ""]
    # Taken whole (by the prefix signature, without prefixes): the lines as one sentence each.
    whole, whole_scores = exported.translate(LINES, split_sentences=False)
    assert exported.truncated_indices == []
    [[best]], [[best_score]] = exported.translate(LINES[:1], n_best=1, split_sentences=False)
    assert whole[0] == best and whole_scores[0] == pytest.approx(best_score, abs=1e-5)
    assert whole[2] == "" and whole_scores[2] == 0.0
    # A sentence over max_input_length (48) is cut again when split, and cut to it when whole.
    exported.translate(["Click " * 60])
    assert exported.truncated_indices == []
    exported.translate(["Help", "Click " * 60], split_sentences=False)
    assert exported.truncated_indices == [1]
    assert whole[1] == exported.translate(LINES[1:2])[0][0]


def test_translate_lines_and_markup_are_the_signatures_outputs(exported, tiny_export):
    import tensorflow as tf

    loaded = exported._loaded
    records = exported.translate_lines(LINES, alignments=True)
    aligned = loaded.signatures["align"](inputs=tf.constant(LINES))
    assert [record.text for record in records] == exported.translate(LINES)[0]
    for row, record in enumerate(records):
        assert record.text == aligned["translations"].numpy()[row].decode("utf-8")
        assert record.alignment == aligned["alignments"].numpy()[row].decode("utf-8")
        assert len(record.tokens) == len(record.token_scores) == aligned["token_counts"].numpy()[row]
        expected = np.exp(np.mean(record.token_scores)) if record.token_scores else 1.0
        np.testing.assert_allclose(record.confidence, expected, rtol=1e-4)
        assert record.notes == ()
    assert exported.empty_indices == [2] and records[2].confidence == 1.0 and records[2].tokens == []
    marked = loaded.signatures["markup"](inputs=tf.constant(LINES))
    texts, scores = exported.translate(LINES, markup=True)
    assert texts == [text.decode("utf-8") for text in marked["translations"].numpy()]
    records = exported.translate_lines(LINES, markup=True)
    assert [record.text for record in records] == texts and "%1" in texts[3]
    assert [record.notes for record in records] == [
        tuple(notes.decode("utf-8").split("\n")) if notes else () for notes in marked["notes"].numpy()
    ]
    with pytest.raises(ExportRequestError, match="markup with n-best lists"):
        exported.translate(LINES[1:], markup=True, n_best=2)
    with pytest.raises(ExportRequestError, match="markup with alignments"):
        exported.translate_lines(LINES, markup=True, alignments=True)
    with pytest.raises(ExportRequestError, match="translate_lines with prefixes"):
        exported.translate_lines(LINES, prefixes=["Öffnen", None, None, None])
