"""The sentences to evaluate on: a split of a prepared corpus, or a user's source/reference files."""

import codecs
import os

from common.errors import UserError
from data.sources import cleaning


class TestSetError(UserError, ValueError):
    """A test set that cannot be read as line-aligned sources and references (names the file)."""


def read_lines(path):
    """The lines of a UTF-8 text file without line ends, a leading byte-order mark dropped.

    Raises:
        TestSetError: a missing file, or bytes that are not UTF-8 (names the line and the byte).
    """
    if not os.path.isfile(path):
        raise TestSetError(f"{path} does not exist or is not a file")
    with open(path, "rb") as handle:
        data = handle.read()
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line_start = data.rfind(b"\n", 0, error.start) + 1
        number = data.count(b"\n", 0, error.start) + 1
        raise TestSetError(
            f"{path}:{number}: not UTF-8 text: byte 0x{data[error.start]:02x} at byte offset {error.start - line_start} "
            f"in the line ({error.reason}); convert the file to UTF-8 (e.g. with iconv)"
        ) from error
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # The file's last line end (or an empty file).
    return [line.rstrip("\r") for line in lines]


def read_parallel_files(source_path, reference_path=None):
    """`(sources, references)`, line-aligned; `references` None when `reference_path` is.

    Raises:
        TestSetError: a missing or empty file, or different line counts (both named).
    """
    sources = read_lines(source_path)
    if not sources:
        raise TestSetError(f"--src {source_path} is empty: no lines to translate")
    if reference_path is None:
        return sources, None
    references = read_lines(reference_path)
    if len(sources) != len(references):
        raise TestSetError(
            f"--src {source_path} has {len(sources)} lines but --ref {reference_path} has {len(references)}: "
            "the files must be line-aligned (line i of --ref is the reference translation of line i of --src)"
        )
    return sources, references


def split_path(corpus, split):
    """The TSV of `split` ("train", "dev", "test" or "test.<source>") in a `CorpusPaths`.

    Raises:
        TestSetError: an unknown split (lists the available ones).
    """
    if split == "train" and len(corpus.train) > 1:
        raise TestSetError(
            f"--split=train: the training split of {corpus.root} is in {len(corpus.train)} shards; score a "
            f"sample of it with --src/--ref, or use dev or test"
        )
    if split == "train":
        return corpus.train[0]
    if split in cleaning.SPLITS:
        return corpus.split(split)
    if split.startswith("test."):
        source = split[len("test.") :]
        if source in corpus.test_by_source:
            return corpus.test_by_source[source]
    available = list(cleaning.SPLITS) + [f"test.{source}" for source in sorted(corpus.test_by_source)]
    raise TestSetError(f"--split={split!r} is not a split of {corpus.root}; expected one of {available}")


def read_tsv_pairs(tsv_path, reverse=False):
    """`(sources, references)` of a corpus TSV (`english<TAB>foreign`), the second column into the
    first when `reverse`.

    Raises:
        TestSetError: an empty file, or a line without exactly one tab (names the file and line).
    """
    lines = read_lines(tsv_path)
    if not lines:
        raise TestSetError(f"{tsv_path} is empty: no sentence pairs to evaluate on")
    sources, references = [], []
    for number, line in enumerate(lines, start=1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise TestSetError(f"{tsv_path}:{number}: expected 2 tab-separated columns, found {len(columns)}")
        first, second = columns
        sources.append(second if reverse else first)
        references.append(first if reverse else second)
    return sources, references
