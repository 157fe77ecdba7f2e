"""The search settings every tool decodes with: the paper's section 6.1 (beam 4, length penalty
alpha 0.6, at most input length + 50 output tokens), and how many source tokens are kept.

One `SearchConfig` travels from the flags (`cli.search_flags`) or a run's recorded search
(`inference.runs.search_settings`) to every search above `models/`: the translators, the dev BLEU
of training, the attention plots, the evaluator and the export. Its constructor is the one place
the settings are checked (`check_setting`, which the flags' parsers call too).
"""

import dataclasses

from common.errors import UserError

# Each setting's type and least value: what `check_setting` accepts, and the flags' lower bounds.
SETTING_BOUNDS = {
    "beam_size": (int, 1),
    "alpha": (float, 0.0),
    "max_extra_length": (int, 1),
    "min_length_ratio": (float, 0.0),
    "max_input_length": (int, 2),  # A token and EOS.
}
_KINDS = {int: "an int", float: "a number"}


class SearchConfigError(UserError, ValueError):
    """A search setting of the wrong type or below its least value (the message names both).

    Attributes:
        name: the setting, e.g. "beam_size".
        value: the value received.
    """

    def __init__(self, name, value):
        kind, least = SETTING_BOUNDS[name]
        super().__init__(f"{name} must be >= {least:g} ({_KINDS[kind]}), received {value!r}")
        self.name = name
        self.value = value


def check_setting(name, value):
    """`value` as search setting `name` holds it (an int, or a float for alpha and
    min_length_ratio); None is kept for max_input_length.

    Raises:
        SearchConfigError: a bool, a string, a float for an int setting, NaN, or a value below the
            setting's least value (`SETTING_BOUNDS`).
    """
    if value is None and name == "max_input_length":
        return None
    kind, least = SETTING_BOUNDS[name]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or (kind is int and not isinstance(value, int)) or not value >= least:
        raise SearchConfigError(name, value)
    return kind(value)


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Beam search settings, checked when built.

    Args:
        beam_size: hypotheses kept per sentence; 1 is greedy decoding.
        alpha: length-penalty exponent of Wu et al. (2016).
        max_extra_length: a sentence of n source tokens gets at most n + this many output tokens.
        min_length_ratio: a sentence of n source tokens gets at least floor(n * this) output
            tokens (EOS is barred before); 0 (the paper's search) sets no minimum.
        max_input_length: source tokens kept per sentence, EOS included; longer inputs are cut. None:
            the tool's own default (evaluate.py: the run's `max_length`; the export:
            `EXPORT_MAX_INPUT_LENGTH`, since its graph needs a fixed bound; `Translator`: no limit).

    Raises:
        SearchConfigError: a setting of the wrong type or out of range (`check_setting`).
    """

    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    min_length_ratio: float = 0.0
    max_input_length: int | None = None

    def __post_init__(self):
        for field in dataclasses.fields(self):
            object.__setattr__(self, field.name, check_setting(field.name, getattr(self, field.name)))

    def override(self, **settings):
        """A copy with the settings given that are not None (the rest kept), checked.

        Raises:
            TypeError: a name that is not a setting.
        """
        return dataclasses.replace(self, **{name: value for name, value in settings.items() if value is not None})

    def search_arguments(self):
        """The keyword arguments of `models.translation.translate_ids` this search sets."""
        return dict(
            beam_size=self.beam_size,
            alpha=self.alpha,
            max_extra_length=self.max_extra_length,
            min_length_ratio=self.min_length_ratio,
        )


DEFAULT_SEARCH = SearchConfig()

# The source length an export keeps when none is given.
EXPORT_MAX_INPUT_LENGTH = 256
