import os

import pytest

from data.sources import builtin_corpora, corpus_cache, parallel_files, user_corpus
from tests.data.helpers import make_pairs, write_parallel


def test_prepare_is_idempotent_and_rebuilds_a_corrupt_cache(tmp_path):
    train = write_parallel(tmp_path, make_pairs(300, seed=3))
    cache = str(tmp_path / "cache")
    paths = user_corpus.prepare_user_corpus("mine", cache, ("en", "de"), train)
    stamp = os.stat(paths.manifest).st_mtime_ns
    again = user_corpus.prepare_user_corpus("mine", cache, ("en", "de"), train)
    assert again == paths and os.stat(paths.manifest).st_mtime_ns == stamp
    with open(paths.train[0], "a", encoding="utf-8") as f:
        f.write("extra\tline\n")
    with pytest.raises(corpus_cache.CorpusError, match=r"train-00000-of-00001.tsv has \d+ bytes, the manifest records"):
        corpus_cache.check_corpus(paths.root)
    rebuilt = user_corpus.prepare_user_corpus("mine", cache, ("en", "de"), train)
    corpus_cache.check_corpus(rebuilt.root)
    assert os.stat(rebuilt.manifest).st_mtime_ns != stamp
    assert sorted(os.listdir(cache)) == ["mine"]  # no temporary or stale directories left


def test_corrupt_cache_error_when_rebuild_is_off(tmp_path):
    root = tmp_path / "cache" / "deb-en-de"
    root.mkdir(parents=True)
    (root / "train.tsv").write_text("half\twritten\n")
    with pytest.raises(corpus_cache.CorpusError, match=r"deb-en-de: incomplete corpus, no manifest.json"):
        builtin_corpora.prepare_corpus("deb-en-de", str(tmp_path / "cache"), rebuild_invalid=False)


@pytest.mark.parametrize("umask", [0o022, 0o027], ids=["022", "027"])
def test_corpus_directory_mode_follows_the_umask(tmp_path, umask):
    train = str(tmp_path / "train.tsv")
    parallel_files.write_tsv(train, make_pairs(50))
    previous = os.umask(umask)
    try:
        paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train)
    finally:
        os.umask(previous)
    assert oct(os.stat(paths.root).st_mode & 0o777) == oct(0o777 & ~umask)
