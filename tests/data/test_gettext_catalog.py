import struct

import pytest

from data import gettext_catalog


def _mo(entries: list[tuple[bytes, bytes]]) -> bytes:
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


def test_read_mo_removes_context_and_skips_header_and_untranslated():
    blob = _mo(
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
