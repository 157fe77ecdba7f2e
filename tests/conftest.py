"""Shared test setup: quiet TensorFlow logs, fixed seeds, the real deb-en-de corpus, and a tiny
model trained on it (built once per session and shared by the training, evaluation and export tests).
"""

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import pytest  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Downloaded .deb files persist here between runs (the directory is git-ignored); CI starts empty.
DEB_CACHE = os.environ.get("TRANSFORMER_TEST_DEB_DIR", os.path.join(REPO_ROOT, "cache", "test-debs"))

# The model the shared run trains: small enough for a minute on two cores.
TINY_MODEL = dict(num_layers=2, hidden_dim=64, num_heads=4, intermediate_dim=256, dropout=0.1)


@pytest.fixture(autouse=True)
def _seed_and_policy():
    keras.utils.set_random_seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture(scope="session")
def deb_en_de(tmp_path_factory):
    """The real deb-en-de corpus, built into a fresh directory from packages cached in DEB_CACHE.

    Returns (CorpusPaths, seconds spent fetching the packages, seconds spent building).
    """
    from data import deb_packages, prepare

    start = time.monotonic()
    debs = deb_packages.fetch_debs(list(prepare.DEB_EN_DE_PACKAGES), DEB_CACHE)
    fetch_seconds = time.monotonic() - start
    size = sum(os.path.getsize(p) for p in debs.values())
    print(f"\nfetched/found {len(debs)} packages ({size / 1e6:.1f} MB) in {fetch_seconds:.1f} s")
    start = time.monotonic()
    paths = prepare.prepare_corpus("deb-en-de", str(tmp_path_factory.mktemp("corpora")), DEB_CACHE)
    build_seconds = time.monotonic() - start
    print(f"built deb-en-de in {build_seconds:.1f} s")
    return paths, fetch_seconds, build_seconds


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
def tiny_run(deb_en_de, tmp_path_factory):
    """`(model_dir, summary)` of a tiny model trained 200 steps on deb-en-de."""
    from training.trainer import train

    corpus = deb_en_de[0]
    model_dir = tmp_path_factory.mktemp("tiny_run")
    start = time.monotonic()
    summary = train(tiny_run_config(model_dir, os.path.dirname(corpus.root)))
    print(f"\ntrained the shared tiny model in {time.monotonic() - start:.1f} s: {summary['history']}")
    return str(model_dir), summary
