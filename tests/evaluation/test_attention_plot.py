"""`evaluation.attention_plot`: labels drawn without missing-glyph boxes (SentencePiece's word marker,
letters outside ASCII), with the font found here and with Pillow's built-in one."""

import dataclasses
import io

import numpy as np
import pytest
from PIL import Image, ImageFont

from evaluation import attention_plot, evaluator
from inference.protocol import DEFAULT_ALIGNMENT, AlignmentConfig
from inference.translator import Translator
from models.search_config import SearchConfig

PIECES = ["\u2581Öffnen", "\u2581Sie", "\u2581die", "\u2581Datei", "."]


def missing_glyphs(text, font):
    """The characters of `text` that `font` draws as its missing-glyph box."""
    box = attention_plot._glyph(font, attention_plot.NO_GLYPH)
    return [
        character for character in text if not character.isascii() and attention_plot._glyph(font, character) == box
    ]


BUILTIN_FONT = ImageFont.load_default(size=attention_plot.FONT_SIZE)


def test_the_builtin_font_draws_the_word_marker_and_umlauts_as_boxes():
    assert missing_glyphs("\u2581Ö", BUILTIN_FONT) == ["\u2581", "Ö"]


@pytest.mark.parametrize("font", [attention_plot.label_font(), BUILTIN_FONT], ids=["found", "builtin"])
def test_labels_have_no_missing_glyphs(font):
    for piece in PIECES:
        label = attention_plot.displayable(piece, font)
        assert missing_glyphs(label, font) == [], (piece, label)
    assert attention_plot.displayable("\u2581Datei", font) == "_Datei"
    assert attention_plot.displayable("\u2581Öffnen", font) in ("_Öffnen", "_Offnen")


def test_draw_heatmap_writes_a_png_of_the_matrix_size(tmp_path):
    weights = np.eye(len(PIECES), dtype="float32")
    path = attention_plot.draw_heatmap(weights, PIECES, PIECES, str(tmp_path / "a.png"), title="Öffnen Sie die Datei.")
    with Image.open(path) as image:
        assert image.width > len(PIECES) * attention_plot.CELL and image.height > len(PIECES) * attention_plot.CELL


@pytest.mark.slow  # a recipe run copied and plotted
def test_the_plotted_translation_is_the_scored_one(tiny_run, tmp_path, monkeypatch):
    """The plot searches as the evaluator's translator does, min_length_ratio included (a recipe's
    run records one): the plotted output is the scored translation of the sentence."""
    model_dir, _ = tiny_run
    sentence = "Open the file."
    src, output = tmp_path / "src.en", tmp_path / "out.de"
    src.write_text(sentence + "\n", encoding="utf-8")
    plotted = []
    draw = attention_plot.attention_matrix

    def recording(model, tokenizer, source, translation_ids, *attention):
        plotted.append(tokenizer.detokenize(np.asarray([translation_ids])).numpy()[0].decode("utf-8"))
        return draw(model, tokenizer, source, translation_ids, *attention)

    monkeypatch.setattr(attention_plot, "attention_matrix", recording)
    config = evaluator.EvalConfig(
        model_dir=model_dir,
        src=str(src),
        output=str(output),
        plot_attention=(sentence,),
        plot_dir=str(tmp_path / "plots"),
        search=SearchConfig(beam_size=2, alpha=1.0, min_length_ratio=2.0),
        progress=False,
    )
    evaluator.evaluate(config, out=io.StringIO())
    scored = output.read_text(encoding="utf-8").rstrip("\n")
    unconstrained = evaluator.evaluate(
        dataclasses.replace(config, search=SearchConfig(beam_size=2, alpha=1.0), plot_attention=()), out=io.StringIO()
    )
    assert unconstrained["sentences"] == 1 and output.read_text(encoding="utf-8").rstrip("\n") != scored
    assert plotted == [scored]


@pytest.mark.slow  # Three alignments, each batched and eager.
def test_the_alignment_is_read_from_the_plotted_matrix(tiny_model):
    """The translator's alignment (batched, compiled) is the argmax alignment of the matrix the plot
    draws for the sentence (alone, eager), for the default attention and for a chosen layer and head."""
    model, tokenizer, _, _ = tiny_model
    sentence = "The document could not be saved because the disk is full."
    # The tiny run, left alone, may end the translation at once: a minimum length gives it words.
    search = SearchConfig(beam_size=2, max_extra_length=6, min_length_ratio=0.5)
    translator = Translator(model, tokenizer, search, batch_size=2)
    for attention in (DEFAULT_ALIGNMENT, AlignmentConfig(layer=-1, head=1)):
        matrix = attention_plot.translated_attention(model, tokenizer, sentence, search, attention)
        texts, _, alignments = translator.translate([sentence, "Print"], alignments=attention)
        assert tokenizer.detokenize(np.asarray([matrix.target_ids])).numpy()[0].decode("utf-8") == texts[0]
        assert matrix.weights.shape == (len(matrix.target_pieces), len(matrix.source_pieces))
        assert alignments[0] == matrix.alignment() != ""
