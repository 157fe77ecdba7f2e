"""Fixed ids of the special tokens in every SentencePiece vocabulary this project trains.

The tokenizer trainer pins these ids (`pad_id=0, bos_id=1, eos_id=2, unk_id=3`), and the model
and the search read them from here rather than writing literals. This module imports nothing so
that `models/` (backend-agnostic, no TensorFlow) can use it.
"""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
