"""`evaluation.scoring`: sacreBLEU's tokenizer chosen by target language, named in the signature."""

import pytest

from common.bleu_tokenizers import bleu_tokenizer
from evaluation import scoring

# A near-match: one character of five differs. 13a sees each sentence as one word.
CHINESE_HYPOTHESIS = ["我喜欢猫。"]
CHINESE_REFERENCE = ["我喜欢狗。"]


@pytest.mark.parametrize(
    "language, tokenizer",
    [
        ("zh", "zh"),
        ("ZH", "zh"),
        ("zh_cn", "zh"),
        ("zh-TW", "zh"),
        ("de", "13a"),
        (None, "13a"),
        ("ja", "char"),
        ("th", "char"),
        ("ko", "13a"),
        ("pt_br", "13a"),
    ],
)
def test_bleu_tokenizer_by_target_language(language, tokenizer):
    assert bleu_tokenizer(language) == tokenizer


def test_chinese_near_match_scores_with_the_zh_tokenizer():
    thirteen_a = scoring.score(CHINESE_HYPOTHESIS, CHINESE_REFERENCE)
    chinese = scoring.score(CHINESE_HYPOTHESIS, CHINESE_REFERENCE, tokenize=bleu_tokenizer("zh"))
    assert thirteen_a["bleu"] == 0.0 and "|tok:13a|" in thirteen_a["bleu_signature"]
    # 4/5 unigrams, 2/4 bigrams, 1/3 trigrams, 0/2 4-grams (exp smoothing: 1/2 -> 1/4), BP 1.
    assert chinese["bleu"] == pytest.approx(100 * (0.8 * 0.5 * (1 / 3) * 0.25) ** 0.25, abs=0.01)
    assert "|tok:zh|" in chinese["bleu_signature"]
    assert chinese["chrf"] == thirteen_a["chrf"]


def test_length_ratio_is_hypothesis_over_reference_words():
    scores = scoring.score(["das ist gut", "ja"], ["das ist sehr gut", "ja doch nein"])
    assert scores["length_ratio"] == pytest.approx(4 / 7)
    assert "ratio = 0.571" in scores["bleu_text"]
