import json
import os
import socket

import pytest

from data import prepare as prepare_command
from data.sources import builtin_corpora, corpus_cache, deb_packages
from tests.data.helpers import english_by_split, write_sample_debs
from tests.helpers import DEB_CACHE
from tools import debian_languages_table


def _all_pairs(paths):
    """The pairs of every split (a sample's may leave a split empty)."""
    pairs = set()
    for path in (*paths.train, paths.dev, paths.test):
        with open(path, encoding="utf-8") as f:
            pairs.update(tuple(line.rstrip("\n").split("\t")) for line in f)
    return pairs


def test_unknown_corpus_lists_the_built_in_ones():
    with pytest.raises(corpus_cache.CorpusError, match="Unknown corpus 'deb-en-tlh'.*deb-en-fr.*data.prepare --list"):
        builtin_corpora.prepare_corpus("deb-en-tlh", "/nonexistent")


def test_deb_en_xx_corpus_of_help_pages_and_interface_strings(tmp_path):
    """deb-en-ja from sample packages: help paragraphs joined on their ids and catalog strings, one
    corpus with per-source test files, its packages recorded in the pinned order."""
    write_sample_debs(tmp_path / "debs", "ja")
    paths = builtin_corpora.prepare_corpus("deb-en-ja", str(tmp_path / "cache"), str(tmp_path / "debs"))
    manifest = paths.load_manifest()
    assert manifest["languages"] == ["en", "ja"]
    assert [p["package"] for p in manifest["packages"]] == list(builtin_corpora.deb_pins("ja"))
    assert {p["version"] for p in manifest["packages"]} == {builtin_corpora.LIBREOFFICE_VERSION}
    assert tuple(manifest["sources"]) == builtin_corpora.SOURCES["deb-en-ja"] == ("libreoffice-help", "libreoffice-ui")
    assert "libreoffice-help-ja" in manifest["credits"]["libreoffice-help"] and "notes" not in manifest
    pairs = _all_pairs(paths)
    assert {("Insert Mode", "挿入モード"), ("Save Document", "文書を保存する時"), ("Spelling", "つづり")} <= pairs
    # Untranslated paragraphs (English in the Japanese page) are dropped as identical.
    assert manifest["sources"]["libreoffice-help"]["dropped"]["identical"] >= 2
    assert all(en != ja for en, ja in pairs)


def test_a_language_without_help_pages_gets_interface_strings_and_says_so(tmp_path):
    write_sample_debs(tmp_path / "debs", "af")
    cache = tmp_path / "cache"
    paths = builtin_corpora.prepare_corpus("deb-en-af", str(cache), str(tmp_path / "debs"))
    manifest = paths.load_manifest()
    assert [p["package"] for p in manifest["packages"]] == ["libreoffice-l10n-af"]
    assert list(manifest["sources"]) == ["libreoffice-ui"] and manifest["sources"]["libreoffice-ui"]["kept"] == 3
    assert manifest["notes"] == ["interface strings only: Debian 12 has no help pages in this language"]
    rows = {line.split()[0]: line for line in prepare_command.listing_lines(str(cache))[1:]}
    assert " yes " in rows["deb-en-af"] and "interface strings only" in rows["deb-en-af"]
    assert " no " in rows["deb-en-fr"] and "interface strings only" not in rows["deb-en-fr"]


def test_the_language_table():
    """Every language is pinned at deb-en-de's LibreOffice version, with counts of its built corpus;
    the languages the issue names have help pages; deb-en-de keeps its packages."""
    languages = builtin_corpora.LANGUAGES
    assert len(languages) == 89 and sum(language.help is not None for language in languages.values()) == 31
    for code, language in languages.items():
        assert "-" not in code and language.corpus in builtin_corpora.CORPORA
        for pinned in filter(None, (language.l10n, language.help)):
            assert pinned.version == builtin_corpora.LIBREOFFICE_VERSION and len(pinned.sha256) == 64
            assert pinned.pool_path == f"pool/main/libr/libreoffice/{pinned.package}_7.4.7-1+deb12u14_all.deb"
        assert (language.help is None) == (language.help_dir is None)
        counts = language.counts
        assert counts["train"] > 1000 and counts["dev"] > 0 and counts["test"] > 0, code
        assert tuple(counts["sources"]) == builtin_corpora.SOURCES[language.corpus]
    for code in ("fr", "es", "it", "pt", "ru", "ja", "zh_cn", "zh_tw", "ko", "el"):
        assert languages[code].help is not None, code
    assert languages["zh_cn"].help_dir == "zh-CN" and languages["pt_br"].help_dir == "pt-BR"
    assert languages["uk"].help is None  # interface strings only
    assert not {"en_gb", "en_za", "in", "za"} & languages.keys()
    assert builtin_corpora.DEB_EN_DE_DEBS["libreoffice-help-de"].sha256 == (
        "00490b63c509ac96f7f212d6a6e40452d3e0d1f97ccf4b824dd5ec4c01e8277f"
    )
    listed = [row["corpus"] for row in builtin_corpora.listing()]
    assert listed == list(builtin_corpora.CORPORA) and "tatoeba-en-es" in listed


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
    assert debian_languages_table.corpus_counts(manifest) == builtin_corpora.LANGUAGES["de"].counts  # --list's
    # A second call finds the complete corpus and returns without building.
    again = builtin_corpora.prepare_corpus("deb-en-de", os.path.dirname(paths.root), "/nonexistent")
    assert again == paths


@pytest.mark.slow
@pytest.mark.full
def test_deb_en_ja_from_the_packages_has_the_listed_counts(tmp_path):
    """A pair in a non-Latin script, built from the real packages: the counts --list shows."""
    pins = builtin_corpora.deb_pins("ja")
    deb_packages.fetch_debs(list(pins), DEB_CACHE, pinned=pins)
    paths = builtin_corpora.prepare_corpus("deb-en-ja", str(tmp_path), DEB_CACHE)
    manifest = paths.load_manifest()
    assert debian_languages_table.corpus_counts(manifest) == builtin_corpora.LANGUAGES["ja"].counts
    assert ("Page Style", "ページスタイル") in _all_pairs(paths)
