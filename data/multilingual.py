"""Multilingual corpora: several built-in pairs in one model, each source sentence tagged `<2xx>`
with its target language (fairseq's `--encoder-langtok tgt`). docs/training.md, "Several pairs in
one model", is the user's guide."""

import hashlib
import os
import re

from common.errors import UserError
from data.sources import corpus_cache
from data.sources.corpus_cache import CorpusError, CorpusPaths

DEFAULT_TEMPERATURE = 5.0
PREFIX = "multi-"
_TAG = re.compile(r"^<2([A-Za-z][A-Za-z0-9_]*)>$")


class MultilingualError(CorpusError):
    """A multilingual --corpus that cannot be used as given (the message names the entry)."""


def is_multilingual(corpus: str, languages: str | None = None) -> bool:
    """Whether --corpus names several pairs, or --corpus=files several --languages."""
    return "," in corpus or (corpus == "files" and "," in (languages or ""))


def pair_list(corpus: str, languages: str | None = None) -> str:
    """The pairs of a multilingual configuration: --corpus's corpora, or --languages ("en-fr")."""
    return languages if corpus == "files" else corpus


def tag(language: str) -> str:
    """The target-language tag of `language`, e.g. "<2fr>", "<2zh_cn>"."""
    return f"<2{language}>"


def tag_language(piece: str) -> str | None:
    """The language of a tag piece ("<2fr>" -> "fr"), or None for any other piece."""
    match = _TAG.match(piece)
    return match.group(1) if match else None


def pair_names(value: str, known, flag: str = "--corpus") -> tuple[str, ...]:
    """The pairs of `--corpus=a,b,...` (or of `--languages=en-de,en-fr`: `known` None), in order.
    Raises `MultilingualError` on an empty or repeated entry, a name not in `known`, or two pairs
    into the same language."""
    names = tuple(name.strip() for name in value.split(","))
    if any(not name for name in names):
        raise MultilingualError(f"{flag}={value}: an empty pair name; write the pairs as deb-en-de,deb-en-fr")
    for name in names:
        if names.count(name) > 1:
            raise MultilingualError(f"{flag}={value}: {name} is given twice; name each pair once")
        if known is None and (name.count("-") != 1 or not all(name.split("-"))):
            raise MultilingualError(f"{flag}={value}: {name} is not two language codes like en-fr")
        if known is not None and name not in known:
            raise MultilingualError(
                f"--corpus={value}: {name} is not a built-in corpus; a multilingual model trains on built-in "
                f"pairs: {', '.join(sorted(known))} (`python -m data.prepare --list`)"
            )
    targets = {}
    for name in names:
        language = target_language(name)
        if language in targets:
            raise MultilingualError(
                f"{flag}={value}: {targets[language]} and {name} both translate into {language}: one tag cannot "
                "tell them apart; keep one"
            )
        targets[language] = name
    return names


def temperature_weights(sizes: dict, temperature: float) -> dict:
    """Sampling probabilities of the pairs: each pair's share of the pairs raised to 1/temperature,
    normalized (temperature 1: in proportion to size; larger: flatter, so small pairs are seen more)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, received {temperature}")
    total = sum(sizes.values())
    raw = {name: (count / total) ** (1.0 / temperature) for name, count in sizes.items()}
    norm = sum(raw.values())
    return {name: value / norm for name, value in raw.items()}


def _tagged_copy(sources, destination, prefix):
    """Writes the lines of `sources` into `destination` with `prefix` before each; returns the count."""
    count = 0
    with open(destination, "w", encoding="utf-8") as out:
        for path in sources:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    out.write(prefix + line)
                    count += 1
    return count


def _write(tmp_dir: str, pairs: dict) -> None:
    """Writes the multilingual entry of `pairs` ({name: CorpusPaths}) into `tmp_dir`."""
    entries, files, shards = {}, {}, []
    for name, paths in pairs.items():
        language = target_language(name)
        prefix = tag(language) + " "
        shard = f"train.{name}.tsv"
        shards.append(shard)
        entries[name] = {
            "corpus_dir": os.path.basename(paths.root),
            "language": language,
            "tag": tag(language),
            "train": _tagged_copy(paths.train, os.path.join(tmp_dir, shard), prefix),
        }
    for split in ("dev", "test"):
        with open(os.path.join(tmp_dir, f"{split}.tsv"), "w", encoding="utf-8") as out:
            for name, paths in pairs.items():
                count = 0
                with open(paths.split(split), encoding="utf-8") as f:
                    for line in f:
                        out.write(entries[name]["tag"] + " " + line)
                        count += 1
                entries[name][split] = count
    for file in (*shards, "dev.tsv", "test.tsv"):
        files[file] = {"bytes": os.path.getsize(os.path.join(tmp_dir, file))}
    sources = {paths.languages[0] for paths in pairs.values()}
    manifest = {
        "format": corpus_cache.MANIFEST_FORMAT,
        "corpus": ",".join(pairs),
        "languages": [sources.pop() if len(sources) == 1 else "mul", "mul"],
        "train_shards": shards,
        "sources": {},
        "pairs": entries,
        "splits": {split: sum(entry[split] for entry in entries.values()) for split in ("train", "dev", "test")},
        "files": files,
    }
    corpus_cache.write_manifest(os.path.join(tmp_dir, corpus_cache.MANIFEST), manifest)


def prepare_multilingual(names, cache_dir: str, build) -> CorpusPaths:
    """The multilingual entry of `names` in `cache_dir`, written unless complete (`build(name)`: a pair)."""
    pairs = {name: build(name) for name in names}
    digest = hashlib.sha256()
    for name, paths in pairs.items():
        digest.update(name.encode() + b"\0" + corpus_cache.sha256_file(paths.manifest).encode() + b"\0")
    root_name = PREFIX + digest.hexdigest()[:16]
    cached = corpus_cache.cached(os.path.join(cache_dir, root_name), rebuild_invalid=True)
    if cached is not None:
        return cached
    return corpus_cache.build_atomically(cache_dir, root_name, lambda tmp_dir: _write(tmp_dir, pairs))


def pairs_of(corpus: CorpusPaths) -> dict:
    """{pair name: {"corpus_dir", "language", "tag", "train", "dev", "test"}} of a multilingual
    entry; each pair's own corpus is `corpus_dir` beside it in the cache."""
    return corpus.load_manifest()["pairs"]


def target_language(name: str) -> str:
    """The target language of a built-in pair: its name's last part ("deb-en-zh_cn" -> "zh_cn")."""
    return name.rsplit("-", 1)[-1]


def languages_of(corpus: str, languages: str | None = None) -> tuple[str, ...]:
    """The target languages of a multilingual configuration (`pair_list`), in order."""
    return tuple(target_language(name.strip()) for name in pair_list(corpus, languages).split(","))


def tags_of(corpus: str, languages: str | None = None) -> tuple[str, ...]:
    """The target-language tags of a multilingual configuration, in order."""
    return tuple(tag(language) for language in languages_of(corpus, languages))


def vocabulary_symbols(corpus: str, symbols, languages: str | None = None) -> tuple[str, ...]:
    """A vocabulary's user-defined symbols: a multilingual configuration's tags, then `symbols`."""
    symbols = tuple(symbols or ())
    if not is_multilingual(corpus, languages):
        return symbols
    tags = tags_of(corpus, languages)
    return tags + tuple(symbol for symbol in symbols if symbol not in tags)


class TargetLanguageError(UserError, ValueError):
    """A target language the model cannot translate into, or none for a multilingual model."""


def model_languages(data: dict) -> tuple[str, ...] | None:
    """The target languages of a model trained with data section `data`, or None if bilingual."""
    corpus, languages = data.get("corpus") or "", data.get("languages")
    return languages_of(corpus, languages) if is_multilingual(corpus, languages) else None


def side_languages(data: dict) -> tuple[str | None, str | None]:
    """The (source, target) languages of a data section, each None where it names none or several."""
    if data.get("direction"):
        directions = [data["direction"]]
    elif data.get("languages"):
        directions = data["languages"].split(",")
    else:  # Built-in corpora: deb-en-de, tatoeba-en-es.
        directions = [name.split("-", 1)[1] for name in (data.get("corpus") or "").split(",") if name.count("-") == 2]
    sides = [{direction.split("-")[index] for direction in directions if direction.count("-") == 1} for index in (0, 1)]
    source, target = (side.pop() if len(side) == 1 else None for side in sides)
    return source, target


def bilingual_target(data: dict) -> str | None:
    """The target language of a bilingual model's data section, where it names one."""
    direction = data.get("direction") or data.get("languages")
    corpus = data.get("corpus") or ""
    if not direction and corpus.count("-") == 2:  # deb-en-de, tatoeba-en-es
        direction = corpus.split("-", 1)[1]
    return direction.split("-")[-1] if direction else None


def target_tag(data: dict, target_language: str | None, where: str) -> str | None:
    """The tag before each sentence to translate into `target_language` with a model trained on
    `data` (config.json's data section); None for a bilingual model. Raises `TargetLanguageError` on
    a multilingual model without a target language or with an unknown one; a bilingual model asked
    for another language. Names `where`."""
    languages = model_languages(data)
    if languages is None:
        own = bilingual_target(data)
        if target_language is None or target_language == own:
            return None
        raise TargetLanguageError(
            f"--target_language={target_language}: {where} is a bilingual model"
            + (f" into {own}" if own else "")
            + "; a target language chooses among the languages of a multilingual model (--corpus=deb-en-de,deb-en-fr)"
        )
    if target_language is None:
        raise TargetLanguageError(
            f"{where} is a multilingual model: pass --target_language, one of {', '.join(languages)}"
        )
    if target_language not in languages:
        raise TargetLanguageError(
            f"--target_language={target_language}: {where} was trained to translate into {', '.join(languages)} only"
        )
    return tag(target_language)


def tag_ids(tokenizer, tag):
    """The ids `tag` puts before a sentence's tokens (`["▁", tag]`: SentencePiece segments around a
    user-defined symbol). Raises `TargetLanguageError` when `tag` is not in the vocabulary."""
    ids = tokenizer.tokenize([tag]).to_list()[0]
    last = tokenizer.id_to_piece(ids[-1:]).numpy()[0].decode() if ids else ""
    if last != tag or len(ids) > 2:
        raise TargetLanguageError(f"{tag} is not a symbol of the vocabulary: the model was not trained with that tag")
    return ids
