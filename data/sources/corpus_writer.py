"""Writing a corpus cache entry from its sources as a stream, in memory that does not grow with it.

Pass one cleans each pair, assigns its split, appends it to a candidates file and hashes it into a
`duplicates.DuplicateFinder`; pass two writes the non-duplicates into shards and split files in the
sources' order (so each source's training pairs are consecutive lines, as `corpus_mix` needs)."""

import hashlib
import itertools
import os
import shutil
import sys
import time
from array import array
from collections.abc import Callable, Iterable

import numpy as np

from common.progress import PLAIN_SECONDS, is_terminal
from common.write_errors import writing
from data.sources import cleaning, duplicates
from data.sources.corpus_cache import MANIFEST, MANIFEST_FORMAT, write_manifest

# Training pairs per shard file: a multi-worker run gives each worker whole shards, so a corpus
# needs several; about 30 MB of text each.
SHARD_PAIRS = 250_000
_SPLIT_CODES = {split: code for code, split in enumerate(cleaning.SPLITS)}
_CHUNK = 1 << 13  # Candidates buffered, and per step of the second pass (a multiple of 8: whole bitmap bytes).
_WORK_DIR = ".work"


def shard_name(index: int, count: int) -> str:
    return f"train-{index:05d}-of-{count:05d}.tsv"


class ProgressLine:
    """A plain progress line on stderr at most every `every` seconds: pairs read and kept, rate,
    and time left when `fraction_done` can say."""

    def __init__(
        self, label: str, fraction_done: Callable[[], float | None] = lambda: None, every: float | None = None
    ):
        if every is None:
            every = 2.0 if is_terminal(sys.stderr) else PLAIN_SECONDS
        self._label, self._fraction_done, self._every = label, fraction_done, every
        self._start = self._last = time.monotonic()
        self.printed = False

    def update(self, read: int, kept: int, final: bool = False) -> None:
        now = time.monotonic()
        if not final and now - self._last < self._every:
            return
        self._last = now
        elapsed = max(now - self._start, 1e-9)
        line = f"{self._label}: {read:,} pairs read, {kept:,} kept, {read / elapsed:,.0f} pairs/s"
        fraction = None if final else self._fraction_done()
        if fraction:
            line += f", about {elapsed * (1 - fraction) / fraction:.0f} s of reading left"
        if final:
            line += f" ({elapsed:.1f} s)"
        print(line, file=sys.stderr, flush=True)
        self.printed = True


class _Digest:
    """A file written in blocks, counting its lines and hashing its bytes as they go."""

    def __init__(self, path: str):
        self.path, self.lines = path, 0
        with writing(path):
            self._handle = open(path, "wb")
        self._sha256 = hashlib.sha256()

    def write(self, lines: list[bytes]) -> None:
        block = b"".join(lines)
        with writing(self.path):
            self._handle.write(block)
        self._sha256.update(block)
        self.lines += len(lines)

    def close(self) -> dict:
        """Closes the file; returns the manifest's record of it (lines, bytes, sha256)."""
        with writing(self.path):
            self._handle.close()
        return {"lines": self.lines, "bytes": os.path.getsize(self.path), "sha256": self._sha256.hexdigest()}


class _Shards:
    """The training split, written in files of `shard_pairs` lines, named once their count is known."""

    def __init__(self, out_dir: str, shard_pairs: int):
        self._out_dir, self._shard_pairs = out_dir, shard_pairs
        self._done: list[tuple[str, dict]] = []
        self._current = None

    def write(self, lines: list[bytes]) -> None:
        while lines:
            if self._current is None or self._current.lines == self._shard_pairs:
                self._close_current()
                self._current = _Digest(os.path.join(self._out_dir, f".train-{len(self._done):05d}.partial"))
            room = self._shard_pairs - self._current.lines
            self._current.write(lines[:room])
            lines = lines[room:]

    def _close_current(self) -> None:
        if self._current is not None:
            self._done.append((self._current.path, self._current.close()))
            self._current = None

    def close(self) -> dict:
        """Names the shards `train-IIIII-of-NNNNN.tsv`; returns their manifest records in order."""
        if self._current is None and not self._done:
            self._current = _Digest(os.path.join(self._out_dir, ".train-00000.partial"))
        self._close_current()
        files = {}
        for index, (path, info) in enumerate(self._done):
            name = shard_name(index, len(self._done))
            os.replace(path, os.path.join(self._out_dir, name))
            files[name] = info
        return files


def write_corpus(
    out_dir: str,
    name: str,
    languages: tuple,
    sources: dict[str, Iterable[tuple[str, str]]],
    splitters: dict[str, Callable[[str], str]] | None = None,
    extra: dict | Callable[[], dict] | None = None,
    attributions: dict | None = None,
    kept_whole: Iterable[str] = (),
    per_source_test_files: bool = True,
    shard_pairs: int = SHARD_PAIRS,
    progress: ProgressLine | None = None,
) -> dict:
    """Cleans, deduplicates, splits and writes the corpus files and manifest into `out_dir`; returns
    the manifest. `splitters`: source -> (English side -> split); others use `cleaning.split_of`.
    Sources in `kept_whole` (the user's dev/test files, first in `sources`) are only normalised, and
    other pairs equal to theirs are dropped; elsewhere a pair's repeats are dropped. `extra` (or
    what it returns once the sources are read) is added to the manifest."""
    kept_whole = tuple(kept_whole)
    splitters = splitters or {}
    work = os.path.join(out_dir, _WORK_DIR)
    with writing(work):
        os.makedirs(work)
    names = list(sources)
    read = _read_candidates(work, sources, splitters, kept_whole, progress)
    by_source = _write_files(out_dir, work, names, read, shard_pairs, per_source_test_files, attributions)
    shutil.rmtree(work)
    files = by_source.pop("files")
    source_stats = {}
    for index, source in enumerate(names):
        stats = read["stats"][source]
        duplicate_count = int(by_source["duplicates"][index])
        if duplicate_count:
            stats.dropped["duplicate"] += duplicate_count
        counts = {split: int(by_source["kept"][index, code]) for split, code in _SPLIT_CODES.items()}
        stats.kept = sum(counts.values())
        source_stats[source] = {**stats.as_dict(), "splits": counts}
        if source in kept_whole:
            source_stats[source]["cleaning"] = "normalised only, every pair kept"
    splits = {split: int(by_source["kept"][:, code].sum()) for split, code in _SPLIT_CODES.items()}
    manifest = {
        "format": MANIFEST_FORMAT,
        "corpus": name,
        "languages": list(languages),
        "columns": [f"{languages[0]} (source)", f"{languages[1]} (target)"],
        "splits": splits,
        "total_pairs": sum(splits.values()),
        "train_shards": [file for file in files if file.startswith("train-")],
        "sources": source_stats,
        "cleaning": _cleaning_rules(kept_whole),
        "files": files,
        **((extra() if callable(extra) else extra) or {}),
    }
    write_manifest(os.path.join(out_dir, MANIFEST), manifest)
    return manifest


def _read_candidates(work, sources, splitters, kept_whole, progress) -> dict:
    """Pass one into `work/candidates.tsv` and `work/codes.bin` (source index * 4 + split);
    returns the count, the duplicate bitmap and each source's `CleaningStats`."""
    finder = duplicates.DuplicateFinder(os.path.join(work, "hashes"))
    reserved: set[int] = set()
    position = read_total = 0
    lines, codes = [], array("H")
    all_stats = {}
    lines_path, codes_path = os.path.join(work, "candidates.tsv"), os.path.join(work, "codes.bin")
    with writing(lines_path), open(lines_path, "wb") as lines_out, open(codes_path, "wb") as codes_out:

        def flush():
            with writing(lines_path):
                lines_out.write(b"".join(lines))
                codes.tofile(codes_out)
            lines.clear()
            del codes[:]

        for index, (source, pairs) in enumerate(sources.items()):
            stats = all_stats[source] = cleaning.CleaningStats()
            whole = source in kept_whole
            split_of = splitters.get(source, cleaning.split_of)
            for english, foreign in pairs:
                stats.raw += 1
                read_total += 1
                if progress is not None and not read_total % 4096:
                    progress.update(read_total, position)
                english, foreign = cleaning.normalize_text(english), cleaning.normalize_text(foreign)
                if whole:
                    reason = None if english and foreign else "empty"
                else:
                    reason = cleaning.rejection_reason(english, foreign)
                if reason is None:
                    line = f"{english}\t{foreign}\n".encode()
                    hash_value = duplicates.pair_hash(line)
                    if whole:
                        reserved.add(hash_value)
                    elif hash_value in reserved:
                        reason = "in_evaluation_files"
                    else:
                        finder.add(position, hash_value)
                if reason is not None:
                    stats.dropped[reason] += 1
                    continue
                lines.append(line)
                codes.append(index * 4 + _SPLIT_CODES[split_of(english)])
                position += 1
                if len(codes) == _CHUNK:
                    flush()
        flush()
    if progress is not None:
        progress.update(read_total, position, final=True)
    return {"count": position, "duplicates": finder.finish(position), "stats": all_stats}


def _write_files(out_dir, work, names, read, shard_pairs, per_source_test_files, attributions) -> dict:
    """Pass two: the non-duplicates into the split files; returns "files", "duplicates", "kept"."""
    shards = _Shards(out_dir, shard_pairs)
    evaluation = {"dev": _Digest(os.path.join(out_dir, "dev.tsv")), "test": _Digest(os.path.join(out_dir, "test.tsv"))}
    by_source_test = (
        {index: _Digest(os.path.join(out_dir, f"test.{source}.tsv")) for index, source in enumerate(names)}
        if per_source_test_files
        else {}
    )
    credited = {split: [] for split in cleaning.SPLITS}
    duplicate_counts = np.zeros(len(names), np.int64)
    kept_counts = np.zeros((len(names), 4), np.int64)
    count, bitmap = read["count"], read["duplicates"]
    with (
        open(os.path.join(work, "candidates.tsv"), "rb") as lines_in,
        open(os.path.join(work, "codes.bin"), "rb") as codes_in,
    ):
        for start in range(0, count, _CHUNK):
            size = min(_CHUNK, count - start)
            lines = list(itertools.islice(lines_in, size))
            codes = np.fromfile(codes_in, np.uint16, size).astype(np.int64)
            repeated = np.unpackbits(bitmap[start // 8 : (start + size + 7) // 8])[:size].astype(bool)
            source, split = codes >> 2, codes & 3
            duplicate_counts += np.bincount(source[repeated], minlength=len(names))
            kept_counts += np.bincount(codes[~repeated], minlength=len(names) * 4).reshape(len(names), 4)
            for name, code in _SPLIT_CODES.items():
                mask = ~repeated & (split == code)
                selected = list(itertools.compress(lines, mask.tolist()))
                if not selected:
                    continue
                (shards if name == "train" else evaluation[name]).write(selected)
                if attributions is not None:
                    credited[name] += _credits(selected, attributions)
                if name == "test":
                    for index, digest in by_source_test.items():
                        digest.write(list(itertools.compress(lines, (mask & (source == index)).tolist())))
    files = shards.close()
    for split, digest in evaluation.items():
        files[f"{split}.tsv"] = digest.close()
    for index, digest in by_source_test.items():
        files[f"test.{names[index]}.tsv"] = digest.close()
    if attributions is not None:
        attribution = _Digest(os.path.join(out_dir, "attribution.tsv"))
        for split in cleaning.SPLITS:
            attribution.write(credited[split])
        files["attribution.tsv"] = attribution.close()
    return {"files": files, "duplicates": duplicate_counts, "kept": kept_counts}


def _credits(lines: list[bytes], attributions: dict) -> list[bytes]:
    """`english<TAB>foreign<TAB>credit` lines for those of `lines` with a credit in `attributions`."""
    found = []
    for line in lines:
        text = line.decode("utf-8").rstrip("\n")
        credit = attributions.get(tuple(text.split("\t")))
        if credit is not None:
            found.append(f"{text}\t{credit}\n".encode())
    return found


def _cleaning_rules(kept_whole: tuple) -> dict:
    """The manifest's `cleaning` entry: the rules applied, and those of `kept_whole` sources."""
    return {
        "normalisation": "NFC, invisible characters removed, whitespace collapsed",
        "max_length_ratio": cleaning.MAX_LENGTH_RATIO,
        "split": f"sha256(english) mod 1000: <{cleaning.TEST_PER_MILLE} test, "
        f"<{cleaning.TEST_PER_MILLE + cleaning.DEV_PER_MILLE} dev, else train",
        "deduplication": "exact pairs after normalisation, by a 64-bit blake2b hash (the first kept)",
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
