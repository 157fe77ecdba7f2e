"""translate.py's documents, markup and confidence: a window translated through the translator's
`translate_lines` where its output needs a line's token scores or markup notes (--format=jsonl,
--markup), else through `translate`; the JSON Lines records of --format=jsonl (docs/translating.md,
"JSON Lines"); markup notes on stderr."""

import functools
import json
import math
import sys
from typing import NamedTuple

DECIMALS = 4


class Window(NamedTuple):
    """A window's translations: `texts` and `scores` as `translate` gives them, `alignments` (None
    unless asked), `records` (a `Translation` per line, or None where `translate` was called)."""

    texts: list
    scores: list
    alignments: list | None
    records: list | None


@functools.cache
def export_splits(export_dir):
    """Whether the export at `export_dir` translates sentence by sentence (an export that does not
    record it does not)."""
    # TensorFlow loads with this module: inside, so that the tool checks its flags first.
    from inference.saved_model_translator import export_settings, read_export_config, resolve_saved_model

    return bool(export_settings(read_export_config(resolve_saved_model(export_dir))).get("split_sentences", False))


def translate_window(translator, sentences, *, records, n_best, constraints, alignments, **settings):
    """The `Window` of `sentences`. `records`: Translation records wanted (given unless n-best lists
    or constraints are asked, which `translate_lines` does not take); `settings`: `keys`,
    `prefixes`, `split_sentences`, `markup`, as `translate` takes them."""
    if records and n_best is None and constraints is None:
        lines = translator.translate_lines(sentences, alignments=alignments, **settings)
        aligned = [line.alignment for line in lines] if alignments else None
        return Window([line.text for line in lines], [line.score for line in lines], aligned, lines)
    texts, scores, *aligned = translator.translate(
        sentences, n_best=n_best, constraints=constraints, alignments=alignments, **settings
    )
    return Window(texts, scores, aligned[0] if aligned else None, None)


def report_notes(window, numbers, name):
    """Each line's markup notes on stderr, `translate.py: NAME line N: note`."""
    for record, number in zip(window.records or (), numbers):
        for note in record.notes:
            print(f"translate.py: {name} line {number}: {note}", file=sys.stderr)


def _rounded(value):
    return round(float(value), DECIMALS)


def record_object(record, alignments):
    """The JSON object of a `Translation`: its keys in the documented order."""
    result = {
        "translation": record.text,
        "score": _rounded(record.score),
        "confidence": _rounded(record.confidence),
        "tokens": list(record.tokens),
        "token_scores": [_rounded(value) for value in record.token_scores],
    }
    if alignments:
        result["alignment"] = record.alignment
    if record.notes:
        result["notes"] = list(record.notes)
    return result


def jsonl_lines(translator, window, sentences, n_best):
    """The JSON Lines of a window: a record per line; for n-best lists or constrained translations
    (no `Translation` records), each text's confidence from forced decoding (`translator.score`) and
    with --n_best an "n_best" list of objects of the same keys, best first."""
    alignments = window.alignments is not None
    if window.records is not None:
        return [_dumped(record_object(record, alignments)) for record in window.records]
    count = n_best or 1
    empty = set(translator.empty_indices)  # `score` resets the translator's records
    flat_sources = [sentence for sentence in sentences for _ in range(count)]
    flat_texts = window.texts if n_best is None else [text for line in window.texts for text in line]
    scored = translator.score(flat_sources, flat_texts) if flat_texts else []
    lines = []
    for index in range(len(sentences)):
        objects = []
        for rank in range(count):
            pair = scored[index * count + rank]
            text = flat_texts[index * count + rank]
            score = window.scores[index] if n_best is None else window.scores[index][rank]
            confidence = 1.0 if index in empty else math.exp(pair.average)
            item = {"translation": text, "score": _rounded(score), "confidence": _rounded(confidence)}
            if alignments:
                item["alignment"] = window.alignments[index] if n_best is None else window.alignments[index][rank]
            objects.append(item)
        lines.append(_dumped(objects[0] if n_best is None else {**objects[0], "n_best": objects}))
    return lines


def score_line(result, output_format):
    """The output line of a `PairScore` (--score): tab-separated, or a JSON object of its score
    (the log-probability) and confidence."""
    if output_format == "jsonl":
        return _dumped({"score": _rounded(result.log_prob), "confidence": _rounded(math.exp(result.average))})
    return f"{result.log_prob:.6f}\t{result.average:.6f}\t{result.perplexity:.4f}\t{result.tokens}"


def _dumped(value):
    return json.dumps(value, ensure_ascii=False)
