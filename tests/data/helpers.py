"""What the data tests share: generated parallel sentences, parallel files, the splits of a built corpus."""

import os
import random

from data import cleaning, parallel_files

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")

_SUBJECTS = [
    ("The cat", "Die Katze"),
    ("My brother", "Mein Bruder"),
    ("The teacher", "Die Lehrerin"),
    ("Our neighbour", "Unser Nachbar"),
    ("The old man", "Der alte Mann"),
    ("Anna", "Anna"),
    ("The small dog", "Der kleine Hund"),
    ("Every student", "Jeder Student"),
]
_PREDICATES = [
    ("reads a book", "liest ein Buch"),
    ("opens the window", "öffnet das Fenster"),
    ("drinks cold water", "trinkt kaltes Wasser"),
    ("writes a long letter", "schreibt einen langen Brief"),
    ("sees the green house", "sieht das grüne Haus"),
    ("buys fresh bread", "kauft frisches Brot"),
    ("waits for the train", "wartet auf den Zug"),
    ("sings a song", "singt ein Lied"),
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


def write_parallel(tmp_path, pairs, stem="train"):
    """Writes `pairs` as line-aligned `stem.en` and `stem.de` in `tmp_path`; returns their paths."""
    src, tgt = tmp_path / f"{stem}.en", tmp_path / f"{stem}.de"
    src.write_text("".join(f"{en}\n" for en, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(f"{de}\n" for _, de in pairs), encoding="utf-8")
    return str(src), str(tgt)


def english_by_split(paths):
    """The English sentences of each split of a built corpus (`CorpusPaths`)."""
    return {split: {en for en, _ in parallel_files.read_tsv(paths.split(split))} for split in cleaning.SPLITS}
