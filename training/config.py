"""The resolved configuration of a training run, written as JSON into model_dir, and the one place
each of its defaults is written.

`model` and `data` decide what a checkpoint means: a run on an existing model_dir must match them
(or start over); `train` may change between runs. A field declared with `option(...)` carries its
flag's default, help and validation, from which `training.train_flags` defines train.py's
`--<field name>` (docs/design.md).
"""

import dataclasses
import json
import os

from common.errors import UserError
from data import multilingual
from data.sources import builtin_corpora, deb_packages
from data.vocabulary_options import SUBWORD_MODELS, VOCABULARIES, sampling_refusal
from data.vocabulary_size import DEFAULT_VOCAB_SIZE, MIN_VOCAB_SIZE
from inference.runs import CONFIG_FILE
from models.presets import PRESETS
from models.search_config import SearchConfig, SearchConfigError
from training.distribution import DISTRIBUTIONS
from training.init_from import CHOICES as INIT_CHECKPOINTS

BEST_METRICS = ("bleu", "loss")
CORPORA = (*builtin_corpora.CORPORA, "files")
MIXED_PRECISION = ("none", "bf16", "fp16")
LEARNING_RATE_SCHEDULES = ("noam", "constant")


@dataclasses.dataclass(frozen=True)
class Flag:
    """How train.py defines a field's flag: absl's `DEFINE_<kind>` with `help` and `arguments`;
    `to_config` / `to_flag` convert values between flag and field (identity when None); `refusal`,
    the check of the flag's value alone beyond its bounds: `(value) -> message or None`."""

    kind: str
    help: str
    arguments: dict
    to_config: object = None
    to_flag: object = None
    refusal: object = None


def option(default, help_text, kind, to_config=None, to_flag=None, refusal=None, **arguments):
    """A config field with a flag of its own (`Flag`)."""
    flag = Flag(kind, help_text, arguments, to_config, to_flag, refusal)
    return dataclasses.field(default=default, metadata={"flag": flag})


def flag_fields(config_class):
    """`[(field, Flag)]` of the fields of `config_class` that have a flag of their own."""
    return [(field, field.metadata["flag"]) for field in dataclasses.fields(config_class) if "flag" in field.metadata]


def flag_default(field, flag):
    """The flag's default: the field's, in the flag's form."""
    return flag.to_flag(field.default) if flag.to_flag else field.default


def from_flag(flag, value):
    """The field's value for the flag's `value`."""
    return flag.to_config(value) if flag.to_config else value


def eval_sentences_from_flag(value):
    """--eval_sentences as the config holds it: an int, or None for the whole dev split."""
    return None if value.strip().lower() == "all" else int(value)


def eval_sentences_to_flag(value):
    return "all" if value is None else str(value)


def eval_sentences_refusal(value):
    """Why --eval_sentences=`value` (the flag's text) is no number of sentences, or None."""
    if value.strip().lower() == "all" or value.strip().isdigit():
        return None
    return "--eval_sentences must be a number of sentences (0 or more) or all"


def _learning_rate_scale_refusal(value):
    return None if value > 0 else "--learning_rate_scale must be above 0 (0 would never move the weights)"


def _ema_decay_refusal(value):
    return ema_refusal(TrainConfig(ema_decay=value))


@dataclasses.dataclass(frozen=True)
class DataConfig:
    corpus: str = option(
        "deb-en-de",
        "Training corpus: deb-en-XX (a language of Debian's LibreOffice translations; `python -m data.prepare "
        "--list` shows them), tatoeba-en-es, several of them joined by commas (one multilingual model from "
        "English, each source tagged <2xx> with its target language), or files (your own, with --train_tsv or "
        "--train_src/--train_tgt).",
        "string",
    )
    cache_dir: str = option("cache/corpora", "Where corpora are built and cached.", "string")
    deb_dir: str | None = option(None, "Directory of already-downloaded .deb files for a deb-en-XX corpus.", "string")
    deb_source: str = option(
        "auto",
        "How missing deb-en-XX .deb files are fetched: apt, mirror (--deb_mirror over HTTPS), or auto "
        "(apt where apt-get is installed, else mirror).",
        "enum",
        enum_values=list(deb_packages.DEB_SOURCES),
    )
    deb_mirror: str = option(
        deb_packages.DEFAULT_MIRROR, "Root URL of the Debian mirror for --deb_source=mirror.", "string"
    )
    languages: str | None = option(
        None,
        "With --corpus=files: source-target language codes of the files, e.g. en-fr; several (en-de,en-fr) train "
        "one multilingual model, one --train_tsv/--dev_tsv/--test_tsv file per pair.",
        "string",
    )  # Built-in corpora know theirs.
    direction: str | None = option(
        None, "Translation direction, e.g. en-de or de-en (default: the corpus's).", "string"
    )
    teacher: str | None = option(
        None,
        "Distilled students (docs/training.md): the run, or runs joined by commas, whose translations of the "
        "training sources --train_tsv holds; recorded in the run, and refused unless each translates its direction.",
        "string",
        to_config=lambda value: value and ",".join(os.path.abspath(path) for path in value.split(",")),
    )
    train_files: tuple = ()  # User corpus: (tsv,) or (src, tgt); with train_weights, several TSVs.
    train_weights: tuple = ()  # A weight per training TSV of a weighted mix (data.sources.corpus_mix).
    source_weights: dict = dataclasses.field(default_factory=dict)  # {source: weight} of a built-in corpus.
    dev_files: tuple = ()
    test_files: tuple = ()
    pair_sampling_temperature: float = option(
        multilingual.DEFAULT_TEMPERATURE,
        "With several --corpus pairs: draw each with probability proportional to (its share of the pairs)^(1/T); "
        "1 follows the sizes, larger values draw small pairs more often.",
        "float",
        lower_bound=1.0,
    )
    subword_model: str = option(
        "bpe",
        "SentencePiece model of the vocabulary: bpe (the paper's byte-pair encoding) or unigram (a unigram language "
        "model; --subword_nbest samples among its best segmentations).",
        "enum",
        enum_values=list(SUBWORD_MODELS),
    )
    user_defined_symbols: tuple = option(
        (),
        "Comma-separated pieces the SentencePiece vocabulary keeps whole wherever they occur (tags such as "
        "<2fr>, placeholders); not <pad>, <s>, </s>, <unk> or a byte piece <0xNN>.",
        "list",
        to_config=tuple,
        to_flag=list,
    )
    vocabulary: str = option(
        "shared",
        "shared: one SentencePiece vocabulary for both languages and one embedding matrix for both stacks and the "
        "output projection (section 3.4); separate: each side its own vocabulary (other scripts) and the encoder its "
        "own embedding.",
        "enum",
        enum_values=list(VOCABULARIES),
    )
    vocab_size: int = option(
        DEFAULT_VOCAB_SIZE,
        "SentencePiece vocabulary size (shared by both languages, or of each with --vocabulary=separate).",
        "integer",
        lower_bound=MIN_VOCAB_SIZE,
    )
    max_length: int = option(
        128,
        "Longest sequence in tokens (with BOS/EOS); longer pairs are dropped and counted.",
        "integer",
        lower_bound=8,
    )


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    preset: str = option(
        "base", "Model size: the paper's base or big, or tiny for CPUs.", "enum", enum_values=sorted(PRESETS)
    )
    train_steps: int = option(
        100000,
        "Total optimizer updates (the paper: 100k for base, 300k for big); each takes --accumulate_steps batches.",
        "integer",
        lower_bound=1,
    )
    batch_tokens: int = option(
        4096, "Padded tokens per batch per replica and side (the paper: ~25k per step).", "integer", lower_bound=8
    )
    warmup_steps: int = option(4000, "Learning-rate warm-up updates (equation 3).", "integer", lower_bound=1)
    learning_rate_scale: float = option(
        1.0,
        "Factor on the whole learning-rate schedule (> 0).",
        "float",
        refusal=_learning_rate_scale_refusal,
        lower_bound=0.0,
    )
    label_smoothing: float = option(0.1, "epsilon_ls.", "float", lower_bound=0.0, upper_bound=0.99)
    distribution: str = option(
        "auto",
        "auto: all GPUs mirrored if several, else one device.",
        "enum",
        enum_values=list(DISTRIBUTIONS),
    )
    cpu_replicas: int = option(
        0, "With --distribution=mirrored and no GPU: mirror over this many CPU devices.", "integer", lower_bound=0
    )
    mixed_precision: str = option(
        "none", "Mixed precision policy (fp16 adds loss scaling).", "enum", enum_values=list(MIXED_PRECISION)
    )
    checkpoint_every: int = option(
        1000, "Updates between checkpoints (also the Keras epoch length).", "integer", lower_bound=1
    )
    keep_checkpoints: int = option(
        5, "Checkpoints kept (the paper averages the last 5 for base, 20 for big).", "integer", lower_bound=1
    )
    eval_every: int = option(
        5000, "Updates between dev loss and dev BLEU; a multiple of --checkpoint_every.", "integer", lower_bound=1
    )
    eval_sentences: int | None = option(  # None: the whole dev split; 0: none.
        200,
        "Dev sentences decoded for BLEU at each evaluation: a number (0: none, dev loss only) or all (the whole "
        "dev split).",
        "string",
        to_config=eval_sentences_from_flag,
        to_flag=eval_sentences_to_flag,
        refusal=eval_sentences_refusal,
    )
    eval_beam_size: int = option(1, "Beam size of the dev BLEU's search (1: greedy, the quickest).", "integer")
    eval_no_repeat_ngram_size: int = option(
        0,
        "The dev BLEU's repetition guard (as --no_repeat_ngram_size of evaluate.py; 0: off).",
        "integer",
        lower_bound=0,
    )
    best_metric: str = option(
        "bleu",
        "What ranks the dev evaluations for the best checkpoint (checkpoints/best.weights.h5): dev BLEU "
        "(higher is better) or dev loss (lower is better).",
        "enum",
        enum_values=list(BEST_METRICS),
    )
    early_stopping: int = option(
        0,
        "End training after this many dev evaluations in a row without an improvement of --best_metric above "
        "--early_stopping_min_delta, and write model.keras from the best checkpoint (0: never).",
        "integer",
        lower_bound=0,
    )
    early_stopping_min_delta: float = option(
        0.0,
        "The improvement (BLEU points, or loss) an evaluation must exceed to count for --early_stopping.",
        "float",
        lower_bound=0.0,
    )
    seed: int = option(
        1234, "Seed for initialisation, dropout and data order.", "integer", lower_bound=0, upper_bound=2**32 - 1
    )
    jit_compile: bool | None = option(
        None, "Compile the train step with XLA (default: on GPUs, not on CPUs).", "boolean"
    )
    steps_per_execution: int = option(
        1,
        "Batches run per call into the compiled step; the host reads the "
        "logs once per call (fewer round-trips on GPUs). Must divide --checkpoint_every.",
        "integer",
        lower_bound=1,
    )
    cache_tokenized: bool = option(
        False,
        "Keep the tokenized training pairs in memory after the first pass "
        "(later passes skip reading and tokenizing; pairs are shuffled instead of lines).",
        "boolean",
    )
    subword_alpha: float = option(
        0.0,
        "Subword regularization: sample a segmentation of each training sentence at each pass, in (0, 1]: a "
        "BPE vocabulary drops each merge with this probability (BPE-dropout; 0.1 is usual), a unigram one "
        "smooths with it. 0: off. Evaluation, translation and the export always segment deterministically.",
        "float",
    )
    subword_nbest: int = option(
        -1,
        "With --subword_alpha and --subword_model=unigram: sample from the N best segmentations, up to 512 (-1: "
        "from all).",
        "integer",
    )
    learning_rate_schedule: str = option(
        "noam",
        "noam: equation (3), warm-up then inverse square root; constant: --learning_rate throughout (fine-tuning).",
        "enum",
        enum_values=list(LEARNING_RATE_SCHEDULES),
    )
    learning_rate: float | None = option(
        None, "With --learning_rate_schedule=constant: the learning rate (> 0).", "float"
    )
    init_from: str | None = option(
        None,
        "Start from this run directory's weights and vocabulary (its architecture and --vocab_size are "
        "kept); the optimizer and the step start afresh.",
        "string",
    )
    init_checkpoint: str = option(
        "auto",
        "With --init_from: its best checkpoint, its last weights (newest checkpoint, else model.keras), "
        "or auto: best where it has one, else last.",
        "enum",
        enum_values=list(INIT_CHECKPOINTS),
    )
    accumulate_steps: int = option(
        1,
        "Batches per optimizer update (gradient accumulation): the update is the one a batch of all K batches' "
        "pairs would give, its loss normalised by their target tokens together. K times --batch_tokens per "
        "replica and update, e.g. the paper's ~25k target tokens on one device. Steps (--train_steps, "
        "--warmup_steps, --checkpoint_every, --eval_every) count updates.",
        "integer",
        lower_bound=1,
    )
    data_service: str | None = option(
        None,
        "grpc://HOST:PORT of a tf.data service dispatcher (python -m data.service): the training batches are made "
        "on its workers' CPUs, each in its own shuffled order, instead of here. Default: made here.",
        "string",
    )
    ema_decay: float | None = option(
        None,
        "Keep an exponential moving average of the weights, ema = D * ema + (1 - D) * weights after each update, "
        "with this decay D in (0, 1), e.g. 0.9999 (fairseq's --ema-decay): written with each checkpoint "
        "(checkpoints/ema-<step>.weights.h5) and loaded by the tools' --checkpoint=ema. Default: none kept.",
        "float",
        refusal=_ema_decay_refusal,
    )

    def dev_search(self, max_input_length=None):
        """The dev BLEU's `SearchConfig` (--eval_* flags), keeping `max_input_length` source tokens.

        Raises:
            SearchConfigError: a setting out of range.
        """
        return SearchConfig(
            beam_size=self.eval_beam_size,
            max_input_length=max_input_length,
            no_repeat_ngram_size=self.eval_no_repeat_ngram_size,
        )


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """`model`, `data` and `train`; `record` holds what training found when it started (the mix's
    pair counts, a fine-tuning's parent), written to config.json and never compared."""

    model_dir: str
    model: dict
    data: DataConfig
    train: TrainConfig
    record: dict = dataclasses.field(default_factory=dict)

    def to_json(self):
        return {
            "model": dict(self.model),
            "data": dataclasses.asdict(self.data),
            "train": dataclasses.asdict(self.train),
            **self.record,
        }


def evaluation_refusal(train, distribution=None):
    """Why the best-checkpoint and early-stopping options of `train` cannot work (naming the flags)
    under `distribution` (default `train.distribution`), or None."""
    if train.best_metric not in BEST_METRICS:
        return f"--best_metric={train.best_metric} is not one of {', '.join(BEST_METRICS)}"
    try:
        train.dev_search()
    except SearchConfigError as error:
        flag = f"eval_{error.name}"  # --eval_beam_size or --eval_no_repeat_ngram_size
        return f"--{flag}={getattr(train, flag)}: the dev BLEU's {error}"
    if train.early_stopping_min_delta < 0:
        return f"--early_stopping_min_delta={train.early_stopping_min_delta} must be 0 or more"
    if not train.early_stopping:
        return None
    flag = f"--early_stopping={train.early_stopping}"
    if train.early_stopping < 0:
        return f"{flag} must be 0 (off) or a positive number of evaluations"
    if train.best_metric == "bleu" and train.eval_sentences == 0:
        return (
            f"{flag} ranks dev evaluations by --best_metric=bleu, but --eval_sentences=0 decodes no dev "
            "sentence: pass --eval_sentences=N (or all), or --best_metric=loss"
        )
    if train.eval_every >= train.train_steps:
        return (
            f"{flag} needs dev evaluations during training, but --eval_every={train.eval_every} evaluates only "
            f"at the end of --train_steps={train.train_steps}: lower --eval_every"
        )
    if (distribution or train.distribution) == "multi_worker":
        return (
            f"{flag} is not available with --distribution=multi_worker (dev BLEU is decoded by the chief alone, "
            "and every worker must stop at the same step)"
        )
    return None


def subword_refusal(train, subword_model="bpe"):
    """Why `train`'s subword regularization settings cannot work with a `subword_model` vocabulary
    (the run's DataConfig's), naming the flags, or None."""
    if not train.subword_alpha:
        if train.subword_nbest != -1:
            return f"--subword_nbest={train.subword_nbest} needs --subword_alpha (sampling is off without it)"
        return None
    refusal = sampling_refusal(train.subword_alpha, train.subword_nbest)
    if refusal is None and train.subword_nbest != -1 and subword_model == "bpe":
        refusal = (
            f"--subword_nbest={train.subword_nbest} picks among a unigram vocabulary's segmentations; a BPE "
            "vocabulary samples by dropping merges (--subword_alpha alone): leave it out or pass "
            "--subword_model=unigram"
        )
    if refusal is None and train.cache_tokenized:
        refusal = (
            f"--subword_alpha={train.subword_alpha} samples a new segmentation at each pass, but --cache_tokenized "
            "keeps the first pass's: drop one of them"
        )
    return refusal


def ema_refusal(train):
    """Why `train.ema_decay` cannot be a moving average's decay (naming the flag), or None."""
    decay = train.ema_decay
    if decay is None or (isinstance(decay, (int, float)) and 0 < decay < 1):
        return None
    return (
        f"--ema_decay={decay} must lie strictly between 0 and 1 (the weight of the old average in each update, "
        "e.g. 0.9999); leave it out to keep no average"
    )


class ConfigMismatchError(UserError, ValueError):
    """model_dir holds a run with another model or data configuration."""


def _normalise(value):
    return json.loads(json.dumps(value))


# Where the data lives or comes from, not what it is: a run may move its cache (another machine,
# another disk) and fetch its packages another way.
LOCATION_KEYS = ("cache_dir", "deb_dir", "deb_source", "deb_mirror")
# User files, compared as absolute paths (configs written before paths were made absolute hold them
# as typed, relative to the directory train.py ran in).
PATH_KEYS = ("train_files", "dev_files", "test_files")


# Data keys added after configs were first written, with the value that an older config meant.
_DATA_DEFAULTS = {
    "train_weights": [],
    "source_weights": {},
    "user_defined_symbols": [],
    "subword_model": "bpe",
    "vocabulary": "shared",
    "teacher": None,
}


def _comparable(section, values, default_direction):
    values = dict(values)
    if section != "data":
        return values
    for key, default in _DATA_DEFAULTS.items():
        values.setdefault(key, default)
    for key in LOCATION_KEYS:
        values.pop(key, None)
    for key in PATH_KEYS:
        values[key] = [os.path.abspath(path) for path in values.get(key) or ()]
    if values.get("direction") is None:
        values["direction"] = default_direction
    return values


def check(config, default_direction=None):
    """Checks that model_dir/config.json, if there, has the same model and data as `config`.
    Locations may differ; user file paths compare as absolute; an unset direction is `default_direction`.

    Raises:
        ConfigMismatchError: another model or data configuration (names the keys).
    """
    path = os.path.join(config.model_dir, CONFIG_FILE)
    if not os.path.exists(path):
        return
    current = _normalise(config.to_json())
    with open(path, encoding="utf-8") as handle:
        try:
            previous = json.load(handle)
        except ValueError as error:
            raise ConfigMismatchError(
                f"{path} is not valid JSON ({error}); pass --start_over to replace the run"
            ) from error
    differences = []
    for section in ("model", "data"):
        before = _comparable(section, previous.get(section, {}), default_direction)
        after = _comparable(section, current[section], default_direction)
        differences += [
            f"{section}.{key}: {before.get(key)!r} -> {after.get(key)!r}"
            for key in sorted(set(before) | set(after))
            if before.get(key) != after.get(key)
        ]
    if differences:
        raise ConfigMismatchError(
            f"{config.model_dir} holds a run with another configuration ({'; '.join(differences)}). "
            "Use another --model_dir, or pass --start_over to delete its checkpoints and start again."
        )


def write(config):
    """Writes model_dir/config.json atomically; returns its path."""
    path = os.path.join(config.model_dir, CONFIG_FILE)
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(_normalise(config.to_json()), handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.replace(temporary, path)
    return path


def load(model_dir):
    path = os.path.join(model_dir, CONFIG_FILE)
    if not os.path.exists(path):
        raise FileNotFoundError(f"{model_dir} has no {CONFIG_FILE}: not a model directory written by train.py")
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)
