"""Several training corpora sampled in proportion to weights: the flags that name them
(`--train_tsv=a.tsv:3,b.tsv:1`, `--source_weights=ding:3`) and the per-corpus training files
(`train.<source>.tsv`) the input pipeline samples from. docs/training.md, "Several training corpora
with weights", says what a weight means."""

import dataclasses
import itertools
import math
import os

from common.errors import UserError
from data.sources.corpus_cache import CorpusError


class WeightsError(UserError, ValueError):
    """A weighted spec that cannot be read; the message names the flag, its value and the entry."""


@dataclasses.dataclass(frozen=True)
class TrainingSource:
    """One corpus of a training mix: `name` in the corpus manifest, `label` as the user called it,
    `path` of its `english<TAB>foreign` pairs, their count `pairs`, and `weight` (> 0)."""

    name: str
    label: str
    path: str
    pairs: int
    weight: float


def _weight(flag, value, name, text):
    try:
        weight = float(text)
    except ValueError:
        weight = math.nan
    if not (math.isfinite(weight) and weight > 0):
        raise WeightsError(f"{flag}={value}: the weight {text!r} of {name} is not a positive number")
    return weight


def parse_weights(flag: str, value: str) -> list[tuple[str, float]]:
    """`"ding:3,libreoffice-ui:1"` -> `[("ding", 3.0), ("libreoffice-ui", 1.0)]`. Raises `WeightsError`
    on an entry not NAME:WEIGHT, a weight not positive and finite, or a name given twice."""
    entries = []
    for entry in value.split(","):
        name, separator, text = entry.strip().rpartition(":")
        if not separator or not name.strip():
            raise WeightsError(f"{flag}={value}: {entry!r} is not NAME:WEIGHT (e.g. ding:3)")
        entries.append((name.strip(), _weight(flag, value, name.strip(), text.strip())))
    names = [name for name, _ in entries]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise WeightsError(f"{flag}={value}: {', '.join(repeated)} given more than once")
    return entries


def parse_train_tsv(flag: str, value: str) -> list[tuple[str, float | None]]:
    """`"a.tsv"` -> `[("a.tsv", None)]`; `"a.tsv:3,b.tsv:1"` -> `[("a.tsv", 3.0), ("b.tsv", 1.0)]`.
    An existing file's whole name is a path, even with ':' or ','. Raises `WeightsError` on several
    files without a weight each, a bad weight, an empty entry, a file given twice, or a weighted
    file that does not exist."""
    if os.path.isfile(value):
        return [(value, None)]
    entries = []
    for entry in value.split(","):
        entry = entry.strip()
        path, separator, text = entry.rpartition(":")
        if not separator:
            path, weight = entry, None
        else:
            weight = _weight(flag, value, path or "''", text.strip())
        if not path:
            raise WeightsError(f"{flag}={value}: an empty file name; expected FILE:WEIGHT,FILE:WEIGHT,...")
        entries.append((path, weight))
    weighted = [weight is not None for _, weight in entries]
    if len(entries) > 1 and not all(weighted):
        raise WeightsError(
            f"{flag}={value}: several training files need a weight each (FILE:WEIGHT,FILE:WEIGHT, e.g. "
            "a.tsv:3,b.tsv:1 samples three pairs from a.tsv for one from b.tsv); for their union, "
            "concatenate the files"
        )
    paths = [path for path, _ in entries]
    repeated = sorted({path for path in paths if paths.count(path) > 1})
    if repeated:
        raise WeightsError(f"{flag}={value}: {', '.join(repeated)} given more than once")
    if any(weighted):
        missing = [path for path in paths if not os.path.isfile(path)]
        if missing:
            raise WeightsError(f"{flag}={value}: no such file: {', '.join(missing)}")
    return entries


def user_source_names(count: int) -> list[str]:
    """A user corpus's training sources: "train" for one file, "train-1", "train-2", ... for several."""
    return ["train"] if count == 1 else [f"train-{index}" for index in range(1, count + 1)]


def _training_lines(corpus) -> dict[str, tuple[int, int]]:
    """`source -> (first line, line count)` of each source's pairs in the corpus's training shards."""
    manifest = corpus.load_manifest()
    ranges, first = {}, 0
    for source, stats in manifest["sources"].items():
        count = stats["splits"]["train"]
        ranges[source] = (first, count)
        first += count
    if first != manifest["splits"]["train"]:
        raise CorpusError(
            f"{corpus.manifest}: its sources hold {first} training pairs but its training shards {manifest['splits']['train']}; "
            "rebuild the corpus (python -m data.prepare --rebuild)"
        )
    return ranges


def _lines_of(path: str):
    with open(path, "rb") as handle:
        yield from handle


def _count_lines(path: str) -> int:
    with open(path, "rb") as handle:
        return sum(1 for _ in handle)


def source_training_files(corpus, names) -> dict[str, tuple[str, int]]:
    """`source -> (path, pairs)`: each named source's `train.<source>.tsv`, written atomically from
    the training shards when missing. Raises `CorpusError` on an unknown source, or manifest counts
    that do not match the shards."""
    ranges = _training_lines(corpus)
    unknown = [name for name in names if name not in ranges]
    if unknown:
        raise CorpusError(f"{corpus.root} has no source {', '.join(unknown)}; its sources are {', '.join(ranges)}")
    wanted = {name: ranges[name] for name in names}
    found = {}
    for name, (first, count) in wanted.items():
        path = os.path.join(corpus.root, f"train.{name}.tsv")
        if not os.path.exists(path) or _count_lines(path) != count:
            temporary = f"{path}.{os.getpid()}.tmp"
            with open(temporary, "wb") as out:
                lines = itertools.chain.from_iterable(_lines_of(shard) for shard in corpus.train)
                out.writelines(itertools.islice(lines, first, first + count))
            os.replace(temporary, path)
        found[name] = (path, count)
    return found


def training_mix(corpus, weights: dict[str, float], labels: dict[str, str] | None = None) -> list[TrainingSource]:
    """The mix of a corpus's sources with `weights` (unnamed sources weigh 1); `labels` gives a
    source the name the user knows it by. Raises `CorpusError` on an unknown source, or a source
    with no training pairs."""
    ranges = _training_lines(corpus)
    unknown = [name for name in weights if name not in ranges]
    if unknown:
        raise CorpusError(f"{corpus.root} has no source {', '.join(unknown)}; its sources are {', '.join(ranges)}")
    names = [name for name, (_, count) in ranges.items() if count or name in weights]
    files = source_training_files(corpus, names)
    labels = labels or {}
    empty = [labels.get(name, name) for name in names if not files[name][1]]
    if empty:
        raise CorpusError(
            f"no training pairs left from {', '.join(empty)} after cleaning (see the counts above): a corpus "
            "of a weighted mix needs pairs to sample"
        )
    return [
        TrainingSource(name, labels.get(name, name), files[name][0], files[name][1], float(weights.get(name, 1.0)))
        for name in names
    ]


def describe(mix: list[TrainingSource]) -> list[dict]:
    """The mix as config.json records it: each corpus, its weight, share and pairs."""
    total = sum(source.weight for source in mix)
    return [
        {
            "corpus": source.label,
            "weight": source.weight,
            "share": round(source.weight / total, 4),
            "pairs": source.pairs,
            "file": source.path,
        }
        for source in mix
    ]
