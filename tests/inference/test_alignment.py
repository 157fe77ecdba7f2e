"""`inference.alignment`: pieces to words on hand-built matrices (known answers), the Pharaoh
string, the choice of layer and head; the translator's alignments over the shared tiny model."""

import numpy as np
import pytest

from common.special_ids import EOS_ID, UNK_ID
from inference.alignment import AttentionMatrix, pharaoh, word_indices, word_weights
from inference.protocol import AlignmentConfig, AlignmentError
from inference.translator import Translator
from models.search_config import SearchConfig

M = "\u2581"  # SentencePiece's word marker
WORD = 100  # any id of an ordinary piece

# "Open the file." -> "Öffnen Sie" with the EOS of each; "file." is three pieces, "Öffnen" two.
SOURCE = [M + "Open", M + "the", M + "fi", "le", ".", "</s>"]
TARGET = [M + "Öff", "nen", M + "Sie", "</s>"]
# One row per target piece, one column per source piece.
WEIGHTS = np.array(
    [
        [0.60, 0.10, 0.10, 0.05, 0.05, 0.10],  # Öff
        [0.20, 0.25, 0.05, 0.05, 0.00, 0.45],  # nen: most on the source EOS, which is no word
        [0.30, 0.00, 0.15, 0.15, 0.15, 0.25],  # Sie: "file." holds 0.45 over three pieces, "Open" 0.30 in one
        [0.00, 0.00, 0.00, 0.00, 0.10, 0.90],  # EOS: no word
    ],
    "float32",
)


def ids_of(pieces):
    return [EOS_ID if piece == "</s>" else UNK_ID if piece == "<unk>" else WORD for piece in pieces]


def test_words_start_at_the_word_marker_and_eos_is_no_word():
    assert word_indices(ids_of(SOURCE), SOURCE) == [0, 1, 2, 2, 2, -1]
    assert word_indices(ids_of(TARGET), TARGET) == [0, 0, 1, -1]
    # A first piece without the marker starts the first word.
    assert word_indices(ids_of(["(", M + "a"]), ["(", M + "a"]) == [0, 1]


def test_a_bare_marker_joins_the_next_piece_and_unk_is_a_word_of_its_own():
    # Detokenized: "a  x ⁇ y" (the bare marker a space of its own, <unk> as " ⁇ "), four words; a
    # trailing bare marker is no word.
    pieces = [M + "a", M, M + "x", "<unk>", "y", M, "</s>"]
    assert word_indices(ids_of(pieces), pieces) == [0, 1, 1, 2, 3, -1, -1]


def test_source_pieces_are_summed_and_target_pieces_averaged():
    matrix = word_weights(WEIGHTS, word_indices(ids_of(SOURCE), SOURCE), word_indices(ids_of(TARGET), TARGET))
    expected = np.array(
        [
            [(0.60 + 0.20) / 2, (0.10 + 0.25) / 2, (0.20 + 0.10) / 2],  # Öffnen: the mean of its two rows
            [0.30, 0.00, 0.45],  # Sie: "file." sums its three pieces
        ]
    )
    assert np.max(np.abs(matrix - expected)) < 1e-6
    assert pharaoh(matrix) == "0-0 2-1"


def test_the_attention_matrix_aligns_its_words():
    matrix = AttentionMatrix(WEIGHTS, ids_of(SOURCE), ids_of(TARGET), SOURCE, TARGET)
    assert matrix.alignment() == "0-0 2-1"


def test_a_side_without_words_gives_no_links():
    assert pharaoh(np.zeros((2, 0), "float32")) == ""
    assert pharaoh(np.zeros((0, 3), "float32")) == ""
    only_eos = AttentionMatrix(np.ones((1, 6), "float32"), ids_of(SOURCE), [EOS_ID], SOURCE, ["</s>"])
    assert only_eos.alignment() == ""


def test_the_default_attention_is_the_penultimate_layer_averaged_over_heads():
    assert AlignmentConfig().resolve(num_layers=6, num_heads=8) == (4, None)
    assert AlignmentConfig().resolve(num_layers=1, num_heads=8) == (0, None)
    assert AlignmentConfig(layer=-1, head=7).resolve(num_layers=6, num_heads=8) == (5, 7)
    with pytest.raises(AlignmentError, match="alignment layer 6 is out of range: the decoder has 6 layers"):
        AlignmentConfig(layer=6).resolve(num_layers=6, num_heads=8)
    with pytest.raises(AlignmentError, match="alignment head 8 is out of range: the attention has 8 heads"):
        AlignmentConfig(head=8).resolve(num_layers=6, num_heads=8)


def links(alignment):
    return [tuple(int(i) for i in link.split("-")) for link in alignment.split()]


def test_greedy_translations_get_one_link_per_target_word_within_both_sentences(tiny_model):
    model, tokenizer, _, _ = tiny_model
    sentences = ["Open the file.", "", "The document could not be saved because the disk is full.", "Print"]
    translator = Translator(model, tokenizer, search=SearchConfig(beam_size=1, max_extra_length=6), batch_size=4)
    texts, _, alignments = translator.translate(sentences, alignments=True)
    assert alignments[1] == ""
    for sentence, text, alignment in zip(sentences, texts, alignments):
        assert [target for _, target in links(alignment)] == list(range(len(text.split()))), (text, alignment)
        assert all(0 <= source < len(sentence.split()) for source, _ in links(alignment)), (sentence, alignment)


def test_each_of_the_n_best_of_a_beam_gets_its_own_alignment(tiny_model):
    model, tokenizer, _, _ = tiny_model
    translator = Translator(model, tokenizer, search=SearchConfig(beam_size=3, max_extra_length=6), batch_size=2)
    sentences = ["Open the file.", "Close the window."]
    lists, _, alignments = translator.translate(sentences, n_best=3, alignments=AlignmentConfig(layer=-1))
    for texts, hypotheses in zip(lists, alignments):
        assert len(hypotheses) == 3
        for text, alignment in zip(texts, hypotheses):
            assert [target for _, target in links(alignment)] == list(range(len(text.split())))
    with pytest.raises(AlignmentError, match="alignment layer 2 is out of range: the decoder has 2 layers"):
        translator.translate(sentences, alignments=AlignmentConfig(layer=2))


def test_a_students_alignments_read_its_decoders_layers(tiny_model):
    """A deep encoder and a one-layer decoder (a distilled student): the default alignment reads the
    decoder's only layer, and a layer is checked against the decoder's depth, not the encoder's."""
    from models.transformer import Transformer
    from tests.helpers import TINY_MODEL

    _, tokenizer, _, _ = tiny_model
    student = Transformer(tokenizer.vocabulary_size, **dict(TINY_MODEL, num_layers=3), num_decoder_layers=1)
    student.build()
    translator = Translator(student, tokenizer, search=SearchConfig(beam_size=1, max_extra_length=4), batch_size=2)
    sentences = ["Open the file.", "Print"]
    texts, _, alignments = translator.translate(sentences, alignments=True)
    for text, alignment in zip(texts, alignments):
        assert [target for _, target in links(alignment)] == list(range(len(text.split())))
    with pytest.raises(AlignmentError, match="alignment layer 1 is out of range: the decoder has 1 layers"):
        translator.translate(sentences, alignments=AlignmentConfig(layer=1))
