"""The default SentencePiece vocabulary size, one number for train.py, `DataConfig` and
`train_sentencepiece`: 8000 fits the built-in corpora (~70k pairs; the paper used 37k for 4.5M)."""

DEFAULT_VOCAB_SIZE = 8000
MIN_VOCAB_SIZE = 100
