"""Shared test setup: quiet TensorFlow logs, fixed seeds, the two test tiers, the corpora, and a tiny
model trained once per session and shared by the training, evaluation and export tests.

Two tiers. The full one (`make test`, CI) runs everything; the shared model trains on the real
deb-en-de corpus, built from Debian packages (fetched with apt-get, or from a Debian mirror where
apt-get is missing, unless cached in DEB_CACHE).
The fast one (`pytest --fast`, `make test-fast`) leaves out the tests marked `slow` or `full`,
builds the corpus from the small checked-in sample tests/fixtures/deb_en_de_sample.tsv instead,
and refuses any network connection or package download.
"""

import fcntl
import json
import os
import socket
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Downloaded .deb files persist here between runs (the directory is git-ignored); CI starts empty.
DEB_CACHE = os.environ.get("TRANSFORMER_TEST_DEB_DIR", os.path.join(REPO_ROOT, "cache", "test-debs"))

# The model the shared run trains: small enough for a minute on two cores.
TINY_MODEL = dict(num_layers=2, hidden_dim=64, num_heads=4, intermediate_dim=256, dropout=0.1)

# The fast tier's corpus: `source<TAB>english<TAB>german` lines sampled from the deb-en-de sources
# by tests/fixtures/make_deb_en_de_sample.py.
SAMPLE_TSV = os.path.join(REPO_ROOT, "tests", "fixtures", "deb_en_de_sample.tsv")


# What TensorFlow and Keras print on their own that a tool's stderr must not show
# (data/quiet_logs.py; the tools' tests check their output for these).
STARTUP_NOISE = (
    "absl::InitializeLog",
    "oneDNN custom operations",
    "cuda drivers",
    "cuInit",
    "cpu_feature_guard",
    "shuffle=True",
    "triggered tf.function retracing",
)


def pytest_addoption(parser):
    parser.addoption(
        "--fast",
        action="store_true",
        help="the fast tier: leave out tests marked slow or full, train the shared model on the "
        "sample corpus, and refuse network connections and package downloads",
    )


def _fast(config):
    return config.getoption("--fast")


def pytest_configure(config):
    if _fast(config):
        _refuse_network()


def pytest_collection_modifyitems(config, items):
    if not _fast(config):
        return
    kept, deselected = [], []
    for item in items:
        left_out = item.get_closest_marker("slow") or item.get_closest_marker("full")
        (deselected if left_out else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "")


def _refuse_network():
    """Makes any connection or name lookup beyond the loopback interface, and any apt-get run,
    fail loudly in this process: the fast tier must work offline."""
    from data import deb_packages

    def refuse(what):
        raise AssertionError(f"the fast tier (--fast) uses no network, but the test tried {what}")

    original_connect, original_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def connect(sock, address):
        host = address[0] if isinstance(address, tuple) else None
        if host is not None and not (host in _LOOPBACK or str(host).startswith("127.")):
            refuse(f"to connect to {address!r}")
        return original_connect(sock, address)

    def getaddrinfo(host, *args, **kwargs):
        if host is not None and not (host in _LOOPBACK or str(host).startswith("127.")):
            refuse(f"to look up {host!r}")
        return original_getaddrinfo(host, *args, **kwargs)

    socket.socket.connect = connect
    socket.getaddrinfo = getaddrinfo
    deb_packages._run_apt = lambda args, cwd: refuse(f"to run {' '.join(args)!r}")


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


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


@pytest.fixture(scope="session")
def deb_en_de(request, tmp_path_factory):
    """The real deb-en-de corpus, built into a fresh directory from packages cached in DEB_CACHE.

    Returns (CorpusPaths, seconds spent fetching the packages, seconds spent building).
    """
    from data import builtin_corpora, corpus_cache, deb_packages

    if _fast(request.config):
        pytest.fail("the fast tier (--fast) has no real deb-en-de corpus: mark the test `full`, or use `corpus`")

    def build(directory):
        start = time.monotonic()
        debs = deb_packages.fetch_debs(
            list(builtin_corpora.DEB_EN_DE_PACKAGES), DEB_CACHE, pinned=builtin_corpora.DEB_EN_DE_DEBS
        )
        fetch_seconds = time.monotonic() - start
        size = sum(os.path.getsize(p) for p in debs.values())
        print(f"\nfetched/found {len(debs)} packages ({size / 1e6:.1f} MB) in {fetch_seconds:.1f} s")
        start = time.monotonic()
        paths = builtin_corpora.prepare_corpus("deb-en-de", directory, DEB_CACHE)
        build_seconds = time.monotonic() - start
        print(f"built deb-en-de in {build_seconds:.1f} s")
        return paths.root, fetch_seconds, build_seconds

    root, fetch_seconds, build_seconds = once_per_session(tmp_path_factory, "corpora", build)
    return corpus_cache.check_corpus(root), fetch_seconds, build_seconds


def build_sample_corpus(cache_dir):
    """SAMPLE_TSV built as the corpus "deb-en-de" in `cache_dir`, by the same cleaning, hash split and
    per-source test files as the real one; `builtin_corpora.prepare_corpus` then finds it cached."""
    from data import builtin_corpora, corpus_cache

    sources = {}
    with open(SAMPLE_TSV, encoding="utf-8") as handle:
        for line in handle:
            source, english, german = line.rstrip("\n").split("\t")
            sources.setdefault(source, []).append((english, german))
    extra = {
        "packages": [],
        "credits": {source: builtin_corpora.CREDITS[source] for source in sources},
        "sample": SAMPLE_TSV,
    }
    build = lambda tmp_dir: corpus_cache.write_corpus(tmp_dir, "deb-en-de", ("en", "de"), sources, extra=extra)
    return corpus_cache.build_atomically(cache_dir, "deb-en-de", build)


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory):
    """The deb-en-de sample built as corpus deb-en-de in a fresh directory (CorpusPaths)."""
    from data import corpus_cache

    root = once_per_session(tmp_path_factory, "sample_corpora", lambda directory: build_sample_corpus(directory).root)
    return corpus_cache.check_corpus(root)


@pytest.fixture(scope="session")
def corpus(request):
    """The corpus the shared run trains on: the real deb-en-de in the full tier, the sample in the
    fast one (CorpusPaths). For tests that need some built deb-en-de corpus, not its real contents."""
    if _fast(request.config):
        return request.getfixturevalue("sample_corpus")
    return request.getfixturevalue("deb_en_de")[0]


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


@pytest.fixture(scope="session")
def tiny_run(corpus, tmp_path_factory):
    """`(model_dir, summary)` of a tiny model trained 200 steps on `corpus`."""
    from training.trainer import train

    def build(model_dir):
        start = time.monotonic()
        summary = train(tiny_run_config(model_dir, os.path.dirname(corpus.root)))
        print(f"\ntrained the shared tiny model in {time.monotonic() - start:.1f} s: {summary['history']}")
        return model_dir, summary

    model_dir, summary = once_per_session(tmp_path_factory, "tiny_run", build)
    return model_dir, summary


# A few updates of a small model, one device, no dev BLEU: for runs of train.py that test its flags.
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
    """`python train.py --model_dir=model_dir *flags` in a new process (the CompletedProcess)."""
    import subprocess
    import sys

    command = [sys.executable, os.path.join(REPO_ROOT, "train.py"), f"--model_dir={model_dir}", *flags]
    return subprocess.run(command, cwd=REPO_ROOT, env=TOOL_ENV, capture_output=True, text=True, timeout=timeout)


def assert_train_refuses(model_dir, argv, message):
    """Runs train.py with `argv` and checks it is refused with `message` on stderr, no traceback,
    and nothing written at `model_dir`."""
    completed = run_train_py(model_dir, *argv, timeout=120)
    assert completed.returncode != 0
    assert message in completed.stderr, completed.stderr[-2000:]
    assert "Traceback" not in completed.stderr
    assert not os.path.exists(model_dir)
