"""Corpus-level sacreBLEU and chrF on detokenized text, with their signatures."""

import sacrebleu


def score(hypotheses, references, tokenize="13a"):
    """sacreBLEU (exp smoothing, `tokenize`: one of sacreBLEU's tokenizers) and chrF of
    `hypotheses` against one reference each.

    Returns:
        A dict: `bleu` and `chrf` (floats), `bleu_signature` and `chrf_signature` (sacreBLEU's
        signature strings, to be reported with the scores; the BLEU one names the tokenizer),
        `bleu_text` / `chrf_text` (the score lines as sacreBLEU formats them), `length_ratio`
        (BLEU's hypothesis / reference length in its tokenizer's words, the "ratio" of `bleu_text`).
    """
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
