"""Fixtures for tests/data: a small generated parallel corpus, a tokenizer trained on it, and the
real deb-en-de corpus (built once per session from the Debian packages)."""

import os
import random
import time

import pytest

from data import deb_packages, parallel_files, prepare, tokenizer

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
# Downloaded .deb files persist here between runs (the directory is git-ignored); CI starts empty.
DEB_CACHE = os.environ.get("TRANSFORMER_TEST_DEB_DIR", os.path.join(REPO_ROOT, "cache", "test-debs"))

_SUBJECTS = [
    ("The cat", "Die Katze"), ("My brother", "Mein Bruder"), ("The teacher", "Die Lehrerin"),
    ("Our neighbour", "Unser Nachbar"), ("The old man", "Der alte Mann"), ("Anna", "Anna"),
    ("The small dog", "Der kleine Hund"), ("Every student", "Jeder Student"),
]
_PREDICATES = [
    ("reads a book", "liest ein Buch"), ("opens the window", "öffnet das Fenster"),
    ("drinks cold water", "trinkt kaltes Wasser"), ("writes a long letter", "schreibt einen langen Brief"),
    ("sees the green house", "sieht das grüne Haus"), ("buys fresh bread", "kauft frisches Brot"),
    ("waits for the train", "wartet auf den Zug"), ("sings a song", "singt ein Lied"),
]


def make_pairs(count: int, seed: int = 0, max_clauses: int = 8) -> list[tuple[str, str]]:
    """`count` distinct English-German sentence pairs of 1 to `max_clauses` clauses."""
    rng = random.Random(seed)
    pairs = []
    for index in range(count):
        clauses = []
        for _ in range(rng.randint(1, max_clauses)):
            (en_s, de_s), (en_p, de_p) = rng.choice(_SUBJECTS), rng.choice(_PREDICATES)
            clauses.append((f"{en_s} {en_p}", f"{de_s} {de_p}"))
        hour = index % 24
        english = " and ".join(c[0] for c in clauses) + f" at {hour} o'clock ({index})."
        german = " und ".join(c[1] for c in clauses) + f" um {hour} Uhr ({index})."
        pairs.append((english, german))
    return pairs


@pytest.fixture(scope="session")
def small_tsv(tmp_path_factory) -> str:
    """A 600-pair en-de TSV of generated sentences."""
    path = str(tmp_path_factory.mktemp("small") / "pairs.tsv")
    parallel_files.write_tsv(path, make_pairs(600))
    return path


@pytest.fixture(scope="session")
def small_tokenizer(small_tsv, tmp_path_factory) -> tokenizer.Tokenizer:
    """A 400-piece BPE model trained on `small_tsv`."""
    prefix = str(tmp_path_factory.mktemp("spm") / "small")
    return tokenizer.Tokenizer.from_file(
        tokenizer.train_sentencepiece(small_tsv, prefix, vocab_size=400)
    )


@pytest.fixture(scope="session")
def deb_en_de(tmp_path_factory):
    """The real deb-en-de corpus, built into a fresh directory from packages cached in DEB_CACHE.

    Returns (CorpusPaths, seconds spent fetching the packages, seconds spent building).
    """
    start = time.monotonic()
    debs = deb_packages.fetch_debs(list(prepare.DEB_EN_DE_PACKAGES), DEB_CACHE)
    fetch_seconds = time.monotonic() - start
    size = sum(os.path.getsize(p) for p in debs.values())
    print(f"\nfetched/found {len(debs)} packages ({size / 1e6:.1f} MB) in {fetch_seconds:.1f} s")
    start = time.monotonic()
    paths = prepare.prepare_corpus("deb-en-de", str(tmp_path_factory.mktemp("corpora")), DEB_CACHE)
    build_seconds = time.monotonic() - start
    print(f"built deb-en-de in {build_seconds:.1f} s")
    return paths, fetch_seconds, build_seconds
