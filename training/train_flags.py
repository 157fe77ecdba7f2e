"""train.py's flags: those of the config fields (training/config.py), the hand-written ones beside
them (the user files, the model overrides, --config), the validators that check them together, and
the run configuration they describe (`config_from_flags`)."""

import os

from absl import app, flags

from common import progress
from common.errors import UserError
from data import multilingual
from data.sources import builtin_corpora, corpus_mix, user_corpus
from data.vocabulary_options import check_user_defined_symbols
from models.presets import MODEL_OPTIONS, layer_shape, model_config
from training import config_file, init_from, teachers
from training.config import (
    CORPORA,
    DataConfig,
    RunConfig,
    TrainConfig,
    eval_sentences_from_flag,
    eval_sentences_refusal,
    evaluation_refusal,
    flag_default,
    flag_fields,
    from_flag,
    subword_refusal,
)
from training.recipes import RECIPES, search_record

FLAGS = flags.FLAGS

CONFIG_HELP = (
    "Start from another run's resolved configuration, its model_dir/config.json: its model, data and train "
    "values are the defaults of the flags not given on the command line."
)


class ConfigFileParser(flags.ArgumentParser):
    """--config's parser: sets each flag not given on the command line (so far: one given after
    --config is parsed later and overrides it) to the file's value, through the flag's own parser
    (its bounds, its enum values), before absl runs the validators on the merged values."""

    syntactic_help = "a run's config.json"

    def parse(self, argument):
        try:
            values = config_file.flag_values(argument)
        except config_file.ConfigFileError as error:
            raise ValueError(error.reason) from None
        for name, value in values.items():
            if FLAGS[name].present:
                continue
            try:
                FLAGS[name].value = None if value is None else FLAGS[name].parser.parse(value)
            except (TypeError, ValueError) as error:
                raise ValueError(f"--{name}={value!r}: {error}") from None
        return argument


_DEFINE = {
    "boolean": flags.DEFINE_boolean,
    "enum": flags.DEFINE_enum,
    "float": flags.DEFINE_float,
    "integer": flags.DEFINE_integer,
    "list": flags.DEFINE_list,
    "string": flags.DEFINE_string,
}


def _define_config_flags(config_class):
    """Defines `--<field>` for each field of `config_class` with a flag of its own: its default, help,
    bounds and check are the field's (training/config.py says why they live there)."""
    for field, flag in flag_fields(config_class):
        _DEFINE[flag.kind](field.name, flag_default(field, flag), help=flag.help, **flag.arguments)


def _register_field_checks(config_class):
    """Registers the check of each field of `config_class` that has one (`Flag.refusal`)."""
    for field, flag in flag_fields(config_class):
        if flag.refusal is not None:
            flags.register_validator(field.name, _validator(flag.refusal), message="")


def _validator(refusal):
    def check(value):
        message = refusal(value)
        if message:
            raise flags.ValidationError(message)
        return True

    return check


def _config_values(config_class):
    """The values of `config_class`'s fields that have a flag of their own, from the flags."""
    return {field.name: from_flag(flag, FLAGS[field.name].value) for field, flag in flag_fields(config_class)}


def define_train_flags():
    """Defines train.py's flags and their validators in absl's global FLAGS."""
    flags.DEFINE_string(
        "model_dir", None, "Directory for the config, vocabulary, checkpoints, logs and model.keras.", required=True
    )
    flags.DEFINE_boolean(
        "start_over", False, "Delete the run in --model_dir (checkpoints, logs, model) and start again."
    )
    flags.DEFINE_string(
        "progress_every",
        "60s",
        "When stdout is a file or a pipe (not a terminal, which shows Keras's progress bar): a plain progress line "
        "every N steps (100) or N seconds (30s), besides the one at the end of each epoch; 0: epoch ends only.",
    )
    # Data: the user files, and weights, which DataConfig holds translated (`_files`, `_train_weights`).
    for split in ("train", "dev", "test"):
        flags.DEFINE_string(f"{split}_src", None, f"With --corpus=files: {split} source sentences, one per line.")
        flags.DEFINE_string(f"{split}_tgt", None, f"With --corpus=files: {split} target sentences, line-aligned.")
        flags.DEFINE_string(
            f"{split}_tsv",
            None,
            f"With --corpus=files: {split} pairs as source<TAB>target lines."
            + (
                " Several corpora sampled in proportion to weights: FILE:WEIGHT,FILE:WEIGHT,..."
                if split == "train"
                else ""
            ),
        )
    flags.DEFINE_string(
        "source_weights",
        None,
        "With a built-in corpus: sample its sources in proportion to weights, SOURCE:WEIGHT,... "
        "(deb-en-XX: libreoffice-help where the language has help pages, libreoffice-ui, and for deb-en-de ding); "
        "sources not named weigh 1.",
    )
    # Model: the preset is TrainConfig's; these override its values.
    flags.DEFINE_enum(
        "recipe",
        None,
        sorted(RECIPES),
        "Defaults for the flags not given: small_data is the tiny pre-norm model and schedule for small corpora "
        "and short CPU runs (make demo's); none: the paper's settings.",
    )
    flags.DEFINE_integer("num_layers", None, "Override: layers per stack (N).", lower_bound=1)
    flags.DEFINE_integer(
        "num_decoder_layers",
        None,
        "Override: the decoder's layers, when not --num_layers (a distilled student's shallow decoder: "
        "--preset=student).",
        lower_bound=1,
    )
    flags.DEFINE_integer("hidden_dim", None, "Override: d_model.", lower_bound=2)
    flags.DEFINE_integer("num_heads", None, "Override: attention heads (h).", lower_bound=1)
    flags.DEFINE_integer("intermediate_dim", None, "Override: d_ff.", lower_bound=1)
    flags.DEFINE_float("dropout", None, "Override: P_drop.", lower_bound=0.0, upper_bound=0.99)
    flags.DEFINE_float(
        "attention_dropout", None, "Dropout on attention weights (not in the paper).", lower_bound=0.0, upper_bound=0.99
    )
    flags.DEFINE_float(
        "activation_dropout", None, "Dropout after the ReLU (not in the paper).", lower_bound=0.0, upper_bound=0.99
    )
    flags.DEFINE_boolean("normalize_first", None, "Pre-norm residual blocks instead of the paper's post-norm.")
    # Data, optimisation, fine-tuning, checkpoints and evaluation.
    _define_config_flags(DataConfig)
    _define_config_flags(TrainConfig)
    flags.DEFINE(ConfigFileParser(), "config", None, CONFIG_HELP)
    _register_validators()


def _register_validators():
    """The checks of several flags together (and of single flags beyond their bounds), in FLAGS."""
    flags.register_multi_flags_validator(
        ["train_steps", "checkpoint_every", "eval_every", "steps_per_execution"], _check_steps, message=""
    )
    flags.register_multi_flags_validator(["corpus", "languages", "direction", "init_from"], _check_corpus, message="")
    flags.register_multi_flags_validator(
        ["corpus", "languages", "direction", *user_corpus.FILE_FLAGS], _check_files, message=""
    )
    flags.register_multi_flags_validator(["teacher", "corpus", "languages", "direction"], _check_teacher, message="")
    flags.register_multi_flags_validator(["learning_rate_schedule", "learning_rate"], _check_learning_rate, message="")
    flags.register_multi_flags_validator(["corpus", "source_weights"], _check_source_weights, message="")
    flags.register_multi_flags_validator(["init_from", "init_checkpoint"], _check_init_from, message="")
    _register_field_checks(DataConfig)
    _register_field_checks(TrainConfig)
    flags.register_multi_flags_validator(
        ["subword_alpha", "subword_nbest", "cache_tokenized", "subword_model"], _check_subword_sampling, message=""
    )
    flags.register_multi_flags_validator(["user_defined_symbols", "init_from"], _check_user_defined_symbols, message="")
    flags.register_multi_flags_validator(["batch_tokens", "max_length"], _check_batch, message="")
    flags.register_multi_flags_validator(
        ["distribution", "cpu_replicas", "mixed_precision", "accumulate_steps"], _check_devices, message=""
    )
    flags.register_multi_flags_validator(
        [
            "early_stopping",
            "early_stopping_min_delta",
            "best_metric",
            "eval_sentences",
            "eval_beam_size",
            "eval_every",
            "train_steps",
            "distribution",
        ],
        _check_evaluations,
        message="",
    )
    flags.register_validator("progress_every", _check_progress_every, message="")


def _check_steps(values):
    if values["checkpoint_every"] % values["steps_per_execution"]:
        raise flags.ValidationError(
            f"--checkpoint_every={values['checkpoint_every']} must be a multiple of "
            f"--steps_per_execution={values['steps_per_execution']}"
        )
    if values["train_steps"] % values["checkpoint_every"]:
        raise flags.ValidationError(
            f"--train_steps={values['train_steps']} must be a multiple of --checkpoint_every={values['checkpoint_every']}"
        )
    if values["eval_every"] % values["checkpoint_every"]:
        raise flags.ValidationError(
            f"--eval_every={values['eval_every']} must be a multiple of --checkpoint_every={values['checkpoint_every']}"
        )
    return True


def _check_corpus(values):
    corpus, languages = values["corpus"], values["languages"]
    if not multilingual.is_multilingual(corpus):
        if corpus not in CORPORA:
            raise flags.ValidationError(
                f"--corpus={corpus} is not a corpus: the built-in ones are {', '.join(sorted(CORPORA[:-1]))} "
                "(`python -m data.prepare --list`), several of them joined by commas, or files"
            )
        if not multilingual.is_multilingual(corpus, languages):
            return True  # Several --languages of user files: _check_files.
    try:
        if corpus != "files":
            multilingual.pair_names(corpus, builtin_corpora.CORPORA)
        refusal = values["init_from"] and init_from.tags_refusal(
            values["init_from"],
            init_from.read_parent(values["init_from"]).get("data", {}),
            multilingual.tags_of(corpus, languages),
        )
    except UserError as error:
        raise flags.ValidationError(str(error)) from None
    if corpus != "files" and values["direction"]:
        raise flags.ValidationError(
            f"--direction={values['direction']}: a multilingual model translates from English into each pair's "
            f"language (--corpus={corpus}); leave --direction out"
        )
    if refusal:
        raise flags.ValidationError(refusal)
    return True


def _check_files(values):
    if values["corpus"] != "files":
        given = [name for name in user_corpus.FILE_FLAGS if values[name]]
        if given:
            raise flags.ValidationError(f"--{given[0]} needs --corpus=files (received --corpus={values['corpus']})")
        return True
    try:
        if multilingual.is_multilingual("files", values["languages"]):
            multilingual.pair_names(values["languages"], None, "--languages")
            user_corpus.multilingual_files(values, "--corpus=files")
        else:
            user_corpus.user_files(values, "--corpus=files")
    except UserError as error:
        raise flags.ValidationError(str(error)) from None
    if multilingual.is_multilingual("files", values["languages"]) and values["direction"]:
        raise flags.ValidationError(
            f"--direction={values['direction']}: a multilingual model translates each pair of --languages="
            f"{values['languages']} as given; leave --direction out"
        )
    return True


def _check_teacher(values):
    refusal = values["teacher"] and teachers.refusal(values["teacher"], values)
    if refusal:
        raise flags.ValidationError(refusal)
    return True


def _check_learning_rate(values):
    if values["learning_rate_schedule"] == "constant":
        if values["learning_rate"] is None or not values["learning_rate"] > 0:
            raise flags.ValidationError(
                f"--learning_rate_schedule=constant needs --learning_rate above 0 (received {values['learning_rate']})"
            )
    elif values["learning_rate"] is not None:
        raise flags.ValidationError(
            f"--learning_rate={values['learning_rate']} needs --learning_rate_schedule=constant (the noam schedule "
            "is set by --warmup_steps and --learning_rate_scale)"
        )
    return True


def _check_source_weights(values):
    if values["source_weights"] is None:
        return True
    if values["corpus"] not in builtin_corpora.SOURCES:
        raise flags.ValidationError(
            f"--source_weights needs a built-in corpus (received --corpus={values['corpus']}); with --corpus=files "
            "give --train_tsv=FILE:WEIGHT,FILE:WEIGHT"
        )
    try:
        entries = corpus_mix.parse_weights("--source_weights", values["source_weights"])
    except corpus_mix.WeightsError as error:
        raise flags.ValidationError(str(error)) from None
    known = builtin_corpora.SOURCES[values["corpus"]]
    unknown = [name for name, _ in entries if name not in known]
    if unknown:
        raise flags.ValidationError(
            f"--source_weights={values['source_weights']}: {values['corpus']} has no source {', '.join(unknown)}; "
            f"its sources are {', '.join(known)}"
        )
    return True


def _check_init_from(values):
    if values["init_from"] is None:
        if flags.FLAGS["init_checkpoint"].present:
            raise flags.ValidationError("--init_checkpoint needs --init_from")
        return True
    try:
        init_from.read_parent(values["init_from"])
        if values["init_checkpoint"] != "auto":
            init_from.choose_weights(values["init_from"], values["init_checkpoint"])
    except init_from.InitFromError as error:
        raise flags.ValidationError(str(error)) from None
    return True


def _check_subword_sampling(values):
    train = TrainConfig(**{name: value for name, value in values.items() if name != "subword_model"})
    refusal = subword_refusal(train, values["subword_model"])
    if refusal:
        raise flags.ValidationError(refusal)
    return True


def _check_user_defined_symbols(values):
    symbols = values["user_defined_symbols"] or []
    try:
        check_user_defined_symbols(symbols)
    except UserError as error:
        raise flags.ValidationError(f"--user_defined_symbols: {error}") from None
    refusal = (
        symbols
        and values["init_from"]
        and init_from.symbols_refusal(init_from.read_parent(values["init_from"]), symbols)
    )
    if refusal:
        raise flags.ValidationError(refusal)
    return True


def _check_batch(values):
    if values["batch_tokens"] < values["max_length"]:
        raise flags.ValidationError(
            f"--batch_tokens={values['batch_tokens']} cannot hold one pair of --max_length={values['max_length']} "
            "tokens: raise --batch_tokens or lower --max_length"
        )
    return True


def _check_devices(values):
    if values["accumulate_steps"] > 1 and values["mixed_precision"] == "fp16":
        raise flags.ValidationError(
            f"--accumulate_steps={values['accumulate_steps']} does not combine with --mixed_precision=fp16 "
            "(its loss scaling skips batches); use --mixed_precision=bf16 or none"
        )
    if values["cpu_replicas"] and values["distribution"] != "mirrored":
        raise flags.ValidationError(f"--cpu_replicas needs --distribution=mirrored (received {values['distribution']})")
    if values["distribution"] == "mirrored" and values["cpu_replicas"] == 1:
        raise flags.ValidationError("--cpu_replicas=1 mirrors nothing; use 2 or more, or --distribution=one_device")
    return True


def _check_evaluations(values):
    if eval_sentences_refusal(values["eval_sentences"]):
        return True  # Its own validator names it.
    train = TrainConfig(
        **{name: values[name] for name in values if name != "eval_sentences"},
        eval_sentences=eval_sentences_from_flag(values["eval_sentences"]),
    )
    refusal = evaluation_refusal(train)
    if refusal:
        raise flags.ValidationError(refusal)
    return True


def _check_progress_every(value):
    try:
        progress.parse_interval("progress_every", value)
    except UserError as error:
        raise flags.ValidationError(str(error)) from None
    return True


def _files(split):
    """The split's user files as absolute paths (the config must mean the same files from any directory);
    `_check_files` has checked the flags."""
    tsv = getattr(FLAGS, f"{split}_tsv")
    if tsv and multilingual.is_multilingual(FLAGS.corpus, FLAGS.languages):  # One file per pair.
        return tuple(os.path.abspath(path.strip()) for path in tsv.split(","))
    if tsv and split == "train":
        return tuple(os.path.abspath(path) for path, _ in corpus_mix.parse_train_tsv("--train_tsv", tsv))
    if tsv:
        return (os.path.abspath(tsv),)
    src, tgt = getattr(FLAGS, f"{split}_src"), getattr(FLAGS, f"{split}_tgt")
    return (os.path.abspath(src), os.path.abspath(tgt)) if src else ()


def _train_weights():
    """The weights of several --train_tsv files, or () for one corpus."""
    if FLAGS.corpus != "files" or not FLAGS.train_tsv or multilingual.is_multilingual("files", FLAGS.languages):
        return ()
    entries = corpus_mix.parse_train_tsv("--train_tsv", FLAGS.train_tsv)
    return tuple(weight for _, weight in entries) if len(entries) > 1 else ()


def _model_overrides():
    """The model flags given on the command line (None where not given)."""
    return {name: FLAGS[name].value for name in MODEL_OPTIONS if name in FLAGS and FLAGS[name].value is not None}


def _inherited_model():
    """With --init_from: `(preset, model, vocab_size)` of the parent, the dropout flags given on
    top; a preset, architecture flag or --vocab_size that differs from the parent's is refused."""
    parent = init_from.read_parent(FLAGS.init_from)
    preset = parent.get("train", {}).get("preset", FLAGS.preset)
    vocab_size = parent.get("data", {}).get("vocab_size", FLAGS.vocab_size)
    requested = dict(parent["model"], **_model_overrides())
    differences = init_from.architecture_differences(
        parent, requested, FLAGS.vocab_size if FLAGS["vocab_size"].present else vocab_size
    )
    if FLAGS["preset"].present and FLAGS.preset != preset:
        shapes = (
            f"{preset} ({layer_shape(parent['model'])})",
            f"{FLAGS.preset} ({layer_shape(model_config(FLAGS.preset))})",
        )
        differences.insert(0, ("preset", *shapes))
    if FLAGS["vocabulary"].present and FLAGS.vocabulary != init_from.vocabulary_kind(parent):
        differences.append(("vocabulary", init_from.vocabulary_kind(parent), FLAGS.vocabulary))
    if differences:
        raise app.UsageError(init_from.describe_differences(FLAGS.init_from, differences))
    flags_data = {"corpus": FLAGS.corpus, "languages": FLAGS.languages, "direction": FLAGS.direction}
    refusal = init_from.direction_refusal(FLAGS.init_from, parent, flags_data)
    if refusal:
        raise app.UsageError(refusal)
    return preset, requested, vocab_size


def _vocabulary_options():
    """The vocabulary's symbols, model type and kind: the flags', or a fine-tuning's parent's (it
    keeps the parent's vocabulary)."""
    if FLAGS.init_from:
        parent = init_from.read_parent(FLAGS.init_from)
        return {
            "user_defined_symbols": tuple(parent.get("data", {}).get("user_defined_symbols", ())),
            "subword_model": parent.get("data", {}).get("subword_model", "bpe"),
            "vocabulary": init_from.vocabulary_kind(parent),
        }
    return {
        "user_defined_symbols": tuple(FLAGS.user_defined_symbols or ()),
        "subword_model": FLAGS.subword_model,
        "vocabulary": FLAGS.vocabulary,
    }


def config_from_flags():
    """The frozen run configuration the flags describe."""
    preset, vocab_size = FLAGS.preset, FLAGS.vocab_size
    try:
        if FLAGS.init_from:
            preset, model, vocab_size = _inherited_model()
        else:
            model = model_config(FLAGS.preset, **_model_overrides())
    except UserError as error:
        raise app.UsageError(str(error)) from None
    if model["hidden_dim"] % model["num_heads"] or model["hidden_dim"] % 2:
        raise app.UsageError(
            f"--hidden_dim={model['hidden_dim']} must be even and divisible by --num_heads={model['num_heads']}"
        )
    data = DataConfig(
        **{
            **_config_values(DataConfig),
            "cache_dir": os.path.abspath(FLAGS.cache_dir),
            "deb_dir": FLAGS.deb_dir and os.path.abspath(FLAGS.deb_dir),
            "train_files": _files("train"),
            "train_weights": _train_weights(),
            "source_weights": dict(corpus_mix.parse_weights("--source_weights", FLAGS.source_weights))
            if FLAGS.source_weights
            else {},
            "dev_files": _files("dev"),
            "test_files": _files("test"),
            "vocab_size": vocab_size,
            **_vocabulary_options(),
        }
    )
    train = TrainConfig(
        **{
            **_config_values(TrainConfig),
            "preset": preset,
            "init_from": FLAGS.init_from and os.path.abspath(FLAGS.init_from),
        }
    )
    search = search_record(FLAGS.recipe) if FLAGS.recipe else None
    if FLAGS.config and not FLAGS.recipe:
        search = config_file.search_record(FLAGS.config)
    record = {"search": search} if search else {}
    return RunConfig(model_dir=FLAGS.model_dir, model=model, data=data, train=train, record=record)
