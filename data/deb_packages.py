"""Fetching Debian packages with `apt-get download` and reading their files without installing them.

A `.deb` is an `ar` archive holding `control.tar.*` (package metadata) and `data.tar.*` (the files).
Both are read here in pure Python (xz, gzip, bzip2 or uncompressed tar; zstd through the `zstd`
program when present), so building a corpus needs neither `dpkg` nor root: only `apt-get download`
when the `.deb` files are not already at hand.
"""

import dataclasses
import glob
import hashlib
import io
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Iterator

from absl import logging

_AR_MAGIC = b"!<arch>\n"
_AR_HEADER_SIZE = 60


class DebPackageError(RuntimeError):
    """A package that cannot be fetched or a `.deb` file that cannot be read."""


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
    """Yields `(path, contents)` for the regular files of the package whose path `keep` accepts.

    Paths are relative to the filesystem root without a leading `./` (`usr/share/...`), in the
    order the archive stores them.
    """
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


def fetch_debs(packages: list[str], deb_dir: str, allow_download: bool = True) -> dict[str, str]:
    """Makes sure `deb_dir` holds a `.deb` for every package and returns their paths by package.

    Packages already in `deb_dir` are reused. The others are fetched with one `apt-get download`
    call (apt fetches them over one pipelined connection); when apt does not know a package (empty
    package lists, as on a fresh machine) it runs `apt-get update` once and tries again. As root the
    system's lists are used; otherwise private lists under `deb_dir/.apt`. Downloads land in a
    temporary directory first, so an interrupted fetch leaves no partial `.deb` behind.

    Raises:
        DebPackageError: naming the packages that are missing and why (no apt-get, apt's error).
    """
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
    if apt_get is None:
        raise DebPackageError(
            f"Cannot fetch package(s) {', '.join(missing)}: apt-get is not installed. Download "
            f"the .deb files elsewhere and pass their directory as --deb_dir."
        )
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
                    f"{update.stderr.strip()[-2000:]}"
                )
            result = _run_apt([apt_get, *options, "download", *missing], cwd=tmp)
        for name in os.listdir(tmp):
            if name.endswith(".deb"):
                os.replace(os.path.join(tmp, name), os.path.join(deb_dir, name))
    found = {p: find_deb(deb_dir, p) for p in packages}
    still_missing = [p for p, path in found.items() if path is None]
    if still_missing:
        raise DebPackageError(
            f"Cannot fetch package(s) {', '.join(still_missing)} with apt-get download: {result.stderr.strip()[-2000:]}"
        )
    return found
