"""PNG heatmaps of the encoder-decoder attention of translated sentences, for looking at
alignments (section 3.2.3's third use of attention). Drawn with Pillow, which TensorBoard already
requires, so no plotting library is needed."""

import functools
import os
import unicodedata

import keras
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from data.special_ids import BOS_ID, EOS_ID, PAD_ID
from models.search_config import DEFAULT_SEARCH
from models.translation import cross_attention_weights, translate_ids

CELL = 22
MARGIN = 6
FONT_SIZE = 11
# SentencePiece's word-start marker, U+2581 LOWER ONE EIGHTH BLOCK, drawn as an underscore: few fonts
# have it and it is the piece's only sign of a preceding space.
WORD_MARKER = "\u2581"
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
    """`text` as `font` can draw it: the word marker as "_", and a character the font lacks as its
    ASCII base letter (Ö -> O) or "?", never the missing-glyph box."""
    missing = _glyph(font, NO_GLYPH)
    characters = []
    for character in text.replace(WORD_MARKER, "_"):
        if character.isascii() or _glyph(font, character) != missing:
            characters.append(character)
        else:
            base = unicodedata.normalize("NFKD", character).encode("ascii", "ignore").decode("ascii")
            characters.append(base or "?")
    return "".join(characters)


def _pieces(tokenizer, ids):
    return [piece.decode("utf-8", "replace") for piece in tokenizer.id_to_piece(np.asarray(ids, "int32")).numpy()]


def attention_matrix(model, tokenizer, source, translation_ids):
    """`(weights [target, source] float32, source_pieces, target_pieces)`: the last decoder layer's
    encoder-decoder attention averaged over heads, for the forced output `translation_ids` (the
    search's ids, EOS included)."""
    source_ids = [int(i) for i in tokenizer.tokenize([source]).to_list()[0]] + [EOS_ID]
    target = []
    for token in (int(i) for i in translation_ids):
        if token == PAD_ID:
            break
        target.append(token)
        if token == EOS_ID:
            break
    target = target or [EOS_ID]
    target_input = [BOS_ID] + target[:-1]
    weights = cross_attention_weights(
        model,
        keras.ops.convert_to_tensor(np.asarray([source_ids], "int32")),
        keras.ops.convert_to_tensor(np.asarray([target_input], "int32")),
    )
    weights = keras.ops.convert_to_numpy(weights)[0].mean(axis=0)  # [target, source]
    return weights, _pieces(tokenizer, source_ids), _pieces(tokenizer, target)


def draw_heatmap(weights, source_pieces, target_pieces, path, title=""):
    """Writes a PNG: one row per output piece, one column per source piece, darker = more weight.

    Pieces are drawn with `label_font()` as `displayable` makes them (the word marker as "_")."""
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


def plot_attention(
    model,
    tokenizer,
    sources,
    output_dir,
    search=DEFAULT_SEARCH,
):
    """Translates each of `sources` alone (eagerly, with `search`, a `SearchConfig`, as the
    translator does) and writes its attention as `attention-<n>.png` in `output_dir`; returns the
    paths. The input is not cut to `search.max_input_length`: the plot shows the whole sentence.

    Raises:
        ValueError: an empty sentence (nothing to attend to).
    """
    paths = []
    for number, source in enumerate(sources, start=1):
        if not source.strip():
            raise ValueError(f"--plot_attention sentence {number} is empty")
        source_ids = [int(i) for i in tokenizer.tokenize([source]).to_list()[0]] + [EOS_ID]
        ids, _ = translate_ids(
            model,
            keras.ops.convert_to_tensor(np.asarray([source_ids], "int32")),
            **search.search_arguments(),
        )
        ids = keras.ops.convert_to_numpy(ids)[0, 0]
        weights, source_pieces, target_pieces = attention_matrix(model, tokenizer, source, ids)
        path = os.path.join(output_dir, f"attention-{number}.png")
        paths.append(draw_heatmap(weights, source_pieces, target_pieces, path, title=source[:80]))
    return paths
