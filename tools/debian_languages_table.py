"""Rewrites data/sources/debian_languages.json, the table behind the deb-en-XX corpora: a maintainer's
command, run by hand when Debian updates LibreOffice; the product only reads the table.

    python -m tools.debian_languages_table --deb_dir=cache/debs --cache_dir=/tmp/all-corpora

It reads the pins from `apt-cache show` (bookworm's package lists), fetches the packages, builds
every corpus and records its counts, so `python -m data.prepare --list` can show them without a
build.
"""

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys

from common import json_files
from data.sources import builtin_corpora, deb_packages, libreoffice_help
from data.sources.debian_languages import TABLE_FILE

ENGLISH_HELP_PACKAGE = "libreoffice-help-en-us"
HELP_PREFIX = "libreoffice-help-"
L10N_PREFIX = "libreoffice-l10n-"

# Packages of the l10n family that are not a foreign language: English variants (their pairs would
# be copies of the English side) and a metapackage that only depends on the Indic packages.
NOT_A_LANGUAGE = {
    "en-gb": "British English: a variant of the English side",
    "en-za": "South African English: a variant of the English side",
    "in": "a metapackage of the Indic language packages, with no strings of its own",
    "za": "a metapackage of the South African language packages, with no strings of its own",
}


def code_of(suffix: str) -> str:
    """The language code of a package suffix ("pt-br" -> "pt_br")."""
    return suffix.replace("-", "_")


def parse_packages_index(text: str) -> dict[tuple[str, str], deb_packages.PinnedDeb]:
    """`{(package, version): PinnedDeb}` of the stanzas of a Packages index (or `apt-cache show`)."""
    pins = {}
    for stanza in re.split(r"\n\s*\n", text):
        fields = dict(re.findall(r"^([A-Za-z0-9-]+): ?(.*)$", stanza, flags=re.MULTILINE))
        if not {"Package", "Version", "Filename", "SHA256", "Size"} <= fields.keys():
            continue
        pins[fields["Package"], fields["Version"]] = deb_packages.PinnedDeb(
            package=fields["Package"],
            version=fields["Version"],
            architecture=fields.get("Architecture", "all"),
            pool_path=fields["Filename"],
            sha256=fields["SHA256"],
            size_bytes=int(fields["Size"]),
        )
    return pins


def language_name(description: str) -> str:
    """The language of an l10n package description ("... -- Chinese_simplified language package")."""
    match = re.search(r"--\s*(.+?)\s+language package", description)
    return match.group(1).replace("_", " ") if match else description


def help_directory(help_deb: str) -> str | None:
    """The language directory of a help package's pages (`usr/share/libreoffice/help/<dir>/text`), or
    None for a package without pages (Debian 12's libreoffice-help-sk holds only its docs)."""
    pattern = re.compile(re.escape(libreoffice_help.HELP_ROOT) + r"/([^/]+)/text/")
    for path, _ in deb_packages.iter_deb_files(help_deb, lambda p: pattern.match(p) is not None):
        return pattern.match(path).group(1)
    return None


def _apt_cache(*args: str) -> str:
    return subprocess.run(["apt-cache", *args], capture_output=True, text=True, check=True).stdout


def pinned_table(version: str, deb_dir: str) -> dict:
    """The table's pins for `version`, from apt's package lists; fetches the help packages into
    `deb_dir` to find their page directories."""
    names = _apt_cache("pkgnames", "libreoffice-").split()
    helps = sorted(n for n in names if n.startswith(HELP_PREFIX) and n != "libreoffice-help-common")
    l10ns = sorted(n for n in names if n.startswith(L10N_PREFIX))
    pins = parse_packages_index(_apt_cache("show", *helps, *l10ns))
    descriptions = dict(re.findall(r"^Package: (\S+)\n(?:.+\n)*?Description: (.+)$", _apt_cache("show", *l10ns), re.M))
    missing = [n for n in helps + l10ns if (n, version) not in pins]
    if missing:
        raise SystemExit(f"apt's package lists have no {version} of {', '.join(missing)}")
    debs = deb_packages.fetch_debs(helps, deb_dir, pinned={n: pins[n, version] for n in helps})
    languages = {}
    for l10n in l10ns:
        suffix = l10n[len(L10N_PREFIX) :]
        if suffix in NOT_A_LANGUAGE:
            continue
        help_package = HELP_PREFIX + suffix
        entry = {"name": language_name(descriptions[l10n]), "l10n": dataclasses.asdict(pins[l10n, version])}
        help_dir = help_directory(debs[help_package]) if help_package in helps else None
        if help_dir is not None:
            entry["help"] = dataclasses.asdict(pins[help_package, version])
            entry["help_dir"] = help_dir
        languages[code_of(suffix)] = entry
    return {
        "release": "Debian 12 (bookworm)",
        "version": version,
        "english_help": dataclasses.asdict(pins[ENGLISH_HELP_PACKAGE, version]),
        "not_a_language": NOT_A_LANGUAGE,
        "languages": languages,
    }


def corpus_counts(manifest: dict) -> dict:
    """The counts the table keeps of a built corpus's manifest."""
    counts = {split: manifest["splits"][split] for split in ("train", "dev", "test")}
    counts["sources"] = {source: stats["kept"] for source, stats in manifest["sources"].items()}
    return counts


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--deb_dir", required=True, help="directory with (or to receive) the .deb files")
    parser.add_argument("--cache_dir", required=True, help="where every corpus is built to count its pairs")
    parser.add_argument("--version", default=None, help="the LibreOffice version (default: deb-en-de's)")
    parser.add_argument("--only", default=None, help="comma-separated codes to build (default: all)")
    args = parser.parse_args(argv)
    version = args.version or builtin_corpora.LIBREOFFICE_VERSION
    table = pinned_table(version, args.deb_dir)
    if os.path.exists(TABLE_FILE):  # keep the counts of languages not rebuilt
        with open(TABLE_FILE, encoding="utf-8") as f:
            previous = json.load(f)
        for code, entry in table["languages"].items():
            old = previous["languages"].get(code, {})
            if old.get("l10n") == entry["l10n"] and old.get("help") == entry.get("help"):
                entry["counts"] = old.get("counts", {})
        table["other_corpora"] = previous.get("other_corpora", {})
    json_files.write_json_atomically(TABLE_FILE, table)
    builtin_corpora.reload_languages()
    only = set(args.only.split(",")) if args.only else set(table["languages"])
    for code in sorted(only):
        name = f"deb-en-{code}"
        paths = builtin_corpora.prepare_corpus(name, args.cache_dir, args.deb_dir)
        table["languages"][code]["counts"] = corpus_counts(paths.load_manifest())
        print(name, table["languages"][code]["counts"], file=sys.stderr, flush=True)
        json_files.write_json_atomically(TABLE_FILE, table)
    for name in ("tatoeba-en-es",):
        if args.only is None:
            paths = builtin_corpora.prepare_corpus(name, args.cache_dir, args.deb_dir)
            table.setdefault("other_corpora", {})[name] = corpus_counts(paths.load_manifest())
    json_files.write_json_atomically(TABLE_FILE, table)


if __name__ == "__main__":
    main()
