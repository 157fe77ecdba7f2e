"""The corpus a run's data configuration names, built or found in the cache, and its direction.

The functions take any object with `training.config.DataConfig`'s attributes (data/ does not import
training/)."""

import dataclasses
import os
import shlex
import sys

from data import multilingual, pipeline
from data.sources import builtin_corpora, corpus_mix, deb_packages, user_corpus
from data.sources.corpus_cache import CorpusError


class CorpusChoiceError(CorpusError):
    """The configured corpus cannot serve as asked (direction, dev pairs); the message says what to change."""


def vocabulary_symbols(data):
    """The user-defined symbols of the run's vocabulary (`multilingual.vocabulary_symbols`)."""
    return multilingual.vocabulary_symbols(data.corpus, getattr(data, "user_defined_symbols", ()), data.languages)


def prepare_command(data, vocab_size):
    """The `python -m data.prepare` command that builds the corpus and its vocabulary."""
    arguments = [f"--cache_dir={data.cache_dir}", f"--vocab_size={vocab_size}"]
    if getattr(data, "subword_model", "bpe") != "bpe":
        arguments.append(f"--model_type={data.subword_model}")
    if getattr(data, "vocabulary", "shared") != "shared":
        arguments.append(f"--vocabulary={data.vocabulary}")
    symbols = tuple(getattr(data, "user_defined_symbols", ()) or ())  # data.prepare adds the tags itself.
    if symbols:
        arguments.append(f"--user_defined_symbols={','.join(symbols)}")
    if data.corpus != "files":
        arguments.append(f"--corpus={data.corpus}")
    else:
        arguments += ["--corpus=user", f"--name={user_corpus.cache_name(data)}", f"--languages={data.languages}"]
        if _train_weights(data):
            weighted = zip(data.train_files, data.train_weights)
            arguments.append(
                "--train_tsv=" + ",".join(f"{os.path.abspath(path)}:{weight:g}" for path, weight in weighted)
            )
        for split, paths in (("train", data.train_files), ("dev", data.dev_files), ("test", data.test_files)):
            if split == "train" and _train_weights(data):
                continue
            kinds = ("tsv",) if len(paths) == 1 else ("src", "tgt")
            arguments += [f"--{split}_{kind}={os.path.abspath(path)}" for kind, path in zip(kinds, paths)]
    return "python -m data.prepare " + " ".join(shlex.quote(argument) for argument in arguments)


def check_dev_split(corpus, data):
    """Checks that the corpus has dev pairs (the hash split of a small corpus may give none). Raises
    `CorpusChoiceError`, naming the flags that give a dev file, when there are none."""
    if corpus.load_manifest()["splits"]["dev"]:
        return
    if data.corpus == "files" and not data.dev_files:
        raise CorpusChoiceError(
            f"the corpus built from {', '.join(data.train_files)} has no dev pairs: without dev files, dev takes "
            f"the ~3% of training pairs that a hash of the sentence picks, and none was picked. Pass --dev_tsv or "
            "--dev_src/--dev_tgt"
        )
    raise CorpusChoiceError(f"{corpus.dev} holds no pairs (after cleaning): training needs a dev set")


def resolve_corpus(data):
    """`(CorpusPaths, reverse)`: the corpus built or found, and whether its columns are read in
    reverse for the direction. Raises `CorpusChoiceError` on a direction the corpus does not hold;
    `CorpusError`, `parallel_files.ParallelDataError` or `deb_packages.DebPackageError` when the
    corpus cannot be built."""
    if multilingual.is_multilingual(data.corpus, data.languages):
        return _resolve_multilingual(data), False
    if data.corpus == "files":
        name = user_corpus.cache_name(data)
        spec = lambda files: None if not files else (files[0] if len(files) == 1 else tuple(files))  # noqa: E731
        corpus = user_corpus.prepare_user_corpus(
            name,
            data.cache_dir,
            tuple(data.languages.split("-")),
            list(data.train_files) if _train_weights(data) else spec(data.train_files),
            spec(data.dev_files),
            spec(data.test_files),
        )
        _print_cleaning(corpus)
    else:
        corpus = pair_corpus(data, data.corpus)
    direction = data.direction or "-".join(corpus.languages)
    try:
        return corpus, pipeline.resolve_direction(corpus.languages, direction)
    except ValueError as error:
        raise CorpusChoiceError(f"--direction={direction}: {error}") from error


def _resolve_multilingual(data):
    """The multilingual entry of the configuration's pairs, each pair built or found first. Raises
    `CorpusChoiceError` on a --direction (multilingual pairs translate from English);
    `multilingual.MultilingualError` on a pair given twice, unknown, or two into one language."""
    if data.direction is not None:
        raise CorpusChoiceError(
            f"--direction={data.direction}: a multilingual model translates each pair from its source language into "
            "its target language (the tag names it); leave --direction out"
        )
    configs = pair_configs(data)
    return multilingual.prepare_multilingual(
        tuple(configs), data.cache_dir, lambda name: resolve_corpus(configs[name])[0]
    )


def pair_configs(data):
    """{pair name: the data configuration of that pair alone}. Raises `multilingual.MultilingualError`
    on a pair given twice, unknown, or two into one language, or user files not one per pair."""
    if data.corpus != "files":
        names = multilingual.pair_names(data.corpus, builtin_corpora.CORPORA)
        return {name: dataclasses.replace(data, corpus=name) for name in names}
    names = multilingual.pair_names(data.languages, None, "--languages")
    for split, files in (("train", data.train_files), ("dev", data.dev_files), ("test", data.test_files)):
        if files and len(files) != len(names):
            raise multilingual.MultilingualError(
                f"--languages={data.languages} names {len(names)} pairs, --{split}_tsv {len(files)} files: give one "
                "file per pair, in the order of --languages"
            )
    return {
        name: dataclasses.replace(
            data,
            languages=name,
            train_files=(data.train_files[index],),
            dev_files=data.dev_files[index : index + 1],
            test_files=data.test_files[index : index + 1],
            train_weights=(),
        )
        for index, name in enumerate(names)
    }


def pair_corpus(data, name):
    """The `CorpusPaths` of the built-in corpus `name`, built with the data configuration's packages."""
    return builtin_corpora.prepare_corpus(
        name,
        data.cache_dir,
        data.deb_dir,
        deb_source=data.deb_source,
        deb_mirror=data.deb_mirror or deb_packages.DEFAULT_MIRROR,
    )


def _train_weights(data):
    """The weights of several training TSVs (a DataConfig written before mixes has none)."""
    return tuple(getattr(data, "train_weights", ()) or ())


def training_mix(corpus, data):
    """The weighted training mix asked for, or None to read the training split as one corpus. Raises
    `CorpusError` on a source the corpus does not have, or one without training pairs."""
    weights = _train_weights(data)
    if multilingual.is_multilingual(data.corpus, data.languages):
        return _pair_mix(corpus, data)
    if data.corpus == "files":
        if not weights:
            return None
        names = corpus_mix.user_source_names(len(weights))
        return corpus_mix.training_mix(corpus, dict(zip(names, weights)), labels=dict(zip(names, data.train_files)))
    source_weights = dict(getattr(data, "source_weights", None) or {})
    if not source_weights:
        return None
    return corpus_mix.training_mix(corpus, source_weights)


def _pair_mix(corpus, data):
    """The training mix of a multilingual entry: its pairs, drawn with temperature over their sizes."""
    pairs = multilingual.pairs_of(corpus)
    temperature = getattr(data, "pair_sampling_temperature", multilingual.DEFAULT_TEMPERATURE)
    weights = multilingual.temperature_weights({name: entry["train"] for name, entry in pairs.items()}, temperature)
    return [
        corpus_mix.TrainingSource(
            name, name, os.path.join(corpus.root, f"train.{name}.tsv"), entry["train"], weights[name]
        )
        for name, entry in pairs.items()
    ]


def print_mix(mix):
    """The training mix on stderr: each corpus, its weight, its share of the pairs and its size."""
    for entry in corpus_mix.describe(mix):
        print(
            f"training corpus {entry['corpus']}: {entry['pairs']} pairs, weight {entry['weight']:g} "
            f"({entry['share']:.1%} of the pairs sampled)",
            file=sys.stderr,
        )


def _source_files(manifest, source):
    """The input files recorded for a source of a user corpus ("train", "train-1", ...)."""
    inputs = manifest.get("inputs", {})
    if source in inputs:
        return inputs[source]
    if source.startswith("train-") and "train" in inputs:
        index = int(source.split("-", 1)[1])
        return inputs["train"][index - 1 : index]
    return []


def _print_cleaning(corpus):
    """What became of the user's files: pairs read, kept (and to which split), dropped by reason."""
    manifest = corpus.load_manifest()
    for source, stats in manifest["sources"].items():
        files = ", ".join(os.path.basename(entry["path"]) for entry in _source_files(manifest, source))
        dropped = ", ".join(f"{count} {reason}" for reason, count in stats["dropped"].items()) or "none"
        splits = ", ".join(f"{count} {split}" for split, count in stats["splits"].items() if count)
        print(
            f"{source} files ({files}): {stats['raw']} pairs read, {stats['kept']} kept ({splits}), dropped: {dropped}",
            file=sys.stderr,
        )
