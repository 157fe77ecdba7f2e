"""A run's lexical table (`shortlist.tsv`, written by `python -m training.shortlist`), what the
vocabulary shortlist of the search reads (`models.vocabulary_shortlist`): its format, and reading it
back checked against the run's vocabularies and corpus.

The file is text: a header line `#shortlist<TAB>{JSON}` (the format, each vocabulary's digest, the
corpus, direction and pairs it was counted on, the candidates per source piece), then a line
`frequent<TAB>ids`, the target pieces always kept, most frequent first, then one line per source
piece id `id<TAB>ids`, its target candidates best first (ids are SentencePiece ids, separated by
spaces)."""

import hashlib
import json
import os

import numpy as np

from common.errors import UserError
from common.special_ids import PAD_ID
from models.vocabulary_shortlist import LexicalTable

HEADER = "#shortlist"
FORMAT = 1
FREQUENT = "frequent"


class ShortlistError(UserError, ValueError):
    """A lexical table that is missing, malformed, or built for another vocabulary or corpus (the
    message names the file and both)."""


def vocabulary_digest(path):
    """The first 16 hex digits of the SHA-256 of a SentencePiece model file."""
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()[:16]


def table_lines(header, frequent, candidates):
    """The file's lines (without newlines): `header` a dict, `frequent` ints, `candidates` a list
    per source piece id of ints (the pad id after a row's end is left out)."""
    yield f"{HEADER}\t{json.dumps(header, sort_keys=True)}"
    yield f"{FREQUENT}\t{' '.join(map(str, frequent))}"
    for source, row in enumerate(candidates):
        yield f"{source}\t{' '.join(str(token) for token in row if token != PAD_ID)}"


def read_header(path):
    """The header dict of the table at `path`; ShortlistError for a file that is not one."""
    try:
        with open(path, encoding="utf-8") as handle:
            first = handle.readline().rstrip("\n")
    except OSError as error:
        raise ShortlistError(f"cannot read the lexical table {path}: {error.strerror}") from None
    name, _, text = first.partition("\t")
    try:
        header = json.loads(text) if name == HEADER else None
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ShortlistError(
            f"{path} is not a lexical table of format {FORMAT} (its first line is not '{HEADER}<TAB>{{JSON}}'): "
            "build it again with python -m training.shortlist"
        )
    return header


def read_table(path, expected):
    """The `LexicalTable` at `path`, after checking that its header agrees with `expected` (a dict
    of the header's "source_vocabulary", "target_vocabulary", "corpus", "direction").

    Raises:
        ShortlistError: a file that is not a table, or one built for another vocabulary or corpus.
    """
    header = read_header(path)
    for key, value in expected.items():
        if header.get(key) != value:
            raise ShortlistError(
                f"{path} was built for {_words(header)}, but the run has {_words(expected)}: {key.replace('_', ' ')} "
                f"{header.get(key)!r} against {value!r}. Build it again for this run with python -m training.shortlist"
            )
    rows, frequent = _read_rows(path)
    if len(rows) != header.get("source_pieces"):
        raise ShortlistError(
            f"{path} has {len(rows)} source pieces, its header {header.get('source_pieces')}: rebuild it"
        )
    width = max([len(row) for row in rows] + [1])
    candidates = np.full((len(rows), width), PAD_ID, "int32")
    for source, row in enumerate(rows):
        candidates[source, : len(row)] = row
    return LexicalTable(candidates, np.asarray(frequent or [], "int32"))


def _read_rows(path):
    """`(rows, frequent)`: each source piece's candidates and the frequent pieces, as int lists."""
    rows, frequent = [], None
    with open(path, encoding="utf-8") as handle:
        next(handle)
        for number, line in enumerate(handle, start=2):
            name, tab, ids = line.rstrip("\n").partition("\t")
            try:
                values = [int(token) for token in ids.split()]
            except ValueError:
                values = None
            if not tab or values is None or (name != FREQUENT and name != str(len(rows))):
                raise ShortlistError(
                    f"{path}:{number}: expected '{len(rows) if rows or frequent else FREQUENT}<TAB>ids'"
                )
            if name == FREQUENT:
                frequent = values
            else:
                rows.append(values)
    return rows, frequent


def corpus_name(data):
    """The corpus a run's config.json "data" names: the built-in corpus, or the user's training files."""
    if data.get("corpus") == "files":
        return "files:" + ",".join(os.path.basename(path) for path in data.get("train_files") or ())
    return data.get("corpus")


def expected_header(run_dir, data):
    """What the header of a table for the run (`inference.runs.RunDir`, config.json "data" `data`)
    must say: its vocabularies' digests, corpus and direction."""
    source = run_dir.source_vocabulary_path if run_dir.has_separate_vocabularies() else run_dir.vocabulary_path
    return {
        "source_vocabulary": vocabulary_digest(source),
        "target_vocabulary": vocabulary_digest(run_dir.vocabulary_path),
        "corpus": corpus_name(data),
        "direction": data.get("direction"),
    }


def _words(header):
    """ "vocabulary 1a2b.../3c4d... (corpus deb-en-de, en-de)" of a header or expectation."""
    vocabularies = header.get("source_vocabulary"), header.get("target_vocabulary")
    shown = vocabularies[0] if vocabularies[0] == vocabularies[1] else "/".join(map(str, vocabularies))
    direction = f", direction {header['direction']}" if header.get("direction") else ""
    return f"the vocabulary {shown} (corpus {header.get('corpus')}{direction})"
