"""A built corpus in its cache directory: the manifest, the check that an entry is complete, and
the atomic build that never leaves a half-written entry behind.

An entry `cache_dir/name` holds train/dev/test TSV files of `english<TAB>foreign` lines (the corpus's
canonical direction; the input pipeline reverses it for xx->en) and `manifest.json`. A build writes
into a temporary directory next to the entry and renames it into place only when complete; a corrupt
or incomplete entry is rebuilt or refused, never read.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable

from absl import logging

from common.errors import UserError
from common.write_errors import WriteError, default_mode, writing
from data import cleaning, parallel_files

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


class CorpusError(UserError, RuntimeError):
    """A corpus that cannot be built or a cache entry that is not a complete corpus."""


@dataclasses.dataclass(frozen=True)
class CorpusPaths:
    """Where a built corpus lives. Every TSV holds `english<TAB>foreign` lines.

    Attributes:
        root: the corpus directory (`cache_dir/name`).
        train, dev, test: the splits.
        test_by_source: per-source test files of a built-in corpus, e.g.
            {"ding": ".../test.ding.tsv"}; empty for a user corpus (its sources are its splits).
        manifest: `manifest.json` (sources, package versions and sha256, counts).
        languages: (source, target) language codes of the TSV columns, e.g. ("en", "de").
    """

    root: str
    train: str
    dev: str
    test: str
    test_by_source: dict
    manifest: str
    languages: tuple

    def split(self, name: str) -> str:
        """The TSV path of split "train", "dev" or "test"."""
        if name not in cleaning.SPLITS:
            raise ValueError(f"Unknown split {name!r}; expected one of {cleaning.SPLITS}.")
        return getattr(self, name)

    def load_manifest(self) -> dict:
        with open(self.manifest, encoding="utf-8") as f:
            return json.load(f)


def sha256_file(path: str) -> str:
    """The hex sha256 of a file, as the manifest records its files and inputs."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _corpus_paths(root: str, manifest: dict) -> CorpusPaths:
    return CorpusPaths(
        root=root,
        train=os.path.join(root, "train.tsv"),
        dev=os.path.join(root, "dev.tsv"),
        test=os.path.join(root, "test.tsv"),
        test_by_source={
            source: os.path.join(root, f"test.{source}.tsv")
            for source in manifest["sources"]
            if f"test.{source}.tsv" in manifest.get("files", {})
        },
        manifest=os.path.join(root, MANIFEST),
        languages=tuple(manifest["languages"]),
    )


def check_corpus(root: str) -> CorpusPaths:
    """Returns the paths of the complete corpus at `root`.

    Raises:
        CorpusError: naming what is missing or wrong: no or unreadable manifest, another format,
            a listed file missing or of another size than the manifest records.
    """
    manifest_path = os.path.join(root, MANIFEST)
    if not os.path.exists(manifest_path):
        raise CorpusError(f"{root}: incomplete corpus, no {MANIFEST}.")
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(f"{manifest_path}: unreadable manifest: {e}") from e
    if manifest.get("format") != MANIFEST_FORMAT:
        raise CorpusError(f"{manifest_path}: manifest format {manifest.get('format')!r}, expected {MANIFEST_FORMAT}.")
    for name, info in manifest.get("files", {}).items():
        path = os.path.join(root, name)
        if not os.path.exists(path):
            raise CorpusError(f"{root}: corrupt corpus, {name} listed in the manifest is missing.")
        if os.path.getsize(path) != info["bytes"]:
            raise CorpusError(
                f"{root}: corrupt corpus, {name} has {os.path.getsize(path)} bytes, the manifest "
                f"records {info['bytes']}."
            )
    return _corpus_paths(root, manifest)


def write_corpus(
    out_dir: str,
    name: str,
    languages: tuple,
    sources: dict[str, Iterable[tuple[str, str]]],
    splitters: dict[str, Callable[[str], str]] | None = None,
    extra: dict | None = None,
    attributions: dict | None = None,
    kept_whole: Iterable[str] = (),
    per_source_test_files: bool = True,
) -> dict:
    """Cleans, splits and writes the corpus files and manifest into `out_dir`; returns the manifest.

    `splitters` maps a source name to a function from the English side to its split (the user's
    own dev/test files go whole to one split); other sources use `cleaning.split_of`. The sources
    in `kept_whole` (the user's dev/test files) are only normalised (`cleaning.normalize_pairs`),
    and must come first in `sources`, so that the pairs of the others equal to theirs are dropped.
    `per_source_test_files` writes `test.<source>.tsv` for each source.
    """
    kept_whole = tuple(kept_whole)
    by_split, test_by_source, source_stats = _clean_and_split(sources, splitters or {}, kept_whole)
    files = {f"{split}.tsv": pairs for split, pairs in by_split.items()}
    if per_source_test_files:
        for source, pairs in test_by_source.items():
            files[f"test.{source}.tsv"] = pairs
    file_info = {}
    for file_name, pairs in files.items():
        path = os.path.join(out_dir, file_name)
        with writing(path):
            lines = parallel_files.write_tsv(path, pairs)
        file_info[file_name] = _file_info(path, lines)
    if attributions is not None:
        file_info["attribution.tsv"] = _write_attribution(out_dir, by_split, attributions)
    manifest = {
        "format": MANIFEST_FORMAT,
        "corpus": name,
        "languages": list(languages),
        "columns": [f"{languages[0]} (source)", f"{languages[1]} (target)"],
        "splits": {split: len(pairs) for split, pairs in by_split.items()},
        "total_pairs": sum(len(pairs) for pairs in by_split.values()),
        "sources": source_stats,
        "cleaning": _cleaning_rules(kept_whole),
        "files": file_info,
        **(extra or {}),
    }
    path = os.path.join(out_dir, MANIFEST)
    with writing(path), open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return manifest


def _clean_and_split(
    sources: dict[str, Iterable[tuple[str, str]]], splitters: dict[str, Callable[[str], str]], kept_whole: tuple
) -> tuple[dict, dict, dict]:
    """Reads `sources` in order, cleans each (only normalises those in `kept_whole`) and assigns every
    kept pair to its split; returns `by_split` (split -> pairs), `test_by_source` (source -> its test
    pairs) and `source_stats` (source -> the manifest's cleaning counts and split sizes)."""
    seen: set = set()
    reserved: set = set()
    by_split = {split: [] for split in cleaning.SPLITS}
    test_by_source = {}
    source_stats = {}
    for source, pairs in sources.items():
        stats = cleaning.CleaningStats()
        counts = dict.fromkeys(cleaning.SPLITS, 0)
        test_by_source[source] = []
        if source in kept_whole:
            kept = cleaning.normalize_pairs(pairs, stats, reserved)
        else:
            kept = cleaning.clean_pairs(pairs, stats, seen, reserved)
        for english, foreign in kept:
            split = splitters.get(source, cleaning.split_of)(english)
            by_split[split].append((english, foreign))
            counts[split] += 1
            if split == "test":
                test_by_source[source].append((english, foreign))
        source_stats[source] = {**stats.as_dict(), "splits": counts}
        if source in kept_whole:
            source_stats[source]["cleaning"] = "normalised only, every pair kept"
    return by_split, test_by_source, source_stats


def _file_info(path: str, lines: int) -> dict:
    """The manifest's record of a written file: its lines, bytes and SHA-256, checked by `check_corpus`."""
    return {"lines": lines, "bytes": os.path.getsize(path), "sha256": sha256_file(path)}


def _write_attribution(out_dir: str, by_split: dict, attributions: dict) -> dict:
    """Writes `attribution.tsv` (english, foreign, credit) for the kept pairs that have a credit in
    `attributions`, in split order; returns its `_file_info`."""
    path = os.path.join(out_dir, "attribution.tsv")
    kept = [
        (en, xx, attributions[(en, xx)]) for split in by_split.values() for en, xx in split if (en, xx) in attributions
    ]
    with writing(path), open(path, "w", encoding="utf-8") as f:
        f.writelines(f"{en}\t{xx}\t{credit}\n" for en, xx, credit in kept)
    return _file_info(path, len(kept))


def _cleaning_rules(kept_whole: tuple) -> dict:
    """The manifest's `cleaning` entry: the rules every source went through, and those of the
    sources in `kept_whole` when there are any."""
    return {
        "normalisation": "NFC, invisible characters removed, whitespace collapsed",
        "max_length_ratio": cleaning.MAX_LENGTH_RATIO,
        "split": f"sha256(english) mod 1000: <{cleaning.TEST_PER_MILLE} test, "
        f"<{cleaning.TEST_PER_MILLE + cleaning.DEV_PER_MILLE} dev, else train",
        **(
            {
                "kept_whole": {
                    "sources": list(kept_whole),
                    "rule": "normalised only: every pair read is kept (no identical, length_ratio or "
                    "duplicate drops); pairs of the other sources equal to one of theirs are dropped "
                    "(in_evaluation_files)",
                }
            }
            if kept_whole
            else {}
        ),
    }


def _install(tmp_dir: str, root: str) -> None:
    """Moves the finished `tmp_dir` to `root`, replacing an invalid entry there."""
    if os.path.exists(root):
        stale = tempfile.mkdtemp(dir=os.path.dirname(root), prefix=f".{os.path.basename(root)}.stale-")
        os.replace(root, os.path.join(stale, "corpus"))
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(tmp_dir, root)
    except OSError:
        # Another process installed the corpus meanwhile; keep theirs if it is complete.
        check_corpus(root)
        shutil.rmtree(tmp_dir, ignore_errors=True)


def cached(root: str, rebuild_invalid: bool, expected_inputs: dict | None = None) -> CorpusPaths | None:
    """The complete corpus at `root`, or None when it must be (re)built."""
    if not os.path.exists(root):
        return None
    try:
        paths = check_corpus(root)
    except CorpusError as e:
        if not rebuild_invalid:
            raise CorpusError(f"{e} Delete {root} or rebuild it with --rebuild.") from e
        logging.warning("%s Rebuilding.", e)
        return None
    if expected_inputs is not None and paths.load_manifest().get("inputs") != expected_inputs:
        logging.info("%s was built from other input files or languages; rebuilding.", root)
        return None
    return paths


def build_atomically(cache_dir: str, name: str, build: Callable[[str], None]) -> CorpusPaths:
    """Runs `build(tmp_dir)` in a fresh directory and installs it as `cache_dir/name`; returns its paths.

    An exception in `build` leaves neither the temporary directory nor a new entry behind.

    Raises:
        WriteError: a file of the entry could not be written (named as it would have been installed,
            `cache_dir/name/<file>`), or `cache_dir` cannot hold a new directory.
    """
    root = os.path.join(cache_dir, name)
    with writing(root):
        os.makedirs(cache_dir, exist_ok=True)
        tmp_dir = tempfile.mkdtemp(dir=cache_dir, prefix=f".{name}.building-")
    # mkdtemp makes the directory 0700; the installed corpus is a directory like any other.
    os.chmod(tmp_dir, default_mode(directory=True))
    try:
        build(tmp_dir)
        with writing(root):
            _install(tmp_dir, root)
    except WriteError as error:
        inside = os.path.relpath(error.path, tmp_dir)
        if inside.startswith(os.pardir):
            raise
        raise error.renamed(os.path.join(root, inside)) from None
    finally:
        if os.path.exists(tmp_dir):
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return check_corpus(root)
