"""A built corpus in its cache directory: the manifest, the completeness check, and the atomic build
(a temporary directory renamed into place when complete), so a half-written entry is never read.
docs/data.md, "The corpora", lists an entry's files."""

import dataclasses
import fcntl
import glob
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable

from absl import logging

from common.errors import UserError
from common.write_errors import WriteError, default_mode, writing
from data.sources import cleaning

MANIFEST = "manifest.json"
# 2: the training split in shards. 3: a wide character counts twice in the length ratio (data.sources.cleaning),
# so a corpus with CJK text cleaned before is built again.
MANIFEST_FORMAT = 3
_BUILD_LOCK = ".building.lock"


class CorpusError(UserError, RuntimeError):
    """A corpus that cannot be built or a cache entry that is not a complete corpus."""


class OlderFormatError(CorpusError):
    """A complete entry written by an earlier version of this code, in another layout."""


@dataclasses.dataclass(frozen=True)
class CorpusPaths:
    """Where a built corpus lives; every TSV holds `english<TAB>foreign` lines.

    Attributes:
        train: the training shards, in order.
        test_by_source: a built-in corpus's per-source test files ({"ding": ".../test.ding.tsv"});
            empty for a user corpus.
        languages: the columns' (source, target) codes, e.g. ("en", "de").
    """

    root: str
    train: tuple
    dev: str
    test: str
    test_by_source: dict
    manifest: str
    languages: tuple

    def split(self, name: str) -> str | tuple:
        """The TSV path of split "dev" or "test", the shards of "train"."""
        if name not in cleaning.SPLITS:
            raise ValueError(f"Unknown split {name!r}; expected one of {cleaning.SPLITS}.")
        return getattr(self, name)

    def load_manifest(self) -> dict:
        with open(self.manifest, encoding="utf-8") as f:
            return json.load(f)


def sha256_file(path: str) -> str:
    """The hex sha256 of a file, as the manifest records its files and inputs."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _corpus_paths(root: str, manifest: dict) -> CorpusPaths:
    return CorpusPaths(
        root=root,
        train=tuple(os.path.join(root, shard) for shard in manifest["train_shards"]),
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
    """Returns the paths of the complete corpus at `root`. Raises `CorpusError` naming what is
    missing or wrong in the manifest or the files it lists."""
    manifest_path = os.path.join(root, MANIFEST)
    if not os.path.exists(manifest_path):
        raise CorpusError(f"{root}: incomplete corpus, no {MANIFEST}.")
    try:
        with open(manifest_path, encoding="utf-8") as f:
            manifest = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise CorpusError(f"{manifest_path}: unreadable manifest: {e}") from e
    if manifest.get("format") != MANIFEST_FORMAT:
        raise (OlderFormatError if manifest.get("format", 0) < MANIFEST_FORMAT else CorpusError)(
            f"{manifest_path}: manifest format {manifest.get('format')!r}, expected {MANIFEST_FORMAT}."
        )
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


def write_manifest(path: str, manifest: dict) -> None:
    with writing(path), open(path, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=2, ensure_ascii=False)
        f.write("\n")


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


def cached(
    root: str, rebuild_invalid: bool, expected_inputs: dict | None = None, identity: Callable = lambda inputs: inputs
) -> CorpusPaths | None:
    """The complete corpus at `root`, or None when it must be (re)built for `expected_inputs`."""
    if not os.path.exists(root):
        return None
    try:
        paths = check_corpus(root)
    except OlderFormatError as e:
        logging.info("%s Rebuilding in the current layout.", e)
        return None
    except CorpusError as e:
        if not rebuild_invalid:
            raise CorpusError(f"{e} Delete {root} or rebuild it with --rebuild.") from e
        logging.warning("%s Rebuilding.", e)
        return None
    if expected_inputs is not None and identity(paths.load_manifest().get("inputs")) != expected_inputs:
        logging.info("%s was built from other input files or languages; rebuilding.", root)
        return None
    return paths


def build_atomically(cache_dir: str, name: str, build: Callable[[str], None]) -> CorpusPaths:
    """Runs `build(tmp_dir)` in a fresh, locked directory and installs it as `cache_dir/name`;
    returns its paths. A failed build leaves nothing behind; killed builds' directories are removed.
    Raises `WriteError` when a file of the entry (named as installed) or the directory cannot be
    written."""
    root = os.path.join(cache_dir, name)
    with writing(root):
        os.makedirs(cache_dir, exist_ok=True)
        _remove_abandoned_builds(cache_dir, name)
        tmp_dir = tempfile.mkdtemp(dir=cache_dir, prefix=f".{name}.building-")
        lock = open(os.path.join(tmp_dir, _BUILD_LOCK), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    # mkdtemp makes the directory 0700; the installed corpus is a directory like any other.
    os.chmod(tmp_dir, default_mode(directory=True))
    try:
        build(tmp_dir)
        os.remove(os.path.join(tmp_dir, _BUILD_LOCK))
        with writing(root):
            _install(tmp_dir, root)
    except WriteError as error:
        inside = os.path.relpath(error.path, tmp_dir)
        if inside.startswith(os.pardir):
            raise
        raise error.renamed(os.path.join(root, inside)) from None
    finally:
        if os.path.exists(tmp_dir):
            shutil.rmtree(tmp_dir, ignore_errors=True)
        lock.close()
    return check_corpus(root)


def _remove_abandoned_builds(cache_dir: str, name: str) -> None:
    """Removes the temporary directories of killed builds of `name` (no process holds their lock)."""
    for directory in glob.glob(os.path.join(glob.escape(cache_dir), f".{glob.escape(name)}.building-*")):
        try:
            with open(os.path.join(directory, _BUILD_LOCK)) as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except FileNotFoundError:
            continue  # A build that has not taken its lock yet, or one that is installing.
        except BlockingIOError:
            continue  # A build that is running.
        logging.info("removing %s, left by a build that did not finish", directory)
        shutil.rmtree(directory, ignore_errors=True)
