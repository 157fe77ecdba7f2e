"""The batching loop both translators share: sentences in a given order, a batch at a time, the
results put back in input order, with an optional progress line on stderr."""

import time

from common.progress import ProgressLine


def translate_in_order(sentence_count, order, batch_size, translate_batch, progress=False, n_best=None):
    """Translates the sentences at positions `order` (sorted by length, so batches pad little),
    `batch_size` at a time.

    Args:
        sentence_count: input sentences; positions not in `order` translate to "" with score 0.0.
        translate_batch: `indices -> (texts, scores)`, bytes or str texts and float scores in the
            same order (with `n_best`: a list of `n_best` of each per position).
        progress: report progress on stderr (`common.progress.ProgressLine`).

    Returns:
        `(translations, scores)` in input order (with `n_best`: lists of `n_best` each).
    """
    translations = [""] * sentence_count if n_best is None else [[""] * n_best for _ in range(sentence_count)]
    scores = [0.0] * sentence_count if n_best is None else [[0.0] * n_best for _ in range(sentence_count)]
    started = time.perf_counter()
    line = ProgressLine() if progress else None
    for start in range(0, len(order), batch_size):
        indices = order[start : start + batch_size]
        texts, batch_scores = translate_batch(indices)
        for row, index in enumerate(indices):
            if n_best is None:
                translations[index], scores[index] = _text(texts[row]), float(batch_scores[row])
            else:
                translations[index] = [_text(text) for text in texts[row]]
                scores[index] = [float(score) for score in batch_scores[row]]
        if line is not None:
            done = min(start + batch_size, len(order))
            rate = done / max(time.perf_counter() - started, 1e-9)
            line.update(f"translated {done}/{len(order)} sentences ({rate:.1f}/s)", final=done == len(order))
    return translations, scores


def _text(text):
    return text.decode("utf-8") if isinstance(text, bytes) else str(text)
