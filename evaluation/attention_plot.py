"""PNG heatmaps of the encoder-decoder attention of translated sentences (section 3.2.3): the
`inference.alignment.AttentionMatrix` the word alignments read, drawn with Pillow (which
TensorBoard already requires)."""

import functools
import os
import unicodedata

import keras
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from common.special_ids import EOS_ID
from inference.alignment import WORD_MARKER, attention_matrix
from inference.protocol import DEFAULT_ALIGNMENT
from models.search_config import DEFAULT_SEARCH
from models.translation import translate_ids

CELL = 22
MARGIN = 6
FONT_SIZE = 11
# A code point no font draws: its rendering is the font's missing-glyph box.
NO_GLYPH = "\U0010fffd"


@functools.cache
def label_font():
    """DejaVu Sans (Latin, Greek, Cyrillic...) when the system has it, else Pillow's built-in
    font (ASCII only)."""
    try:
        return ImageFont.truetype("DejaVuSans.ttf", FONT_SIZE)
    except OSError:
        return ImageFont.load_default(size=FONT_SIZE)


def _glyph(font, character):
    mask = font.getmask(character)
    return mask.size, bytes(mask)


def displayable(text, font):
    """`text` as `font` can draw it: the word marker as "_" (few fonts have U+2581), a missing
    character as its ASCII base letter (Ö -> O) or "?", never the missing-glyph box."""
    missing = _glyph(font, NO_GLYPH)
    characters = []
    for character in text.replace(WORD_MARKER, "_"):
        if character.isascii() or _glyph(font, character) != missing:
            characters.append(character)
        else:
            base = unicodedata.normalize("NFKD", character).encode("ascii", "ignore").decode("ascii")
            characters.append(base or "?")
    return "".join(characters)


def draw_heatmap(weights, source_pieces, target_pieces, path, title=""):
    """Writes a PNG: one row per output piece, one column per source piece, darker = more weight."""
    font = label_font()
    source_pieces = [displayable(piece, font) for piece in source_pieces]
    target_pieces = [displayable(piece, font) for piece in target_pieces]
    title = displayable(title, font)
    measure = ImageDraw.Draw(Image.new("L", (1, 1)))

    def width(text):
        return int(measure.textlength(text, font=font))

    left = MARGIN * 2 + max([width(p) for p in target_pieces] + [0])
    top = MARGIN * 3 + max([width(p) for p in source_pieces] + [0]) + (CELL if title else 0)
    rows, columns = weights.shape
    image = Image.new("RGB", (left + columns * CELL + MARGIN, top + rows * CELL + MARGIN), "white")
    draw = ImageDraw.Draw(image)
    if title:
        draw.text((MARGIN, MARGIN), title, fill="black", font=font)
    scale = weights / max(float(weights.max()), 1e-9)
    for row in range(rows):
        for column in range(columns):
            shade = int(255 * (1.0 - scale[row, column]))
            box = (left + column * CELL, top + row * CELL, left + (column + 1) * CELL - 1, top + (row + 1) * CELL - 1)
            draw.rectangle(box, fill=(shade, shade, 255))
        draw.text((MARGIN, top + row * CELL + 5), target_pieces[row], fill="black", font=font)
    for column, piece in enumerate(source_pieces):
        label = Image.new("RGB", (width(piece) + 2, CELL - 4), "white")
        ImageDraw.Draw(label).text((0, 2), piece, fill="black", font=font)
        label = label.rotate(90, expand=True)
        image.paste(label, (left + column * CELL + 2, top - MARGIN - label.height))
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    image.save(path)
    return path


def translated_attention(
    model, tokenizer, source, search=DEFAULT_SEARCH, attention=DEFAULT_ALIGNMENT, source_tokenizer=None
):
    """The `AttentionMatrix` that `plot_attention` draws: `source` translated alone and eagerly with
    `search`, not cut to `search.max_input_length` (the plot shows the whole sentence)."""
    source_ids = [int(i) for i in (source_tokenizer or tokenizer).tokenize([source]).to_list()[0]] + [EOS_ID]
    ids, _ = translate_ids(model, keras.ops.convert_to_tensor(np.asarray([source_ids], "int32")), search)
    return attention_matrix(
        model, tokenizer, source, keras.ops.convert_to_numpy(ids)[0, 0], attention, source_tokenizer
    )


def plot_attention(
    model, tokenizer, sources, output_dir, search=DEFAULT_SEARCH, attention=DEFAULT_ALIGNMENT, source_tokenizer=None
):
    """Writes each of `sources`' attention (`translated_attention`) as `attention-<n>.png` in
    `output_dir`; returns the paths.

    Raises:
        ValueError: an empty sentence (nothing to attend to).
        AlignmentError: a layer or head the model does not have.
    """
    paths = []
    for number, source in enumerate(sources, start=1):
        if not source.strip():
            raise ValueError(f"--plot_attention sentence {number} is empty")
        matrix = translated_attention(model, tokenizer, source, search, attention, source_tokenizer)
        path = os.path.join(output_dir, f"attention-{number}.png")
        paths.append(draw_heatmap(matrix.weights, matrix.source_pieces, matrix.target_pieces, path, title=source[:80]))
    return paths
