"""Multilingual corpora: the pairs a --corpus names, the sampling temperature, the target-language
refusals, and the tagged cache entry built from the deb-en-de sample and sample deb-en-ja packages."""

import math
import os

import pytest

from data import corpora, multilingual
from data.sources import builtin_corpora
from tests.data.helpers import make_pairs
from tests.helpers import build_sample_multilingual


def test_pair_names_keep_the_order_and_refuse_a_pair_given_twice_or_unknown():
    known = builtin_corpora.CORPORA
    assert multilingual.pair_names("deb-en-de, deb-en-fr,deb-en-zh_cn", known) == (
        "deb-en-de",
        "deb-en-fr",
        "deb-en-zh_cn",
    )
    refusals = {
        "deb-en-de,deb-en-fr,deb-en-de": "deb-en-de is given twice; name each pair once",
        "deb-en-de,deb-en-tlh": "deb-en-tlh is not a built-in corpus; a multilingual model trains on built-in pairs: "
        "deb-en-af",
        "deb-en-de,,deb-en-fr": "an empty pair name",
        "deb-en-es,tatoeba-en-es": "deb-en-es and tatoeba-en-es both translate into es",
    }
    for value, message in refusals.items():
        with pytest.raises(multilingual.MultilingualError, match=f"--corpus={value}: {message}"):
            multilingual.pair_names(value, known)


def test_temperature_flattens_the_sampling_over_pair_sizes():
    sizes = {"big": 9000, "small": 1000}
    assert multilingual.temperature_weights(sizes, 1.0) == pytest.approx({"big": 0.9, "small": 0.1})
    five = multilingual.temperature_weights(sizes, 5.0)
    ratio = (0.9 / 0.1) ** (1 / 5)  # big's weight over small's
    assert five == pytest.approx({"big": ratio / (1 + ratio), "small": 1 / (1 + ratio)})
    assert math.isclose(sum(five.values()), 1.0)
    assert multilingual.temperature_weights(sizes, 1e9)["small"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        multilingual.temperature_weights(sizes, 0)


def test_target_language_of_a_multilingual_and_of_a_bilingual_model():
    multi = {"corpus": "deb-en-de,deb-en-zh_cn"}
    assert multilingual.model_languages(multi) == ("de", "zh_cn")
    assert multilingual.target_tag(multi, "zh_cn", "runs/m") == "<2zh_cn>"
    assert multilingual.tag_language("<2zh_cn>") == "zh_cn" and multilingual.tag_language("<bt>") is None
    with pytest.raises(
        multilingual.TargetLanguageError,
        match="runs/m is a multilingual model: pass --target_language, one of de, zh_cn",
    ):
        multilingual.target_tag(multi, None, "runs/m")
    with pytest.raises(
        multilingual.TargetLanguageError,
        match="--target_language=fr: runs/m was trained to translate into de, zh_cn only",
    ):
        multilingual.target_tag(multi, "fr", "runs/m")
    assert multilingual.target_tag({"corpus": "deb-en-de"}, None, "runs/b") is None
    assert multilingual.target_tag({"corpus": "deb-en-de", "direction": "de-en"}, "en", "runs/b") is None
    with pytest.raises(
        multilingual.TargetLanguageError, match="--target_language=fr: runs/b is a bilingual model into de"
    ):
        multilingual.target_tag({"corpus": "deb-en-de"}, "fr", "runs/b")


def test_the_vocabulary_holds_the_tags_first_then_the_user_symbols():
    assert multilingual.vocabulary_symbols("deb-en-de,deb-en-fr", ["<bt>", "<2fr>"]) == ("<2de>", "<2fr>", "<bt>")
    assert multilingual.vocabulary_symbols("deb-en-de", ["<bt>"]) == ("<bt>",)


def test_the_entry_tags_each_pair_and_is_built_once(tmp_path):
    """Every training and dev line of a pair starts with its tag; the counts are the pairs'; the
    entry is found again, not rewritten; another pair list is another entry."""
    cache = str(tmp_path / "cache")
    pairs = build_sample_multilingual(cache, str(tmp_path / "debs"))
    build = lambda name: pairs[name]  # noqa: E731
    entry = multilingual.prepare_multilingual(("deb-en-de", "deb-en-ja"), cache, build)
    manifest = entry.load_manifest()
    assert os.path.basename(entry.root).startswith(multilingual.PREFIX) and entry.languages == ("en", "mul")
    for name, paths in pairs.items():
        recorded = manifest["pairs"][name]
        assert recorded["tag"] == multilingual.tag(name.split("-")[-1])
        own = paths.load_manifest()["splits"]
        assert {split: recorded[split] for split in ("train", "dev", "test")} == own
        with open(os.path.join(entry.root, f"train.{name}.tsv"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        with open(paths.train[0], encoding="utf-8") as f:
            assert lines == [f"{recorded['tag']} {line}" for line in f.read().splitlines()]
    with open(entry.dev, encoding="utf-8") as f:
        dev = f.read().splitlines()
    assert len(dev) == manifest["splits"]["dev"] and dev[-1].startswith("<2ja> ")
    assert entry.train == tuple(os.path.join(entry.root, f"train.{name}.tsv") for name in pairs)
    written = os.path.getmtime(entry.manifest)
    assert multilingual.prepare_multilingual(("deb-en-de", "deb-en-ja"), cache, build) == entry
    assert os.path.getmtime(entry.manifest) == written
    swapped = multilingual.prepare_multilingual(("deb-en-ja", "deb-en-de"), cache, build)
    assert swapped.root != entry.root


def test_the_training_mix_of_an_entry_samples_its_pairs_with_temperature(tmp_path):
    from training.config import DataConfig

    cache = str(tmp_path / "cache")
    build_sample_multilingual(cache, str(tmp_path / "debs"))
    data = DataConfig(corpus="deb-en-de,deb-en-ja", cache_dir=cache, deb_dir=str(tmp_path / "debs"))
    entry, reverse = corpora.resolve_corpus(data)
    assert not reverse
    mix = corpora.training_mix(entry, data)
    sizes = {name: recorded["train"] for name, recorded in multilingual.pairs_of(entry).items()}
    weights = multilingual.temperature_weights(sizes, multilingual.DEFAULT_TEMPERATURE)
    assert [(source.name, source.pairs, source.weight) for source in mix] == [
        (name, sizes[name], weights[name]) for name in ("deb-en-de", "deb-en-ja")
    ]
    assert corpora.vocabulary_symbols(data) == ("<2de>", "<2ja>")
    with pytest.raises(
        corpora.CorpusChoiceError,
        match="--direction=ja-en: a multilingual model translates each pair from its source language",
    ):
        corpora.resolve_corpus(DataConfig(corpus="deb-en-de,deb-en-ja", cache_dir=cache, direction="ja-en"))


def _tsv(path, pairs):
    path.write_text("".join(f"{source}\t{target}\n" for source, target in pairs), encoding="utf-8")
    return str(path)


def test_user_files_of_several_languages_are_one_pair_each(tmp_path):
    """--corpus=files --languages=en-de,en-nl: each TSV one pair, named by its languages, built as a
    user corpus of its own; the entry tags each with its target language."""
    from training.config import DataConfig

    german = make_pairs(300, seed=1)
    dutch = [(english, target.upper()) for english, target in make_pairs(200, seed=2)]
    files = dict(
        train_files=(_tsv(tmp_path / "de.tsv", german[:260]), _tsv(tmp_path / "nl.tsv", dutch[:170])),
        dev_files=(_tsv(tmp_path / "dev-de.tsv", german[260:]), _tsv(tmp_path / "dev-nl.tsv", dutch[170:])),
    )
    data = DataConfig(corpus="files", languages="en-de,en-nl", cache_dir=str(tmp_path / "cache"), **files)
    entry, _ = corpora.resolve_corpus(data)
    pairs = multilingual.pairs_of(entry)
    assert [(name, pair["tag"], pair["dev"]) for name, pair in pairs.items()] == [
        ("en-de", "<2de>", 40),
        ("en-nl", "<2nl>", 30),
    ]
    assert all(pair["corpus_dir"].startswith("user-") for pair in pairs.values())
    assert corpora.vocabulary_symbols(data) == ("<2de>", "<2nl>")
    assert multilingual.model_languages({"corpus": "files", "languages": "en-de,en-nl"}) == ("de", "nl")
    with pytest.raises(
        multilingual.MultilingualError, match="--languages=en-de,en-nl names 2 pairs, --dev_tsv 1 files"
    ):
        corpora.pair_configs(
            DataConfig(corpus="files", languages="en-de,en-nl", **dict(files, dev_files=files["dev_files"][:1]))
        )


@pytest.mark.parametrize(
    "given, message",
    [
        (dict(train_tsv="de.tsv:2,nl.tsv:1"), "de.tsv:2 has a weight; with several --languages each file is one pair"),
        (dict(train_tsv="de.tsv"), "--languages=en-de,en-nl names 2 pairs, --train_tsv 1 files"),
        (
            dict(train_tsv="de.tsv,nl.tsv", dev_src="d.en", dev_tgt="d.de"),
            "takes one --dev_tsv file per pair, not --dev_src",
        ),
        (dict(), "needs --train_tsv, one file per pair"),
    ],
)
def test_the_flags_of_several_languages_name_one_tsv_per_pair(given, message):
    from data.sources import user_corpus

    values = {name: None for name in user_corpus.FILE_FLAGS}
    values.update(languages="en-de,en-nl", **given)
    with pytest.raises(user_corpus.UserFilesError, match=message):
        user_corpus.multilingual_files(values, "--corpus=files")
