"""The SentencePiece vocabulary size a run trains when none is given: one number that train.py's
`--vocab_size`, `training.config.DataConfig` and `data.tokenizer.train_sentencepiece` all import.

8000 pieces fit the built-in corpora (~70k pairs); the paper used 37k pieces for 4.5M pairs
(Section 5.1), so a larger corpus wants a larger vocabulary. Below `MIN_VOCAB_SIZE` the special
and byte-fallback pieces leave almost no room for words.
"""

DEFAULT_VOCAB_SIZE = 8000
MIN_VOCAB_SIZE = 100
