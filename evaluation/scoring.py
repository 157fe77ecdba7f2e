"""Corpus-level sacreBLEU and chrF on detokenized text, with their signatures."""

import sacrebleu


def score(hypotheses, references, tokenize="13a"):
    """Corpus sacreBLEU (exp smoothing, `tokenize` a sacreBLEU tokenizer) and chrF against one
    reference each: a dict of `bleu`, `chrf`, their `*_signature`s (to report with the scores),
    `*_text` (sacreBLEU's lines) and `length_ratio` (BLEU's hypothesis / reference length)."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    bleu_metric = sacrebleu.BLEU(tokenize=tokenize)
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
        "length_ratio": bleu.sys_len / bleu.ref_len if bleu.ref_len else 0.0,
    }
