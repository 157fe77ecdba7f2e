"""Fetching Debian packages and reading their files without installing them.

`.deb` archives are read in pure Python (zstd through the `zstd` program), so neither `dpkg` nor
root is needed; packages come from `apt-get download` where it exists, else from a Debian mirror,
checked against a `PinnedDeb`."""

import dataclasses
import glob
import hashlib
import http.client
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping

from absl import logging

from common.errors import UserError

_AR_MAGIC = b"!<arch>\n"
_AR_HEADER_SIZE = 60


# Where packages come from when apt-get is absent or --deb_source=mirror asks for it.
DEFAULT_MIRROR = "https://deb.debian.org/debian"
# "auto": apt-get where it is installed, else the mirror.
DEB_SOURCES = ("auto", "apt", "mirror")

# Mirror downloads: attempts per file for transient failures (connection errors, timeouts, HTTP 5xx,
# 408, 429, a connection cut mid-file), with the wait doubling from RETRY_BACKOFF_SECONDS.
DOWNLOAD_ATTEMPTS = 4
RETRY_BACKOFF_SECONDS = 2.0
DOWNLOAD_TIMEOUT_SECONDS = 60.0
_CHUNK_BYTES = 1 << 20


class DebPackageError(UserError, RuntimeError):
    """A package that cannot be fetched or a `.deb` file that cannot be read."""


class MirrorUnreachableError(DebPackageError):
    """The mirror did not answer (offline, DNS failure, refused connection) or kept failing."""


@dataclasses.dataclass(frozen=True)
class PinnedDeb:
    """One exact `.deb` from a Debian mirror's Packages index: `pool_path` (its `Filename:`, below the
    mirror's root), hex `sha256`, `size_bytes`, and `version` with its epoch."""

    package: str
    version: str
    architecture: str
    pool_path: str
    sha256: str
    size_bytes: int

    @property
    def file_name(self) -> str:
        """The name `apt-get download` gives the file (the epoch's colon written `%3a`)."""
        return f"{self.package}_{self.version.replace(':', '%3a')}_{self.architecture}.deb"


@dataclasses.dataclass(frozen=True)
class DebInfo:
    """What the manifest records about one `.deb` file."""

    package: str
    version: str
    path: str
    sha256: str
    size_bytes: int


def _ar_members(deb_path: str) -> dict[str, bytes]:
    """Returns the members of the `ar` archive `deb_path` by name."""
    with open(deb_path, "rb") as f:
        blob = f.read()
    if not blob.startswith(_AR_MAGIC):
        raise DebPackageError(f"{deb_path}: not a Debian package (no '!<arch>' header).")
    members = {}
    offset = len(_AR_MAGIC)
    while offset + _AR_HEADER_SIZE <= len(blob):
        header = blob[offset : offset + _AR_HEADER_SIZE]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError as e:
            raise DebPackageError(f"{deb_path}: corrupt ar member header at byte {offset}.") from e
        start = offset + _AR_HEADER_SIZE
        if start + size > len(blob):
            raise DebPackageError(
                f"{deb_path}: truncated (member {name!r} needs {size} bytes at byte {start}, file has {len(blob)})."
            )
        members[name] = blob[start : start + size]
        offset = start + size + (size % 2)
    return members


def _open_tar(deb_path: str, members: dict[str, bytes], stem: str) -> tarfile.TarFile:
    """Opens the member `stem.tar[.xz|.gz|.bz2|.zst]` as a tar archive."""
    for name, payload in members.items():
        if not name.startswith(stem + ".tar"):
            continue
        if name.endswith(".zst"):
            zstd = shutil.which("zstd")
            if zstd is None:
                raise DebPackageError(f"{deb_path}: {name} is zstd-compressed and the `zstd` program is not installed.")
            payload = subprocess.run([zstd, "-dc"], input=payload, capture_output=True, check=True).stdout
        try:
            return tarfile.open(fileobj=io.BytesIO(payload), mode="r:*")
        except (tarfile.TarError, EOFError, OSError) as e:
            raise DebPackageError(f"{deb_path}: cannot read {name}: {e}") from e
    raise DebPackageError(f"{deb_path}: no {stem}.tar.* member (found {sorted(members)}).")


def read_control(deb_path: str) -> dict[str, str]:
    """Returns the fields of the package's `control` file (Package, Version, ...)."""
    with _open_tar(deb_path, _ar_members(deb_path), "control") as tar:
        for member in tar:
            if member.isfile() and os.path.basename(member.name) == "control":
                text = tar.extractfile(member).read().decode("utf-8")
                break
        else:
            raise DebPackageError(f"{deb_path}: control.tar has no control file.")
    fields = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9-]+):\s*(.*)$", line)
        if match:
            fields[match.group(1)] = match.group(2)
    return fields


def iter_deb_files(deb_path: str, keep: Callable[[str], bool]) -> Iterator[tuple[str, bytes]]:
    """Yields `(path, contents)` of the regular files `keep` accepts, paths without `./`."""
    try:
        with _open_tar(deb_path, _ar_members(deb_path), "data") as tar:
            for member in tar:
                path = member.name[2:] if member.name.startswith("./") else member.name
                if member.isfile() and keep(path):
                    yield path, tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError) as e:
        raise DebPackageError(f"{deb_path}: cannot read data.tar: {e}") from e


def describe_deb(deb_path: str) -> DebInfo:
    """Returns package name, version, sha256 and size of a `.deb` file."""
    control = read_control(deb_path)
    with open(deb_path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    return DebInfo(
        package=control.get("Package", ""),
        version=control.get("Version", ""),
        path=os.path.abspath(deb_path),
        sha256=digest,
        size_bytes=os.path.getsize(deb_path),
    )


def find_deb(deb_dir: str, package: str) -> str | None:
    """Returns the newest `package_*.deb` in `deb_dir`, or None."""
    candidates = [
        p
        for p in glob.glob(os.path.join(glob.escape(deb_dir), f"{package}_*.deb"))
        if os.path.basename(p).split("_", 1)[0] == package
    ]
    return max(candidates, key=os.path.getmtime) if candidates else None


def _apt_options(apt_state_dir: str | None) -> list[str]:
    """apt options that keep package lists and caches in a private directory (for non-root)."""
    options = ["-o", "Acquire::Languages=none", "-q"]
    if apt_state_dir is not None:
        lists = os.path.join(apt_state_dir, "lists")
        cache = os.path.join(apt_state_dir, "cache")
        os.makedirs(os.path.join(lists, "partial"), exist_ok=True)
        os.makedirs(os.path.join(cache, "archives", "partial"), exist_ok=True)
        options += [
            "-o",
            f"Dir::State::Lists={lists}",
            "-o",
            f"Dir::Cache={cache}",
            "-o",
            "Debug::NoLocking=1",
        ]
    return options


def _run_apt(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)


def _mirror_help(mirror: str) -> str:
    return (
        f"Check the connection to {mirror} (urllib honours https_proxy), pass --deb_mirror=URL of "
        f"another Debian mirror, or download the .deb files elsewhere and pass their directory as --deb_dir."
    )


class _TruncatedDownload(ConnectionError):
    """The connection ended before the whole file came (retried like any connection error)."""


def _is_transient_http(code: int) -> bool:
    return code >= 500 or code in (408, 429)


def _download_once(url: str, pinned: PinnedDeb, deb_dir: str, timeout_seconds: float) -> str:
    """One attempt: `url` into a temporary file in `deb_dir`, checked, renamed into place. Raises
    `DebPackageError` when size or SHA256 differs from the pin (not worth retrying);
    `urllib.error.URLError`, `OSError` or `http.client.HTTPException` when the transfer fails."""
    target = os.path.join(deb_dir, pinned.file_name)
    descriptor, partial = tempfile.mkstemp(dir=deb_dir, prefix=".download-", suffix=".part")
    try:
        digest, size = hashlib.sha256(), 0
        with os.fdopen(descriptor, "wb") as out:
            with urllib.request.urlopen(url, timeout=timeout_seconds) as response:
                announced = response.headers.get("Content-Length")
                if announced is not None and announced.isdigit() and int(announced) != pinned.size_bytes:
                    raise DebPackageError(
                        f"{url}: size mismatch for {pinned.package} {pinned.version}: the mirror serves "
                        f"{announced} bytes, the pinned file has {pinned.size_bytes}."
                    )
                while size <= pinned.size_bytes:
                    chunk = response.read(_CHUNK_BYTES)
                    if not chunk:
                        break
                    out.write(chunk)
                    digest.update(chunk)
                    size += len(chunk)
        if size < pinned.size_bytes:
            raise _TruncatedDownload(f"the connection closed after {size} of {pinned.size_bytes} bytes")
        if size > pinned.size_bytes:
            raise DebPackageError(
                f"{url}: size mismatch for {pinned.package} {pinned.version}: expected {pinned.size_bytes} "
                f"bytes, the mirror sent more."
            )
        if digest.hexdigest() != pinned.sha256:
            raise DebPackageError(
                f"{url}: SHA256 mismatch for {pinned.package} {pinned.version}: expected {pinned.sha256}, "
                f"got {digest.hexdigest()}. The file is corrupt or not the pinned one; nothing was kept."
            )
        os.chmod(partial, 0o644)  # mkstemp's 0600 would hide the file from other users of a shared deb_dir.
        os.replace(partial, target)
        return target
    finally:
        if os.path.exists(partial):
            os.remove(partial)


def download_from_mirror(
    pinned: PinnedDeb,
    deb_dir: str,
    mirror: str = DEFAULT_MIRROR,
    *,
    attempts: int | None = None,
    backoff_seconds: float | None = None,
    timeout_seconds: float | None = None,
) -> str:
    """Downloads `mirror/pinned.pool_path` into `deb_dir/pinned.file_name`, checked before it takes
    its name; returns its path. Transient failures are retried `attempts` times in all, the wait
    doubling from `backoff_seconds`. Raises `DebPackageError` on a checksum or size mismatch, or an
    HTTP error retrying cannot fix (404); `MirrorUnreachableError` when every attempt failed with a
    transient error."""
    attempts = DOWNLOAD_ATTEMPTS if attempts is None else attempts
    if attempts < 1:
        raise ValueError(f"attempts={attempts}: expected at least 1")
    backoff_seconds = RETRY_BACKOFF_SECONDS if backoff_seconds is None else backoff_seconds
    timeout_seconds = DOWNLOAD_TIMEOUT_SECONDS if timeout_seconds is None else timeout_seconds
    url = f"{mirror.rstrip('/')}/{urllib.parse.quote(pinned.pool_path, safe='/+~')}"
    os.makedirs(deb_dir, exist_ok=True)
    for attempt in range(1, attempts + 1):
        try:
            return _download_once(url, pinned, deb_dir, timeout_seconds)
        except urllib.error.HTTPError as error:
            if not _is_transient_http(error.code):
                hint = (
                    " The mirror does not carry this version (Debian's main mirrors keep only a release's "
                    "current versions): pass --deb_mirror=URL of a mirror that keeps it (an archive "
                    "such as snapshot.debian.org), or --deb_dir with the files."
                    if error.code == 404
                    else ""
                )
                raise DebPackageError(f"{url}: HTTP {error.code} {error.reason}.{hint}") from error
            reason = f"HTTP {error.code} {error.reason}"
        except urllib.error.URLError as error:
            reason = str(error.reason)
        except _TruncatedDownload as error:
            reason = str(error)
        except (OSError, http.client.HTTPException) as error:
            reason = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
        if attempt < attempts:
            wait = backoff_seconds * 2 ** (attempt - 1)
            logging.warning("%s: %s; retrying in %.0f s (attempt %d of %d)", url, reason, wait, attempt, attempts)
            time.sleep(wait)
    raise MirrorUnreachableError(
        f"Cannot download {pinned.package} {pinned.version} from the Debian mirror {mirror}: {reason} "
        f"(after {attempts} attempt{'s' if attempts != 1 else ''}; URL {url}). {_mirror_help(mirror)}"
    )


def _fetch_with_apt(apt_get: str, missing: list[str], deb_dir: str) -> str:
    """Runs `apt-get download` for `missing` into `deb_dir`; returns apt's stderr."""
    apt_state_dir = None if os.geteuid() == 0 else os.path.join(deb_dir, ".apt")
    options = _apt_options(apt_state_dir)
    with tempfile.TemporaryDirectory(dir=deb_dir, prefix=".download-") as tmp:
        result = _run_apt([apt_get, *options, "download", *missing], cwd=tmp)
        if result.returncode != 0:
            logging.info("apt-get download failed (%s); running apt-get update", result.stderr.strip())
            update = _run_apt([apt_get, *options, "update"], cwd=tmp)
            if update.returncode != 0:
                raise DebPackageError(
                    f"Cannot fetch package(s) {', '.join(missing)}: `apt-get update` failed: "
                    f"{update.stderr.strip()[-2000:]} (--deb_source=mirror downloads them over HTTPS instead)"
                )
            result = _run_apt([apt_get, *options, "download", *missing], cwd=tmp)
        for name in os.listdir(tmp):
            if name.endswith(".deb"):
                os.replace(os.path.join(tmp, name), os.path.join(deb_dir, name))
    return result.stderr


def fetch_debs(
    packages: list[str],
    deb_dir: str,
    allow_download: bool = True,
    *,
    pinned: Mapping[str, PinnedDeb] | None = None,
    source: str = "auto",
    mirror: str = DEFAULT_MIRROR,
) -> dict[str, str]:
    """Makes sure `deb_dir` holds a `.deb` for every package (reusing those there); returns their
    paths by package. `source` "apt": one `apt-get download` (after one `apt-get update` if apt does
    not know a package; private lists under `deb_dir/.apt` unless root), the version apt offers.
    "mirror": `download_from_mirror` for each `pinned` file. "auto": "apt" where apt-get is
    installed. Raises `DebPackageError` naming the missing packages and why;
    `MirrorUnreachableError` when the mirror cannot be reached."""
    if source not in DEB_SOURCES:
        raise ValueError(f"source={source!r}: expected one of {DEB_SOURCES}")
    os.makedirs(deb_dir, exist_ok=True)
    found = {p: find_deb(deb_dir, p) for p in packages}
    missing = [p for p, path in found.items() if path is None]
    if not missing:
        return found
    if not allow_download:
        raise DebPackageError(
            f"Package(s) {', '.join(missing)} not found in {deb_dir} (expected files named "
            f"PACKAGE_VERSION_ARCH.deb) and downloading is disabled."
        )
    apt_get = shutil.which("apt-get")
    if source == "apt" and apt_get is None:
        raise DebPackageError(
            f"Cannot fetch package(s) {', '.join(missing)}: apt-get is not installed. Pass --deb_source=mirror "
            f"to download them from a Debian mirror, or download the .deb files elsewhere and pass their "
            f"directory as --deb_dir."
        )
    if source == "mirror" or apt_get is None:
        unpinned = [p for p in missing if p not in (pinned or {})]
        if unpinned:
            raise DebPackageError(
                f"Cannot fetch package(s) {', '.join(unpinned)} from a Debian mirror: no pinned version, pool "
                f"path and SHA256 for them{'' if apt_get else ' (and apt-get is not installed)'}. Download "
                f"the .deb files elsewhere and pass their directory as --deb_dir."
            )
        for package in missing:
            found[package] = download_from_mirror(pinned[package], deb_dir, mirror)
        return found
    stderr = _fetch_with_apt(apt_get, missing, deb_dir)
    found = {p: find_deb(deb_dir, p) for p in packages}
    still_missing = [p for p, path in found.items() if path is None]
    if still_missing:
        raise DebPackageError(
            f"Cannot fetch package(s) {', '.join(still_missing)} with apt-get download: {stderr.strip()[-2000:]} "
            f"(--deb_source=mirror downloads the pinned files from a Debian mirror instead)"
        )
    return found
