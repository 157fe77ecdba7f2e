"""`TextTranslator`: what every translator offers, over a Keras model (`inference.translator`) or a
SavedModel (`inference.saved_model_translator`); tests/inference checks both against it."""

import math
from typing import NamedTuple, Protocol

from common.errors import UserError
from models.search_config import Sampling, SearchConfig  # noqa: F401 (Sampling: the translators' too)


class SteeringError(UserError, ValueError):
    """A target prefix or constraint the search cannot follow: `reason` (without its position) and
    `index`, its sentence's position in `translate`'s input (None: every sentence)."""

    argument = "steering"  # the `translate` argument, named in the message

    def __init__(self, reason, index=None):
        super().__init__(reason if index is None else f"{self.argument}[{index}]: {reason}")
        self.reason = reason
        self.index = index


class PrefixError(SteeringError):
    """A target prefix that cannot be forced (longer than its sentence's maximum output)."""

    argument = "prefixes"


class ConstraintError(SteeringError):
    """A terminology constraint that cannot be met: an empty phrase, or one longer than its
    sentence's maximum output."""

    argument = "constraints"


class AlignmentError(UserError, ValueError):
    """Word alignments asked of a translator that cannot give them, or of an attention the model
    does not have (a layer or head out of range)."""


class AlignmentConfig(NamedTuple):
    """Which encoder-decoder attention word alignments and attention plots read.

    `layer`: the decoder layer from 0, or negative from the end; None: the penultimate (Garg et
    al., 2019, found it aligns best). `head`: one head from 0; None: the mean over the heads.
    """

    layer: int | None = None
    head: int | None = None

    def resolve(self, num_layers, num_heads):
        """`(layer, head)`: the layer as an index from 0, the head (None: the mean); AlignmentError
        for a layer or head the model does not have."""
        layer = max(num_layers - 2, 0) if self.layer is None else self.layer
        if not -num_layers <= layer < num_layers:
            raise AlignmentError(
                f"alignment layer {self.layer} is out of range: the decoder has {num_layers} layers, 0 to "
                f"{num_layers - 1} (or -{num_layers} to -1 from the last)"
            )
        if self.head is not None and not 0 <= self.head < num_heads:
            raise AlignmentError(
                f"alignment head {self.head} is out of range: the attention has {num_heads} heads, 0 to {num_heads - 1}"
            )
        return layer % num_layers, self.head


# The attention alignments and attention plots read unless told otherwise.
DEFAULT_ALIGNMENT = AlignmentConfig()


class PairScore(NamedTuple):
    """A forced-decoding score: `log_prob`, the sum of the target tokens' log-probabilities (EOS
    included), over `tokens` tokens (pieces + EOS)."""

    log_prob: float
    tokens: int

    @property
    def average(self):
        """The per-token mean log-probability."""
        return self.log_prob / self.tokens

    @property
    def perplexity(self):
        return math.exp(-self.average)


class DocumentError(SteeringError):
    """A per-input request that has no meaning per sentence (n-best, a prefix, constraints) on an
    input of several sentences while sentences are split; the message names the line (from 1)."""

    def __init__(self, reason, index=None):
        UserError.__init__(self, reason if index is None else f"line {index + 1}: {reason}")
        self.reason = reason
        self.index = index


class Translation(NamedTuple):
    """One input line's translation, as `TextTranslator.translate_lines` returns it.

    Attributes:
        text: the translation, its sentences joined as the input's were, markup put back.
        score: the search's length-penalised log-probability, summed over the line's sentences.
        confidence: exp(mean log-probability) of every output token of the line (EOS included);
            1.0 for an empty translation (docs/translating.md, "Confidence").
        tokens: the output's SentencePiece pieces, "</s>" after each sentence's.
        token_scores: one log-probability per entry of `tokens`.
        alignment: Pharaoh links between the input's and the translation's words (whitespace
            separated, counted over the whole line), when asked; else None.
        notes: what markup restoration put back without the alignment's help, or dropped.
    """

    text: str
    score: float
    confidence: float
    tokens: list
    token_scores: list
    alignment: str | None = None
    notes: tuple = ()


class TextTranslator(Protocol):
    """Sentences in, translations out, in input order.

    Attributes:
        search: the `SearchConfig` `translate` uses (None where an export records none).
        max_input_length: source tokens kept per sentence, EOS included (None: no limit or unknown).
        truncated_indices, empty_indices, unmet_indices: positions in the last call's input of the
            sentences cut to `max_input_length`, with no tokens (translated to "", score 0.0), and
            whose constraints the search could not meet (translated without them).
    """

    search: SearchConfig | None
    max_input_length: int | None
    truncated_indices: list
    empty_indices: list
    unmet_indices: list

    def translate(
        self,
        sentences,
        progress=False,
        *,
        search=None,
        n_best=None,
        keys=None,
        prefixes=None,
        constraints=None,
        alignments=False,
        split_sentences=True,
        markup=False,
    ):
        """`(translations, scores)` in input order; with `alignments`, `(translations, scores, alignments)`.

        Args:
            search: this call's `SearchConfig` (default: the translator's; a `max_input_length` of
                None keeps the translator's). With `sampling`, one draw per sentence.
            n_best: None for each sentence's best (a string, a float); K in `[1, beam_size]` for
                lists of the K best, best first.
            keys: ints, one per sentence, fixing a sample's draws (default: the positions).
            prefixes: one target prefix (or None) per sentence, forced as SentencePiece pieces
                before the search goes on; "" or None: no prefix.
            constraints: one list of target phrases (or None) per sentence that every translation
                contains, in any order (`models.beam_search`). A sentence the search cannot satisfy
                is translated without them and listed in `unmet_indices`. Not with sampling.
            alignments: True or an `AlignmentConfig`: also a Pharaoh string ("0-0 1-2") per
                translation, shaped as the translations, "" for an empty one.
            split_sentences: translate each input sentence by sentence (`inference.segmentation`),
                a sentence still over `max_input_length` cut further, and join the translations
                as the input was; False: each input whole, cut to `max_input_length`.
            markup: take inline tags, placeholders, URLs and e-mail addresses out before the
                search and put them back by the word alignments (`inference.markup`).

        Scores are log-probabilities divided by the length penalty, forced prefix pieces included.

        Raises:
            PrefixError, ConstraintError: a prefix or phrase longer than the maximum output, an
                empty phrase.
            AlignmentError: alignments without attention (an export), or a layer or head out of range.
            DocumentError: `n_best` or constraints on an input of several sentences while
                `split_sentences`.
        """
        ...

    def translate_lines(
        self,
        lines,
        progress=False,
        *,
        search=None,
        keys=None,
        prefixes=None,
        alignments=False,
        split_sentences=True,
        markup=False,
    ):
        """A `Translation` per line, in input order: the best translation with its confidence and
        token scores. Arguments as `translate`'s."""
        ...

    def score(self, sources, targets, progress=False):
        """Forced decoding: a `PairScore` per `(source, target)` pair, in input order."""
        ...
