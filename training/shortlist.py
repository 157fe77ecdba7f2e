"""Builds a run's lexical table (MODEL_DIR/shortlist.tsv), what the vocabulary shortlist reads
(`--shortlist=K` of evaluate.py, translate.py and `python -m export`; docs/translating.md,
"Vocabulary shortlist"), from the co-occurrence of source and target pieces in the run's training
split.

    python -m training.shortlist --model_dir=runs/base
    python -m training.shortlist --model_dir=runs/base --candidates=100 --frequent=200

Each pair counts once each source piece, target piece and (source, target) pair of pieces it
holds; a source piece's candidates are the target pieces of the highest Dice coefficient
2 c(s, t) / (c(s) + c(t)) (a classic association score of word alignment; co-occurrence counts
alone would rank the commonest target pieces first for every source piece, and those are kept
anyway, as the `--frequent` most frequent). The corpus is read as a stream of batches of pairs; the pair counts held
are capped (`--max_cooccurrences`: past it the rarest are dropped), so memory does not grow with
the corpus. The table is written aside and renamed into place.
"""

import dataclasses
import os
import sys

import numpy as np
from absl import app, flags

from common import quiet_logs
from common.errors import run_tool
from common.special_ids import SPECIAL_PIECES
from common.write_errors import writing
from inference.runs import ModelDirError, RunDir

FLAGS = flags.FLAGS
CHUNK_PAIRS = 4096  # Pairs tokenized and counted at once.
PENDING_KEYS = 4_000_000  # Pair keys gathered before they are merged into the counts.


@dataclasses.dataclass(frozen=True)
class TableOptions:
    """How a table is built: `candidates` kept per source piece, `frequent` target pieces always
    kept, at most `max_pairs` training pairs read (0: all), `max_cooccurrences` pair counts held."""

    candidates: int = 50
    frequent: int = 100
    max_pairs: int = 0
    max_cooccurrences: int = 20_000_000


def define_flags():
    defaults = TableOptions()
    flags.DEFINE_string("model_dir", None, "A run directory written by train.py.", required=True)
    flags.DEFINE_integer(
        "candidates", defaults.candidates, "Target pieces kept per source piece (--shortlist=K takes up to these).", 1
    )
    flags.DEFINE_integer(
        "frequent", defaults.frequent, "The most frequent target pieces, kept in every shortlist.", lower_bound=0
    )
    flags.DEFINE_integer("max_pairs", defaults.max_pairs, "Training pairs read (0: all).", lower_bound=0)
    flags.DEFINE_integer(
        "max_cooccurrences",
        defaults.max_cooccurrences,
        "Distinct (source, target) piece pairs counted at most; past it the rarest are dropped (bounds the memory).",
        lower_bound=1000,
    )


def training_files(run_dir):
    """`(paths, reverse, data)`: the run's training TSVs, whether their columns are read in reverse,
    and its config.json "data". Raises ModelDirError for a run without config.json."""
    from data import corpora  # The corpus modules, after the flag checks.
    from training.config import DataConfig

    config = run_dir.read_config()
    if not config or "data" not in config:
        raise ModelDirError(f"{run_dir.path} has no config.json with a data section: not a run written by train.py")
    data = config["data"]
    known = {field.name for field in dataclasses.fields(DataConfig)}
    values = {key: tuple(value) if isinstance(value, list) else value for key, value in data.items() if key in known}
    data_config = DataConfig(**values)
    corpus, reverse = corpora.resolve_corpus(data_config)
    mix = corpora.training_mix(corpus, data_config)
    if mix:
        paths = [source.path for source in mix]
    else:
        train = corpus.split("train")
        paths = [train] if isinstance(train, str) else list(train)
    return paths, reverse, data


def _pairs(paths, reverse, max_pairs):
    """Batches of `CHUNK_PAIRS` `(sources, targets)` from the TSVs, at most `max_pairs` (0: all)."""
    from data.sources.parallel_files import read_tsv  # The corpus modules, after the flag checks.

    sources, targets, read = [], [], 0
    for first, second in read_tsv(paths):
        sources.append(second if reverse else first)
        targets.append(first if reverse else second)
        read += 1
        if len(sources) == CHUNK_PAIRS or read == max_pairs:
            yield sources, targets
            sources, targets = [], []
            if read == max_pairs:
                return
    if sources:
        yield sources, targets


class Counts:
    """Sentence counts of source pieces, target pieces and (source, target) pairs, the pairs as
    sorted int64 keys `source * target_size + target`, at most `cap` of them."""

    def __init__(self, source_size, target_size, cap):
        self.source = np.zeros(source_size, "int64")
        self.target = np.zeros(target_size, "int64")
        self.keys, self.counts = np.zeros(0, "int64"), np.zeros(0, "int64")
        self.target_size, self.cap, self.pairs = target_size, cap, 0
        self.pending, self.pending_size = [], 0  # Pair keys not yet merged into `keys`.

    def add(self, source_rows, target_rows):
        """Counts a batch of pairs (their piece ids)."""
        for source_row, target_row in zip(source_rows, target_rows):
            source, target = np.unique(source_row), np.unique(target_row)
            self.source[source] += 1
            self.target[target] += 1
            self.pending.append((source[:, None] * self.target_size + target[None, :]).ravel())
            self.pending_size += len(self.pending[-1])
        self.pairs += len(source_rows)
        if self.pending_size > PENDING_KEYS:
            self.merge()

    def merge(self):
        """Adds the pending pair keys to the counts, then drops the rarest past the cap."""
        if not self.pending:
            return
        keys = np.concatenate(self.pending + [self.keys])
        weights = np.concatenate([np.ones(self.pending_size, "int64"), self.counts])
        self.pending, self.pending_size = [], 0
        self.keys, inverse = np.unique(keys, return_inverse=True)
        self.counts = np.bincount(inverse, weights=weights).astype("int64")
        if len(self.keys) > self.cap:  # The rarest pairs go, ties broken by key.
            keep = np.sort(np.argsort(-self.counts, kind="stable")[: self.cap])
            self.keys, self.counts = self.keys[keep], self.counts[keep]

    def candidates(self, count):
        """Each source piece's best `count` target pieces by Dice, as lists (specials excluded)."""
        self.merge()
        source, target = np.divmod(self.keys, self.target_size)
        dice = 2.0 * self.counts / (self.source[source] + self.target[target])
        real = target >= len(SPECIAL_PIECES)
        source, target, dice = source[real], target[real], dice[real]
        order = np.lexsort((target, -dice, source))  # By source, then best first, ties to the lower id.
        source, target = source[order], target[order]
        starts = np.searchsorted(source, np.arange(len(self.source)))
        ends = np.append(starts[1:], len(source))
        return [target[start : min(end, start + count)].tolist() for start, end in zip(starts, ends)]

    def most_frequent(self, count):
        """The `count` target pieces in most pairs (specials excluded), most frequent first."""
        order = np.lexsort((np.arange(len(self.target)), -self.target))
        return [int(token) for token in order if token >= len(SPECIAL_PIECES) and self.target[token]][:count]


def build_table(model_dir, options=TableOptions(), log=None):
    """Counts the run's training split and writes MODEL_DIR/shortlist.tsv atomically, reporting to
    `log` (default the current `sys.stderr`); returns its header. Raises ModelDirError, CorpusError
    or ParallelDataError on bad input (before writing)."""
    import sentencepiece  # After the flag checks, as Keras (for the table's format) is.

    from inference import lexical_table

    run_dir = RunDir(model_dir)
    if not os.path.isdir(model_dir) or not os.path.exists(run_dir.vocabulary_path):
        raise ModelDirError(f"--model_dir={model_dir}: not a run directory written by train.py (no spm.model)")
    paths, reverse, data = training_files(run_dir)
    separate = run_dir.has_separate_vocabularies()
    source_model = run_dir.source_vocabulary_path if separate else run_dir.vocabulary_path
    source_pieces = sentencepiece.SentencePieceProcessor(model_file=source_model)
    target_pieces = sentencepiece.SentencePieceProcessor(model_file=run_dir.vocabulary_path)
    counts = Counts(source_pieces.get_piece_size(), target_pieces.get_piece_size(), options.max_cooccurrences)
    for sources, targets in _pairs(paths, reverse, options.max_pairs):
        counts.add(source_pieces.encode(sources), target_pieces.encode(targets))
    if not counts.pairs:
        raise ModelDirError(f"{', '.join(paths)}: no training pairs to count")
    header = dict(
        lexical_table.expected_header(run_dir, data),
        format=lexical_table.FORMAT,
        pairs=counts.pairs,
        candidates=options.candidates,
        frequent=options.frequent,
        source_pieces=len(counts.source),
        score="dice",
    )
    lines = lexical_table.table_lines(
        header, counts.most_frequent(options.frequent), counts.candidates(options.candidates)
    )
    _write_atomically(run_dir.shortlist_path, lines)
    print(
        f"counted {counts.pairs} pairs of {', '.join(paths)}; wrote {run_dir.shortlist_path}",
        file=sys.stderr if log is None else log,
    )
    return header


def _write_atomically(path, lines):
    """`lines` into `path`, written aside and renamed (never half a table); WriteError on failure."""
    temporary = f"{path}.tmp-{os.getpid()}"
    try:
        with writing(path):
            with open(temporary, "w", encoding="utf-8") as handle:
                for line in lines:
                    handle.write(line + "\n")
            os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def main(argv):
    quiet_logs.quiet_tool_output()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # The corpus modules load TensorFlow.
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    options = TableOptions(FLAGS.candidates, FLAGS.frequent, FLAGS.max_pairs, FLAGS.max_cooccurrences)
    build_table(FLAGS.model_dir, options)  # A UserError: one line, status 2 (`run_tool`).


if __name__ == "__main__":
    define_flags()
    run_tool(main, "training.shortlist")
