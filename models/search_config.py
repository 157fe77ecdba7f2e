"""The search settings every tool decodes with: the paper's section 6.1 (beam 4, length penalty
alpha 0.6, at most input length + 50 output tokens), and how many source tokens are kept.

Translation in Python (`inference.translator`, evaluate.py), the dev BLEU of training, the attention
plots and the export take their defaults, and their flags' defaults, from `DEFAULT_SEARCH`.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Beam search settings.

    Args:
        beam_size: hypotheses kept per sentence; 1 is greedy decoding.
        alpha: length-penalty exponent of Wu et al. (2016).
        max_extra_length: a sentence of n source tokens gets at most n + this many output tokens.
        min_length_ratio: a sentence of n source tokens gets at least floor(n * this) output
            tokens (EOS is barred before); 0 (the paper's search) sets no minimum.
        max_input_length: source tokens kept per sentence, EOS included; longer inputs are cut. None:
            the tool's own default (evaluate.py: the run's `max_length`; the export:
            `EXPORT_MAX_INPUT_LENGTH`, since its graph needs a fixed bound).
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    min_length_ratio: float = 0.0
    max_input_length: int | None = None


DEFAULT_SEARCH = SearchConfig()

# The source length an export keeps when none is given.
EXPORT_MAX_INPUT_LENGTH = 256
