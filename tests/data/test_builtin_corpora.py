import json
import os
import socket

import pytest

from data import builtin_corpora, corpus_cache, deb_packages
from tests.data.helpers import english_by_split


def test_unknown_corpus():
    with pytest.raises(corpus_cache.CorpusError, match="Unknown corpus 'wmt14'"):
        builtin_corpora.prepare_corpus("wmt14", "/nonexistent")


def test_missing_package_leaves_no_corpus_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get: the packages cannot be fetched with apt
    monkeypatch.setattr(deb_packages, "RETRY_BACKOFF_SECONDS", 0.0)
    with socket.socket() as probe:  # nor from a mirror on a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed_mirror = f"http://127.0.0.1:{probe.getsockname()[1]}/debian"
    cache = tmp_path / "cache"
    for source in ("apt", "auto"):
        with pytest.raises(deb_packages.DebPackageError, match="libreoffice-help-en-us"):
            builtin_corpora.prepare_corpus(
                "deb-en-de", str(cache), str(tmp_path / "debs"), deb_source=source, deb_mirror=closed_mirror
            )
        assert os.listdir(cache) == []


@pytest.mark.slow
@pytest.mark.full
def test_deb_en_de_corpus_from_the_packages(deb_en_de):
    paths, fetch_seconds, build_seconds = deb_en_de
    manifest = paths.load_manifest()
    print(json.dumps({k: manifest[k] for k in ("splits", "total_pairs", "sources")}, indent=1))
    assert [p["package"] for p in manifest["packages"]] == list(builtin_corpora.DEB_EN_DE_PACKAGES)
    assert all(len(p["sha256"]) == 64 and p["version"] for p in manifest["packages"])
    sources = manifest["sources"]
    assert 28_000 <= sources["libreoffice-help"]["kept"] <= 42_000
    assert 55_000 <= sources["libreoffice-help"]["raw"] <= 70_000  # aligned paragraphs
    assert 10_000 <= sources["libreoffice-ui"]["kept"] <= 22_000
    assert 12_000 <= sources["ding"]["kept"] <= 20_000
    assert 55_000 <= manifest["total_pairs"] <= 85_000
    for split in ("dev", "test"):
        assert 0.02 <= manifest["splits"][split] / manifest["total_pairs"] <= 0.04
    for source, stats in sources.items():
        assert stats["splits"]["test"] == manifest["files"][f"test.{source}.tsv"]["lines"] > 300
    by_split = english_by_split(paths)
    assert not by_split["train"] & by_split["test"] and not by_split["train"] & by_split["dev"]
    # A second call finds the complete corpus and returns without building.
    again = builtin_corpora.prepare_corpus("deb-en-de", os.path.dirname(paths.root), "/nonexistent")
    assert again == paths
