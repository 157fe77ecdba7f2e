import os

import pytest

from data.sources import corpus_cache, parallel_files, user_corpus
from tests.data.helpers import english_by_split, make_pairs, write_parallel


def test_user_corpus_splits_are_disjoint_by_source_sentence(tmp_path):
    pairs = make_pairs(3000, seed=1, max_clauses=2)
    # The same English sentence with two translations must land in one split.
    pairs += [(en, de + " Wirklich.") for en, de in pairs[:500]]
    train = write_parallel(tmp_path, pairs)
    paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train)
    by_split = english_by_split(paths)
    assert not by_split["train"] & by_split["dev"]
    assert not by_split["train"] & by_split["test"]
    assert not by_split["dev"] & by_split["test"]
    manifest = paths.load_manifest()
    assert manifest["total_pairs"] == 3500 == sum(manifest["splits"].values())
    assert 0 < manifest["splits"]["test"] < 200


def test_user_corpus_keeps_given_dev_and_counts_empty_lines(tmp_path):
    train = write_parallel(tmp_path, make_pairs(400, seed=2) + [("", "Leer.")])
    dev = tmp_path / "dev.tsv"
    dev.write_text("A dev sentence here.\tEin Satz.\n\n", encoding="utf-8")
    paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train, dev=str(dev))
    manifest = paths.load_manifest()
    assert list(parallel_files.read_tsv(paths.dev)) == [("A dev sentence here.", "Ein Satz.")]
    assert manifest["read"]["train"]["empty_lines_skipped"] == 1
    assert manifest["read"]["dev"]["empty_lines_skipped"] == 1
    assert manifest["splits"]["test"] > 0  # filled from train by the hash split


def test_bad_input_leaves_no_corpus_behind(tmp_path):
    src, tgt = write_parallel(tmp_path, make_pairs(50))
    with open(tgt, "a", encoding="utf-8") as f:
        f.write("One line too many.\n")
    cache = tmp_path / "cache"
    with pytest.raises(
        parallel_files.ParallelDataError, match=r"train.en ends after line 50, .*train.de goes on at line 51"
    ):
        user_corpus.prepare_user_corpus("mine", str(cache), ("en", "de"), (src, tgt))
    assert os.listdir(cache) == []


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
    dev = write_parallel(tmp_path, [("OK", "OK"), ("Yes.", "Ja."), ("Yes.", "Ja.")], stem="dev")
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
    assert sorted(os.listdir(paths.root)) == ["dev.tsv", "manifest.json", "test.tsv", "train-00000-of-00001.tsv"]


def _flag_values(**given):
    return {"languages": "en-de", **dict.fromkeys(user_corpus.FILE_FLAGS), "train_tsv": "train.tsv", **given}


def test_user_files_gives_each_split_as_prepare_user_corpus_takes_it():
    languages, files = user_corpus.user_files(_flag_values(test_src="test.en", test_tgt="test.de"), "--corpus=user")
    assert languages == ("en", "de")
    assert files == {"train": "train.tsv", "dev": None, "test": ("test.en", "test.de")}


@pytest.mark.parametrize(
    "given, message",
    [
        (
            {"languages": "en"},
            "--corpus=user needs --languages=SRC-TGT; --languages must be two codes like en-de, got 'en'",
        ),
        (
            {"languages": None},
            "--corpus=user needs --languages=SRC-TGT; --languages must be two codes like en-de, got None",
        ),
        ({"dev_tsv": "dev.tsv", "dev_src": "dev.en"}, "give --dev_tsv or --dev_src/--dev_tgt, not both"),
        ({"test_tgt": "test.de"}, "--test_src and --test_tgt go together (received only one)"),
        ({"train_tsv": None}, "--corpus=user needs --train_tsv or --train_src/--train_tgt"),
    ],
)
def test_user_files_names_the_flags_that_do_not_describe_a_corpus(given, message):
    with pytest.raises(user_corpus.UserFilesError) as refused:
        user_corpus.user_files(_flag_values(**given), "--corpus=user")
    assert str(refused.value) == message
