"""The special-token ids the model assumes: the vocabulary contract a tokenizer must satisfy.

    PAD_ID = 0   padding: masked in the encoder's attention, the loss and the metrics
    BOS_ID = 1   the first decoder input of every target and of every search
    EOS_ID = 2   the end of a source sentence and of a translation

These are the defaults of the `pad_id` / `bos_id` / `eos_id` arguments of `Transformer`, the loss,
the metrics, `translate_ids` and the searches; a caller holding other ids passes them. `models/`
does not import `data/` (they are peers): the SentencePiece trainer in `data/tokenizer.py` pins the
same ids through `data/special_ids.py`, and tests/data/test_tokenizer.py checks that a trained
tokenizer's ids are these.
"""

PAD_ID = 0
BOS_ID = 1
EOS_ID = 2
