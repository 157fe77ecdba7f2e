"""`evaluation.attention_plot`: labels drawn without missing-glyph boxes (SentencePiece's word marker,
letters outside ASCII), with the font found here and with Pillow's built-in one."""

import numpy as np
import pytest
from PIL import Image, ImageFont

from evaluation import attention_plot

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
