"""The special-token ids every vocabulary pins: PAD (masked in attention, loss and metrics), BOS
(first decoder input), EOS (end of source and translation), UNK. Everything reads them from here as
the defaults of `pad_id` / `bos_id` / `eos_id`, never as literals."""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
# Their pieces, as the tokenizer trainer names them.
SPECIAL_PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}
