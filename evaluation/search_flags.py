"""The flags evaluate.py and translate.py share: the model (a run or an export), the search and
the batching, with the paper's defaults from `models.search_config.DEFAULT_SEARCH`."""

from absl import flags

from models.search_config import DEFAULT_SEARCH
from training import run_dir

# Said of --model_dir in the tools' help: where the search flags' defaults may come from.
RECORDED_SEARCH_HELP = (
    " A search flag not given takes the run's recorded search (config.json \"search\", e.g. its recipe's), if any."
)

# Flags that configure the search and input length of --model_dir; an export has them built in.
SEARCH_FLAGS = ("beam_size", "alpha", "max_extra_length", "min_length_ratio", "max_input_length")


def define_model_and_search_flags():
    """Defines --model_dir, --export_dir, the search flags, --batch_size and --checkpoint, and
    the rule that exactly one of --model_dir and --export_dir is given."""
    flags.DEFINE_string(
        "model_dir",
        None,
        "A training run's directory (model.keras, spm.model, config.json, checkpoints/)." + RECORDED_SEARCH_HELP,
    )
    flags.DEFINE_string(
        "export_dir", None, "A SavedModel written by `python -m export` (or its base directory of versions)."
    )
    flags.DEFINE_integer(
        "beam_size", DEFAULT_SEARCH.beam_size, "Beam size (section 6.1: 4); 1 is greedy decoding.", lower_bound=1
    )
    flags.DEFINE_float("alpha", DEFAULT_SEARCH.alpha, "Length-penalty exponent (section 6.1: 0.6).", lower_bound=0.0)
    flags.DEFINE_integer(
        "max_extra_length",
        DEFAULT_SEARCH.max_extra_length,
        "Output tokens allowed beyond the input length (section 6.1: 50).",
        lower_bound=1,
    )
    flags.DEFINE_float(
        "min_length_ratio",
        DEFAULT_SEARCH.min_length_ratio,
        "At least floor(n * this) output tokens for n source tokens (EOS barred before); 0: no minimum.",
        lower_bound=0.0,
    )
    flags.DEFINE_integer("batch_size", 32, "Sentences per search call.", lower_bound=1)
    flags.DEFINE_integer(
        "max_input_length",
        DEFAULT_SEARCH.max_input_length,
        "Source tokens kept, EOS included (default: the run's max_length); longer lines are cut and reported.",
        lower_bound=2,
    )
    run_dir.define_checkpoint_flag()
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
    run = run_dir.RunDir(model_dir)
    config = run.read_config() or {}
    settings = run_dir.search_settings(config.get("search"), run.config_path)
    applied = []
    for name, value in settings.items():
        if not flag_values[name].present:
            flag_values[name].value = value
            applied.append(f"--{name}={value:g}")
    if not applied:
        return None
    chosen_for = config["search"].get("chosen_for", "recorded by train.py")
    return f"search of {model_dir} ({chosen_for}): {' '.join(applied)}; a flag on the command line overrides it"


def export_dir_refusal(export_dir, given):
    """The error for flags (`given`, e.g. ["--beam_size"]) that apply to --model_dir only, given
    with --export_dir: it names the export's built-in settings."""
    from inference.saved_model_translator import describe_search_settings

    return (
        f"{', '.join(given)} cannot be used with --export_dir: the export has its weights, search and input "
        f"length built in ({describe_search_settings(export_dir)}); leave {'them' if len(given) > 1 else 'it'} "
        "out, use --model_dir, or export again with other values (python -m export --beam_size=... --alpha=... "
        "--max_extra_length=... --min_length_ratio=... --max_input_length=...)"
    )
