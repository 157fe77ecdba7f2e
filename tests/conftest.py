"""Shared test setup: quiet TensorFlow logs, fixed seeds, the two test tiers, the corpora, and a tiny
model trained once per session and shared by the training, evaluation and export tests.

Two tiers. The full one (`make test`, CI) runs everything but the tests marked `fast_only` (a
smaller run of what a slow test covers whole); the shared model trains on the real
deb-en-de corpus, built from Debian packages (fetched with apt-get, or from a Debian mirror where
apt-get is missing, unless cached in DEB_CACHE).
The fast one (`pytest --fast`, `make test-fast`) leaves out the tests marked `slow` or `full`,
builds the corpus from the small checked-in sample tests/fixtures/deb_en_de_sample.tsv instead,
and refuses any network connection or package download.
"""

import contextlib
import os
import socket
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

from tests.helpers import (  # noqa: E402
    DEB_CACHE,
    EXPORT_SETTINGS,
    EosBiasModel,
    build_sample_corpus,
    export_arguments,
    once_per_session,
    tiny_run_config,
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


@pytest.hookimpl(tryfirst=True)  # Before pytest-xdist's, which reads the groups.
def pytest_collection_modifyitems(config, items):
    # The fast tier leaves out the slow and full tests; the full tier the fast tier's smaller runs
    # of what a slow test covers whole.
    left_out_markers = ("slow", "full") if _fast(config) else ("fast_only",)
    kept, deselected = [], []
    for item in items:
        left_out = any(item.get_closest_marker(name) for name in left_out_markers)
        (deselected if left_out else kept).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = kept
    # The modules that use the shared run go last: while the process given the largest group (the
    # loaded export's, which pytest-xdist hands out first) trains the run and exports it, the other
    # runs the tests that wait for neither. In each part the long tests go first, so that the short
    # ones left at the end even out the processes' finish (`make test` hands the processes one test
    # or group at a time: --dist loadgroup).
    waiting = {item.path for item in items if set(_SHARED_BUILDS) & set(getattr(item, "fixturenames", ()))}
    groups = {item: _module_fixture_group(item) for item in items}
    for item, group in groups.items():
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    long = {item for item, group in groups.items() if group or item.get_closest_marker("slow")}
    items[:] = sorted(items, key=lambda item: (item.path in waiting, item not in long))


# The module-scoped fixtures worth building once per run rather than once per process: a training
# run, a fresh process, a conversion. A cheap one (a loaded translator) is not: grouping its module
# would put all of that module's slow tests in one process.
_COSTLY_MODULE_FIXTURES = ("multilingual_run", "converted", "fresh", "exported", "jax_process")


def _module_fixture_group(item):
    """The xdist group of a test that uses a costly module-scoped fixture of its own module, so that
    one process builds it for all the tests that use it, or None."""
    module = item.nodeid.split("::")[0]
    used = [
        name
        for name, definitions in item._fixtureinfo.name2fixturedefs.items()
        if name in _COSTLY_MODULE_FIXTURES and definitions[-1].scope == "module" and definitions[-1].baseid == module
    ]
    return f"{module}::{','.join(sorted(used))}" if used else None


_SHARED_BUILDS = ("tiny_run", "tiny_export")


_LOOPBACK = ("localhost", "127.0.0.1", "::1", "")


def _refuse_network():
    """Makes any connection or name lookup beyond the loopback interface, and any apt-get run,
    fail loudly in this process: the fast tier must work offline."""
    from data.sources import deb_packages

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


@pytest.fixture(scope="session")
def deb_en_de(request, tmp_path_factory):
    """The real deb-en-de corpus, built into a fresh directory from packages cached in DEB_CACHE.

    Returns (CorpusPaths, seconds spent fetching the packages, seconds spent building).
    """
    from data.sources import builtin_corpora, corpus_cache, deb_packages

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


@pytest.fixture(scope="session")
def sample_corpus(tmp_path_factory):
    """The deb-en-de sample built as corpus deb-en-de in a fresh directory (CorpusPaths)."""
    from data.sources import corpus_cache

    root = once_per_session(tmp_path_factory, "sample_corpora", lambda directory: build_sample_corpus(directory).root)
    return corpus_cache.check_corpus(root)


@pytest.fixture(scope="session")
def corpus(request):
    """The corpus the shared run trains on: the real deb-en-de in the full tier, the sample in the
    fast one (CorpusPaths). For tests that need some built deb-en-de corpus, not its real contents."""
    if _fast(request.config):
        return request.getfixturevalue("sample_corpus")
    return request.getfixturevalue("deb_en_de")[0]


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


@pytest.fixture(scope="module")
def tiny_model(tiny_run):
    """`(model, tokenizer, run_config, model_dir)` of the shared tiny run."""
    from inference.runs import RunDir

    model_dir, _ = tiny_run
    model, tokenizer, run_config = RunDir(model_dir).load_model()
    return model, tokenizer, run_config, model_dir


@pytest.fixture
def eos_bias_model():
    """The class `EosBiasModel` (tests/helpers.py): `eos_bias_model(model, bias)`."""
    return EosBiasModel


@pytest.fixture(scope="session")
def tiny_export(tiny_run, tmp_path_factory):
    """The shared tiny run exported with EXPORT_SETTINGS as version 1, written once per session: its
    base directory, as --export_dir takes it, named `transformer` (the model name TensorFlow
    Serving's requests carry)."""
    exporter = pytest.importorskip("export.exporter")
    model_dir, _ = tiny_run

    def build(directory):
        export_dir = os.path.join(directory, "transformer")
        exporter.export_model(model_dir, export_dir, **export_arguments(EXPORT_SETTINGS))
        return export_dir

    return once_per_session(tmp_path_factory, "tiny_export", build)


@pytest.fixture(scope="session")
def tiny_export_loaded(tiny_export):
    """The shared export's version directory as `tf.saved_model.load` gives it, loaded once per test
    process: a load and the first call of each signature take seconds, and TensorFlow never frees
    what a load made. The tests that use it run in one xdist group, SHARED_EXPORT_GROUP."""
    import tensorflow as tf

    return tf.saved_model.load(os.path.join(tiny_export, "1"))


@contextlib.contextmanager
def _loading_once(tiny_export, loaded):
    """A block in which `tf.saved_model.load` of the shared export's version directory gives
    `loaded` (`tiny_export_loaded`); any other load is TensorFlow's."""
    import tensorflow as tf

    load, shared = tf.saved_model.load, os.path.realpath(os.path.join(tiny_export, "1"))

    def load_once(path, *args, **kwargs):
        return loaded if os.path.realpath(path) == shared and not (args or kwargs) else load(path, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tf.saved_model, "load", load_once)
        yield


@pytest.fixture
def shared_export_loaded_once(tiny_export, tiny_export_loaded):
    """During the test, loading the shared export (a `SavedModelTranslator`, a benchmark) gives
    `tiny_export_loaded`, its signatures maybe already called."""
    with _loading_once(tiny_export, tiny_export_loaded):
        yield


@pytest.fixture(scope="session")
def tiny_export_translator(tiny_export, tiny_export_loaded):
    """A `SavedModelTranslator` of `tiny_export` (batch_size 2) on `tiny_export_loaded`, made once
    per test process. tests/export/conftest.py's `served` is its loaded SavedModel."""
    from inference.saved_model_translator import SavedModelTranslator

    with _loading_once(tiny_export, tiny_export_loaded):
        return SavedModelTranslator(tiny_export, batch_size=2)
