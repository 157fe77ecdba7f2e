"""What every translator offers, over a Keras model (`inference.translator.Translator`) or over a
SavedModel (`inference.saved_model_translator.SavedModelTranslator`): `translate` (best or n-best,
or a sample, with word alignments), `score` (forced decoding), the search it translates with, and
which inputs were cut or had no tokens. Both classes derive from `TextTranslator`; tests/inference checks their
signatures against it."""

import math
from typing import NamedTuple, Protocol

from common.errors import UserError
from models.search_config import Sampling, SearchConfig  # noqa: F401 (Sampling: the translators' too)


class SteeringError(UserError, ValueError):
    """A target prefix or constraint that the search cannot follow; the message names its
    sentence's position in the input.

    Attributes:
        reason: what is wrong with it, without its position.
        index: the position of its sentence in `translate`'s input (None: every sentence).
    """

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
    """Which encoder-decoder attention word alignments read (`inference.alignment`), and the
    attention plots draw.

    Attributes:
        layer: the decoder layer, from 0 (the first) to `num_layers - 1`, or negative from the end
            (-1: the last). None: the penultimate layer (the only one of a one-layer decoder),
            which Garg et al. (2019) found to align best.
        head: one head, from 0 to `num_heads - 1`. None: the mean over the layer's heads.
    """

    layer: int | None = None
    head: int | None = None

    def resolve(self, num_layers, num_heads):
        """`(layer, head)`: the layer as an index from 0, and the head (None: the mean).

        Raises:
            AlignmentError: a layer or head the model does not have.
        """
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
    """The model's forced-decoding score of a target given a source (`TextTranslator.score`).

    Attributes:
        log_prob: the sum of the target tokens' log-probabilities, EOS included.
        tokens: how many target tokens that is (SentencePiece pieces + EOS).
    """

    log_prob: float
    tokens: int

    @property
    def average(self):
        """The per-token mean log-probability."""
        return self.log_prob / self.tokens

    @property
    def perplexity(self):
        return math.exp(-self.average)


class TextTranslator(Protocol):
    """Sentences in, translations out, in input order.

    Attributes:
        search: the `SearchConfig` `translate` searches with (None where an export records none).
        max_input_length: source tokens kept per sentence, EOS included (None: no limit, or unknown).
        truncated_indices: positions, in the last call's input, of the sentences cut to
            `max_input_length`.
        empty_indices: positions, in the last `translate`'s input, of the sentences with no tokens
            (translated to "" with score 0.0).
        unmet_indices: positions, in the last `translate`'s input, of the sentences whose
            constraints the search could not meet (translated without them).
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
    ):
        """Returns `(translations, scores)` in the order of `sentences`, and with `alignments`
        `(translations, scores, alignments)`.

        Args:
            sentences: strings.
            progress: print a line on stderr counting the sentences done.
            search: this call's `SearchConfig` (default: the translator's `search`; a
                `max_input_length` of None keeps the translator's). With `sampling`, one translation
                is drawn per sentence.
            n_best: None for the best translation of each sentence (a string and a float); an int
                K in `[1, beam_size]` for the K best, best first (a list of K strings and K floats).
            keys: ints, one per sentence, that fix a sample's draws (default: the positions).
            prefixes: target prefixes, one string (or None) per sentence: each translation (each
                of the n best, each sample) starts with its prefix's SentencePiece pieces, forced,
                and goes on as the search chooses; "" or None: no prefix, exactly the search without one.
            constraints: terminology constraints, one list of target phrases (strings) or None per
                sentence: every translation (each of the n best) contains each phrase's
                SentencePiece pieces, in any order (a constrained beam search with dynamic beam
                allocation, `models.beam_search`). A sentence for which the search finds fewer than
                the asked translations that do is translated without its constraints instead, and
                its position is recorded in `unmet_indices`. None or []: no constraint, exactly the
                search without them. Not with sampling.
            alignments: True, or an `AlignmentConfig` (True: its defaults), to also return each
                translation's word alignment (`inference.alignment`), shaped as the translations:
                a Pharaoh string per translation (each of the n best, each sample), `source-target`
                word indices from 0 such as "0-0 1-2 2-1", "" for an empty translation.

        Scores are log-probabilities divided by the length penalty, as the search ranks them; with
        a prefix they count the whole translation, the forced pieces included.

        Raises:
            PrefixError: a prefix of more pieces than its sentence's maximum output length.
            ConstraintError: an empty phrase, or one of more pieces than its sentence's maximum
                output length.
            AlignmentError: alignments from a translator without attention (an export), or of a
                layer or head the model does not have.
        """
        ...

    def score(self, sources, targets, progress=False):
        """Forced decoding: a `PairScore` per `(source, target)` pair, in input order."""
        ...
