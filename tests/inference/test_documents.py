"""`inference.documents`: a line translated sentence by sentence equals its sentences translated
one by one and joined (texts, summed scores, alignments offset over the line), token scores and
confidence, the length rule, per-line values (prefix, n-best, constraints) and markup restored with
the whole line's alignment."""

import math

import pytest

from inference import documents
from inference.markup import mask, restore
from inference.protocol import DocumentError
from inference.segmentation import segment
from inference.translator import Translator
from models.search_config import SearchConfig

DOCUMENT = "Open the file.  Print the page! Close"


@pytest.fixture(scope="module")
def translator(tiny_model):
    model, tokenizer, _, _ = tiny_model
    # alpha 0: a score is its tokens' log-probability; min_length_ratio 1: the tiny run's outputs
    # are not empty, so that joining, offsets and markup show.
    search = SearchConfig(beam_size=2, alpha=0.0, max_extra_length=3, max_input_length=16, min_length_ratio=1.0)
    return Translator(model, tokenizer, search, batch_size=4)


def words_before(texts):
    return [sum(len(text.split()) for text in texts[:index]) for index in range(len(texts))]


def test_the_length_rule_cuts_only_what_is_over_the_input_length():
    """Stage 1 gives sentences; one of more than L ids (here a word an id, plus EOS) is cut again
    by its character budget; the pieces join back to the line."""
    long = "Select the cells that you want to format, and then choose a style from the list"
    text = f"Open the file. {long}.  Close it."
    counts = lambda pieces: [len(piece.split()) + 1 for piece in pieces]  # noqa: E731
    assert documents.split_lines([text], counts, None, 0) == [segment(text)]
    # 17 ids over 12: a budget of 83 * 11 * 9 // (16 * 10) = 51 characters, cut at the comma.
    [cut] = documents.split_lines([text], counts, 12, 0)
    assert cut.pieces == [
        "Open the file.",
        "Select the cells that you want to format,",
        "and then choose a style from the list.",
        "Close it.",
    ]
    assert cut.join() == text
    [cut] = documents.split_lines([text], counts, 8, 0)  # 32 characters: the clause is cut too
    assert cut.join() == text and max(counts(cut.pieces)) <= 8 and len(cut.pieces) == 6


def test_a_long_line_is_cut_by_length_never_truncated(translator):
    """A 100,000-character line of words without punctuation: every piece within the input length
    (the tokenizer's ids), joined back whole; translated, nothing is cut."""
    line = " ".join(["select the cells"] * 6250)[:100_000]
    lengths = lambda pieces: documents.source_lengths(translator, pieces)  # noqa: E731
    [pieces] = documents.split_lines([line], lengths, 16, 0)
    assert pieces.join() == line and max(lengths(pieces.pieces)) <= 16
    shorter = line[:600]
    translator.translate([shorter])
    assert translator.truncated_indices == []
    translator.translate([shorter], split_sentences=False)
    assert translator.truncated_indices == [0]


def test_a_document_is_its_sentences_translated_one_by_one_and_joined(translator):
    sentences = segment(DOCUMENT)
    assert sentences.pieces == ["Open the file.", "Print the page!", "Close"]
    texts, scores, alignments = translator.translate([DOCUMENT, "", "  "], alignments=True)
    assert translator.empty_indices == [1, 2]
    alone, alone_scores, alone_alignments = translator.translate(
        sentences.pieces, split_sentences=False, alignments=True
    )
    assert all(alone) and texts == [sentences.join(alone), "", "  "]
    assert scores[0] == pytest.approx(sum(alone_scores), abs=1e-4) and scores[1:] == [0.0, 0.0]
    links = [
        f"{int(source) + source_offset}-{int(target) + target_offset}"
        for alignment, source_offset, target_offset in zip(
            alone_alignments, words_before(sentences.pieces), words_before(alone)
        )
        for source, target in (link.split("-") for link in alignment.split())
    ]
    assert alignments == [" ".join(links), "", ""]


def test_token_scores_and_confidence_cover_every_sentence(translator):
    texts, scores = translator.translate([DOCUMENT, ""])
    record, empty = translator.translate_lines([DOCUMENT, ""])
    assert (record.text, record.score) == (texts[0], scores[0]) and record.alignment is None
    assert len(record.tokens) == len(record.token_scores) and record.tokens.count("</s>") == 3
    assert sum(record.token_scores) == pytest.approx(record.score, abs=1e-3)  # alpha 0
    assert record.confidence == pytest.approx(math.exp(sum(record.token_scores) / len(record.token_scores)))
    assert 0.0 < record.confidence < 1.0
    assert (empty.text, empty.score, empty.confidence, empty.tokens, empty.token_scores) == ("", 0.0, 1.0, [], [])
    assert (
        translator.translate_lines([DOCUMENT], alignments=True)[0].alignment
        == translator.translate([DOCUMENT], alignments=True)[2][0]
    )


def test_a_prefix_needs_one_sentence_per_line_as_in_the_export(translator):
    with pytest.raises(DocumentError, match=r"^line 2: --prefix needs one sentence per line; this line has 3") as error:
        translator.translate(["Print", DOCUMENT], prefixes=[None, "Öffnen Sie"])
    assert error.value.index == 1
    texts, _ = translator.translate([" Print ", DOCUMENT], prefixes=["Drucken", None])  # no prefix: split
    alone, _ = translator.translate(["Print"], split_sentences=False, prefixes=["Drucken"])
    assert texts[0] == f" {alone[0]} " and alone[0].startswith("Drucken")
    assert texts[1] == translator.translate([DOCUMENT])[0][0]


def test_n_best_and_constraints_need_one_sentence_per_line(translator):
    with pytest.raises(DocumentError, match="--n_best needs one sentence per line; this line has 3 sentences") as error:
        translator.translate(["Print", DOCUMENT], n_best=2)
    assert error.value.index == 1
    with pytest.raises(DocumentError, match="--constraints needs one sentence per line") as error:
        translator.translate([DOCUMENT, "Print"], constraints=[["Datei"], None])
    assert error.value.index == 0
    lists, list_scores = translator.translate([" Print ", "Open the file."], n_best=2)
    whole, whole_scores = translator.translate(["Print", "Open the file."], n_best=2, split_sentences=False)
    assert lists == [[f" {text} " for text in whole[0]], whole[1]] and list_scores == whole_scores
    texts, _ = translator.translate([DOCUMENT], n_best=2, split_sentences=False)  # whole: allowed
    assert len(texts[0]) == 2


def test_markup_is_restored_with_the_whole_lines_alignment(translator):
    line = "<b>Open</b> the file. Print %1 <i>now</i>."
    masked = mask(line)
    assert masked.text == "Open the file. Print %1 now."
    plain, _, plain_alignments = translator.translate([masked.text], alignments=True)
    expected = restore(masked, plain[0], plain_alignments[0])
    record, tags_only = translator.translate_lines([line, "<b></b><br/>"], markup=True, alignments=True)
    assert (record.text, record.notes, record.alignment) == (expected.text, tuple(expected.report), plain_alignments[0])
    assert all(part in record.text for part in ("<b>", "</b>", "<i>", "</i>", "%1"))
    assert translator.translate([line], markup=True)[0] == [record.text]
    assert (tags_only.text, tags_only.score, tags_only.tokens) == ("<b></b><br/>", 0.0, [])
    assert translator.translate(["<b></b><br/>"], markup=True)[0] == ["<b></b><br/>"]
