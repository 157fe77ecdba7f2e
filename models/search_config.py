"""The decoding value: everything that shapes a search, checked once when built, with the paper's
defaults (section 6.1: beam 4, alpha 0.6, at most input length + 50 tokens). It travels whole from
the flags or a run's recorded search to every search; per-sentence inputs travel beside it."""

import dataclasses
from typing import NamedTuple

from common.errors import UserError


class _Range(NamedTuple):
    kind: type
    least: float | None = None  # None: no lower bound
    strict: bool = False  # `least` itself is refused
    most: float | None = None  # None: no upper bound
    choices: tuple = ()  # a string setting's values

    def holds(self, value):
        if self.choices:
            return value in self.choices
        above = self.least is None or (value > self.least if self.strict else value >= self.least)
        return above and (self.most is None or value <= self.most)

    def words(self):
        """The range as a message says it: ">= 1", "> 0", "in (0, 1]", "one of 'a', 'b'"; "" for any value."""
        if self.choices:
            return f"one of {', '.join(map(repr, self.choices))}"
        if self.most is not None:
            return f"in {'(' if self.strict else '['}{self.least:g}, {self.most:g}]"
        if self.least is None:
            return ""
        return f"{'>' if self.strict else '>='} {self.least:g}"


# When a sentence's beam search ends (`models.beam_search.beam_search`): "exact", the default, once
# no alive hypothesis could still beat the returned ones; "heuristic", once none would at the next step.
STOPPING_RULES = ("exact", "heuristic")
# Each setting's type and range: what `check_setting` accepts.
_RANGES = {
    "beam_size": _Range(int, 1),
    "alpha": _Range(float, 0.0),
    "max_extra_length": _Range(int, 1),
    "min_length_ratio": _Range(float, 0.0),
    "max_input_length": _Range(int, 2),  # A token and EOS.
    "no_repeat_ngram_size": _Range(int, 0),  # 0: off; 1 bars repeating any token (as in fairseq).
    "shortlist": _Range(int, 0),  # 0: off (the whole vocabulary).
    "stopping": _Range(str, choices=STOPPING_RULES),
    "top_k": _Range(int, 0),
    "temperature": _Range(float, 0.0, strict=True),
    "seed": _Range(int),
    "top_p": _Range(float, 0.0, strict=True, most=1.0),
}
# The type and least value of each setting whose range is `>= least`: the flags' lower bounds.
SETTING_BOUNDS = {
    name: (range_.kind, range_.least)
    for name, range_ in _RANGES.items()
    if range_.least is not None and not range_.strict and range_.most is None
}
# The values of each string setting: its flag's choices.
SETTING_CHOICES = {name: range_.choices for name, range_ in _RANGES.items() if range_.choices}
_KINDS = {int: "an int", float: "a number", str: "a string"}


class SearchConfigError(UserError, ValueError):
    """A decoding setting of the wrong type or out of its range (the message names both).

    Attributes:
        name: the setting, e.g. "beam_size".
        value: the value received.
        expected: the range in words, e.g. ">= 1" or "in (0, 1]" ("" for any value of its type).
    """

    def __init__(self, name, value):
        range_ = _RANGES[name]
        self.expected = range_.words()
        condition = f"{self.expected} ({_KINDS[range_.kind]})" if self.expected else _KINDS[range_.kind]
        super().__init__(f"{name} must be {condition}, received {value!r}")
        self.name = name
        self.value = value


def check_setting(name, value):
    """`value` as decoding setting `name` holds it (an int, a float for alpha, min_length_ratio,
    temperature and top_p, or one of the strings of `stopping`); None is kept for max_input_length.

    Raises:
        SearchConfigError: a bool, a string for a number, a float for an int setting, NaN, or a
            value out of the setting's range.
    """
    if value is None and name == "max_input_length":
        return None
    range_ = _RANGES[name]
    if range_.kind is str:
        if not isinstance(value, str) or not range_.holds(value):
            raise SearchConfigError(name, value)
        return value
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not number or (range_.kind is int and not isinstance(value, int)) or not range_.holds(value):
        raise SearchConfigError(name, value)
    return range_.kind(value)


def _check_fields(value, names):
    for name in names:
        object.__setattr__(value, name, check_setting(name, getattr(value, name)))


@dataclasses.dataclass(frozen=True)
class Sampling:
    """Decoding by drawing each token (`models.sampling.token_sampler`) instead of searching.

    Args:
        top_k: draw among the `top_k` most likely tokens; 0 for the whole vocabulary.
        temperature: > 0; the logits are divided by it before the softmax.
        seed: with each sentence's key (its position, or the `keys` given), fixes its draws.
        top_p: in (0, 1]: then draw within the nucleus, the most likely tokens (of those `top_k`
            keeps) whose probability mass reaches `top_p`; 1 for no nucleus.

    Raises:
        SearchConfigError: a setting of the wrong type or out of range.
    """

    top_k: int = 0
    temperature: float = 1.0
    seed: int = 0
    top_p: float = 1.0

    def __post_init__(self):
        _check_fields(self, [field.name for field in dataclasses.fields(self)])


def _setting(default, run_help, export_help, recorded=True):
    """A beam-search setting of `SearchConfig`: its search flag's help for the tools that translate
    with a run and for the export (`cli.search_flags`), and whether a run records it (config.json
    "search"). A setting added later defaults to off: an older export or run searches so."""
    return dataclasses.field(default=default, metadata={"help": (run_help, export_help), "recorded": recorded})


@dataclasses.dataclass(frozen=True)
class SearchConfig:
    """Everything that shapes a search, checked when built.

    Args:
        beam_size: hypotheses kept per sentence; 1 is greedy decoding. Sampling draws one,
            whatever the beam.
        alpha: length-penalty exponent of Wu et al. (2016).
        max_extra_length: a sentence of n source tokens gets at most n + this many output tokens.
        min_length_ratio: a sentence of n source tokens gets at least floor(n * this) output
            tokens (EOS is barred before); 0 (the paper's search) sets no minimum.
        max_input_length: source tokens kept per sentence, EOS included; longer inputs are cut. None:
            the tool's own default (evaluate.py: the run's `max_length`; the export:
            `EXPORT_MAX_INPUT_LENGTH`, since its graph needs a fixed bound; `Translator`: no limit).
        no_repeat_ngram_size: the repetition guard (`models.no_repeat_ngram`, fairseq's
            `--no-repeat-ngram-size`): no output holds an n-gram of this many tokens twice; 1 bars
            repeating any token; 0 (the paper's search) is off. Every search applies it.
        shortlist: the vocabulary shortlist (`models.vocabulary_shortlist`, Marian's `--shortlist`):
            the output projection of a batch is restricted to the `shortlist` best target pieces of
            each of its source pieces in the run's lexical table, plus the table's most frequent
            target pieces; 0 (the paper's search) is the whole vocabulary.
        stopping: when a sentence's search ends: "exact" (the default), once no alive hypothesis
            could beat the returned ones even at its maximum length (Tensor2Tensor's rule, the
            paper's "terminate early when possible"); "heuristic", once none would by ending at the
            next step, as OpenNMT-py and CTranslate2 stop (fewer steps; docs/translating.md, "The
            search").
        sampling: a `Sampling` to draw translations instead of searching (a run's translator
            only); None: the beam search.

    Raises:
        SearchConfigError: a setting of the wrong type or out of range (`check_setting`).
    """

    beam_size: int = _setting(
        4, "Beam size (section 6.1: 4); 1 is greedy decoding.", "Beam size baked into the graph (1: greedy decoding)."
    )
    alpha: float = _setting(0.6, "Length-penalty exponent (section 6.1: 0.6).", "Length-penalty exponent.")
    max_extra_length: int = _setting(
        50,
        "Output tokens allowed beyond the input length (section 6.1: 50).",
        "A sentence of n source tokens gets at most n + this many output tokens.",
    )
    min_length_ratio: float = _setting(
        0.0,
        "At least floor(n * this) output tokens for n source tokens (EOS barred before); 0: no minimum.",
        "A sentence of n source tokens gets at least floor(n * this) output tokens (EOS barred before); 0: no minimum.",
    )
    max_input_length: int | None = _setting(
        None,
        "Source tokens kept, EOS included (default: the run's max_length); longer lines are cut and reported.",
        "SentencePiece tokens kept per input sentence, EOS included; longer inputs keep their first "
        "max_input_length - 1 tokens.",
        recorded=False,  # A run's own max_length bounds its inputs.
    )
    sampling: Sampling | None = None
    no_repeat_ngram_size: int = _setting(
        0,
        "Repetition guard: no translation holds an n-gram of this many tokens twice (1: no token twice); "
        "0 (the default): off.",
        "Repetition guard baked into the graph: no translation holds an n-gram of this many tokens twice "
        "(1: no token twice); 0: off.",
    )
    shortlist: int = _setting(
        0,
        "Vocabulary shortlist: each batch's output is restricted to the best this many target pieces of each of "
        "its source pieces in the run's lexical table (python -m training.shortlist builds it), plus the table's "
        "most frequent pieces; 0 (the default): the whole vocabulary.",
        "Vocabulary shortlist baked into the graph (the run's lexical table, python -m training.shortlist): each "
        "batch's output is restricted to the best this many target pieces of each of its source pieces, plus the "
        "table's most frequent pieces; 0: the whole vocabulary.",
    )
    stopping: str = _setting(
        "exact",
        "When a sentence's search ends: exact (the default), once no alive hypothesis could beat the returned "
        "ones even at its maximum length; heuristic, once none would by ending at the next step (fewer steps, as "
        "CTranslate2 and OpenNMT-py stop).",
        "When a sentence's search ends, baked into the graph: exact, once no alive hypothesis could beat the "
        "returned ones even at its maximum length; heuristic, once none would by ending at the next step (fewer "
        "steps, as CTranslate2 and OpenNMT-py stop).",
    )

    def __post_init__(self):
        _check_fields(self, SEARCH_SETTINGS)
        if self.sampling is not None and not isinstance(self.sampling, Sampling):
            raise TypeError(f"sampling must be a Sampling or None, received {self.sampling!r}")

    def override(self, **settings):
        """A copy with the settings given that are not None (the rest kept), checked.

        Raises:
            TypeError: a name that is not a setting.
        """
        return dataclasses.replace(self, **{name: value for name, value in settings.items() if value is not None})

    def search_settings(self):
        """`{name: value}` of the beam search's settings (`SEARCH_SETTINGS`): what an export records."""
        return {name: getattr(self, name) for name in SEARCH_SETTINGS}


_SETTING_FIELDS = [field for field in dataclasses.fields(SearchConfig) if "help" in field.metadata]
# The settings of a beam search (every field but `sampling`), in their order: each is a search flag,
# and an export builds them into its graph and records them.
SEARCH_SETTINGS = tuple(field.name for field in _SETTING_FIELDS)
# Each setting's search flag help: (for the tools that translate with a run, for the export).
SETTING_HELP = {field.name: field.metadata["help"] for field in _SETTING_FIELDS}
# The settings a run may record in config.json ("search").
RECORDED_SETTINGS = tuple(field.name for field in _SETTING_FIELDS if field.metadata["recorded"])

DEFAULT_SEARCH = SearchConfig()

# The source length an export keeps when none is given.
EXPORT_MAX_INPUT_LENGTH = 256
