"""A corpus built from the user's own parallel files (`prepare_user_corpus`) and `user_files`, the
one check of the flags that name them. Dev and test files are kept whole (normalised only) so that
scores compare with published ones."""

import dataclasses
import hashlib
import json
import os

from common.errors import UserError
from data.sources import cleaning, corpus_cache, corpus_mix, corpus_writer, parallel_files
from data.sources.corpus_cache import CorpusError, CorpusPaths

FILE_KINDS = ("src", "tgt", "tsv")
# The flags naming the user's files, e.g. --train_src, --train_tgt, --train_tsv, --dev_src, ...
FILE_FLAGS = tuple(f"{split}_{kind}" for split in cleaning.SPLITS for kind in FILE_KINDS)


class UserFilesError(UserError, ValueError):
    """Flags that do not describe a user corpus; the message names them."""


def user_files(values, corpus_flag: str) -> tuple[tuple[str, str], dict]:
    """Checks the flags of a user corpus; returns `(languages, files)` for `prepare_user_corpus`.

    Args:
        values: "languages" and each of FILE_FLAGS (None or "" when not given).
        corpus_flag: the flag named in the messages ("--corpus=files").

    Returns:
        languages ("en", "de") and files: split -> a TSV path, a (source, target) pair, or None;
            "train" is a list when --train_tsv names several weighted files.

    Raises:
        UserFilesError: any inconsistent or missing flag.
    """
    value = values["languages"]
    codes = (value or "").split("-")
    if len(codes) != 2 or not all(codes):
        raise UserFilesError(
            f"{corpus_flag} needs --languages=SRC-TGT; --languages must be two codes like en-de, got {value!r}"
        )
    files = {}
    for split in cleaning.SPLITS:
        src, tgt, tsv = (values[f"{split}_{kind}"] for kind in FILE_KINDS)
        if tsv and (src or tgt):
            raise UserFilesError(f"give --{split}_tsv or --{split}_src/--{split}_tgt, not both")
        if bool(src) != bool(tgt):
            raise UserFilesError(f"--{split}_src and --{split}_tgt go together (received only one)")
        files[split] = tsv or ((src, tgt) if src else None)
    if values["train_tsv"]:
        try:
            entries = corpus_mix.parse_train_tsv("--train_tsv", values["train_tsv"])
        except corpus_mix.WeightsError as error:
            raise UserFilesError(str(error)) from None
        files["train"] = entries[0][0] if len(entries) == 1 else [path for path, _ in entries]
    if files["train"] is None:
        raise UserFilesError(f"{corpus_flag} needs --train_tsv or --train_src/--train_tgt")
    return (codes[0], codes[1]), files


def multilingual_files(values, corpus_flag: str) -> dict:
    """Checks a multilingual user corpus's flags (one `--<split>_tsv` per pair of --languages, in
    order); returns {split: [paths]} ([] where not given). Raises `UserFilesError` on
    --<split>_src/--<split>_tgt flags, a weighted --train_tsv, or not one file per pair."""
    pairs = values["languages"].split(",")
    files = {}
    for split in cleaning.SPLITS:
        if values[f"{split}_src"] or values[f"{split}_tgt"]:
            raise UserFilesError(
                f"{corpus_flag} with several --languages ({values['languages']}) takes one --{split}_tsv file per pair, "
                f"not --{split}_src/--{split}_tgt"
            )
        files[split] = [path.strip() for path in values[f"{split}_tsv"].split(",")] if values[f"{split}_tsv"] else []
        weighted = [path for path in files[split] if ":" in path and not os.path.exists(path)]
        if weighted:
            raise UserFilesError(
                f"--{split}_tsv={values[f'{split}_tsv']}: {weighted[0]} has a weight; with several --languages each "
                "file is one pair, drawn with --pair_sampling_temperature"
            )
        if files[split] and len(files[split]) != len(pairs):
            raise UserFilesError(
                f"--languages={values['languages']} names {len(pairs)} pairs, --{split}_tsv {len(files[split])} files: "
                "give one file per pair, in the order of --languages"
            )
    if not files["train"]:
        raise UserFilesError(f"{corpus_flag} needs --train_tsv, one file per pair of --languages")
    return files


def cache_name(data) -> str:
    """The cache entry of a `--corpus=files` corpus: a hash of its languages and absolute paths."""
    files = [[os.path.abspath(path) for path in paths] for paths in (data.train_files, data.dev_files, data.test_files)]
    return "user-" + hashlib.sha256(json.dumps([data.languages, *files]).encode()).hexdigest()[:12]


def prepare_user_corpus(
    name: str,
    cache_dir: str,
    languages: tuple[str, str],
    train: str | tuple[str, str] | list[str],
    dev: str | tuple[str, str] | None = None,
    test: str | tuple[str, str] | None = None,
    *,
    rebuild: bool = False,
    shard_pairs: int = corpus_writer.SHARD_PAIRS,
) -> CorpusPaths:
    """Builds a corpus from the user's files: each split a TSV path or a (source, target) pair, a
    path possibly a glob or gzip-compressed; `train` may be a list of TSV paths for a weighted mix.
    Streamed in bounded memory, the training split in shards of `shard_pairs` pairs; missing dev or
    test splits come from training by the hash split (docs/data.md, "Your own files"). Rebuilt when
    the languages or the files (paths, sizes, modification times) change. Raises
    `parallel_files.ParallelDataError` on malformed input (file and line), or a glob matching
    nothing; `CorpusError` on bad languages, or no training pairs left after cleaning."""
    languages = tuple(languages)
    if len(languages) != 2 or not all(isinstance(code, str) and code for code in languages):
        raise CorpusError(f"languages must be two non-empty codes like ('en', 'de'), got {languages!r}.")
    given = {"train": train, "dev": dev, "test": test}
    expanded = _expanded_sources(given)
    inputs = _input_identities(languages, given, expanded)
    root = os.path.join(cache_dir, name)
    if not rebuild:
        cached = corpus_cache.cached(root, True, expected_inputs=inputs, identity=_without_digests)
        if cached is not None:
            return cached

    def build(tmp_dir: str) -> None:
        sources, splitters, read_stats = _readers(
            expanded, {split for split in ("dev", "test") if given[split] is None}
        )
        paths = [path for files in expanded.values() for path in _paths(files) if os.path.exists(path)]
        total_bytes = sum(os.path.getsize(path) for path in paths)
        progress = corpus_writer.ProgressLine(
            f"{name}: reading", lambda: sum(stats.bytes_done for stats in read_stats.values()) / max(total_bytes, 1)
        )
        for entries in inputs.values():
            for entry in entries if isinstance(entries, list) else ():
                if isinstance(entry, dict) and "bytes" in entry:
                    entry["sha256"] = corpus_cache.sha256_file(entry["path"])
        manifest = corpus_writer.write_corpus(
            tmp_dir,
            name,
            languages,
            sources,
            splitters=splitters,
            extra=lambda: {
                "inputs": inputs,
                "read": {source: dataclasses.asdict(stats) for source, stats in read_stats.items()},
            },
            kept_whole=[split for split in ("test", "dev") if given[split] is not None],
            per_source_test_files=False,
            shard_pairs=shard_pairs,
            progress=progress,
        )
        if manifest["splits"]["train"] == 0:
            raise CorpusError(_no_training_pairs_message(given["train"], manifest))

    return corpus_cache.build_atomically(cache_dir, name, build)


def _expanded_sources(given: dict) -> dict:
    """Each source's files, globs expanded: a list of TSV paths, or (source paths, target paths);
    the sources are the splits given, or "train-1", "train-2", ... for several training corpora."""
    expanded = {}
    for split, spec in given.items():
        if spec is None:
            continue
        several = isinstance(spec, list)
        names = corpus_mix.user_source_names(len(spec)) if several else [split]
        for source, one in zip(names, spec if several else [spec]):
            expanded[source] = (
                parallel_files.expand(one)
                if isinstance(one, str)
                else (parallel_files.expand(one[0]), parallel_files.expand(one[1]))
            )
    return expanded


def _input_identities(languages: tuple, given: dict, expanded: dict) -> dict:
    """The manifest's "inputs": the languages (they decide the direction recorded in the manifest,
    so they decide a rebuild too) and the `_identity` of each split's files."""
    inputs = {"languages": list(languages)}
    if isinstance(given["train"], list):
        inputs["train_corpora"] = len(given["train"])
    for split in given:
        names = [source for source in expanded if source == split or (split == "train" and source.startswith("train-"))]
        if names:
            inputs[split] = [_identity(path) for source in names for path in _paths(expanded[source])]
    return inputs


def _readers(expanded: dict, missing: set) -> tuple[dict, dict, dict]:
    """`(sources, splitters, read_stats)` for `write_corpus`, evaluation files first."""
    sources, splitters, read_stats = {}, {}, {}
    order = {"test": 0, "dev": 1}
    for source in sorted(expanded, key=lambda source: order.get(source, 2)):
        files = expanded[source]
        stats = read_stats[source] = parallel_files.ReadStats()
        if isinstance(files, list):
            sources[source] = parallel_files.read_tsv(files, stats)
        else:
            sources[source] = parallel_files.read_parallel(files[0], files[1], stats)
        if source in order:
            splitters[source] = lambda english, split=source: split
        elif missing:
            splitters[source] = lambda english: split if (split := cleaning.split_of(english)) in missing else "train"
        else:  # Dev and test have files of their own: every training pair is a training pair.
            splitters[source] = lambda english: "train"
    return sources, splitters, read_stats


def _paths(files: list[str] | tuple[list[str], list[str]]) -> list[str]:
    return files if isinstance(files, list) else [*files[0], *files[1]]


def _identity(path: str) -> dict:
    """An input file's path, size and modification time: unchanged without reading it."""
    if not os.path.exists(path):
        return {"path": os.path.abspath(path)}
    status = os.stat(path)
    return {"path": os.path.abspath(path), "bytes": status.st_size, "mtime_ns": status.st_mtime_ns}


def _without_digests(inputs: dict) -> dict:
    """The manifest's inputs as `_identity` records them (without the sha256 of a build)."""
    strip = lambda entry: {k: v for k, v in entry.items() if k != "sha256"} if isinstance(entry, dict) else entry  # noqa: E731
    return {
        key: [strip(entry) for entry in value] if isinstance(value, list) else value
        for key, value in (inputs or {}).items()
    }


def _no_training_pairs_message(train: str | tuple[str, str] | list[str], manifest: dict) -> str:
    several = isinstance(train, list)
    names = corpus_mix.user_source_names(len(train)) if several else ["train"]
    files = ", ".join(train) if several else train if isinstance(train, str) else " and ".join(train)
    raw = sum(manifest["sources"][name]["raw"] for name in names)
    dropped_counts = {}
    moved = {}
    for name in names:
        stats = manifest["sources"][name]
        for reason, count in stats["dropped"].items():
            dropped_counts[reason] = dropped_counts.get(reason, 0) + count
        for split in ("dev", "test"):
            if stats["splits"][split]:
                moved[split] = moved.get(split, 0) + stats["splits"][split]
    dropped = ", ".join(f"{reason} {count}" for reason, count in dropped_counts.items()) or "none"
    empty_lines = sum(manifest["read"][name]["empty_lines_skipped"] for name in names)
    message = (
        f"No training pairs left from {files}: {raw} pairs read "
        f"({empty_lines} empty lines skipped), dropped by reason: {dropped}"
    )
    if moved:
        message += f"; the hash split sent {moved} to dev/test"
    return message + ". The corpus was not cached; give training files with usable pairs."
