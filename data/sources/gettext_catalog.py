"""Translated strings from compiled gettext catalogs (`.mo` files, both byte orders), every entry
kept rather than `gettext`'s one per msgid."""

import re
import struct
from collections.abc import Iterator

from common.errors import UserError

LIBREOFFICE_RESOURCE_DIR = "usr/lib/libreoffice/program/resource"

_MAGIC_LITTLE = 0x950412DE
_MAGIC_BIG = 0xDE120495

# LibreOffice marks keyboard accelerators with `~` (.hrc strings) and `_` (.ui strings): "~File",
# "Save _As". They are not part of the text a translation model should learn.
_ACCELERATOR = re.compile(r"~|(?<![_\w])_(?=\w)|(?<=[^\W_])_(?=[^\W_])")


class CatalogError(UserError, ValueError):
    """A `.mo` file that cannot be parsed."""


def read_mo(blob: bytes, name: str = "<mo>") -> Iterator[tuple[str, str]]:
    """Yields `(msgid, msgstr)` of every translated entry (no header, no context; plurals' singular).
    Raises `CatalogError` on a wrong magic number or table offset (names `name`)."""
    if len(blob) < 20:
        raise CatalogError(f"{name}: too short for a .mo file ({len(blob)} bytes).")
    (magic,) = struct.unpack("<I", blob[:4])
    if magic == _MAGIC_LITTLE:
        order = "<"
    elif magic == _MAGIC_BIG:
        order = ">"
    else:
        raise CatalogError(f"{name}: not a .mo file (magic {magic:#x}).")
    _, count, ids_offset, strs_offset = struct.unpack(order + "4I", blob[4:20])

    def entry(table_offset: int, index: int) -> bytes:
        length, offset = struct.unpack_from(order + "2I", blob, table_offset + 8 * index)
        if offset + length > len(blob):
            raise CatalogError(f"{name}: string {index} points past the end of the file.")
        return blob[offset : offset + length]

    for index in range(count):
        msgid = entry(ids_offset, index)
        msgstr = entry(strs_offset, index)
        if not msgid or not msgstr:
            continue
        msgid = msgid.split(b"\x04", 1)[-1].split(b"\x00", 1)[0]
        msgstr = msgstr.split(b"\x00", 1)[0]
        if msgid and msgstr:
            yield msgid.decode("utf-8", "strict"), msgstr.decode("utf-8", "strict")


def strip_accelerators(text: str) -> str:
    """Removes LibreOffice's accelerator marks: `~File` -> `File`, `Save _As` -> `Save As`."""
    return _ACCELERATOR.sub("", text)
