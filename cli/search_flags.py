"""The search flags of evaluate.py, translate.py and `python -m export` (`define_search_flags`),
translate.py's sampling flags (`define_sampling_flags`), and the flags evaluate.py and translate.py
share: the model (a run or an export) and the batching.

The flags' defaults are `models.search_config.DEFAULT_SEARCH`'s; their values are checked by
`models.search_config.check_setting` as they are parsed (the sampling flags, by `Sampling`, together),
and become one `SearchConfig` (`search_from_flags`), after `apply_run_search` has filled those not
given from the run's record.
"""

from absl import flags

from cli import checkpoint_flag
from inference import runs
from inference.runs import run_paths
from models.search_config import (
    DEFAULT_SEARCH,
    EXPORT_MAX_INPUT_LENGTH,
    SEARCH_SETTINGS,
    SETTING_BOUNDS,
    SETTING_CHOICES,
    SETTING_HELP,
    Sampling,
    SearchConfig,
    SearchConfigError,
    check_setting,
)

# Said of --model_dir in the tools' help: where the search flags' defaults may come from.
RECORDED_SEARCH_HELP = (
    " A search flag not given takes the run's recorded search (config.json \"search\", e.g. its recipe's), if any."
)

# Flags that configure the search and input length of --model_dir; an export has them built in.
SEARCH_FLAGS = SEARCH_SETTINGS
# translate.py's sampling flags and the `Sampling` setting each sets.
SAMPLING_FLAGS = {
    "sampling_topk": "top_k",
    "sampling_topp": "top_p",
    "sampling_temperature": "temperature",
    "seed": "seed",
}


def _setting_parser(name):
    """An absl parser of search setting `name` that checks it with `check_setting`; its lower
    bound only words the flag's help ("a positive integer"), as a string setting's choices do."""
    if name in SETTING_CHOICES:

        class ChoiceParser(flags.EnumParser):
            def parse(self, argument):
                return check_setting(name, argument)

        return ChoiceParser(SETTING_CHOICES[name])
    kind, least = SETTING_BOUNDS[name]
    base = flags.IntegerParser if kind is int else flags.FloatParser

    class SettingParser(base):
        def parse(self, argument):
            return check_setting(name, self.convert(argument))

    return SettingParser(lower_bound=least)


def define_search_flags(export=False, flag_values=flags.FLAGS):
    """Defines a flag for each setting of `SEARCH_SETTINGS` (--beam_size, --alpha, ...), with the
    help its `SearchConfig` field holds.

    Args:
        export: the export's help texts (the search is built into the graph) and its default
            --max_input_length (`EXPORT_MAX_INPUT_LENGTH`, a graph needs a bound); else those of
            the tools that translate with a run (default: the run's max_length).
        flag_values: where to define them (the tools': `absl.flags.FLAGS`).
    """
    defaults = dict(vars(DEFAULT_SEARCH), max_input_length=EXPORT_MAX_INPUT_LENGTH if export else None)
    for name in SEARCH_FLAGS:
        flags.DEFINE(
            _setting_parser(name),
            name,
            defaults[name],
            SETTING_HELP[name][export],
            flag_values=flag_values,
            serializer=flags.ArgumentSerializer(),
        )


def define_sampling_flags(flag_values=flags.FLAGS):
    """Defines --sampling_topk, --sampling_topp, --sampling_temperature and --seed (translate.py's)
    in `flag_values`, and the check of their values, by `Sampling`, as they are parsed."""
    flags.DEFINE_integer(
        "sampling_topk",
        None,
        "Sample translations instead of searching, among the K most likely tokens at each step (0: all).",
        lower_bound=SETTING_BOUNDS["top_k"][1],
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "sampling_topp",
        None,
        "Sample translations instead of searching, within the nucleus at each step: the most likely tokens whose "
        "probability reaches P, in (0, 1]. With --sampling_topk, among those K tokens (top-k, then top-p).",
        flag_values=flag_values,
    )
    flags.DEFINE_float(
        "sampling_temperature", 1.0, "Sampling: logits are divided by this (> 0).", flag_values=flag_values
    )
    flags.DEFINE_integer(
        "seed", 0, "Sampling: the seed; with the line number it fixes each line's sample.", flag_values=flag_values
    )
    flags.register_multi_flags_validator(list(SAMPLING_FLAGS), _check_sampling, message="", flag_values=flag_values)


def _sampling(values):
    """The `Sampling` of the sampling flags' values (by flag name)."""
    return Sampling(
        top_k=values["sampling_topk"] or 0,
        temperature=values["sampling_temperature"],
        seed=values["seed"],
        top_p=1.0 if values["sampling_topp"] is None else values["sampling_topp"],
    )


def _check_sampling(values):
    try:
        _sampling(values)
    except SearchConfigError as error:
        flag = next(flag for flag, name in SAMPLING_FLAGS.items() if name == error.name)
        raise flags.ValidationError(f"--{flag} must be {error.expected}, received {error.value!r}") from None
    return True


def search_from_flags(flag_values):
    """The `SearchConfig` the search flags of `flag_values` (parsed) set, with the `Sampling` of the
    sampling flags where the tool has them and --sampling_topk or --sampling_topp is given."""
    sampling = None
    if "sampling_topk" in flag_values:
        values = {name: flag_values[name].value for name in SAMPLING_FLAGS}
        if values["sampling_topk"] is not None or values["sampling_topp"] is not None:
            sampling = _sampling(values)
    return SearchConfig(**{name: flag_values[name].value for name in SEARCH_FLAGS}, sampling=sampling)


def define_model_and_search_flags():
    """Defines --model_dir, --export_dir, the search flags, --batch_size, --target_language and --checkpoint, and
    the rule that exactly one of --model_dir and --export_dir is given."""
    flags.DEFINE_string(
        "model_dir",
        None,
        "A training run's directory (model.keras, spm.model, config.json, checkpoints/); several joined by "
        "commas translate as an ensemble (their log-probabilities averaged at each step; one vocabulary)."
        + RECORDED_SEARCH_HELP,
    )
    flags.DEFINE_string(
        "export_dir", None, "A SavedModel written by `python -m export` (or its base directory of versions)."
    )
    define_search_flags()
    flags.DEFINE_integer("batch_size", 32, "Sentences per search call.", lower_bound=1)
    flags.DEFINE_string(
        "target_language",
        None,
        "The language a multilingual model (trained on --corpus=deb-en-de,deb-en-fr,...) translates into, e.g. fr: "
        "one it was trained for.",
    )
    checkpoint_flag.define_checkpoint_flag()
    flags.declare_key_flag("checkpoint")  # listed by --helpshort as this module's own
    flags.register_multi_flags_validator(
        ["model_dir", "export_dir"],
        lambda values: bool(values["model_dir"]) != bool(values["export_dir"]),
        message="pass exactly one of --model_dir and --export_dir",
    )


def apply_run_search(flag_values, model_dir):
    """Sets each search flag the command line left out to the value the run at `model_dir`
    records (config.json "search": its recipe's search, chosen on the dev split); returns a line
    for stderr that names them, or None when there was none to set.

    Raises:
        ModelDirError: config.json is not JSON or its "search" is not valid (the file named).
    """
    model_dir = run_paths(model_dir)[0]  # An ensemble's first run.
    run = runs.RunDir(model_dir)
    config = run.read_config() or {}
    settings = runs.search_settings(config.get("search"), run.config_path)
    applied = []
    for name, value in settings.items():
        if not flag_values[name].present:
            flag_values[name].value = value
            applied.append(f"--{name}={value}" if isinstance(value, str) else f"--{name}={value:g}")
    if not applied:
        return None
    chosen_for = config["search"].get("chosen_for", "recorded by train.py")
    return f"search of {model_dir} ({chosen_for}): {' '.join(applied)}; a flag on the command line overrides it"


def export_dir_refusal(export_dir, given):
    """The error for flags (`given`, e.g. ["--beam_size"]) that apply to --model_dir only, given
    with --export_dir: it names the export's built-in settings."""
    # Loads TensorFlow: the tools define their flags from this module before they parse them.
    from inference.saved_model_translator import describe_search_settings

    return (
        f"{', '.join(given)} cannot be used with --export_dir: the export has its weights, search and input "
        f"length built in ({describe_search_settings(export_dir)}); leave {'them' if len(given) > 1 else 'it'} "
        f"out, use --model_dir, or export again with other values (python -m export "
        f"{' '.join(f'--{name}=...' for name in SEARCH_FLAGS)})"
    )
