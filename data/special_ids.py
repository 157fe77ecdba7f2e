"""Fixed ids of the special tokens in every SentencePiece vocabulary this project trains.

The tokenizer trainer pins these ids (`pad_id=0, bos_id=1, eos_id=2, unk_id=3`), and the input
pipeline, the translators and the export read them from here rather than writing literals. The
model does not import `data/`: it states the ids it assumes in `models/special_ids.py` (the
vocabulary contract), and tests/data/test_tokenizer.py checks that these ids satisfy it.
"""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
# Their pieces, as the tokenizer trainer names them.
SPECIAL_PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}
