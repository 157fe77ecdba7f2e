"""sacreBLEU's tokenizer for a target language: one table for evaluate.py and the dev BLEU of training."""

# Target languages whose text has no spaces between words, so 13a would score whole sentences as
# single words: Chinese gets sacreBLEU's "zh" tokenizer; Japanese, Thai, Khmer, Lao, Burmese and
# Dzongkha its "char" one (BLEU over characters), since its Japanese tokenizer needs MeCab, which
# this project does not install. Korean separates words with spaces: 13a.
_LANGUAGE_TOKENIZERS = {"zh": "zh", "ja": "char", "th": "char", "km": "char", "lo": "char", "my": "char", "dz": "char"}


def bleu_tokenizer(target_language):
    """sacreBLEU's tokenizer for `target_language` (a code such as "de", "zh" or "zh_cn", or None):
    by its language subtag, "zh" for Chinese, "char" for the other scripts written without spaces,
    else "13a" (sacreBLEU's default, the WMT standard)."""
    subtag = (target_language or "").lower().replace("-", "_").split("_")[0]
    return _LANGUAGE_TOKENIZERS.get(subtag, "13a")
