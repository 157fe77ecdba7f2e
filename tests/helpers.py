"""What the tests share besides fixtures: the repository's paths, the tiny model's sizes, the runs of
the tools in new processes, and builders of the corpus and run configs that conftest.py's session
fixtures use. Tests import these from here, never from a conftest.py."""

import contextlib
import dataclasses
import fcntl
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import keras

from common.special_ids import EOS_ID

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Downloaded .deb files persist here between runs (the directory is git-ignored); CI starts empty.
DEB_CACHE = os.environ.get("TRANSFORMER_TEST_DEB_DIR", os.path.join(REPO_ROOT, "cache", "test-debs"))

# The product's packages by layer: a package imports only those of lower rank (tests/test_layering.py;
# docs/design.md, "Layers"), and the entry scripts sit on top.
LAYERS = {"common": 0, "data": 1, "models": 1, "inference": 2, "cli": 3, "training": 4, "evaluation": 5, "export": 6}
ENTRY_SCRIPTS = ("train.py", "evaluate.py", "translate.py")


def product_files():
    """The repository-relative paths of every product module: the packages of LAYERS and the entry scripts."""
    paths = list(ENTRY_SCRIPTS)
    for package in LAYERS:
        for root, _, files in os.walk(os.path.join(REPO_ROOT, package)):
            paths += [os.path.relpath(os.path.join(root, name), REPO_ROOT) for name in files if name.endswith(".py")]
    return sorted(path.replace(os.sep, "/") for path in paths)


# The model the shared run trains: small enough for a minute on two cores.
TINY_MODEL = dict(num_layers=2, hidden_dim=64, num_heads=4, intermediate_dim=256, dropout=0.1)

# The fast tier's corpus: `source<TAB>english<TAB>german` lines sampled from the deb-en-de sources
# by tests/fixtures/make_deb_en_de_sample.py.
SAMPLE_TSV = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")


# The settings of the shared export (conftest.py's tiny_export). Small enough that the 64-sentence
# one-by-one check stays within seconds; two buckets below max_input_length so that sentences alone
# and in a batch take different branches.
# The xdist group of the tests that call the shared export loaded in their process
# (tests/conftest.py's `tiny_export_loaded`): one test process runs them all (--dist loadgroup).
SHARED_EXPORT_GROUP = "tests/export::served"
EXPORT_SETTINGS = dict(beam_size=4, alpha=0.6, max_input_length=48, max_extra_length=12, length_buckets=(16,))


def export_arguments(settings):
    """`export.exporter.export_model`'s keyword arguments for settings such as EXPORT_SETTINGS: the
    search's as one `SearchConfig`, and the length buckets."""
    from models.search_config import SearchConfig

    search = {name: value for name, value in settings.items() if name != "length_buckets"}
    return dict(search=SearchConfig(**search), length_buckets=settings["length_buckets"])


# What TensorFlow and Keras print on their own that a tool's stderr must not show
# (common/quiet_logs.py; the tools' tests check their output for these).
STARTUP_NOISE = (
    "absl::InitializeLog",
    "oneDNN custom operations",
    "cuda drivers",
    "cuInit",
    "cpu_feature_guard",
    "shuffle=True",
    "triggered tf.function retracing",
    "To enable the following instructions",
    "AutoGraph could not transform",
)


def once_per_session(tmp_path_factory, name, build):
    """`build(directory)`'s JSON result, built once per test session in `directory`.

    `make test` runs the tests in two pytest-xdist worker processes, each with its own session
    fixtures. What is costly to build (the corpus, the shared training run, the export) is built
    by the first worker that asks, under a file lock, into their common temporary directory; the
    other waits for it and reads the result back. Without xdist this is a plain call.
    """
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # Shared by the workers of this run (and only this run).
    directory, result_path = root / name, root / f"{name}.json"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # Released when the file closes, also on an error.
        if result_path.exists():
            return json.loads(result_path.read_text())
        directory.mkdir(exist_ok=True)
        result_path.write_text(json.dumps(build(str(directory))))
        return json.loads(result_path.read_text())  # The same types for the builder as for the others.


def build_sample_corpus(cache_dir):
    """SAMPLE_TSV built as the corpus "deb-en-de" in `cache_dir`, by the same cleaning, hash split and
    per-source test files as the real one; `builtin_corpora.prepare_corpus` then finds it cached."""
    from data.sources import builtin_corpora, corpus_cache, corpus_writer

    sources = {}
    with open(SAMPLE_TSV, encoding="utf-8") as handle:
        for line in handle:
            source, english, german = line.rstrip("\n").split("\t")
            sources.setdefault(source, []).append((english, german))
    extra = {
        "packages": [],
        "credits": {
            source: builtin_corpora.CREDITS[source].format(packages="the deb-en-de sample") for source in sources
        },
        "sample": SAMPLE_TSV,
    }
    build = lambda tmp_dir: corpus_writer.write_corpus(tmp_dir, "deb-en-de", ("en", "de"), sources, extra=extra)
    return corpus_cache.build_atomically(cache_dir, "deb-en-de", build)


def tiny_run_config(model_dir, corpus_cache_dir, **train_overrides):
    """A RunConfig for a tiny model on the cached deb-en-de corpus (2k vocabulary)."""
    from training.config import DataConfig, RunConfig, TrainConfig

    train = dict(
        preset="tiny",
        train_steps=200,
        batch_tokens=2048,
        warmup_steps=100,
        learning_rate_scale=2.0,
        distribution="one_device",
        checkpoint_every=100,
        keep_checkpoints=3,
        eval_every=200,
        eval_sentences=32,
        seed=1234,
    )
    train.update(train_overrides)
    data = DataConfig(corpus="deb-en-de", cache_dir=corpus_cache_dir, deb_dir=DEB_CACHE, vocab_size=2000, max_length=64)
    return RunConfig(model_dir=str(model_dir), model=dict(TINY_MODEL), data=data, train=TrainConfig(**train))


# For in-process runs that compare two settings: a model, vocabulary and batch as small as a few
# epochs with a dev evaluation allow.
SMALL_MODEL = dict(num_layers=1, hidden_dim=32, num_heads=2, intermediate_dim=64, dropout=0.1)


def build_before_fit(model):
    """Creates a compiled Transformer's variables and its optimizer's before `fit`, as
    training.model_building does: a TensorFlow `fit` that creates them inside its first trace
    traces the train step twice. Returns the model."""
    if not model.built:
        model.build()
    model.optimizer.build(model.trainable_variables)
    return model


def under_file_size_limit(limit, action):
    """Runs `action()` with RLIMIT_FSIZE at `limit` bytes and SIGXFSZ ignored (writes past it fail
    with EFBIG instead of killing the process), then restores both."""
    import resource
    import signal

    previous_limit = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous_handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, previous_limit[1]))
    try:
        return action()
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, previous_limit)
        signal.signal(signal.SIGXFSZ, previous_handler)


def small_run_config(model_dir, corpus, **train_overrides):
    """`tiny_run_config` with SMALL_MODEL, a 500-piece vocabulary and 512-token batches, on the
    built corpus `corpus` (a CorpusPaths, e.g. the sample_corpus fixture)."""
    config = tiny_run_config(model_dir, os.path.dirname(corpus.root), batch_tokens=512, **train_overrides)
    return dataclasses.replace(config, model=dict(SMALL_MODEL), data=dataclasses.replace(config.data, vocab_size=500))


QUICK_TRAIN_FLAGS = (
    "--max_length=64",
    "--batch_tokens=1024",
    "--train_steps=10",
    "--checkpoint_every=10",
    "--eval_every=10",
    "--eval_sentences=0",
    "--distribution=one_device",
)
TOOL_ENV = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow", CI="1")


def run_train_py(model_dir, *flags, timeout=600):
    """`python train.py --model_dir=model_dir *flags` in a new process, its output into files
    (`run_logged`: the CompletedProcess, its output checked plain)."""
    command = [sys.executable, os.path.join(REPO_ROOT, "train.py"), f"--model_dir={model_dir}", *flags]
    return run_logged(command, cwd=REPO_ROOT, env=TOOL_ENV, text=True, timeout=timeout)


# What progress meant for a terminal leaves in a file: carriage returns, backspaces, escape codes.
TERMINAL_CONTROLS = ("\r", "\b", "\x1b")


def assert_plain_output(text):
    """A tool's stdout or stderr written to a file: plain lines, without terminal controls or
    TensorFlow's start-up lines."""
    found = [control for control in TERMINAL_CONTROLS if control in text]
    assert not found, f"{found} in: {text[-2000:]!r}"
    noise = [line for line in text.splitlines() if any(marker in line for marker in STARTUP_NOISE)]
    assert not noise, noise


# make test's XLA_FLAGS for its JAX pass (the Makefile's JAX_TEST_CACHE): the tests compile far more
# than they run, and these compile faster with the same results (XLA's CPU backend at its lowest
# optimization level, its LLVM IR emitters for fusions rather than the newer MLIR ones).
TEST_XLA_FLAGS = ("--xla_backend_optimization_level=0", "--xla_cpu_use_fusion_emitters=false")


def jax_environment(*xla_flags):
    """os.environ for a process run under JAX: KERAS_BACKEND=jax, and TEST_XLA_FLAGS after
    `xla_flags` and any XLA_FLAGS already set."""
    flags = " ".join([os.environ.get("XLA_FLAGS", ""), *xla_flags, *TEST_XLA_FLAGS]).strip()
    return dict(os.environ, KERAS_BACKEND="jax", XLA_FLAGS=flags)


def run_logged(command, text=False, **options):
    """`subprocess.run(command, **options)` with stdout and stderr each written to a file, as
    `tool > out.log 2> err.log` (or cron, or CI) runs a tool: no terminal, no pipe. Returns the
    CompletedProcess with the files' contents as `stdout` and `stderr` (str with `text`), each
    checked by `assert_plain_output`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        completed = subprocess.run(command, stdout=out, stderr=err, **options)
        out.seek(0)
        err.seek(0)
        outputs = [out.read(), err.read()]
    for output in outputs:
        assert_plain_output(output.decode("utf-8", "replace"))
    if text:
        outputs = [output.decode("utf-8", "replace") for output in outputs]
    completed.stdout, completed.stderr = outputs
    return completed


def assert_train_refuses(model_dir, argv, message, status=None):
    """Runs train.py with `argv` and checks it is refused with `message` on stderr (and exit
    `status` when given; else any failure), no traceback, and nothing written at `model_dir`."""
    completed = run_train_py(model_dir, *argv, timeout=120)
    assert completed.returncode == status if status is not None else completed.returncode != 0
    assert message in completed.stderr, completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr
    assert not os.path.exists(model_dir)


class EosBiasModel:
    """A `Transformer` seen through `translate_ids`'s interface (encode, initial_cache,
    plan_decoding, decode, output_projection, pad_id, variables; an export's `hidden_dim` and
    `compute_dtype` too) with `bias` added to the EOS logit of every decoding step: +1e9 forces EOS
    first, -1e9 forbids it so every hypothesis runs to its maximum length."""

    def __init__(self, model, bias):
        self.model = model
        self.pad_id = model.pad_id
        self.variables = model.variables
        self.hidden_dim, self.compute_dtype = model.hidden_dim, model.compute_dtype
        self.vocabulary_size = model.vocabulary_size
        values = [0.0] * model.vocabulary_size
        values[EOS_ID] = bias
        self.bias = keras.ops.convert_to_tensor(values, "float32")

    def encode(self, *args, **kwargs):
        return self.model.encode(*args, **kwargs)

    def initial_cache(self, *args, **kwargs):
        return self.model.initial_cache(*args, **kwargs)

    def plan_decoding(self, *args, **kwargs):
        return self.model.plan_decoding(*args, **kwargs)

    def output_projection(self, *args, **kwargs):
        return self.model.output_projection(*args, **kwargs)

    def decode(self, *args, **kwargs):
        outputs = self.model.decode(*args, **kwargs)
        if isinstance(outputs, tuple):
            return (outputs[0] + self.bias,) + tuple(outputs[1:])
        return outputs + self.bias

    def __call__(self, inputs, training=False):
        return self.model(inputs, training=training) + self.bias


def load_benchmark(name):
    """benchmarks/<name>.py imported as a module, and its path."""
    path = os.path.join(REPO_ROOT, "benchmarks", f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, path


def build_sample_multilingual(cache_dir, deb_dir):
    """The corpora of a two-pair multilingual run in `cache_dir`: the deb-en-de sample
    (`build_sample_corpus`) and deb-en-ja from sample packages written into `deb_dir`
    (`tests.data.helpers.write_sample_debs`). Returns {name: CorpusPaths}."""
    from data.sources import builtin_corpora
    from tests.data.helpers import write_sample_debs

    german = build_sample_corpus(cache_dir)
    write_sample_debs(deb_dir, "ja")
    return {"deb-en-de": german, "deb-en-ja": builtin_corpora.prepare_corpus("deb-en-ja", cache_dir, deb_dir)}


def warmup_requests(export_version_dir):
    """The `PredictionLog` protos of an export's warm-up file, read as TensorFlow Serving reads it
    (a TFRecord file of serialized logs in `assets.extra/`)."""
    # TensorFlow and its Serving protos load here only: the JAX runs of the tests import this module.
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_log_pb2

    from export import warmup

    path = os.path.join(export_version_dir, "assets.extra", warmup.WARMUP_FILE)
    return [prediction_log_pb2.PredictionLog.FromString(record.numpy()) for record in tf.data.TFRecordDataset(path)]


@contextlib.contextmanager
def tool_flags():
    """absl's global FLAGS cleared for one tool's flags: the flags another tool defined there before
    are set aside, and on exit the ones defined meanwhile are deleted and those put back."""
    from absl import app, flags, logging  # noqa: F401  (absl's own flags, defined before the tool's)

    set_aside = {}
    for name in list(flags.FLAGS):
        if not (flags.FLAGS.find_module_defining_flag(name) or "").startswith("absl"):
            set_aside[name] = flags.FLAGS[name]
            delattr(flags.FLAGS, name)
    before = set(flags.FLAGS)
    try:
        yield flags.FLAGS
    finally:
        flags.FLAGS.unparse_flags()
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)
        for name, flag in set_aside.items():
            flags.FLAGS[name] = flag


def train_flags_refusal(model_dir, argv, command_line=False):
    """What train.py says of `argv` before training, in this process: absl's parse with its
    validators (the message as train.py prints it), then the run configuration of the flags; None
    for no refusal. `command_line`: also the checks of the command line itself
    (`launch.checked_config`, which train.py runs; --verbosity=0 keeps it from filtering this
    process's stderr, common/quiet_logs.py). (How train.py prints a refusal and exits:
    tests/training/test_train.py.)"""
    from absl import app, flags

    from common.errors import UserError, refused_flags_message
    from training import launch, train_flags

    with tool_flags() as flag_values:
        train_flags.define_train_flags()
        verbosity = ["--verbosity=0"] if command_line else []
        try:
            flag_values(["train.py", *verbosity, f"--model_dir={model_dir}", *argv])
        except flags.Error as error:
            return refused_flags_message(error)
        try:
            launch.checked_config(["train.py"]) if command_line else train_flags.config_from_flags()
        except (app.UsageError, UserError) as error:
            return str(error)
    return None
