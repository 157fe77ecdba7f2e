"""train.py end to end: signals and resuming, a full disk, NaN handling, flags, bad input.
Runs whose behaviour does not depend on the corpus's contents train on the sample corpus."""

import csv
import functools
import glob
import hashlib
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import (
    DEB_CACHE,
    REPO_ROOT,
    SMALL_MODEL,
    STARTUP_NOISE,
    TINY_MODEL,
    build_before_fit,
    small_run_config,
    tiny_run_config,
    train_flags_refusal,
    under_file_size_limit,
)
from tests.training.helpers import EMA_DECAY, EmaWatch, assert_ema_run

ENV = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow", CI="1")


def _train_command(model_dir, corpus, *extra):
    return [
        sys.executable,
        os.path.join(REPO_ROOT, "train.py"),
        f"--model_dir={model_dir}",
        f"--cache_dir={os.path.dirname(corpus.root)}",
        f"--deb_dir={DEB_CACHE}",
        "--vocab_size=500",
        "--max_length=64",
        "--preset=tiny",
        *(f"--{key}={value}" for key, value in SMALL_MODEL.items()),
        "--batch_tokens=512",
        "--warmup_steps=30",
        "--learning_rate_scale=2.0",
        "--eval_sentences=0",
        "--distribution=one_device",
        *extra,
    ]


def _command_config(model_dir, corpus, **train_overrides):
    """The RunConfig `_train_command(model_dir, corpus, ...)` trains: the same run, in this process."""
    options = dict(warmup_steps=30, learning_rate_scale=2.0, eval_sentences=0, keep_checkpoints=5)
    return small_run_config(str(model_dir), corpus, **dict(options, **train_overrides))


def _run(command, timeout=600):
    return subprocess.run(command, cwd=REPO_ROOT, env=ENV, capture_output=True, text=True, timeout=timeout)


def _log_rows(model_dir):
    with open(os.path.join(model_dir, "training_log.csv")) as handle:
        return list(csv.DictReader(handle))


def _schedule(step, d_model=SMALL_MODEL["hidden_dim"], warmup=30, scale=2.0):
    return scale * d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


class _StateAtStart(keras.callbacks.Callback):
    """Records the weights and optimizer step a (resumed) run starts from: its first fit's (a resume
    off the epoch boundaries fits a short epoch first)."""

    def on_train_begin(self, logs=None):
        if hasattr(self, "step"):
            return
        self.weights = [np.array(keras.ops.convert_to_numpy(w)) for w in self.model.weights]
        self.step = int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))


def _vocabulary_size(model_dir):
    from data.tokenizer import Tokenizer

    return Tokenizer.from_file(os.path.join(model_dir, "spm.model")).vocabulary_size


def _checkpoint_digests(model_dir):
    digests = {}
    for path in glob.glob(os.path.join(model_dir, "checkpoints", "*")):
        with open(path, "rb") as handle:
            digests[os.path.basename(path)] = hashlib.sha256(handle.read()).hexdigest()
    return digests


@pytest.mark.slow
@pytest.mark.full
def test_tiny_model_lowers_the_dev_loss_on_the_real_corpus(tiny_run):
    from data import pipeline
    from data.tokenizer import Tokenizer
    from models.losses import LabelSmoothedCrossEntropy
    from models.transformer import Transformer

    model_dir, summary = tiny_run
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "spm.model"))
    dev = pipeline.make_dataset(summary["corpus"]["dev"], tokenizer, batch_tokens=2048, max_length=64, shuffle=False)
    untrained = Transformer(tokenizer.vocabulary_size, **TINY_MODEL)
    untrained.compile(loss=LabelSmoothedCrossEntropy())
    initial_loss = untrained.evaluate(dev, verbose=0)
    trained_loss = summary["history"]["val_loss"][-1]
    print(f"dev loss: {initial_loss:.3f} untrained, {trained_loss:.3f} after {summary['step']} steps")
    assert trained_loss < initial_loss - 1.5
    assert summary["step"] == 200


@pytest.mark.slow
def test_fp16_training_stays_finite(sample_corpus, tmp_path):
    from training.trainer import train

    # float16 arithmetic is emulated on a CPU, ten times slower than float32: two steps.
    summary = train(
        small_run_config(
            tmp_path / "fp16",
            sample_corpus,
            train_steps=2,
            checkpoint_every=1,
            eval_every=2,
            eval_sentences=2,
            mixed_precision="fp16",
        )
    )
    losses = summary["history"]["loss"]
    assert len(losses) == 2 and all(np.isfinite(losses))
    model = keras.saving.load_model(summary["model_path"], compile=False)
    assert keras.backend.standardize_dtype(model.dtype_policy.compute_dtype) == "float16"


def test_user_defined_symbols_and_the_subword_model_reach_the_runs_vocabulary(sample_corpus, tmp_path):
    """The run's vocabulary holds the symbols right after the special ids; it is cached under a name
    of its own, beside the corpus's plain vocabulary; --subword_model=unigram trains a unigram one."""
    from data.sources import corpus_cache
    from data.vocabulary_options import vocabulary_stem
    from training.config import DataConfig
    from training.trainer import resolve_tokenizer

    corpus = corpus_cache.check_corpus(shutil.copytree(sample_corpus.root, tmp_path / "corpus"))
    data = DataConfig(vocab_size=500, user_defined_symbols=("<2fr>", "<2de>"))
    tokenizer = resolve_tokenizer(str(tmp_path / "run"), corpus, data)
    assert tokenizer.id_to_piece(tf.constant([4, 5])).numpy().tolist() == [b"<2fr>", b"<2de>"]
    assert os.path.exists(os.path.join(corpus.root, vocabulary_stem(500, ("<2fr>", "<2de>")) + ".model"))
    plain = resolve_tokenizer(str(tmp_path / "plain"), corpus, DataConfig(vocab_size=500))
    assert plain.id_to_piece(tf.constant([4])).numpy().tolist() != [b"<2fr>"]
    unigram = resolve_tokenizer(str(tmp_path / "unigram"), corpus, DataConfig(vocab_size=500, subword_model="unigram"))
    with open(os.path.join(corpus.root, "spm-unigram-500.model"), "rb") as f:
        assert unigram.model_proto == f.read()
    assert unigram.sampling(0.5, nbest_size=4).samples


def test_separate_vocabularies_learn_each_side_from_its_own_column(sample_corpus, tmp_path):
    """--vocabulary=separate: spm.source.model from the source column as the run reads it (the
    German one for de-en), spm.model from the target's; each cached by column, the user's symbols
    in both; a later run in the other direction finds both in the cache."""
    from data.sources import corpus_cache
    from data.vocabulary_options import vocabulary_stem
    from training.config import DataConfig
    from training.run_dir import RunDir
    from training.trainer import resolve_tokenizer

    corpus = corpus_cache.check_corpus(shutil.copytree(sample_corpus.root, tmp_path / "corpus"))
    data = DataConfig(vocab_size=400, vocabulary="separate", user_defined_symbols=("<x>",))
    run = RunDir(str(tmp_path / "de-en"))
    target = resolve_tokenizer(run.path, corpus, data, reverse=True)
    source = run.load_source_tokenizer()
    cached = [os.path.join(corpus.root, vocabulary_stem(400, ("<x>",), column=c) + ".model") for c in (0, 1)]
    with open(cached[1], "rb") as german, open(cached[0], "rb") as english:
        assert (source.model_proto, target.model_proto) == (german.read(), english.read())
    pieces = [{p.decode() for p in t.id_to_piece(tf.range(400)).numpy()} for t in (source, target)]
    assert "<x>" in pieces[0] and "<x>" in pieces[1]
    assert any(c in piece for piece in pieces[0] for c in "äöüß") and not any(
        c in piece for piece in pieces[1] for c in "äöüß"
    )
    assert (
        source.tokenize(["Öffnen Sie die Datei."]).row_lengths()[0]
        < target.tokenize(["Öffnen Sie die Datei."]).row_lengths()[0]
    )
    mtimes = [os.path.getmtime(path) for path in cached]
    resolve_tokenizer(str(tmp_path / "en-de"), corpus, data)
    assert [os.path.getmtime(path) for path in cached] == mtimes
    assert RunDir(str(tmp_path / "en-de")).load_source_tokenizer().model_proto == target.model_proto
    # A run that never trained, started again with a shared vocabulary, drops the source's.
    resolve_tokenizer(run.path, corpus, DataConfig(vocab_size=400, user_defined_symbols=("<x>",)), reverse=True)
    assert not run.has_separate_vocabularies()


class _PoisonAfter(keras.callbacks.Callback):
    """Turns the embedding into NaN before the step after `step` (so the loss becomes NaN there),
    recording the run's checkpoints as they were then in `digests`."""

    def __init__(self, model_dir, step):
        super().__init__()
        self.model_dir, self.step, self.digests = model_dir, step, None

    def on_train_batch_begin(self, batch, logs=None):
        if self.digests is None and int(keras.ops.convert_to_numpy(self.model.optimizer.iterations)) == self.step:
            self.digests = _checkpoint_digests(self.model_dir)
            weight = self.model.weights[0]
            weight.assign(np.full(weight.shape, np.nan, keras.backend.standardize_dtype(weight.dtype)))


@pytest.mark.slow
def test_steps_per_execution_and_subword_sampling_change_only_what_they_say(sample_corpus, tmp_path):
    """--steps_per_execution changes only how often the host looks: the same losses and weights (both
    runs keep the moving average of the weights, --ema_decay: the first's is checked by
    tests/training/helpers.py's `assert_ema_run`).
    --subword_alpha resegments the training stream (other losses from the same seed), while the
    run's translator segments deterministically: a sampling tokenizer there would give other ids
    (`encode`, the segmentation `translate` reads) at each call. And a NaN loss (the sampled run's,
    in its second epoch) stops with a clear error and keeps its checkpoints."""
    from inference.loading import load_translator
    from training.trainer import TrainingError, train

    options = dict(train_steps=10, checkpoint_every=5, eval_every=10, eval_sentences=0)
    averaged, watch = dict(options, ema_decay=EMA_DECAY), EmaWatch()
    one_config = small_run_config(tmp_path / "one", sample_corpus, **averaged)
    one = train(one_config, callbacks=[watch])
    five = train(small_run_config(tmp_path / "five", sample_corpus, steps_per_execution=5, **averaged))
    assert one["step"] == five["step"] == 10
    assert sorted(os.listdir(tmp_path / "five" / "checkpoints")) == sorted(os.listdir(tmp_path / "one" / "checkpoints"))
    np.testing.assert_allclose(five["history"]["loss"], one["history"]["loss"], rtol=1e-5)
    weights = [keras.saving.load_model(run["model_path"], compile=False).get_weights() for run in (one, five)]
    for a, b in zip(*weights):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert_ema_run(one_config, watch, one)
    with pytest.raises(ValueError, match="checkpoint_every=5 must be a multiple of steps_per_execution=3"):
        train(small_run_config(tmp_path / "three", sample_corpus, steps_per_execution=3, **options))

    poison = _PoisonAfter(tmp_path / "sampled", 5)
    with pytest.raises(TrainingError, match="loss became NaN or infinite.*newest good one: .*ckpt-000000005"):
        train(small_run_config(tmp_path / "sampled", sample_corpus, subword_alpha=0.3, **options), callbacks=[poison])
    assert len(poison.digests) == 1 and _checkpoint_digests(tmp_path / "sampled") == poison.digests
    # Another stream: not the losses the same seed gives without sampling, which agree to rtol 1e-5
    # above (the first steps of a fresh model are all near ln(vocabulary), so the gap is small).
    (first_epoch, *_) = _log_rows(tmp_path / "sampled")
    assert int(first_epoch["step"]) == 5
    assert not np.isclose(float(first_epoch["loss"]), one["history"]["loss"][0], rtol=1e-5)
    with open(tmp_path / "sampled" / "config.json", encoding="utf-8") as f:
        recorded = json.load(f)["train"]
    assert (recorded["subword_alpha"], recorded["subword_nbest"]) == (0.3, -1)
    translator = load_translator(str(tmp_path / "sampled"), kind="run", checkpoint="last", quiet=True)
    sentences = ["Anna reads a book at 7 o'clock.", "The teacher opens the window."]
    first = translator.encode(sentences)
    assert translator.encode(sentences) == first and translator.encode(sentences) == first
    first_epoch_only = dict(options, train_steps=5, eval_every=5)
    with pytest.raises(TrainingError, match="--cache_tokenized keeps the first pass's"):
        train(
            small_run_config(
                tmp_path / "cached", sample_corpus, subword_alpha=0.3, cache_tokenized=True, **first_epoch_only
            )
        )
    assert not os.path.exists(tmp_path / "cached" / "config.json")


def test_another_configuration_on_an_existing_model_dir_is_refused(tmp_path):
    from training import config as run_config

    # The trainer's order: check against the directory's config.json, then write it.
    first = tiny_run_config(tmp_path, "unused")
    run_config.check(first)
    run_config.write(first)
    changed = tiny_run_config(tmp_path, "unused")
    changed = run_config.RunConfig(changed.model_dir, dict(changed.model, hidden_dim=32), changed.data, changed.train)
    with pytest.raises(ValueError, match="another configuration.*model.hidden_dim: 64 -> 32.*--start_over"):
        run_config.check(changed)
    # More steps on the same model and data is fine.
    longer = tiny_run_config(tmp_path, "unused", train_steps=400)
    run_config.check(longer)
    run_config.write(longer)


BAD_FLAGS = [
    (["--preset=huge"], "flag --preset=huge: value should be one of"),
    (["--train_steps=50", "--checkpoint_every=20"], "--train_steps=50 must be a multiple of --checkpoint_every=20"),
    (["--eval_every=30", "--checkpoint_every=20", "--train_steps=40"], "--eval_every=30 must be a multiple"),
    (["--cpu_replicas=2"], "--cpu_replicas needs --distribution=mirrored"),
    (["--train_src=a.en", "--train_tgt=a.de"], "--train_src needs --corpus=files"),
    (["--corpus=files", "--languages=en-de", "--train_src=a.en"], "--train_src and --train_tgt go together"),
    (["--corpus=files", "--train_tsv=a.tsv"], "--corpus=files needs --languages=SRC-TGT"),
    (["--hidden_dim=100", "--num_heads=8"], "--hidden_dim=100 must be even and divisible by --num_heads=8"),
    (["--corpus=wmt14"], "--corpus=wmt14 is not a corpus: the built-in ones are deb-en-af"),
    (
        ["--steps_per_execution=3", "--checkpoint_every=10", "--train_steps=20", "--eval_every=20"],
        "--checkpoint_every=10 must be a multiple of --steps_per_execution=3",
    ),
    (["--seed=-1"], "flag --seed=-1: -1 is not an integer in the range [0, 4294967295]"),
    (["--learning_rate_scale=0"], "--learning_rate_scale=0.0 must be above 0"),
    (["--batch_tokens=16"], "--batch_tokens=16 cannot hold one pair of --max_length=128 tokens"),
    (["--subword_alpha=1.5"], "--subword_alpha=1.5 must lie in (0, 1]"),
    (["--user_defined_symbols=<2fr>,<s>"], "--user_defined_symbols: user-defined symbol '<s>' collides with"),
    (["--subword_alpha=0.1", "--subword_nbest=8"], "--subword_nbest=8 picks among a unigram vocabulary's"),
    (["--corpus=files", "--languages=de-", "--train_tsv=a.tsv"], "--corpus=files needs --languages=SRC-TGT"),
]


@pytest.mark.parametrize("flags, message", BAD_FLAGS)
def test_bad_flags_are_refused_before_training(flags, message, tmp_path):
    """In process: each refusal's message, one line about the flag that is wrong (no other flag's
    value). How train.py prints one and exits: the next test."""
    refused = train_flags_refusal(tmp_path, flags)
    assert refused is not None and message in refused, refused
    assert "\n" not in refused and not refused.startswith("flags "), refused
    assert not os.path.exists(os.path.join(tmp_path, "config.json"))


# A refused value (absl's parse), a validator of several flags, a check of the run configuration.
@pytest.mark.parametrize("flags, message", [BAD_FLAGS[10], BAD_FLAGS[9], BAD_FLAGS[8]])
def test_train_py_prints_a_refused_flag_as_one_line_and_exits_2(flags, message, tmp_path):
    completed = _run(
        [sys.executable, os.path.join(REPO_ROOT, "train.py"), f"--model_dir={tmp_path}", *flags], timeout=120
    )
    assert completed.returncode == 2
    # One line about the flag that is wrong (and absl's pointer to --helpshort): no other flag's value.
    first, *rest = completed.stderr.splitlines()
    assert first.startswith("train.py: error: ") and message in first, completed.stderr[-2000:]
    assert not first.startswith("train.py: error: flags ") and len(rest) <= 1, completed.stderr[-2000:]
    assert not os.path.exists(os.path.join(tmp_path, "config.json"))


def test_an_unwritable_model_dir_is_named(tmp_path):
    from training.trainer import TrainingError, _check_writable

    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    with pytest.raises(TrainingError, match=f"--model_dir '{blocker}/run' is not writable"):
        _check_writable(str(blocker / "run"))


def test_missing_user_files_are_named(tmp_path):
    """In process: how a UserError leaves train.py (one line, status 2) is its other tests'."""
    from common.errors import UserError
    from training.config import DataConfig, RunConfig, TrainConfig
    from training.trainer import train

    data = DataConfig(
        corpus="files",
        languages="en-fr",
        train_files=(str(tmp_path / "missing.en"), str(tmp_path / "missing.fr")),
        cache_dir=str(tmp_path / "cache"),
    )
    config = RunConfig(model_dir=str(tmp_path / "run"), model=dict(TINY_MODEL), data=data, train=TrainConfig())
    with pytest.raises(UserError, match="missing.en: file not found"):
        train(config)
    assert not (tmp_path / "run").exists()


def _wait_for(path, process, timeout=600):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert os.path.exists(path), f"{path} never appeared"


# The signal test's run: a checkpoint (an epoch) every 10 steps, so that a second's wait lands
# mid-epoch, and steps enough that the first run is still training when its signal comes.
SIGNAL_RUN_EPOCH = 10
SIGNAL_RUN_STEPS = 1000


def _stop_mid_epoch(process, checkpoint_dir, after_step, stop_signal, log_path):
    """Waits for the checkpoint an epoch after `after_step`, sends `stop_signal` a second later (mid-epoch)
    and checks the exit: 128 + the signal within a minute, a checkpoint at the step reached and one
    line naming it, no traceback or startup noise. Returns that checkpoint's `(step, path)`."""
    from inference import checkpoint_files

    try:
        _wait_for(checkpoint_files.checkpoint_path(checkpoint_dir, after_step + SIGNAL_RUN_EPOCH), process)
        time.sleep(1.0)
        process.send_signal(stop_signal)
        started = time.monotonic()
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    output = log_path.read_text()
    assert code == 128 + stop_signal, output[-3000:]
    assert time.monotonic() - started < 60
    assert not [noise for noise in STARTUP_NOISE if noise in output], output[-3000:]
    assert "Traceback" not in output
    stopped_at, path = checkpoint_files.latest_checkpoint(checkpoint_dir)
    assert (
        f"{signal.Signals(stop_signal).name} at step {stopped_at}: stopped after that step and wrote {path}" in output
    )
    assert after_step + SIGNAL_RUN_EPOCH < stopped_at < SIGNAL_RUN_STEPS
    return stopped_at, path


@pytest.mark.slow
def test_a_signal_writes_a_checkpoint_at_the_current_step_and_the_rerun_resumes(sample_corpus, tmp_path, capsys):
    """SIGTERM (a scheduler's notice) mid-epoch: a checkpoint at the step reached, exit 143;
    meanwhile a second train.py on the directory is refused by the lock and the newest checkpoint
    loads. The rerun (here, in this process) resumes from that checkpoint's weights and step, the
    learning rate going on along its schedule, and ends on the epoch boundaries. (The lock held by
    another process, and a SIGKILLed holder's: test_run_dir.py; a checkpoint write killed midway:
    test_checkpoints.py. Ctrl-C, SIGINT, takes the same path with exit 130: test_preemption.py sends
    it to the handlers and the callback.)"""
    from inference import checkpoint_files
    from training.model_building import build_model
    from training.run_dir import RunDir
    from training.trainer import TrainingError, train

    model_dir = str(tmp_path / "stopped")
    checkpoint_dir = os.path.join(model_dir, "checkpoints")
    run = dict(train_steps=SIGNAL_RUN_STEPS, checkpoint_every=SIGNAL_RUN_EPOCH, eval_every=SIGNAL_RUN_STEPS)
    command = _train_command(model_dir, sample_corpus, *(f"--{name}={value}" for name, value in run.items()))
    with open(tmp_path / "first.log", "w") as log:
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=ENV, stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait_for(checkpoint_files.checkpoint_path(checkpoint_dir, SIGNAL_RUN_EPOCH), process)
            with pytest.raises(
                TrainingError, match=f"is being trained by another train.py \\(pid {process.pid} on host"
            ):
                train(_command_config(model_dir, sample_corpus, **run))
            model, _, _ = RunDir(model_dir).load_model("last", quiet=True)  # A complete checkpoint.
            assert model.count_params() > 0
            newest = checkpoint_files.latest_checkpoint(checkpoint_dir)[0]
        except BaseException:
            process.kill()
            raise
        stopped_at, path = _stop_mid_epoch(process, checkpoint_dir, newest, signal.SIGTERM, tmp_path / "first.log")
    assert not os.path.exists(os.path.join(model_dir, "model.keras"))

    # The rerun, two epochs past the signal's step (the run's `train` settings may change between runs).
    first_boundary = SIGNAL_RUN_EPOCH * (stopped_at // SIGNAL_RUN_EPOCH + 1)
    end = first_boundary + SIGNAL_RUN_EPOCH
    capsys.readouterr()
    state, rows_before = _StateAtStart(), len(_log_rows(model_dir))
    config = _command_config(model_dir, sample_corpus, **dict(run, train_steps=end, eval_every=end))
    summary = train(config, callbacks=[state])
    assert f"resuming from {path} at step {stopped_at}" in capsys.readouterr().err
    assert summary["resumed_from"] == stopped_at and summary["step"] == end
    # It starts from the checkpoint's weights and step, not from fresh ones ...
    assert state.step == stopped_at
    saved = build_model(config.model, _vocabulary_size(model_dir), config.train)
    saved.load_weights(path)
    for value, expected in zip(state.weights, saved.weights):
        assert np.array_equal(value, keras.ops.convert_to_numpy(expected))
    fresh = build_model(config.model, _vocabulary_size(model_dir), config.train)
    assert max(np.max(np.abs(a - keras.ops.convert_to_numpy(b))) for a, b in zip(state.weights, fresh.weights)) > 1e-3
    # ... and the learning rate continues the schedule from there.
    resumed_rows = _log_rows(model_dir)[rows_before:]
    assert [int(row["step"]) for row in resumed_rows] == [first_boundary, end]
    for row in resumed_rows:
        assert abs(float(row["learning_rate"]) - _schedule(int(row["step"]) + 1)) < 1e-6
    steps = [step for step, _ in checkpoint_files.list_checkpoints(checkpoint_dir)]
    # After the signal's step, checkpoints are back on the epoch boundaries, up to exactly the end.
    assert [step for step in steps if step > stopped_at] == [first_boundary, end]


def test_the_deb_source_and_mirror_flags_reach_the_package_fetch(tmp_path):
    """In process (the flags are DataConfig's own, as every data flag); how a UserError leaves
    train.py is its other tests'."""
    from common.errors import UserError
    from training.config import DataConfig, RunConfig, TrainConfig
    from training.trainer import train

    (tmp_path / "mirror").mkdir()  # a mirror without the packages: each answer is a 404

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(tmp_path / "mirror"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    mirror = f"http://127.0.0.1:{server.server_address[1]}/debian"
    data = DataConfig(
        cache_dir=str(tmp_path / "cache"), deb_dir=str(tmp_path / "debs"), deb_source="mirror", deb_mirror=mirror
    )
    config = RunConfig(model_dir=str(tmp_path / "run"), model=dict(TINY_MODEL), data=data, train=TrainConfig())
    try:
        with pytest.raises(UserError) as refused:
            train(config)
    finally:
        server.shutdown()
        server.server_close()
    assert f"{mirror}/pool/main/libr/libreoffice/libreoffice-help-en-us_" in str(refused.value)
    assert "HTTP 404" in str(refused.value)


def test_a_first_checkpoint_that_cannot_be_written_says_no_checkpoint_was_written_yet(tmp_path):
    """Under a 100 kB file-size limit (SIGXFSZ ignored, so writes fail with EFBIG) a run's first
    checkpoint fails: the message names the path, the step and that a rerun starts afresh, and no
    temporary file stays. (The same error stopping train.py, with a checkpoint to resume from: the
    full-disk test.)"""
    from inference import checkpoint_files
    from models.transformer import Transformer
    from training import checkpoints
    from training.run_dir import RunDir
    from training.trainer import _write_failure

    run = RunDir(str(tmp_path / "limited"))
    os.makedirs(run.checkpoint_dir)
    model = Transformer(300, **SMALL_MODEL)
    model.compile(optimizer="adam")
    build_before_fit(model)
    model.optimizer.iterations.assign(10)
    with pytest.raises(checkpoints.WriteError) as failed:
        under_file_size_limit(100_000, lambda: checkpoints.save_checkpoint(model, run.checkpoint_dir, 10, keep=5))
    checkpoint = checkpoint_files.checkpoint_path(run.checkpoint_dir, 10)
    message = _write_failure(failed.value, model, run)
    assert message.startswith(f"cannot write {checkpoint}: File too large"), message
    assert "at step 10; no checkpoint was written yet. Make room" in message
    assert os.listdir(run.checkpoint_dir) == []


def _mount_namespace_command():
    """`unshare` into a private mount namespace (as root, or as a user mapped to root), where the
    test may mount a tmpfs that vanishes with the namespace."""
    return ["unshare", "--mount"] if os.geteuid() == 0 else ["unshare", "--user", "--map-root-user", "--mount"]


def _tiny_checkpoint_bytes(tmp_path, vocabulary_size, **model):
    """The size of a checkpoint of the tiny model (`model`'s settings on top) with `vocabulary_size`
    pieces (weights and optimizer state), written here the way train.py writes one."""
    from training.model_building import build_model

    config = tiny_run_config(tmp_path / "unused", tmp_path, batch_tokens=1024, warmup_steps=30)
    model = build_model(dict(config.model, **model), vocabulary_size, config.train)
    path = tmp_path / "sized.weights.h5"
    model.save_weights(str(path))
    size = os.path.getsize(path)
    os.remove(path)
    return size


# The full-disk run's settings that --recipe=small_data would otherwise set.
_QUICK_RUN = dict(max_length=64, batch_tokens=512, eval_sentences=0, distribution="one_device")


def _weighted_source_files(corpus, tmp_path):
    """Two corpora cut from the built corpus: its help pages and its dictionary examples."""
    from data.sources import corpus_mix, parallel_files

    paths = {}
    for name, (path, _) in corpus_mix.source_training_files(corpus, ["libreoffice-help", "ding"]).items():
        paths[name] = str(tmp_path / f"{name}.tsv")
        parallel_files.write_tsv(paths[name], parallel_files.read_tsv(path))
    return paths


def _assert_weighted_files_recorded(model_dir, paths, stderr):
    """What a run on the weighted files `paths` (help pages 3, dictionary 1) under --recipe=small_data
    prints and records: the flags the recipe set (those the command line left out) and its search;
    each file's pairs, weight and share; one vocabulary, trained on their union."""
    applied = "recipe small_data: --normalize_first --warmup_steps=400 --learning_rate_scale=2.0 --cache_tokenized"
    assert applied in stderr
    with open(model_dir / "config.json") as handle:
        recorded = json.load(handle)
    assert recorded["model"] == dict(SMALL_MODEL, normalize_first=True)
    assert recorded["train"]["warmup_steps"] == 400 and recorded["train"]["cache_tokenized"] is True
    assert recorded["search"] == {"alpha": 1.0, "min_length_ratio": 0.8, "chosen_for": "recipe small_data"}
    assert recorded["data"]["train_weights"] == [3.0, 1.0]
    mix = recorded["training_corpora"]
    assert [(entry["corpus"], entry["weight"], entry["share"]) for entry in mix] == [
        (paths["libreoffice-help"], 3.0, 0.75),
        (paths["ding"], 1.0, 0.25),
    ]
    for entry in mix:
        with open(entry["file"]) as handle:
            assert entry["pairs"] == sum(1 for _ in handle) > 100
        printed = (
            f"training corpus {entry['corpus']}: {entry['pairs']} pairs, weight {entry['weight']:g} "
            f"({entry['share']:.1%} of the pairs sampled)"
        )
        assert printed in stderr
    root = os.path.dirname(mix[0]["file"])
    shards = [os.path.join(root, name) for name in sorted(os.listdir(root)) if name.startswith("train-0")]
    assert shards and sum(1 for shard in shards for _ in open(shard)) == sum(entry["pairs"] for entry in mix)
    with open(os.path.join(root, "spm-bpe-500.model"), "rb") as cached, open(model_dir / "spm.model", "rb") as used:
        assert cached.read() == used.read()


@pytest.mark.slow
def test_a_full_disk_stops_with_one_clear_error_and_keeps_the_checkpoint_to_resume_from(sample_corpus, tmp_path):
    """The checkpoint directory on a tmpfs that holds two checkpoints but not the third: the third
    fails with one line naming the file, the step and the newest good checkpoint (exit 1, no
    traceback or crash, no temporary file). With room (the tmpfs's files on the disk beneath, as
    the namespace ends), that checkpoint is the run's latest and loads whole: what a rerun resumes
    from (a rerun resuming from a checkpoint: the signal test). The same train.py run trains on two
    weighted files under --recipe=small_data, and prints and records both
    (`_assert_weighted_files_recorded`; the specs refused: tests/training/test_weighted_corpora.py)."""
    from inference import checkpoint_files
    from training.run_dir import RunDir

    size_kib = int(2.5 * _tiny_checkpoint_bytes(tmp_path, 500, **SMALL_MODEL, normalize_first=True)) // 1024 + 64
    paths = _weighted_source_files(sample_corpus, tmp_path)

    model_dir = tmp_path / "run"
    mount_point = model_dir / "checkpoints"
    mount_point.mkdir(parents=True)
    command = " ".join(
        [
            sys.executable,
            os.path.join(REPO_ROOT, "train.py"),
            f"--model_dir={model_dir}",
            "--recipe=small_data",
            "--corpus=files",
            "--languages=en-de",
            f"--cache_dir={tmp_path / 'cache'}",
            f"--train_tsv={paths['libreoffice-help']}:3,{paths['ding']}:1",
            f"--dev_tsv={sample_corpus.dev}",
            "--vocab_size=500",
            "--preset=tiny",
            *(f"--{key}={value}" for key, value in SMALL_MODEL.items()),
            *(f"--{key}={value}" for key, value in _QUICK_RUN.items()),
            "--train_steps=3",
            "--checkpoint_every=1",
            "--eval_every=3",
        ]
    )
    script = f"""
        mount -t tmpfs -o size={size_kib}k tmpfs {mount_point} || exit 99
        {command} > {tmp_path}/full.out 2> {tmp_path}/full.err
        echo $? > {tmp_path}/full.rc
        ls -a {mount_point} > {tmp_path}/full.ls
        mkdir {tmp_path}/kept && cp -a {mount_point}/. {tmp_path}/kept/
    """
    namespace = subprocess.run(
        [*_mount_namespace_command(), "sh", "-c", script], env=ENV, capture_output=True, text=True, timeout=900
    )
    assert namespace.returncode == 0, namespace.stderr
    full_err = (tmp_path / "full.err").read_text()
    newest = mount_point / "ckpt-000000002.weights.h5"
    assert (tmp_path / "full.rc").read_text().strip() == "1", full_err[-3000:]
    error = full_err.strip().splitlines()[-1]
    assert error.startswith(f"train.py: error: cannot write {mount_point / 'ckpt-000000003.weights.h5'}")
    assert "No space left on device" in error and f"at step 3; the newest good checkpoint is {newest}" in error
    assert "Traceback" not in full_err and "Segmentation" not in full_err
    assert (tmp_path / "full.ls").read_text().split() == [
        ".",
        "..",
        "ckpt-000000001.weights.h5",
        "ckpt-000000002.weights.h5",
    ]
    for name in os.listdir(tmp_path / "kept"):
        shutil.copy2(tmp_path / "kept" / name, mount_point / name)
    assert checkpoint_files.latest_checkpoint(str(mount_point)) == (2, str(newest))
    model, _, _ = RunDir(str(model_dir)).load_model("last", quiet=True)
    assert model.count_params() > 0
    _assert_weighted_files_recorded(model_dir, paths, full_err)
