import functools
import hashlib
import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading

import pytest

from data.sources import builtin_corpora, deb_packages
from tests.data.helpers import write_deb
from tests.helpers import DEB_CACHE, REPO_ROOT


def test_read_deb_control_and_files(tmp_path):
    deb = write_deb(tmp_path / "demo_1.0-1_all.deb", {"usr/share/a.txt": b"A", "usr/share/b.html": b"<p>"})
    assert deb_packages.read_control(deb)["Version"] == "1.0-1"
    assert list(deb_packages.iter_deb_files(deb, lambda p: p.endswith(".html"))) == [("usr/share/b.html", b"<p>")]
    info = deb_packages.describe_deb(deb)
    assert (info.package, info.version, len(info.sha256)) == ("demo", "1.0-1", 64)
    assert deb_packages.find_deb(str(tmp_path), "demo") == deb
    assert deb_packages.find_deb(str(tmp_path), "dem") is None


@pytest.mark.skipif(not os.path.exists("/usr/bin/dpkg-deb"), reason="needs dpkg-deb")
def test_reads_a_deb_built_by_dpkg_deb(tmp_path):
    root = tmp_path / "root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: demo\nVersion: 2.0\nArchitecture: all\nMaintainer: x <x@y>\nDescription: d\n"
    )
    (root / "usr" / "share").mkdir(parents=True)
    (root / "usr" / "share" / "t.txt").write_text("hello")
    deb = str(tmp_path / "demo_2.0_all.deb")
    subprocess.run(["dpkg-deb", "-Zxz", "--build", str(root), deb], check=True, capture_output=True)
    assert deb_packages.read_control(deb)["Version"] == "2.0"
    assert dict(deb_packages.iter_deb_files(deb, lambda p: True))["usr/share/t.txt"] == b"hello"


def test_truncated_and_foreign_files_are_named(tmp_path):
    deb = write_deb(tmp_path / "demo_1.0-1_all.deb", {"usr/a": b"A" * 1000})
    with open(deb, "r+b") as f:
        f.truncate(os.path.getsize(deb) - 50)
    with pytest.raises(deb_packages.DebPackageError, match="demo_1.0-1_all.deb: truncated"):
        deb_packages.read_control(deb)
    other = tmp_path / "x.deb"
    other.write_bytes(b"PK\x03\x04 not a deb")
    with pytest.raises(deb_packages.DebPackageError, match="x.deb: not a Debian package"):
        deb_packages.describe_deb(str(other))


def test_fetch_without_apt_get_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no apt-get on it
    with pytest.raises(deb_packages.DebPackageError, match="trans-de-en: apt-get is not installed"):
        deb_packages.fetch_debs(["trans-de-en"], str(tmp_path / "debs"), source="apt")
    with pytest.raises(deb_packages.DebPackageError, match="trans-de-en from a Debian mirror: no pinned version"):
        deb_packages.fetch_debs(["trans-de-en"], str(tmp_path / "debs"))
    with pytest.raises(deb_packages.DebPackageError, match="trans-de-en not found in"):
        deb_packages.fetch_debs(["trans-de-en"], str(tmp_path / "debs"), allow_download=False)


def test_fetch_reuses_debs_already_there(tmp_path, monkeypatch):
    deb = write_deb(tmp_path / "demo_1.0-1_all.deb", {"usr/a": b"A"})
    monkeypatch.setenv("PATH", str(tmp_path))  # would fail if it tried to download
    assert deb_packages.fetch_debs(["demo"], str(tmp_path)) == {"demo": deb}


@pytest.mark.slow
@pytest.mark.full  # asks apt over the network
@pytest.mark.skipif(not os.path.exists("/usr/bin/apt-get"), reason="needs apt-get")
def test_fetch_unknown_package_names_it(tmp_path):
    with pytest.raises(deb_packages.DebPackageError, match="no-such-package-for-transformer-tests"):
        deb_packages.fetch_debs(["no-such-package-for-transformer-tests"], str(tmp_path))
    assert not [n for n in os.listdir(tmp_path) if not n.startswith(".apt")]


def _pin(deb_path, pool_dir="pool/main/d/demo") -> deb_packages.PinnedDeb:
    """The pin of a .deb file as a mirror would serve it under `pool_dir`."""
    control = deb_packages.read_control(deb_path)
    with open(deb_path, "rb") as f:
        blob = f.read()
    return deb_packages.PinnedDeb(
        package=control["Package"],
        version=control["Version"],
        architecture=control["Architecture"],
        pool_path=f"{pool_dir}/{control['Package']}_{control['Version'].split(':')[-1]}_{control['Architecture']}.deb",
        sha256=hashlib.sha256(blob).hexdigest(),
        size_bytes=len(blob),
    )


class _PoolServer:
    """A Debian mirror on 127.0.0.1: `root` laid out as the pool, served by `http.server` in a thread.

    `failures[path]` lists statuses to answer before the file (e.g. [503, 503]); a path in `truncate`
    announces the whole file and sends half of it. `requests` lists the paths asked for.
    """

    def __init__(self, root):
        self.root = str(root)
        self.failures, self.truncate, self.requests = {}, set(), []
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def do_GET(self):
                server.requests.append(self.path)
                if server.failures.get(self.path):
                    self.send_error(server.failures[self.path].pop(0))
                elif self.path in server.truncate:
                    with open(os.path.join(server.root, self.path.lstrip("/")), "rb") as f:
                        blob = f.read()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(blob)))
                    self.end_headers()
                    self.wfile.write(blob[: len(blob) // 2])
                    self.close_connection = True
                else:
                    super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=self.root))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/debian"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def add(self, deb_path, pinned):
        """Puts a copy of `deb_path` at `pinned`'s pool path; returns the copy's path."""
        target = os.path.join(self.root, "debian", pinned.pool_path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(deb_path, target)
        return target


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """A `_PoolServer` running for the test; no proxy and no waiting between retries."""
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(deb_packages, "RETRY_BACKOFF_SECONDS", 0.0)
    server = _PoolServer(tmp_path / "mirror")
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


@pytest.fixture
def demo_deb(tmp_path, mirror):
    """A generated .deb served by `mirror`: (its path, its pin, its path on the server)."""
    (tmp_path / "built").mkdir()
    deb = write_deb(tmp_path / "built" / "demo_1.0-1_all.deb", {"usr/share/a.txt": b"A" * 5000}, version="2:1.0-1")
    pinned = _pin(deb)
    return deb, pinned, "/debian/" + pinned.pool_path


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def test_mirror_download_is_the_served_file_under_apts_name(tmp_path, mirror, demo_deb):
    deb, pinned, _ = demo_deb
    mirror.add(deb, pinned)
    path = deb_packages.download_from_mirror(pinned, str(tmp_path / "debs"), mirror.url)
    assert os.path.basename(path) == "demo_2%3a1.0-1_all.deb"  # as `apt-get download` names it
    assert _read(path) == _read(deb)
    assert os.listdir(tmp_path / "debs") == [os.path.basename(path)]


def test_mirror_download_retries_503_then_succeeds(tmp_path, mirror, demo_deb):
    deb, pinned, served = demo_deb
    mirror.add(deb, pinned)
    mirror.failures[served] = [503, 503]
    path = deb_packages.download_from_mirror(pinned, str(tmp_path / "debs"), mirror.url)
    assert mirror.requests == [served] * 3
    assert _read(path) == _read(deb)


def test_mirror_download_names_a_checksum_mismatch_and_keeps_nothing(tmp_path, mirror, demo_deb):
    deb, pinned, served = demo_deb
    copy = mirror.add(deb, pinned)
    blob = bytearray(_read(copy))
    blob[-10] ^= 0xFF  # same size, one byte changed
    with open(copy, "wb") as f:
        f.write(blob)
    actual = hashlib.sha256(blob).hexdigest()
    with pytest.raises(deb_packages.DebPackageError) as error:
        deb_packages.download_from_mirror(pinned, str(tmp_path / "debs"), mirror.url)
    message = str(error.value)
    assert f"{mirror.url}/{pinned.pool_path}: SHA256 mismatch" in message
    assert f"expected {pinned.sha256}, got {actual}" in message
    assert mirror.requests == [served]  # not retried
    assert os.listdir(tmp_path / "debs") == []


def test_mirror_download_cut_midway_is_retried_and_leaves_no_partial_file(tmp_path, mirror, demo_deb):
    deb, pinned, served = demo_deb
    mirror.add(deb, pinned)
    mirror.truncate.add(served)
    with pytest.raises(deb_packages.MirrorUnreachableError, match=r"closed after \d+ of \d+ bytes \(after 3 attempts"):
        deb_packages.download_from_mirror(pinned, str(tmp_path / "debs"), mirror.url, attempts=3)
    assert mirror.requests == [served] * 3
    assert os.listdir(tmp_path / "debs") == []
    mirror.truncate.clear()
    assert _read(deb_packages.download_from_mirror(pinned, str(tmp_path / "debs"), mirror.url)) == _read(deb)


def test_mirror_without_the_version_says_so(tmp_path, mirror, demo_deb):
    _, pinned, served = demo_deb
    with pytest.raises(deb_packages.DebPackageError, match="HTTP 404.*does not carry this version.*--deb_mirror"):
        deb_packages.download_from_mirror(pinned, str(tmp_path / "debs"), mirror.url)
    assert mirror.requests == [served]
    assert os.listdir(tmp_path / "debs") == []


def test_mirror_unreachable_gives_one_clear_message(tmp_path, monkeypatch, demo_deb):
    _, pinned, _ = demo_deb
    monkeypatch.setattr(deb_packages, "RETRY_BACKOFF_SECONDS", 0.0)
    with socket.socket() as probe:  # a port that nothing listens on once the probe closes
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    closed = f"http://127.0.0.1:{port}/debian"
    with pytest.raises(deb_packages.MirrorUnreachableError) as error:
        deb_packages.fetch_debs(
            ["demo"], str(tmp_path / "debs"), pinned={"demo": pinned}, source="mirror", mirror=closed
        )
    message = str(error.value)
    assert message.startswith(f"Cannot download demo 2:1.0-1 from the Debian mirror {closed}: ")
    assert "Connection refused" in message and f"after {deb_packages.DOWNLOAD_ATTEMPTS} attempts" in message
    assert "--deb_mirror" in message and "--deb_dir" in message
    assert os.listdir(tmp_path / "debs") == []


def test_fetch_without_apt_get_downloads_from_the_mirror(tmp_path, monkeypatch, mirror, demo_deb):
    deb, pinned, _ = demo_deb
    mirror.add(deb, pinned)
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH with no apt-get on it
    found = deb_packages.fetch_debs(["demo"], str(tmp_path / "debs"), pinned={"demo": pinned}, mirror=mirror.url)
    assert _read(found["demo"]) == _read(deb)
    # Found in deb_dir the next time: nothing is asked of the mirror.
    assert deb_packages.fetch_debs(["demo"], str(tmp_path / "debs"), pinned={}, mirror="http://127.0.0.1:9/") == found


def _real_debs(request):
    """The deb-en-de packages apt-get fetched into DEB_CACHE, by package: fetched in the full tier,
    only found in the fast one (which skips the test when they are absent)."""
    packages = list(builtin_corpora.DEB_EN_DE_PACKAGES)
    if request.config.getoption("--fast"):
        if not all(deb_packages.find_deb(DEB_CACHE, p) for p in packages):
            pytest.skip(f"the deb-en-de packages are not in {DEB_CACHE} (the full tier fetches them)")
    deb_packages.fetch_debs(packages, DEB_CACHE, pinned=builtin_corpora.DEB_EN_DE_DEBS)
    paths = {}
    for package, pinned in builtin_corpora.DEB_EN_DE_DEBS.items():
        path = os.path.join(DEB_CACHE, pinned.file_name)
        assert os.path.exists(path), (
            f"{DEB_CACHE} has {deb_packages.find_deb(DEB_CACHE, package)}, not the pinned {pinned.file_name}: "
            "Debian has a newer version; update the pins with `python -m tools.debian_languages_table` (data/sources/debian_languages.json)"
        )
        paths[package] = path
    return paths


def test_pins_are_the_files_apt_get_fetched(request):
    for package, path in _real_debs(request).items():
        pinned = builtin_corpora.DEB_EN_DE_DEBS[package]
        info = deb_packages.describe_deb(path)
        assert (info.package, info.version, info.sha256, info.size_bytes) == (
            package,
            pinned.version,
            pinned.sha256,
            pinned.size_bytes,
        )
        assert pinned.pool_path.endswith("/" + pinned.file_name.replace(pinned.version.split(":")[0] + "%3a", ""))


def test_mirror_fetch_of_the_corpus_packages_equals_apt_gets(request, tmp_path, mirror):
    apt_fetched = _real_debs(request)
    for package, path in apt_fetched.items():
        mirror.add(path, builtin_corpora.DEB_EN_DE_DEBS[package])
    found = deb_packages.fetch_debs(
        list(builtin_corpora.DEB_EN_DE_PACKAGES),
        str(tmp_path / "debs"),
        pinned=builtin_corpora.DEB_EN_DE_DEBS,
        source="mirror",
        mirror=mirror.url,
    )
    for package, path in found.items():
        assert os.path.basename(path) == os.path.basename(apt_fetched[package])
        assert _read(path) == _read(apt_fetched[package])


def test_command_line_names_a_mirror_error_without_a_traceback(tmp_path, mirror):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "data.prepare",
            f"--cache_dir={tmp_path / 'cache'}",
            "--deb_source=mirror",
            f"--deb_mirror={mirror.url}",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "no_proxy": "*"},
    )
    assert result.returncode != 0
    first = builtin_corpora.DEB_EN_DE_DEBS[builtin_corpora.DEB_EN_DE_PACKAGES[0]]
    assert f"data.prepare: error: {mirror.url}/{first.pool_path}: HTTP 404" in result.stderr
    assert "Traceback" not in result.stderr
