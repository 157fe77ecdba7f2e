"""What the data tests share: generated parallel sentences, parallel files, the splits of a built corpus,
and `.deb` and `.mo` files written as dpkg-deb and msgfmt write them."""

import io
import os
import random
import struct
import tarfile

from data.sources import builtin_corpora, cleaning, gettext_catalog, libreoffice_help, parallel_files

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


def _tar_xz(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def write_deb(path, files: dict[str, bytes], package="demo", version="1.0-1") -> str:
    """Writes a .deb (ar archive: debian-binary, control.tar.xz, data.tar.xz) as dpkg-deb does."""
    control = f"Package: {package}\nVersion: {version}\nArchitecture: all\n".encode()
    members = [
        ("debian-binary", b"2.0\n"),
        ("control.tar.xz", _tar_xz({"./control": control})),
        ("data.tar.xz", _tar_xz({f"./{name}": data for name, data in files.items()})),
    ]
    blob = b"!<arch>\n"
    for name, data in members:
        blob += f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
        blob += data + (b"\n" if len(data) % 2 else b"")
    with open(path, "wb") as f:
        f.write(blob)
    return str(path)


def write_mo(entries: list[tuple[bytes, bytes]]) -> bytes:
    """A little-endian .mo file in GNU gettext's layout (entries sorted by msgid)."""
    entries = sorted(entries)
    header_size = 28
    ids_table = header_size
    strs_table = ids_table + 8 * len(entries)
    data_start = strs_table + 8 * len(entries)
    blob_ids, blob_strs, id_index, str_index = b"", b"", [], []
    for msgid, _ in entries:
        id_index.append((len(msgid), data_start + len(blob_ids)))
        blob_ids += msgid + b"\0"
    strs_start = data_start + len(blob_ids)
    for _, msgstr in entries:
        str_index.append((len(msgstr), strs_start + len(blob_strs)))
        blob_strs += msgstr + b"\0"
    out = struct.pack("<7I", 0x950412DE, 0, len(entries), ids_table, strs_table, 0, 0)
    out += b"".join(struct.pack("<2I", *e) for e in id_index)
    out += b"".join(struct.pack("<2I", *e) for e in str_index)
    return out + blob_ids + blob_strs


# Interface strings of Debian 12's libreoffice-l10n-ja and -af, as their catalogs hold them.
UI_SAMPLES = {
    "ja": [("Save Document", "文書を保存する時"), ("Page Style", "ページスタイル"), ("Spelling", "つづり")],
    "af": [("Save Document", "Stoor dokument"), ("Page Style", "Bladsystyl"), ("Open", "Oopmaak")],
}


def help_files(language_dir):
    """The fixture help pages of `language_dir` at their paths in a help package."""
    root = os.path.join(FIXTURES, "libreoffice_help", language_dir, "text")
    files = {}
    for directory, _, names in os.walk(root):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                files[f"{libreoffice_help.HELP_ROOT}/{language_dir}/text/{os.path.relpath(path, root)}"] = f.read()
    return files


def write_sample_debs(deb_dir, code):
    """The packages of corpus deb-en-`code`, under their pinned names, holding the fixture pages and
    UI_SAMPLES[code] as the help pages and the catalog."""
    os.makedirs(deb_dir, exist_ok=True)
    language = builtin_corpora.LANGUAGES[code]
    for package, pinned in builtin_corpora.deb_pins(code).items():
        if package == language.l10n.package:
            catalog = write_mo([(en.encode(), foreign.encode()) for en, foreign in UI_SAMPLES[code]])
            files = {f"{gettext_catalog.LIBREOFFICE_RESOURCE_DIR}/{code}/LC_MESSAGES/sw.mo": catalog}
        else:
            files = help_files("en-US" if pinned == builtin_corpora.ENGLISH_HELP else language.help_dir)
        write_deb(os.path.join(deb_dir, pinned.file_name), files, package=package, version=pinned.version)
