"""The languages of Debian 12's LibreOffice translations: the table behind the deb-en-XX corpora.

`debian_languages.json`, beside this module, lists for each language its `libreoffice-l10n-*`
package (interface strings) and, where Debian ships one, its `libreoffice-help-*` package (help
pages): version, pool path, size and SHA256 as bookworm's Packages index lists them, the directory
its help pages sit in, and the pair counts of the corpus built from them. Every package is at the
LibreOffice version the deb-en-de corpus reads, so all pairs share one English side. A maintainer
rewrites the table with `python -m tools.debian_languages_table` (docs/data.md, "Pins").
"""

import dataclasses
import json
import os

from data.sources import deb_packages

TABLE_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "debian_languages.json")


@dataclasses.dataclass(frozen=True)
class Language:
    """One language of the table.

    Attributes:
        code: the language code in corpus names and directions: the package suffix with `-` written
            `_` ("fr", "pt_br", "zh_cn"), so "SRC-TGT" splits on its one hyphen.
        name: English name from the package description ("French", "Chinese simplified").
        l10n: the interface-strings package.
        help: the help-pages package, or None where Debian ships none (interface strings only).
        help_dir: the directory below `usr/share/libreoffice/help/` holding the help pages ("zh-CN").
        counts: pairs of the built corpus: {"train", "dev", "test", "sources": {source: pairs kept}},
            or {} before the table's command has built it.
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
    """`(LibreOffice version, English help pin, {code: Language}, {corpus: counts} of the other
    built-in corpora)`."""
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
