import io
import os
import subprocess
import tarfile

import pytest

from data import deb_packages


def _tar_xz(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:xz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _write_deb(path, files: dict[str, bytes], package="demo", version="1.0-1") -> str:
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


def test_read_deb_control_and_files(tmp_path):
    deb = _write_deb(tmp_path / "demo_1.0-1_all.deb", {"usr/share/a.txt": b"A", "usr/share/b.html": b"<p>"})
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
    deb = _write_deb(tmp_path / "demo_1.0-1_all.deb", {"usr/a": b"A" * 1000})
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
        deb_packages.fetch_debs(["trans-de-en"], str(tmp_path / "debs"))
    with pytest.raises(deb_packages.DebPackageError, match="trans-de-en not found in"):
        deb_packages.fetch_debs(["trans-de-en"], str(tmp_path / "debs"), allow_download=False)


def test_fetch_reuses_debs_already_there(tmp_path, monkeypatch):
    deb = _write_deb(tmp_path / "demo_1.0-1_all.deb", {"usr/a": b"A"})
    monkeypatch.setenv("PATH", str(tmp_path))  # would fail if it tried to download
    assert deb_packages.fetch_debs(["demo"], str(tmp_path)) == {"demo": deb}


@pytest.mark.slow
@pytest.mark.full  # asks apt over the network
@pytest.mark.skipif(not os.path.exists("/usr/bin/apt-get"), reason="needs apt-get")
def test_fetch_unknown_package_names_it(tmp_path):
    with pytest.raises(deb_packages.DebPackageError, match="no-such-package-for-transformer-tests"):
        deb_packages.fetch_debs(["no-such-package-for-transformer-tests"], str(tmp_path))
    assert not [n for n in os.listdir(tmp_path) if not n.startswith(".apt")]
