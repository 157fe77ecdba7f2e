"""Word alignments from the encoder-decoder attention: each target word linked to the source word
it attends to most, in Pharaoh format (`0-0 1-2 2-1`, `source-target` word indices from 0).

A translation is forced through the decoder and one layer's encoder-decoder attention read
(`AlignmentConfig`); pieces are gathered into SentencePiece's space-separated words (a source word's
weight the sum over its pieces, a target word's row the mean of its pieces'). The attention plots
draw the same `AttentionMatrix`. The choices and their reasons: docs/translating.md ("Word alignments").
"""

from typing import NamedTuple

import keras
import numpy as np

from common.special_ids import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from data import multilingual
from inference.protocol import DEFAULT_ALIGNMENT
from models.translation import cross_attention_weights

# SentencePiece's word-start marker, U+2581 LOWER ONE EIGHTH BLOCK.
WORD_MARKER = "\u2581"
# Tokens that belong to no word.
NOT_WORDS = (BOS_ID, EOS_ID, PAD_ID)


def forced_target(translation_ids):
    """The tokens of a search's output that the decoder is forced through: up to the first EOS
    included, stopping at PAD; `[EOS]` when that leaves none."""
    target = []
    for token in (int(i) for i in translation_ids):
        if token == PAD_ID:
            break
        target.append(token)
        if token == EOS_ID:
            break
    return target or [EOS_ID]


def decoder_input(target):
    """The decoder's input for forcing `target` (a list of ids): BOS, then `target` but its last."""
    return [BOS_ID] + list(target[:-1])


def attention_weights(model, source_ids, target_input_ids, layer, head):
    """float32 `[batch, target_length, source_length]`: decoder layer `layer`'s encoder-decoder
    attention, of head `head` or (None) the mean over heads; `keras.ops` only, to compile."""
    return attended(cross_attention_weights(model, source_ids, target_input_ids, layer=layer), head)


def attended(weights, head):
    """float32 `[batch, target_length, source_length]` of one layer's attention `weights` `[batch,
    heads, target_length, source_length]`: head `head`'s, or (None) the mean over heads."""
    return keras.ops.mean(weights, axis=1) if head is None else weights[:, head]


def pieces_of(tokenizer, ids):
    """The SentencePiece pieces (str) of a list of ids."""
    return [piece.decode("utf-8", "replace") for piece in tokenizer.id_to_piece(np.asarray(ids, "int32")).numpy()]


def word_indices(ids, pieces):
    """The index of each token's word from 0, -1 for BOS, EOS, PAD, a multilingual tag (and the
    lone word marker before it), and a word with no text.

    A word starts at a piece beginning with `WORD_MARKER` (or the first piece); a marker alone (a
    space) joins the next piece, as the detokenized text has it; `<unk>` is a word of its own.
    """
    words, has_text = [], []  # per token; per word
    closed = True  # whether the next piece starts a word
    tags = [bool(multilingual.tag_language(piece)) for piece in pieces]
    before_tag = [piece == WORD_MARKER and next_is_tag for piece, next_is_tag in zip(pieces, tags[1:] + [False])]
    for token, piece, tag, marker in zip(ids, pieces, tags, before_tag):
        if token in NOT_WORDS or tag or marker:
            words.append(-1)
            continue
        bare = bool(has_text) and not has_text[-1] and not closed  # the word so far is markers alone
        starts = token == UNK_ID or closed or piece.startswith(WORD_MARKER)
        if starts and not bare:
            has_text.append(False)
        words.append(len(has_text) - 1)
        has_text[-1] = has_text[-1] or token == UNK_ID or bool(piece.lstrip(WORD_MARKER))
        closed = token == UNK_ID
    renumbered = np.cumsum(has_text) - 1
    return [int(renumbered[word]) if word >= 0 and has_text[word] else -1 for word in words]


def word_weights(weights, source_words, target_words):
    """float32 `[target words, source words]` from `weights` `[target tokens, source tokens]`: source
    pieces summed, target pieces' rows averaged, word -1 left out (`word_indices` give the words)."""
    source_words, target_words = np.asarray(source_words), np.asarray(target_words)
    source_count, target_count = int(source_words.max(initial=-1)) + 1, int(target_words.max(initial=-1)) + 1
    to_source = (source_words[:, None] == np.arange(source_count)).astype("float32")  # [tokens, words]
    to_target = (target_words[:, None] == np.arange(target_count)).astype("float32")
    summed = np.asarray(weights, "float32") @ to_source  # [target tokens, source words]
    return (to_target.T @ summed) / np.maximum(to_target.sum(axis=0), 1.0)[:, None]


def pharaoh(weights):
    """The Pharaoh alignment of `[target words, source words]` weights: `i-j` for each target word j
    and its largest (first of equal) source word i; "" when either side has no word."""
    if weights.shape[1] == 0:
        return ""
    return " ".join(f"{source}-{target}" for target, source in enumerate(np.argmax(weights, axis=1)))


class AttentionMatrix(NamedTuple):
    """A forced translation's encoder-decoder attention.

    Attributes:
        weights: float32 `[target tokens, source tokens]`.
        source_ids, target_ids: the source with its EOS; the translation up to its EOS (`forced_target`).
        source_pieces, target_pieces: their SentencePiece pieces.
    """

    weights: np.ndarray
    source_ids: list
    target_ids: list
    source_pieces: list
    target_pieces: list

    @classmethod
    def of(cls, tokenizer, weights, source_ids, target_ids, source_tokenizer=None):
        """The matrix `weights` of these tokens, pieces from `tokenizer` (`source_tokenizer`'s for
        the source, with separate vocabularies)."""
        source_ids, target_ids = [int(i) for i in source_ids], [int(i) for i in target_ids]
        return cls(
            np.asarray(weights, "float32"),
            source_ids,
            target_ids,
            pieces_of(source_tokenizer or tokenizer, source_ids),
            pieces_of(tokenizer, target_ids),
        )

    def word_weights(self):
        """float32 `[target words, source words]` (`word_weights`)."""
        return word_weights(
            self.weights,
            word_indices(self.source_ids, self.source_pieces),
            word_indices(self.target_ids, self.target_pieces),
        )

    def alignment(self):
        """The Pharaoh word alignment (`pharaoh`)."""
        return pharaoh(self.word_weights())


def attention_matrix(model, tokenizer, source, translation_ids, config=DEFAULT_ALIGNMENT, source_tokenizer=None):
    """The `AttentionMatrix` of one `source` string and its translation `translation_ids` (read up
    to EOS), computed eagerly; AlignmentError for a layer or head the model does not have."""
    layer, head = config.resolve(model.num_decoder_layers, model.num_heads)
    source_ids = [int(i) for i in (source_tokenizer or tokenizer).tokenize([source]).to_list()[0]] + [EOS_ID]
    target = forced_target(translation_ids)
    weights = attention_weights(
        model,
        keras.ops.convert_to_tensor(np.asarray([source_ids], "int32")),
        keras.ops.convert_to_tensor(np.asarray([decoder_input(target)], "int32")),
        layer,
        head,
    )
    return AttentionMatrix.of(tokenizer, keras.ops.convert_to_numpy(weights)[0], source_ids, target, source_tokenizer)
