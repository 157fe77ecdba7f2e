"""Documents: each input line translated sentence by sentence (`inference.segmentation`) and joined
as it was written, its markup taken out before the search and put back after (`inference.markup`),
for `Translator.translate` and `Translator.translate_lines`. The rules (the length rule, which
per-input values apply how, scores, confidence, alignments): docs/translating.md, "Documents"; the
SavedModel's graph follows the same ones (`export/`).
"""

import math
import re
from typing import NamedTuple

from inference import markup as markup_step
from inference import steering
from inference.alignment import forced_target, pieces_of
from inference.confidence import token_scores
from inference.protocol import DocumentError, SteeringError, Translation
from inference.segmentation import Segments, segment

# A line's sentences after its first sample with its key plus this per position (mod 2**32), so
# that a line of one sentence draws as it does whole, and its sentences draw apart.
KEY_STRIDE = 2654435761
# Stage 2 of the length rule runs this many times; a piece still too long is cut to the input length.
LENGTH_PASSES = 2


class Plan(NamedTuple):
    """A call's lines as the sentences the search translates.

    Attributes:
        documents: `Segments` per line, of its masked text with markup (its whole text as one piece
            without splitting).
        masks: `markup.Masked` per line, or None without markup.
        firsts: the position in `sentences` of each line's first sentence.
        sentences: every line's pieces, in order.
        owners: the line of each sentence.
    """

    documents: list
    masks: list | None
    firsts: list
    sentences: list
    owners: list

    def span(self, line):
        """The positions in `sentences` of `line`'s sentences."""
        return range(self.firsts[line], self.firsts[line] + len(self.documents[line].pieces))


def source_lengths(translator, texts):
    """Source ids (target tags + pieces + EOS; EOS alone without pieces) of each text, uncut."""
    if not texts:
        return []
    rows = translator.source_tokenizer.tokenize(list(texts)).to_list()
    return [len(translator.tag_ids) + len(row) + 1 if row else 1 for row in rows]


def split_lines(texts, lengths, max_input_length, tag_count):
    """The `Segments` of each text: its sentences, each of more than `max_input_length` source ids
    (`lengths(texts)`) cut again by `segment(sentence, max_length=b)`, b its share of characters
    the input length holds (with a tenth to spare), twice; None: sentences only."""
    documents = [segment(text) for text in texts]
    if max_input_length is None:
        return documents
    for _ in range(LENGTH_PASSES):
        counts = iter(lengths([piece for document in documents for piece in document.pieces]))
        documents = [
            _cut(document, [next(counts) for _ in document.pieces], max_input_length, tag_count)
            for document in documents
        ]
    return documents


def _cut(document, counts, limit, tag_count):
    """`document` with each piece of more than `limit` ids (`counts`) cut by its character budget."""
    pieces, separators = [], [document.separators[0]]
    for piece, count, after in zip(document.pieces, counts, document.separators[1:]):
        if count <= limit:
            pieces.append(piece)
            separators.append(after)
            continue
        budget = max(1, (len(piece) * (limit - 1 - tag_count) * 9) // ((count - 1 - tag_count) * 10))
        parts = segment(piece, max_length=budget)
        pieces += parts.pieces
        separators[-1] += parts.separators[0]
        separators += parts.separators[1:-1] + [parts.separators[-1] + after]
    return Segments(pieces, separators)


def plan(translator, lines, search, split_sentences, markup, steered):
    """The `Plan` of `lines`; `steered[i]`: line i has a prefix or phrases, so that a line without
    sentences is still searched (whole), as without splitting."""
    masks = [markup_step.mask(line) for line in lines] if markup else None
    texts = [masked.text for masked in masks] if markup else list(lines)
    if split_sentences:
        limit = (search or translator.search).max_input_length or translator.max_input_length
        lengths = lambda pieces: source_lengths(translator, pieces)  # noqa: E731
        documents = split_lines(texts, lengths, limit, len(translator.tag_ids))
        documents = [
            Segments([text], ["", ""]) if not document.pieces and wanted else document
            for text, document, wanted in zip(texts, documents, steered)
        ]
    else:
        documents = [Segments([text], ["", ""]) for text in texts]
    firsts, sentences, owners = [], [], []
    for line, document in enumerate(documents):
        firsts.append(len(sentences))
        sentences += document.pieces
        owners += [line] * len(document.pieces)
    return Plan(documents, masks, firsts, sentences, owners)


def _check_per_line(plan, n_best, constraints, prefixes=None):
    """DocumentError for n-best lists, phrases or a prefix asked of a line of several sentences
    (the export's signatures for them take each input whole: the same refusal)."""
    for line, document in enumerate(plan.documents):
        count = len(document.pieces)
        phrases, prefix = constraints and constraints[line], prefixes and prefixes[line]
        if count > 1 and (n_best is not None or phrases or prefix):
            flag = "--n_best" if n_best is not None else "--constraints" if phrases else "--prefix"
            raise DocumentError(
                f"{flag} needs one sentence per line; this line has {count} sentences; pass --nosplit_sentences "
                "(split_sentences=False) or one sentence per line",
                line,
            )


def _per_sentence(plan, keys, prefixes, constraints):
    """`(keys, prefixes, constraints)` of the sentences: a line's key (then KEY_STRIDE apart), its
    prefix and phrases on its first sentence."""
    line_keys = list(range(len(plan.documents))) if keys is None else [int(key) for key in keys]
    if len(line_keys) != len(plan.documents):
        raise ValueError(f"keys must have one int per line: {len(line_keys)} keys for {len(plan.documents)} lines")
    positions = [index - plan.firsts[line] for index, line in enumerate(plan.owners)]
    sentence_keys = [
        line_keys[line] if not position else (line_keys[line] + position * KEY_STRIDE) % 2**32
        for line, position in zip(plan.owners, positions)
    ]
    first = [not position for position in positions]
    return (
        sentence_keys,
        None
        if prefixes is None
        else [prefixes[line] if is_first else None for line, is_first in zip(plan.owners, first)],
        None
        if constraints is None
        else [constraints[line] if is_first else [] for line, is_first in zip(plan.owners, first)],
    )


def word_count(text):
    """Words as alignments count them: runs of non-whitespace (`markup.WORD`)."""
    return sum(1 for _ in re.finditer(markup_step.WORD, text))


def offset_alignment(sources, translations, alignments):
    """One Pharaoh string over the whole line from each sentence's, its links offset by the words of
    the sentences (`sources`) and translations before it."""
    links, source_offset, target_offset = [], 0, 0
    for source, translation, alignment in zip(sources, translations, alignments):
        for source_word, target_word in markup_step.links_of(alignment):
            links.append(f"{source_word + source_offset}-{target_word + target_offset}")
        source_offset += word_count(source)
        target_offset += word_count(translation)
    return " ".join(links)


class Lines(NamedTuple):
    """Per line: `hypotheses` (a list of texts, one without n-best), their `scores` and `alignments`
    (Pharaoh strings over the masked line and the translation before markup is restored), and the
    best one's markup `notes`."""

    hypotheses: list
    scores: list
    alignments: list
    notes: list


def translated(translator, lines, progress, settings, alignments, searched=None):
    """The `(Plan, Lines)` of `lines`. `settings`: `split_sentences`, `markup`, `search`, `n_best`,
    `keys`, `prefixes`, `constraints` of `translate`; `searched` as `translate_sentences`'s."""
    n_best, markup = settings["n_best"], settings["markup"]
    prefixes = steering.prefix_list(settings["prefixes"], len(lines))
    constraints = steering.constraint_lists(settings["constraints"], len(lines))
    steered = [bool((prefixes and prefixes[i]) or (constraints and constraints[i])) for i in range(len(lines))]
    the_plan = plan(translator, lines, settings["search"], settings["split_sentences"], markup, steered)
    _check_per_line(the_plan, n_best, constraints, prefixes)
    keys, sentence_prefixes, sentence_constraints = _per_sentence(the_plan, settings["keys"], prefixes, constraints)
    aligner = alignments or (True if markup else False)
    try:
        texts, scores, *aligned = translator.translate_sentences(
            the_plan.sentences,
            progress,
            search=settings["search"],
            n_best=n_best,
            keys=keys,
            prefixes=sentence_prefixes,
            constraints=sentence_constraints,
            alignments=aligner,
            searched=searched,
        )
    except SteeringError as error:
        if error.index is None:
            raise
        raise type(error)(error.reason, the_plan.owners[error.index]) from None
    _report_by_line(translator, the_plan)
    if n_best is None:  # one hypothesis per sentence, as n-best lists of one
        texts, scores = [[text] for text in texts], [[score] for score in scores]
        aligned = [[[alignment] for alignment in aligned[0]]] if aligned else []
    return the_plan, _joined(the_plan, n_best or 1, texts, scores, aligned[0] if aligned else None)


def _report_by_line(translator, the_plan):
    """The translator's truncated, unmet and empty positions as lines (a line is empty when none of
    its sentences has tokens)."""
    for name in ("truncated_indices", "unmet_indices"):
        setattr(translator, name, sorted({the_plan.owners[index] for index in getattr(translator, name)}))
    empty = set(translator.empty_indices)
    translator.empty_indices = [
        line for line in range(len(the_plan.documents)) if all(index in empty for index in the_plan.span(line))
    ]


def _joined(the_plan, count, texts, scores, aligned):
    """The `Lines` of each line from its sentences' `count` hypotheses each, markup restored."""
    result = Lines([], [], [], [])
    for line, document in enumerate(the_plan.documents):
        span = the_plan.span(line)
        hypotheses, line_scores, line_alignments, notes = [], [], [], ()
        for rank in range(count):
            translations = [texts[index][rank] for index in span]
            text = document.join(translations)
            alignment = None
            if aligned is not None:
                alignment = offset_alignment(document.pieces, translations, [aligned[index][rank] for index in span])
            if the_plan.masks is not None:
                restored = markup_step.restore(the_plan.masks[line], text, alignment)
                text, notes = restored.text, tuple(restored.report) if not rank else notes
            hypotheses.append(text)
            line_scores.append(float(sum(scores[index][rank] for index in span)))
            line_alignments.append(alignment)
        result.hypotheses.append(hypotheses)
        result.scores.append(line_scores)
        result.alignments.append(line_alignments)
        result.notes.append(notes)
    return result


def translate(translator, lines, progress=False, *, alignments=False, **settings):
    """`TextTranslator.translate` of `lines` through `translator.translate_sentences`; `settings`:
    `split_sentences`, `markup`, `search`, `n_best`, `keys`, `prefixes`, `constraints`."""
    _, result = translated(translator, list(lines), progress, settings, alignments)
    if settings["n_best"] is None:
        first = [
            [values[0] for values in per_line] for per_line in (result.hypotheses, result.scores, result.alignments)
        ]
    else:
        first = [result.hypotheses, result.scores, result.alignments]
    return tuple(first) if alignments else tuple(first[:2])


def translate_lines(translator, lines, progress=False, *, alignments=False, **settings):
    """`TextTranslator.translate_lines` of `lines`: `translate`'s best translations with their
    tokens, token log-probabilities (`inference.confidence.token_scores`) and confidence."""
    lines, searched = list(lines), {}
    settings.update(n_best=None, constraints=None)
    the_plan, result = translated(translator, lines, progress, settings, alignments, searched)
    tokens, log_probs = _token_scores(translator, searched)
    records = []
    for line in range(len(lines)):
        line_tokens = [token for index in the_plan.span(line) for token in tokens.get(index, [])]
        line_scores = [score for index in the_plan.span(line) for score in log_probs.get(index, [])]
        confidence = math.exp(sum(line_scores) / len(line_scores)) if line_scores else 1.0
        records.append(
            Translation(
                result.hypotheses[line][0],
                result.scores[line][0],
                confidence,
                line_tokens,
                line_scores,
                result.alignments[line][0] if alignments else None,
                result.notes[line],
            )
        )
    return records


def _token_scores(translator, searched):
    """`({position: pieces}, {position: log-probabilities})` of each searched sentence's output up
    to its EOS, forced through the model."""
    positions = sorted(searched)
    if not positions:
        return {}, {}
    targets = [forced_target(searched[index][1]) for index in positions]
    log_probs, _ = token_scores(
        translator.model,
        [searched[index][0] for index in positions],
        targets,
        translator.batch_size,
        translator.token_scorer(),
    )
    pieces = iter(pieces_of(translator.tokenizer, [token for target in targets for token in target]))
    tokens = {index: [next(pieces) for _ in target] for index, target in zip(positions, targets)}
    return tokens, {index: [float(value) for value in row] for index, row in zip(positions, log_probs)}
