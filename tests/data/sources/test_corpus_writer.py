"""The streaming corpus writer: the same corpus as reading it all into sets would give, in shards,
in bounded buffers; the duplicate finder; a killed build and an earlier layout."""

import json
import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from data.sources import cleaning, corpus_cache, corpus_writer, duplicates, parallel_files, user_corpus
from tests.data.helpers import make_pairs
from tests.helpers import REPO_ROOT


def _reference(sources, kept_whole):
    """What the corpus holds, computed with sets over all pairs in memory."""
    seen, reserved = set(), set()
    by_split = {split: [] for split in cleaning.SPLITS}
    test_by_source, stats = {}, {}
    for source, pairs in sources.items():
        dropped, kept, counts = {}, 0, dict.fromkeys(cleaning.SPLITS, 0)
        test_by_source[source] = []
        for english, foreign in pairs:
            english, foreign = cleaning.normalize_text(english), cleaning.normalize_text(foreign)
            if source in kept_whole:
                reason = None if english and foreign else "empty"
            else:
                reason = cleaning.rejection_reason(english, foreign)
                if reason is None and (english, foreign) in reserved:
                    reason = "in_evaluation_files"
                if reason is None and (english, foreign) in seen:
                    reason = "duplicate"
            if reason is not None:
                dropped[reason] = dropped.get(reason, 0) + 1
                continue
            (reserved if source in kept_whole else seen).add((english, foreign))
            split = source if source in kept_whole else cleaning.split_of(english)
            by_split[split].append((english, foreign))
            test_by_source[source] += [(english, foreign)] if split == "test" else []
            kept += 1
            counts[split] += 1
        stats[source] = {"raw": len(pairs), "kept": kept, "dropped": dict(sorted(dropped.items())), "splits": counts}
    return by_split, test_by_source, stats


def _noisy_sources():
    rng = random.Random(7)
    pairs = make_pairs(1500, seed=11, max_clauses=2)
    first = pairs[:900] + [pairs[rng.randrange(900)] for _ in range(300)]  # repeats within a source
    first += [("Same text", "Same text"), ("", "leer"), ("Short", "A much, much, much longer translation")]
    first += [(f"  {en}\u200b ", de.replace(" ", "\t")) for en, de in pairs[:40]]  # equal once normalised
    second = pairs[800:1500] + pairs[:100]  # repeats of the first source
    rng.shuffle(second)
    evaluation = pairs[1400:1430] + [pairs[1400]]  # kept whole, its repeat too
    return {"test": evaluation, "first": first, "second": second}


@pytest.mark.parametrize("shard_pairs", [1, 137, 10**6])
def test_the_streamed_corpus_equals_the_one_built_in_memory(tmp_path, monkeypatch, shard_pairs):
    # Small buffers, so the finder spills many times and the second pass takes many steps.
    monkeypatch.setattr(duplicates, "_BUFFER", 64)
    monkeypatch.setattr(corpus_writer, "_CHUNK", 96)
    sources = _noisy_sources()
    manifest = corpus_writer.write_corpus(
        str(tmp_path),
        "noisy",
        ("en", "de"),
        {name: iter(pairs) for name, pairs in sources.items()},
        splitters={"test": lambda english: "test"},
        kept_whole=["test"],
        shard_pairs=shard_pairs,
    )
    by_split, test_by_source, stats = _reference(sources, {"test"})
    shards = [os.path.join(tmp_path, name) for name in manifest["train_shards"]]
    assert len(shards) == -(-len(by_split["train"]) // shard_pairs)
    assert [os.path.basename(path) for path in shards[:1]] == [corpus_writer.shard_name(0, len(shards))]
    assert list(parallel_files.read_tsv(shards)) == by_split["train"]
    assert all(manifest["files"][name]["lines"] <= shard_pairs for name in manifest["train_shards"])
    for split in ("dev", "test"):
        assert list(parallel_files.read_tsv(str(tmp_path / f"{split}.tsv"))) == by_split[split]
    for source, pairs in test_by_source.items():
        lines = (tmp_path / f"test.{source}.tsv").read_text(encoding="utf-8").splitlines()
        assert lines == [f"{english}\t{foreign}" for english, foreign in pairs]
    for source, expected in stats.items():
        assert {key: manifest["sources"][source][key] for key in expected} == expected
    assert stats["first"]["dropped"]["duplicate"] >= 300 and stats["second"]["dropped"]["duplicate"] >= 100
    assert manifest["splits"] == {split: len(pairs) for split, pairs in by_split.items()}
    assert sorted(os.listdir(tmp_path)) == sorted([*manifest["files"], "manifest.json"])  # no work files left
    corpus_cache.check_corpus(str(tmp_path))


def test_the_duplicate_finder_marks_every_repeat_after_the_first(tmp_path, monkeypatch):
    monkeypatch.setattr(duplicates, "_BUFFER", 1000)
    rng = np.random.default_rng(0)
    distinct = rng.integers(0, 2**64, 3000, dtype=np.uint64, endpoint=False)
    stream = distinct[rng.integers(0, 3000, 20000)]
    finder = duplicates.DuplicateFinder(str(tmp_path / "hashes"))
    skipped = set(range(0, 20000, 7))  # positions never added are never duplicates
    for position, value in enumerate(stream.tolist()):
        if position not in skipped:
            finder.add(position, value)
    bitmap = finder.finish(20000)
    seen, expected = set(), []
    for position, value in enumerate(stream.tolist()):
        expected.append(position not in skipped and value in seen)
        if position not in skipped:
            seen.add(value)
    assert np.unpackbits(bitmap)[:20000].astype(bool).tolist() == expected
    assert os.listdir(tmp_path / "hashes") == []
    assert duplicates.pair_hash(b"a\tb\n") == duplicates.pair_hash(b"a\tb\n") != duplicates.pair_hash(b"a\tc\n")


def test_the_progress_line_says_how_much_is_read_and_left(tmp_path, capsys):
    progress = corpus_writer.ProgressLine("big: reading", lambda: 0.25, every=0.0)
    pairs = make_pairs(5000, seed=2, max_clauses=1)
    corpus_writer.write_corpus(str(tmp_path), "big", ("en", "de"), {"train": pairs}, progress=progress)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("big: reading: 4,096 pairs read, ") and "pairs/s, about " in lines[0]
    assert lines[0].endswith(" s of reading left")
    assert lines[-1].startswith("big: reading: 5,000 pairs read, ") and lines[-1].endswith(" s)")


_KILLED_BUILD = """
import sys, time
from data.sources import user_corpus, parallel_files

def slow(pairs):
    for index, pair in enumerate(pairs):
        if index == 500:
            open(sys.argv[2], "w").close()
            time.sleep(600)
        yield pair

pairs = list(parallel_files.read_tsv(sys.argv[3]))
user_corpus.parallel_files.read_tsv = lambda files, stats: slow(pairs)
user_corpus.prepare_user_corpus("mine", sys.argv[1], ("en", "de"), sys.argv[3])
"""


def test_a_killed_preparation_installs_nothing_and_its_rerun_cleans_up(tmp_path):
    train = str(tmp_path / "train.tsv")
    parallel_files.write_tsv(train, make_pairs(2000, seed=4))
    cache, marker = tmp_path / "cache", tmp_path / "reading"
    process = subprocess.Popen([sys.executable, "-c", _KILLED_BUILD, str(cache), str(marker), train], cwd=REPO_ROOT)
    deadline = time.monotonic() + 60
    while not marker.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the build did not start"
    building = [name for name in os.listdir(cache) if name.startswith(".mine.building-")]
    # A second build while the first is running leaves its directory alone.
    other = user_corpus.prepare_user_corpus("other", str(cache), ("en", "de"), train)
    assert other.load_manifest()["sources"]["train"]["raw"] == 2000
    assert all(os.path.isdir(cache / name) for name in building)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert "mine" not in os.listdir(cache) and len(building) == 1
    paths = user_corpus.prepare_user_corpus("mine", str(cache), ("en", "de"), train)
    assert sorted(os.listdir(cache)) == ["mine", "other"]  # the killed build's directory is gone
    assert paths.load_manifest()["sources"]["train"]["raw"] == 2000


def test_a_corpus_of_an_earlier_layout_is_rebuilt(tmp_path):
    train = str(tmp_path / "train.tsv")
    parallel_files.write_tsv(train, make_pairs(100, seed=6))
    paths = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train)
    manifest = paths.load_manifest()
    with open(paths.manifest, "w", encoding="utf-8") as handle:
        json.dump({**manifest, "format": 2}, handle)
    with pytest.raises(corpus_cache.OlderFormatError, match="manifest format 2, expected 3"):
        corpus_cache.check_corpus(paths.root)
    rebuilt = user_corpus.prepare_user_corpus("mine", str(tmp_path / "cache"), ("en", "de"), train)
    assert rebuilt.load_manifest()["format"] == corpus_cache.MANIFEST_FORMAT
