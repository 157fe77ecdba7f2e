import json
import os
import subprocess
import sys

import pytest

from data import builtin_corpora, cleaning, corpus_cache, parallel_files, user_corpus
from tests.conftest import REPO_ROOT
from tests.data.conftest import make_pairs


def _english_by_split(paths):
    return {split: {en for en, _ in parallel_files.read_tsv(paths.split(split))} for split in cleaning.SPLITS}


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
    paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train)
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
    paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train, dev=str(dev))
    manifest = paths.load_manifest()
    assert list(parallel_files.read_tsv(paths.dev)) == [("A dev sentence here.", "Ein Satz.")]
    assert manifest["read"]["train"]["empty_lines_skipped"] == 1
    assert manifest["read"]["dev"]["empty_lines_skipped"] == 1
    assert manifest["splits"]["test"] > 0  # filled from train by the hash split


def test_prepare_is_idempotent_and_rebuilds_a_corrupt_cache(tmp_path):
    train = _write_parallel(tmp_path, make_pairs(300, seed=3))
    cache = str(tmp_path / "cache")
    paths = user_corpus.prepare_user_corpus("mine", cache, ("en", "de"), train)
    stamp = os.stat(paths.manifest).st_mtime_ns
    again = user_corpus.prepare_user_corpus("mine", cache, ("en", "de"), train)
    assert again == paths and os.stat(paths.manifest).st_mtime_ns == stamp
    with open(paths.train, "a", encoding="utf-8") as f:
        f.write("extra\tline\n")
    with pytest.raises(corpus_cache.CorpusError, match=r"train.tsv has \d+ bytes, the manifest records"):
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


def test_bad_input_leaves_no_corpus_behind(tmp_path):
    src, tgt = _write_parallel(tmp_path, make_pairs(50))
    with open(tgt, "a", encoding="utf-8") as f:
        f.write("One line too many.\n")
    cache = tmp_path / "cache"
    with pytest.raises(parallel_files.ParallelDataError, match="train.en has 50 lines"):
        user_corpus.prepare_user_corpus("mine", str(cache), ("en", "de"), (src, tgt))
    assert os.listdir(cache) == []


def test_missing_package_leaves_no_corpus_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no apt-get: the packages cannot be fetched
    cache = tmp_path / "cache"
    with pytest.raises(Exception, match="libreoffice-help-en-us"):
        builtin_corpora.prepare_corpus("deb-en-de", str(cache), str(tmp_path / "debs"))
    assert os.listdir(cache) == []


def test_unknown_corpus():
    with pytest.raises(corpus_cache.CorpusError, match="Unknown corpus 'wmt14'"):
        builtin_corpora.prepare_corpus("wmt14", "/nonexistent")


def test_command_line_user_corpus(tmp_path):
    src, tgt = _write_parallel(tmp_path, make_pairs(200, seed=4))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "data.prepare",
            "--corpus=user",
            "--name=cli",
            "--languages=en-de",
            f"--cache_dir={tmp_path / 'cache'}",
            f"--train_src={src}",
            f"--train_tgt={tgt}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    with open(tmp_path / "cache" / "cli" / "manifest.json", encoding="utf-8") as f:
        assert json.load(f)["total_pairs"] == 200


def test_user_corpus_rebuilds_when_the_languages_change(tmp_path):
    train = str(tmp_path / "train.tsv")
    parallel_files.write_tsv(train, make_pairs(200, seed=5))
    cache = str(tmp_path / "cache")
    assert user_corpus.prepare_user_corpus("mine", cache, ("en", "de"), train).languages == ("en", "de")
    flipped = user_corpus.prepare_user_corpus("mine", cache, ("de", "en"), train)
    assert flipped.languages == ("de", "en")
    assert flipped.load_manifest()["columns"] == ["de (source)", "en (target)"]


@pytest.mark.parametrize("languages", [("en", ""), ("", "de"), ("en",)])
def test_user_corpus_needs_two_language_codes(tmp_path, languages):
    train = str(tmp_path / "train.tsv")
    parallel_files.write_tsv(train, make_pairs(20))
    with pytest.raises(corpus_cache.CorpusError, match="two non-empty codes"):
        user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), languages, train)


def test_user_corpus_without_training_pairs_is_an_error_and_not_cached(tmp_path):
    train = tmp_path / "same.tsv"
    train.write_text("same\tsame\n1\t1\nHello.\tHallo.\nHello.\tHallo.\n\n", encoding="utf-8")
    test = tmp_path / "test.tsv"
    test.write_text("Hello.\tHallo.\n", encoding="utf-8")
    cache = tmp_path / "cache"
    message = (
        rf"No training pairs left from {train}: 4 pairs read \(1 empty lines skipped\), dropped by "
        r"reason: identical 2, in_evaluation_files 2\. The corpus was not cached"
    )
    with pytest.raises(corpus_cache.CorpusError, match=message):
        user_corpus.prepare_user_corpus("mine", str(cache), ("en", "de"), str(train), test=str(test))
    assert os.listdir(cache) == []


def test_user_dev_and_test_files_are_kept_whole(tmp_path):
    test_pairs = [
        ("Open the file.", "Öffnen Sie die Datei."),
        ("Open the file.", "Öffnen Sie die Datei."),  # duplicate
        ("OK", "OK"),  # identical sides
        ("A very long English sentence for a short word.", "Ja."),  # length ratio above 3
        ("Save  it\u200b.", "Speichern Sie es."),  # normalised: one space, no invisible character
    ]
    test = str(tmp_path / "test.tsv")
    parallel_files.write_tsv(test, test_pairs)
    dev = _write_parallel(tmp_path, [("OK", "OK"), ("Yes.", "Ja."), ("Yes.", "Ja.")], stem="dev")
    contaminated = [test_pairs[0], ("Yes.", "Ja.")]
    train = str(tmp_path / "train.tsv")
    parallel_files.write_tsv(train, make_pairs(300, seed=6) + contaminated)
    paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train, dev=dev, test=test)
    expected_test = test_pairs[:4] + [("Save it.", "Speichern Sie es.")]
    assert list(parallel_files.read_tsv(paths.test)) == expected_test
    assert list(parallel_files.read_tsv(paths.dev)) == [("OK", "OK"), ("Yes.", "Ja."), ("Yes.", "Ja.")]
    train_pairs = set(parallel_files.read_tsv(paths.train))
    assert len(train_pairs) == 300 and not train_pairs & set(contaminated)
    manifest = paths.load_manifest()
    assert manifest["splits"] == {"train": 300, "dev": 3, "test": 5}
    assert manifest["sources"]["test"]["cleaning"] == "normalised only, every pair kept"
    assert manifest["sources"]["train"]["dropped"] == {"in_evaluation_files": 2}
    assert manifest["cleaning"]["kept_whole"]["sources"] == ["test", "dev"]


def test_user_corpus_has_no_per_source_test_files(tmp_path):
    train = str(tmp_path / "train.tsv")
    parallel_files.write_tsv(train, make_pairs(200, seed=7))
    test = str(tmp_path / "test.tsv")
    parallel_files.write_tsv(test, [("A test sentence.", "Ein Testsatz.")])
    paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train, test=test)
    assert paths.test_by_source == {}
    assert sorted(os.listdir(paths.root)) == ["dev.tsv", "manifest.json", "test.tsv", "train.tsv"]


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


def _run_prepare(*args):
    return subprocess.run(
        [sys.executable, "-m", "data.prepare", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("flag", ["--train_tsv=pairs.tsv", "--languages=en-de", "--name=mine", "--test_src=test.en"])
def test_command_line_refuses_user_corpus_flags_without_corpus_user(tmp_path, flag):
    result = _run_prepare("--corpus=tatoeba-en-es", f"--cache_dir={tmp_path / 'cache'}", flag)
    assert result.returncode != 0
    assert f"{flag.split('=')[0]} describe a user corpus: add --corpus=user" in result.stderr
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("languages", ["en-", "-de", "en", "en-de-fr"])
def test_command_line_needs_two_language_codes(tmp_path, languages):
    src, tgt = _write_parallel(tmp_path, make_pairs(20))
    result = _run_prepare(
        "--corpus=user",
        f"--languages={languages}",
        f"--cache_dir={tmp_path / 'cache'}",
        f"--train_src={src}",
        f"--train_tgt={tgt}",
    )
    assert result.returncode != 0
    assert f"--languages must be two codes like en-de, got '{languages}'" in result.stderr


def test_command_line_reports_input_errors_without_a_traceback(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("one\ttab\nno tab here\n", encoding="utf-8")
    identical = tmp_path / "same.tsv"
    identical.write_text("same\tsame\n1\t1\n", encoding="utf-8")
    cache = f"--cache_dir={tmp_path / 'cache'}"
    for train, message in [
        (bad, f"data.prepare: error: {bad}:2: expected 'source<TAB>target' (one tab)"),
        (identical, f"data.prepare: error: No training pairs left from {identical}"),
        (tmp_path / "missing.tsv", f"data.prepare: error: {tmp_path / 'missing.tsv'}: file not found"),
    ]:
        result = _run_prepare("--corpus=user", "--languages=en-de", cache, f"--train_tsv={train}")
        assert result.returncode != 0
        assert result.stderr.strip().splitlines()[-1].startswith(message), result.stderr
        assert "Traceback" not in result.stderr


def test_command_line_reports_a_vocab_size_error_without_a_traceback(tmp_path):
    src, tgt = _write_parallel(tmp_path, make_pairs(100, seed=8))
    result = _run_prepare(
        "--corpus=user",
        "--languages=en-de",
        f"--cache_dir={tmp_path / 'cache'}",
        f"--train_src={src}",
        f"--train_tgt={tgt}",
        "--vocab_size=100",
    )
    assert result.returncode != 0
    assert "data.prepare: error: vocab_size=100 is too small for" in result.stderr
    assert "Traceback" not in result.stderr


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
    by_split = _english_by_split(paths)
    assert not by_split["train"] & by_split["test"] and not by_split["train"] & by_split["dev"]
    # A second call finds the complete corpus and returns without building.
    again = builtin_corpora.prepare_corpus("deb-en-de", os.path.dirname(paths.root), "/nonexistent")
    assert again == paths
