"""Reading and writing parallel text: `source<TAB>target` TSV files and pairs of plain-text files.

Every reader checks its input and fails with a message that names the file and line: invalid UTF-8,
a TSV row without exactly one tab, parallel files of different lengths, an empty file. Lines that are
empty (on either side) are skipped and counted, never silently.
"""

import dataclasses
import os
from collections.abc import Iterator

from common.errors import UserError


class ParallelDataError(UserError, ValueError):
    """Malformed parallel text; the message names the file and line."""


@dataclasses.dataclass
class ReadStats:
    """Counts of one read: pairs returned and empty lines skipped."""

    pairs: int = 0
    empty_lines_skipped: int = 0


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """Yields `(line_number, text)` (1-based, newline removed), decoding UTF-8 strictly."""
    with open(path, "rb") as f:
        for number, raw in enumerate(f, start=1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ParallelDataError(
                    f"{path}:{number}: invalid UTF-8 at byte {e.start} of the line "
                    f"({raw[max(0, e.start - 10) : e.start + 10]!r})."
                ) from None
            if number == 1 and text.startswith("\ufeff"):
                text = text[1:]
            yield number, text.rstrip("\r\n")


def _check_not_empty(path: str) -> None:
    if not os.path.exists(path):
        raise ParallelDataError(f"{path}: file not found.")
    if os.path.getsize(path) == 0:
        raise ParallelDataError(f"{path}: file is empty.")


def read_tsv(path: str, stats: ReadStats | None = None) -> Iterator[tuple[str, str]]:
    """Yields `(source, target)` from a TSV file with exactly one tab per row.

    Raises:
        ParallelDataError: empty file, invalid UTF-8, or a row without exactly one tab (file:line).
    """
    stats = ReadStats() if stats is None else stats
    _check_not_empty(path)
    for number, text in _lines(path):
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


def read_parallel(source_path: str, target_path: str, stats: ReadStats | None = None) -> Iterator[tuple[str, str]]:
    """Yields `(source, target)` from two line-aligned plain-text files.

    A line pair with an empty side is skipped and counted in `stats.empty_lines_skipped`.

    Raises:
        ParallelDataError: an empty or missing file, invalid UTF-8 (file:line), or files with
            different numbers of lines (both files and both counts).
    """
    stats = ReadStats() if stats is None else stats
    _check_not_empty(source_path)
    _check_not_empty(target_path)
    source_lines, target_lines = _lines(source_path), _lines(target_path)
    while True:
        source_item = next(source_lines, None)
        target_item = next(target_lines, None)
        if source_item is None and target_item is None:
            return
        if source_item is None or target_item is None:
            source_count = _count_lines(source_path)
            target_count = _count_lines(target_path)
            raise ParallelDataError(
                f"Parallel files differ in length: {source_path} has {source_count} lines, "
                f"{target_path} has {target_count} lines."
            )
        (_, source), (_, target) = source_item, target_item
        if not source.strip() or not target.strip():
            stats.empty_lines_skipped += 1
            continue
        stats.pairs += 1
        yield source, target


def _count_lines(path: str) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def write_tsv(path: str, pairs: Iterator[tuple[str, str]] | list[tuple[str, str]]) -> int:
    """Writes `source<TAB>target` lines; returns the number written.

    Raises:
        ValueError: a side containing a tab or a line break (clean the text first).
    """
    count = 0
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for source, target in pairs:
            for side in (source, target):
                if "\t" in side or "\n" in side or "\r" in side:
                    raise ValueError(f"{path}: text with a tab or line break: {side[:80]!r}")
            f.write(f"{source}\t{target}\n")
            count += 1
    return count
