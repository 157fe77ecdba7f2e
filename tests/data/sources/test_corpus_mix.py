"""Weighted training mixes: the specs, the per-source training files, and the proportions the
real input pipeline draws."""

import math
import os

import numpy as np
import pytest

from data import pipeline
from data.sources import corpus_mix, parallel_files, user_corpus
from data.sources.corpus_cache import CorpusError
from tests.data.helpers import make_pairs


def _drawn_shares(dataset, tokenizer, markers, pairs):
    """The share of each marker among the first `pairs` source sentences of the batches."""
    counts = dict.fromkeys(markers, 0)
    seen = 0
    for (source, _), _ in dataset:
        for text in tokenizer.detokenize(source).numpy():
            text = text.decode()
            counts[next(marker for marker in markers if marker in text)] += 1
            seen += 1
        if seen >= pairs:
            break
    return {marker: count / seen for marker, count in counts.items()}, seen


def _marked(pairs, marker):
    return [(f"{marker} {en}", f"{marker} {de}") for en, de in pairs]


@pytest.mark.parametrize("cache_tokenized", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_the_pipeline_draws_pairs_in_proportion_to_the_weights(tmp_path, small_tokenizer, cache_tokenized):
    # A large corpus with a small weight and a small one with a large weight: the shares follow the
    # weights, not the sizes.
    pairs = make_pairs(1200, seed=3, max_clauses=2)
    big, small = str(tmp_path / "big.tsv"), str(tmp_path / "small.tsv")
    parallel_files.write_tsv(big, _marked(pairs[:1000], "alpha"))
    parallel_files.write_tsv(small, _marked(pairs[1000:], "omega"))
    dataset = pipeline.make_dataset(
        [big, small],
        small_tokenizer,
        batch_tokens=1024,
        max_length=96,
        seed=7,
        repeat=True,
        weights=[1, 3],
        cache_tokenized=cache_tokenized,
    )
    shares, seen = _drawn_shares(dataset, small_tokenizer, ("alpha", "omega"), 3000)
    # Each pair is drawn independently: the share of "omega" is binomial around 3/4.
    tolerance = 4 * math.sqrt(0.75 * 0.25 / seen)
    print(f"drawn {seen} pairs: {shares}, tolerance {tolerance:.4f}")
    assert abs(shares["omega"] - 0.75) < tolerance
    # The small corpus (200 pairs) was drawn many times over: it repeats on its own.
    assert shares["omega"] * seen > 4 * 200


def test_a_mix_needs_a_weight_per_path_and_repeat(small_tsv, small_tokenizer):
    options = dict(batch_tokens=1024, max_length=96)
    with pytest.raises(ValueError, match="one positive number per path"):
        pipeline.make_dataset([small_tsv, small_tsv], small_tokenizer, repeat=True, weights=[1], **options)
    with pytest.raises(ValueError, match="one positive number per path"):
        pipeline.make_dataset([small_tsv, small_tsv], small_tokenizer, repeat=True, weights=[1, 0], **options)
    with pytest.raises(ValueError, match="pass repeat=True"):
        pipeline.make_dataset([small_tsv, small_tsv], small_tokenizer, weights=[1, 1], **options)


def test_weight_specs_are_read(tmp_path):
    assert corpus_mix.parse_weights("--source_weights", "ding:3, libreoffice-ui:0.5") == [
        ("ding", 3.0),
        ("libreoffice-ui", 0.5),
    ]
    a, b = tmp_path / "a.tsv", tmp_path / "b:2.tsv"
    a.write_text("x\ty\n")
    b.write_text("x\ty\n")
    assert corpus_mix.parse_train_tsv("--train_tsv", f"{a}:3,{b}:1") == [(str(a), 3.0), (str(b), 1.0)]
    # An existing file is a path, whatever it holds; a single file needs no weight.
    assert corpus_mix.parse_train_tsv("--train_tsv", str(b)) == [(str(b), None)]
    assert corpus_mix.parse_train_tsv("--train_tsv", "missing.tsv") == [("missing.tsv", None)]


@pytest.mark.parametrize(
    "value, message",
    [
        ("{a}:3,{b}:0", "--train_tsv={a}:3,{b}:0: the weight '0' of {b} is not a positive number"),
        ("{a}:3,{b}:-1", "the weight '-1' of {b} is not a positive number"),
        ("{a}:3,{b}:x", "the weight 'x' of {b} is not a positive number"),
        ("{a}:3,{b}:inf", "the weight 'inf' of {b} is not a positive number"),
        ("{a}:3,{b}:nan", "the weight 'nan' of {b} is not a positive number"),
        ("{a}:3,{b}", "several training files need a weight each"),
        ("{a}:3,:1", "an empty file name"),
        ("{a}:3,{a}:1", "{a} given more than once"),
        ("{a}:3,{missing}:1", "--train_tsv={a}:3,{missing}:1: no such file: {missing}"),
    ],
)
def test_bad_train_tsv_specs_name_the_flag_and_value(tmp_path, value, message):
    names = dict(a=str(tmp_path / "a.tsv"), b=str(tmp_path / "b.tsv"), missing=str(tmp_path / "missing.tsv"))
    for name in ("a", "b"):
        with open(names[name], "w") as handle:
            handle.write("x\ty\n")
    with pytest.raises(corpus_mix.WeightsError) as raised:
        corpus_mix.parse_train_tsv("--train_tsv", value.format(**names))
    assert message.format(**names) in str(raised.value)


@pytest.mark.parametrize(
    "value, message",
    [
        ("ding", "'ding' is not NAME:WEIGHT"),
        ("ding:3,:1", "':1' is not NAME:WEIGHT"),
        ("ding:three", "the weight 'three' of ding is not a positive number"),
        ("ding:3,ding:1", "ding given more than once"),
    ],
)
def test_bad_source_weights_name_the_flag_and_value(value, message):
    with pytest.raises(corpus_mix.WeightsError, match=f"--source_weights={value}: .*{message}"):
        corpus_mix.parse_weights("--source_weights", value)


def test_each_source_of_a_built_corpus_has_its_training_lines(sample_corpus):
    manifest = sample_corpus.load_manifest()
    mix = corpus_mix.training_mix(sample_corpus, {"ding": 3})
    assert [(source.name, source.weight) for source in mix] == [
        ("libreoffice-help", 1.0),
        ("libreoffice-ui", 1.0),
        ("ding", 3.0),
    ]
    train_lines = []
    for shard in sample_corpus.train:
        with open(shard, encoding="utf-8") as handle:
            train_lines += handle.readlines()
    together = []
    for source in mix:
        with open(source.path, encoding="utf-8") as handle:
            lines = handle.readlines()
        assert source.pairs == len(lines) == manifest["sources"][source.name]["splits"]["train"]
        together += lines
    # The sources' files are the training split cut into its sources, none left out.
    assert together == train_lines
    with pytest.raises(CorpusError, match="has no source dign; its sources are libreoffice-help, libreoffice-ui, ding"):
        corpus_mix.training_mix(sample_corpus, {"dign": 2})


def test_several_training_files_are_sources_of_one_user_corpus(tmp_path):
    pairs = make_pairs(900, seed=5, max_clauses=2)
    first, second = str(tmp_path / "first.tsv"), str(tmp_path / "second.tsv")
    parallel_files.write_tsv(first, _marked(pairs[:600], "alpha"))
    parallel_files.write_tsv(second, _marked(pairs[600:], "omega"))
    corpus = user_corpus.prepare_user_corpus("mix", str(tmp_path / "cache"), ("en", "de"), [first, second])
    mix = corpus_mix.training_mix(corpus, {"train-1": 2, "train-2": 1}, labels={"train-1": first, "train-2": second})
    assert [(source.label, source.weight) for source in mix] == [(first, 2.0), (second, 1.0)]
    for source, marker in zip(mix, ("alpha", "omega")):
        english = [en for en, _ in parallel_files.read_tsv(source.path)]
        assert english and all(en.startswith(marker) for en in english)
    # The vocabulary's input, the training split, is their union.
    assert len(list(parallel_files.read_tsv(corpus.train))) == sum(source.pairs for source in mix) > 800
    described = corpus_mix.describe(mix)
    assert [entry["share"] for entry in described] == [0.6667, 0.3333]
    assert os.path.basename(described[0]["file"]) == "train.train-1.tsv"
    assert np.isclose(sum(entry["share"] for entry in described), 1.0, atol=1e-3)


@pytest.mark.slow  # two input pipelines drawn far enough to measure shares
def test_each_input_pipeline_of_a_distributed_mix_draws_its_shard_in_proportion(tmp_path, small_tokenizer):
    import tensorflow as tf

    pairs = make_pairs(1200, seed=4, max_clauses=2)
    big, small = str(tmp_path / "big.tsv"), str(tmp_path / "small.tsv")
    parallel_files.write_tsv(big, _marked(pairs[:1000], "alpha"))
    parallel_files.write_tsv(small, _marked(pairs[1000:], "omega"))
    dataset_fn = pipeline.make_distributed_dataset_fn(
        [big, small], small_tokenizer, batch_tokens=1024, max_length=96, seed=7, repeat=True, weights=[1, 3]
    )
    for pipeline_id in (0, 1):
        context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=pipeline_id)
        shares, seen = _drawn_shares(dataset_fn(context), small_tokenizer, ("alpha", "omega"), 1500)
        assert abs(shares["omega"] - 0.75) < 4 * math.sqrt(0.75 * 0.25 / seen)
