"""The languages of Debian 12's LibreOffice translations, the table behind the deb-en-XX corpora:
`debian_languages.json` pins each language's packages and counts its corpus's pairs; a maintainer
rewrites it with `python -m tools.debian_languages_table` (docs/data.md, "Pins")."""

import dataclasses
import json
import os

from data.sources import deb_packages

TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "debian_languages.json")


@dataclasses.dataclass(frozen=True)
class Language:
    """One language of the table.

    Attributes:
        code: the package suffix with `-` written `_` ("pt_br"), so "SRC-TGT" splits on its hyphen.
        help: the help-pages package, or None (interface strings only).
        help_dir: below `usr/share/libreoffice/help/` ("zh-CN").
        counts: {"train", "dev", "test", "sources": {source: pairs}}, {} before a build.
    """

    code: str
    name: str
    l10n: deb_packages.PinnedDeb
    help: deb_packages.PinnedDeb | None
    help_dir: str | None
    counts: dict

    @property
    def corpus(self) -> str:
        return f"deb-en-{self.code}"


def _pin(entry: dict) -> deb_packages.PinnedDeb:
    return deb_packages.PinnedDeb(**entry)


def load_table(path: str = TABLE_FILE) -> tuple[str, deb_packages.PinnedDeb, dict[str, Language], dict]:
    """`(LibreOffice version, English help pin, {code: Language}, {corpus: counts})`."""
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    languages = {
        code: Language(
            code=code,
            name=entry["name"],
            l10n=_pin(entry["l10n"]),
            help=_pin(entry["help"]) if entry.get("help") else None,
            help_dir=entry.get("help_dir"),
            counts=entry.get("counts", {}),
        )
        for code, entry in table["languages"].items()
    }
    return table["version"], _pin(table["english_help"]), languages, table.get("other_corpora", {})
