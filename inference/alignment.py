"""Word alignments from the encoder-decoder attention: each word of a translation linked to the
source word it attends to most (the "attention argmax" alignment), written in Pharaoh format,
`source-target` word indices from 0 (`0-0 1-2 2-1`), one link per target word, by target word.

The matrix. A translation (the search's own ids, EOS included) is forced through the decoder, and
one decoder layer's encoder-decoder attention is read: one row per target token (the attention
while that token is predicted), one column per source token, EOS included. `AlignmentConfig`
(`inference.protocol`) says which layer and how the heads are combined; `attention_weights` computes
it for a batch, `attention_matrix` for one sentence. The attention plots
(`evaluation.attention_plot`) draw the same `AttentionMatrix` the alignments are read from.

The layer: by default the penultimate one (the only one of a one-layer decoder). Garg et al. (2019,
"Jointly Learning to Align and Translate with Transformer Models") measured the alignment error
rate of each layer's attention, averaged over heads, in a 6-layer Transformer and found the
penultimate layer's the best. (fairseq's `--print-alignment` reads the last layer by default;
`AlignmentConfig.layer` reads any.)

The heads: by default their mean. Heads specialise (one follows the aligned word, another the next
one or the source EOS), and which head aligns best differs from model to model; without reference
alignments to choose one, the mean is the choice that does not depend on it, and Garg et al.'s. A
head can be chosen (`AlignmentConfig.head`).

The words. SentencePiece starts a word with a piece that begins with U+2581 (`WORD_MARKER`); a word
is that piece and the pieces after it up to the next one, so the words are the space-separated
words of the text (of the source after SentencePiece's normalisation, of the translation as
detokenized). BOS, EOS and padding belong to no word (attention on the source EOS, where a decoder
often puts what it does not align, is left out; the EOS row is no word of the translation).

Pieces to words. A row of the matrix is a distribution over source pieces, so the weight of a source
word is the SUM over its pieces: the mean would divide a word's weight by its piece count and let a
word kept whole win over a rarer word split into pieces that holds more of the attention. A target
word's row is the MEAN of its pieces' rows: the sum would scale the row and pick the same argmax,
and the mean keeps the weights of words of different piece counts comparable. (Garg et al. instead link two words when any of their
pieces are linked by a piece-level argmax, which may give a word several links; this is one link
per target word, from the word-level weights.)
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
    """The tokens of a search's output that the decoder is forced through, as a list: up to its
    first EOS included, stopping at PAD; `[EOS]` when that leaves none."""
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
    attention (an index from 0) for the forced targets, of head `head` or (None) the mean over
    heads. `keras.ops` only, so a translator can compile it."""
    weights = cross_attention_weights(model, source_ids, target_input_ids, layer=layer)  # [batch, heads, t, s]
    return keras.ops.mean(weights, axis=1) if head is None else weights[:, head]


def pieces_of(tokenizer, ids):
    """The SentencePiece pieces (str) of a list of ids."""
    return [piece.decode("utf-8", "replace") for piece in tokenizer.id_to_piece(np.asarray(ids, "int32")).numpy()]


def word_indices(ids, pieces):
    """The index of the word each token belongs to, -1 for BOS, EOS and PAD (and for a word with no
    text); words are counted from 0 in order.

    A word starts at a piece that begins with `WORD_MARKER` (or at the first piece), except that a
    marker alone (a space) joins the piece after it, as the detokenized text has it; `<unk>`, which
    SentencePiece detokenizes as " ⁇ ", is a word of its own.

    A multilingual model's target-language tag (`data.multilingual.tag`), and the lone word marker
    before it (`data.multilingual.tag_ids`), belong to no word either.
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
    """float32 `[target words, source words]` from `weights` `[target tokens, source tokens]`: a
    source word's weight is the sum over its pieces, a target word's row the mean of its pieces'
    rows; tokens of word -1 are left out. `source_words`, `target_words`: `word_indices`."""
    source_words, target_words = np.asarray(source_words), np.asarray(target_words)
    source_count, target_count = int(source_words.max(initial=-1)) + 1, int(target_words.max(initial=-1)) + 1
    to_source = (source_words[:, None] == np.arange(source_count)).astype("float32")  # [tokens, words]
    to_target = (target_words[:, None] == np.arange(target_count)).astype("float32")
    summed = np.asarray(weights, "float32") @ to_source  # [target tokens, source words]
    return (to_target.T @ summed) / np.maximum(to_target.sum(axis=0), 1.0)[:, None]


def pharaoh(weights):
    """The Pharaoh alignment of word weights `[target words, source words]`: `i-j` for each target
    word j and the source word i of its largest weight (the first of equal ones), by j; "" when
    either side has no word."""
    if weights.shape[1] == 0:
        return ""
    return " ".join(f"{source}-{target}" for target, source in enumerate(np.argmax(weights, axis=1)))


class AttentionMatrix(NamedTuple):
    """A forced translation's encoder-decoder attention, as the plots draw it and the alignments
    read it.

    Attributes:
        weights: float32 `[target tokens, source tokens]`.
        source_ids, target_ids: the tokens of the columns and rows: the source with its EOS, the
            translation up to its EOS (`forced_target`).
        source_pieces, target_pieces: their SentencePiece pieces.
    """

    weights: np.ndarray
    source_ids: list
    target_ids: list
    source_pieces: list
    target_pieces: list

    @classmethod
    def of(cls, tokenizer, weights, source_ids, target_ids, source_tokenizer=None):
        """The matrix `weights` of these tokens, with their pieces from `tokenizer` (the source's
        from `source_tokenizer`, with separate vocabularies)."""
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
    """The `AttentionMatrix` of `source` (a string) and its translation `translation_ids` (the
    search's ids; read up to EOS), computed eagerly for this one sentence, of the attention `config`
    chooses; `source_tokenizer` tokenizes the source with separate vocabularies.

    Raises:
        AlignmentError: a layer or head the model does not have.
    """
    layer, head = config.resolve(model.num_layers, model.num_heads)
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
