"""Reading and writing parallel text: `source<TAB>target` TSV files and pairs of plain-text files,
plain or `.gz`, one file or a glob. Readers stream and fail naming the file and line; empty lines
are skipped and counted."""

import dataclasses
import glob
import gzip
import os
import zlib
from collections.abc import Iterator

from common.errors import UserError


class ParallelDataError(UserError, ValueError):
    """Malformed parallel text; the message names the file and line."""


@dataclasses.dataclass
class ReadStats:
    """Counts of one read: pairs returned, empty lines skipped, and the bytes of its files read so
    far (compressed bytes for a .gz file), for a progress line."""

    pairs: int = 0
    empty_lines_skipped: int = 0
    bytes_done: int = dataclasses.field(default=0, compare=False)


def expand(pattern: str) -> list[str]:
    """The files a path names: itself, or a glob's matches sorted by name (so source and target
    globs pair in order). Raises `ParallelDataError` on a glob that matches no file."""
    if not glob.has_magic(pattern):
        return [pattern]
    paths = sorted(path for path in glob.glob(pattern) if os.path.isfile(path))
    if not paths:
        raise ParallelDataError(f"{pattern}: no file matches this pattern.")
    return paths


def _lines(path: str, stats: ReadStats) -> Iterator[tuple[int, str]]:
    """Yields `(line_number, text)`, 1-based, newline removed, strict UTF-8, `.gz` through gzip.
    Raises `ParallelDataError` on invalid UTF-8, a bad .gz file, or a failed read (file and line)."""
    base = stats.bytes_done
    number = 0
    try:
        with open(path, "rb") as raw:
            stream = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
            for number, line in enumerate(stream, start=1):
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ParallelDataError(
                        f"{path}:{number}: invalid UTF-8 at byte {e.start} of the line "
                        f"({line[max(0, e.start - 10) : e.start + 10]!r})."
                    ) from None
                if number == 1 and text.startswith("\ufeff"):
                    text = text[1:]
                if not number % 4096:
                    stats.bytes_done = base + raw.tell()
                yield number, text.rstrip("\r\n")
    except EOFError:
        raise ParallelDataError(
            f"{path}: truncated gzip file, it ends after line {number} (the file was cut short: copy it again)."
        ) from None
    except (gzip.BadGzipFile, zlib.error) as e:
        raise ParallelDataError(f"{path}: corrupt gzip data after line {number}: {e}.") from None
    except OSError as e:
        raise ParallelDataError(f"{path}: cannot read after line {number}: {e.strerror or e}.") from None
    if number == 0:  # A compressed file of no lines.
        raise ParallelDataError(f"{path}: file is empty (no lines).")
    stats.bytes_done = base + os.path.getsize(path)


def _check_not_empty(path: str) -> None:
    if not os.path.exists(path):
        raise ParallelDataError(f"{path}: file not found.")
    if os.path.getsize(path) == 0:
        raise ParallelDataError(f"{path}: file is empty.")


def read_tsv(paths: str | list[str], stats: ReadStats | None = None) -> Iterator[tuple[str, str]]:
    """Yields `(source, target)` from one or several TSV files, in order. Raises `ParallelDataError`
    on an empty or missing file, invalid UTF-8, or a row without exactly one tab (file:line)."""
    stats = ReadStats() if stats is None else stats
    paths = [paths] if isinstance(paths, str) else paths
    for path in paths:
        _check_not_empty(path)
    for path in paths:
        for number, text in _lines(path, stats):
            if not text.strip():
                stats.empty_lines_skipped += 1
                continue
            fields = text.split("\t")
            if len(fields) != 2:
                raise ParallelDataError(
                    f"{path}:{number}: expected 'source<TAB>target' (one tab), found "
                    f"{len(fields) - 1} tabs in {text[:80]!r}."
                )
            if not fields[0].strip() or not fields[1].strip():
                stats.empty_lines_skipped += 1
                continue
            stats.pairs += 1
            yield fields[0], fields[1]


def read_parallel(
    source_paths: str | list[str], target_paths: str | list[str], stats: ReadStats | None = None
) -> Iterator[tuple[str, str]]:
    """Yields `(source, target)` from line-aligned files: two paths, or two lists pairing in order;
    pairs with an empty side are counted in `stats.empty_lines_skipped`. Raises `ParallelDataError`
    on an empty or missing file, invalid UTF-8, lists of different lengths, or files of different
    numbers of lines (both files and the line)."""
    stats = ReadStats() if stats is None else stats
    source_paths = [source_paths] if isinstance(source_paths, str) else source_paths
    target_paths = [target_paths] if isinstance(target_paths, str) else target_paths
    if len(source_paths) != len(target_paths):
        raise ParallelDataError(
            f"{len(source_paths)} source files ({', '.join(source_paths)}) but {len(target_paths)} target files "
            f"({', '.join(target_paths)}): each source file needs its target file."
        )
    for path in (*source_paths, *target_paths):
        _check_not_empty(path)
    target_stats = ReadStats()  # Only the source side counts towards `stats.bytes_done`.
    for source_path, target_path in zip(source_paths, target_paths):
        source_lines, target_lines = _lines(source_path, stats), _lines(target_path, target_stats)
        number = 0
        while True:
            source_item = next(source_lines, None)
            target_item = next(target_lines, None)
            if source_item is None and target_item is None:
                break
            if source_item is None or target_item is None:
                shorter, longer = (source_path, target_path) if source_item is None else (target_path, source_path)
                raise ParallelDataError(
                    f"Parallel files differ in length: {shorter} ends after line {number}, "
                    f"{longer} goes on at line {number + 1}."
                )
            (number, source), (_, target) = source_item, target_item
            if not source.strip() or not target.strip():
                stats.empty_lines_skipped += 1
                continue
            stats.pairs += 1
            yield source, target


def write_tsv(path: str, pairs: Iterator[tuple[str, str]] | list[tuple[str, str]]) -> int:
    """Writes `source<TAB>target` lines; returns the number written. Raises `ValueError` on a side
    containing a tab or a line break."""
    count = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for source, target in pairs:
            for side in (source, target):
                if "\t" in side or "\n" in side or "\r" in side:
                    raise ValueError(f"{path}: text with a tab or line break: {side[:80]!r}")
            f.write(f"{source}\t{target}\n")
            count += 1
    return count
