import json
import os
import subprocess
import sys

import pytest

from data import cleaning, parallel_files, prepare
from tests.conftest import REPO_ROOT
from tests.data.conftest import make_pairs


def _english_by_split(paths):
    return {
        split: {en for en, _ in parallel_files.read_tsv(paths.split(split))} for split in cleaning.SPLITS
    }


def _write_parallel(tmp_path, pairs, stem="train"):
    src, tgt = tmp_path / f"{stem}.en", tmp_path / f"{stem}.de"
    src.write_text("".join(f"{en}\n" for en, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(f"{de}\n" for _, de in pairs), encoding="utf-8")
    return str(src), str(tgt)


def test_user_corpus_splits_are_disjoint_by_source_sentence(tmp_path):
    pairs = make_pairs(3000, seed=1, max_clauses=2)
    # The same English sentence with two translations must land in one split.
    pairs += [(en, de + " Wirklich.") for en, de in pairs[:500]]
    train = _write_parallel(tmp_path, pairs)
    paths = prepare.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train)
    by_split = _english_by_split(paths)
    assert not by_split["train"] & by_split["dev"]
    assert not by_split["train"] & by_split["test"]
    assert not by_split["dev"] & by_split["test"]
    manifest = paths.load_manifest()
    assert manifest["total_pairs"] == 3500 == sum(manifest["splits"].values())
    assert 0 < manifest["splits"]["test"] < 200


def test_user_corpus_keeps_given_dev_and_counts_empty_lines(tmp_path):
    train = _write_parallel(tmp_path, make_pairs(400, seed=2) + [("", "Leer.")])
    dev = tmp_path / "dev.tsv"
    dev.write_text("A dev sentence here.\tEin Satz.\n\n", encoding="utf-8")
    paths = prepare.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train, dev=str(dev))
    manifest = paths.load_manifest()
    assert list(parallel_files.read_tsv(paths.dev)) == [("A dev sentence here.", "Ein Satz.")]
    assert manifest["read"]["train"]["empty_lines_skipped"] == 1
    assert manifest["read"]["dev"]["empty_lines_skipped"] == 1
    assert manifest["splits"]["test"] > 0  # filled from train by the hash split


def test_prepare_is_idempotent_and_rebuilds_a_corrupt_cache(tmp_path):
    train = _write_parallel(tmp_path, make_pairs(300, seed=3))
    cache = str(tmp_path / "cache")
    paths = prepare.prepare_user_corpus("mine", cache, ("en", "de"), train)
    stamp = os.stat(paths.manifest).st_mtime_ns
    again = prepare.prepare_user_corpus("mine", cache, ("en", "de"), train)
    assert again == paths and os.stat(paths.manifest).st_mtime_ns == stamp
    with open(paths.train, "a", encoding="utf-8") as f:
        f.write("extra\tline\n")
    with pytest.raises(prepare.CorpusError, match=r"train.tsv has \d+ bytes, the manifest records"):
        prepare.check_corpus(paths.root)
    rebuilt = prepare.prepare_user_corpus("mine", cache, ("en", "de"), train)
    prepare.check_corpus(rebuilt.root)
    assert os.stat(rebuilt.manifest).st_mtime_ns != stamp
    assert sorted(os.listdir(cache)) == ["mine"]  # no temporary or stale directories left


def test_corrupt_cache_error_when_rebuild_is_off(tmp_path):
    root = tmp_path / "cache" / "deb-en-de"
    root.mkdir(parents=True)
    (root / "train.tsv").write_text("half\twritten\n")
    with pytest.raises(prepare.CorpusError, match=r"deb-en-de: incomplete corpus, no manifest.json"):
        prepare.prepare_corpus("deb-en-de", str(tmp_path / "cache"), rebuild_invalid=False)


def test_bad_input_leaves_no_corpus_behind(tmp_path):
    src, tgt = _write_parallel(tmp_path, make_pairs(50))
    with open(tgt, "a", encoding="utf-8") as f:
        f.write("One line too many.\n")
    cache = tmp_path / "cache"
    with pytest.raises(parallel_files.ParallelDataError, match="train.en has 50 lines"):
        prepare.prepare_user_corpus("mine", str(cache), ("en", "de"), (src, tgt))
    assert os.listdir(cache) == []


def test_missing_package_leaves_no_corpus_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get: the packages cannot be fetched
    cache = tmp_path / "cache"
    with pytest.raises(Exception, match="libreoffice-help-en-us"):
        prepare.prepare_corpus("deb-en-de", str(cache), str(tmp_path / "debs"))
    assert os.listdir(cache) == []


def test_unknown_corpus():
    with pytest.raises(prepare.CorpusError, match="Unknown corpus 'wmt14'"):
        prepare.prepare_corpus("wmt14", "/nonexistent")


def test_command_line_user_corpus(tmp_path):
    src, tgt = _write_parallel(tmp_path, make_pairs(200, seed=4))
    result = subprocess.run(
        [sys.executable, "-m", "data.prepare", "--corpus=user", "--name=cli", "--languages=en-de",
         f"--cache_dir={tmp_path / 'cache'}", f"--train_src={src}", f"--train_tgt={tgt}"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "cache" / "cli" / "manifest.json", encoding="utf-8") as f:
        assert json.load(f)["total_pairs"] == 200


@pytest.mark.slow
def test_deb_en_de_corpus_from_the_packages(deb_en_de):
    paths, fetch_seconds, build_seconds = deb_en_de
    manifest = paths.load_manifest()
    print(json.dumps({k: manifest[k] for k in ("splits", "total_pairs", "sources")}, indent=1))
    assert [p["package"] for p in manifest["packages"]] == list(prepare.DEB_EN_DE_PACKAGES)
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
    by_split = _english_by_split(paths)
    assert not by_split["train"] & by_split["test"] and not by_split["train"] & by_split["dev"]
    # A second call finds the complete corpus and returns without building.
    again = prepare.prepare_corpus("deb-en-de", os.path.dirname(paths.root), "/nonexistent")
    assert again == paths
