"""The special-token ids: the vocabulary contract between the tokenizer and the model.

The SentencePiece trainer pins these ids in every vocabulary the project trains; the model, the
input pipeline, the searches, the translators and the export read them from here, never as literals.
They are the defaults of the `pad_id` / `bos_id` / `eos_id` arguments in `models/`, so a caller
holding other ids passes them.

    PAD_ID   padding: masked in the encoder's attention, the loss and the metrics
    BOS_ID   the first decoder input of every target and of every search
    EOS_ID   the end of a source sentence and of a translation
    UNK_ID   a piece outside the vocabulary
"""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
UNK_ID = 3
# Their pieces, as the tokenizer trainer names them.
SPECIAL_PIECES = {PAD_ID: "<pad>", BOS_ID: "<s>", EOS_ID: "</s>", UNK_ID: "<unk>"}
