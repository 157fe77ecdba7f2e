from tests.data.helpers import help_files, write_deb
from tools import debian_languages_table


def test_help_directory_of_a_help_package(tmp_path):
    """The table's command finds where a help package keeps its pages, or that it has none (Debian
    12's libreoffice-help-sk holds only its docs)."""
    pages = write_deb(tmp_path / "libreoffice-help-ja_1_all.deb", help_files("ja"), package="libreoffice-help-ja")
    assert debian_languages_table.help_directory(pages) == "ja"
    empty = write_deb(
        tmp_path / "libreoffice-help-sk_1_all.deb",
        {"usr/share/doc/libreoffice-help-sk/copyright": b"MPL-2.0"},
        package="libreoffice-help-sk",
    )
    assert debian_languages_table.help_directory(empty) is None


def test_packages_index_parsing():
    index = (
        "Package: libreoffice-l10n-zh-cn\nVersion: 4:7.4.7-1+deb12u14\nArchitecture: all\n"
        "Description: office productivity suite -- Chinese_simplified language package\n"
        "Filename: pool/main/libr/libreoffice/libreoffice-l10n-zh-cn_7.4.7-1+deb12u14_all.deb\nSize: 1234\n"
        "SHA256: " + "ab" * 32 + "\n\nPackage: no-file\nVersion: 1\n"
    )
    pins = debian_languages_table.parse_packages_index(index)
    assert list(pins) == [("libreoffice-l10n-zh-cn", "4:7.4.7-1+deb12u14")]
    assert pins["libreoffice-l10n-zh-cn", "4:7.4.7-1+deb12u14"].size_bytes == 1234
    assert debian_languages_table.language_name("office productivity suite -- Chinese_simplified language package") == (
        "Chinese simplified"
    )
    assert debian_languages_table.code_of("pt-br") == "pt_br"
