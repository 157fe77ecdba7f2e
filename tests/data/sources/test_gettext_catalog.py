import pytest

from data.sources import gettext_catalog
from tests.data.helpers import write_mo


def test_read_mo_removes_context_and_skips_header_and_untranslated():
    blob = write_mo(
        [
            (b"", b"Content-Type: text/plain; charset=UTF-8\n"),
            (b"STR_SAVE\x04~Save As...", b"Speichern ~unter..."),
            (b"untranslated", b""),
            (b"%1 file\x00%1 files", b"%1 Datei\x00%1 Dateien"),
        ]
    )
    assert sorted(gettext_catalog.read_mo(blob)) == [
        ("%1 file", "%1 Datei"),
        ("~Save As...", "Speichern ~unter..."),
    ]


def test_read_mo_rejects_other_files():
    with pytest.raises(gettext_catalog.CatalogError, match="ui.mo: not a .mo file"):
        list(gettext_catalog.read_mo(b"\x00" * 40, "ui.mo"))


def test_strip_accelerators():
    assert gettext_catalog.strip_accelerators("~File") == "File"
    assert gettext_catalog.strip_accelerators("Save _As") == "Save As"
    assert gettext_catalog.strip_accelerators("Sa_ve") == "Save"
    assert gettext_catalog.strip_accelerators("File__name stays") == "File__name stays"
