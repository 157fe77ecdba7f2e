"""Corpus-level sacreBLEU and chrF on detokenized text, with their signatures."""

import sacrebleu


def score(hypotheses, references):
    """sacreBLEU (13a tokenization, exp smoothing) and chrF of `hypotheses` against one reference
    each.

    Returns:
        A dict: `bleu` and `chrf` (floats), `bleu_signature` and `chrf_signature` (sacreBLEU's
        signature strings, to be reported with the scores), `bleu_text` / `chrf_text` (the score
        lines as sacreBLEU formats them).
    """
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu_metric = sacrebleu.BLEU()
    chrf_metric = sacrebleu.CHRF()
    bleu = bleu_metric.corpus_score(hypotheses, [references])
    chrf = chrf_metric.corpus_score(hypotheses, [references])
    return {
        "bleu": bleu.score,
        "chrf": chrf.score,
        "bleu_signature": str(bleu_metric.get_signature()),
        "chrf_signature": str(chrf_metric.get_signature()),
        "bleu_text": str(bleu),
        "chrf_text": str(chrf),
    }
