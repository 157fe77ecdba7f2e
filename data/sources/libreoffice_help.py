"""Aligned paragraphs from the LibreOffice help pages in two languages, joined exactly on (page path
below `text/`, paragraph `id`), ids being shared by every language's page: no sentence alignment is
guessed."""

import html.parser
import re
from collections.abc import Iterable, Iterator

HELP_ROOT = "usr/share/libreoffice/help"

# Paragraph and heading ids of the XHP sources; other ids (switches, bookmarks) are not text units.
_TEXT_ID = re.compile(r"^(par|hd)_id\w+$")
_VOID_TAGS = frozenset("area base br col embed hr img input link meta param source track wbr".split())
# Text of these elements is not prose: scripts, and alternatives shown only in one application
# (`hidden` spans of a switch, which would otherwise be concatenated with the default text).
_SKIPPED_TAGS = frozenset(["script", "style", "noscript"])


class _ParagraphParser(html.parser.HTMLParser):
    """Collects the text of every element whose id is a paragraph or heading id."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: dict[str, str] = {}
        self._order: list[str] = []
        # One entry per open element: (tag, paragraph id it opened or None, skips its text).
        self._stack: list[tuple[str, str | None, bool]] = []
        self._buffers: dict[str, list[str]] = {}

    def _skipping(self) -> bool:
        return any(skip for _, _, skip in self._stack)

    def handle_starttag(self, tag, attrs):
        if tag in _VOID_TAGS:
            if tag == "br":
                self.handle_data(" ")
            return
        attributes = dict(attrs)
        element_id = attributes.get("id") or ""
        opened = None
        if _TEXT_ID.match(element_id) and element_id not in self._buffers:
            opened = element_id
            self._buffers[element_id] = []
            self._order.append(element_id)
        skip = tag in _SKIPPED_TAGS or "hidden" in attributes
        self._stack.append((tag, opened, skip))

    def handle_startendtag(self, tag, attrs):
        if tag == "br":
            self.handle_data(" ")

    def handle_endtag(self, tag):
        # Close up to the matching open tag; an end tag with no open match is ignored.
        for depth in range(len(self._stack) - 1, -1, -1):
            if self._stack[depth][0] == tag:
                for _, opened, _ in self._stack[depth:]:
                    if opened is not None:
                        self.paragraphs[opened] = "".join(self._buffers[opened])
                del self._stack[depth:]
                return

    def handle_data(self, data):
        if self._skipping():
            return
        for _, opened, _ in self._stack:
            if opened is not None:
                self._buffers[opened].append(data)

    def close(self):
        super().close()
        for _, opened, _ in self._stack:
            if opened is not None:
                self.paragraphs[opened] = "".join(self._buffers[opened])
        self._stack = []


def extract_paragraphs(page_html: str) -> dict[str, str]:
    """`{id: text}` for one help page's paragraphs and headings, in page order, markup dropped,
    hidden alternatives and scripts skipped; an id's first occurrence wins."""
    parser = _ParagraphParser()
    parser.feed(page_html)
    parser.close()
    return {key: parser.paragraphs[key] for key in parser._order if key in parser.paragraphs}


def help_page_key(path: str, language: str) -> str | None:
    """Returns the page path below `<lang>/text/` for a help file of `language`, else None."""
    prefix = f"{HELP_ROOT}/{language}/text/"
    if path.startswith(prefix) and path.endswith(".html"):
        return path[len(prefix) :]
    return None


def align_pages(source_pages: dict[str, str], target_pages: dict[str, str]) -> Iterator[tuple[str, str, str]]:
    """Yields `(page/id, source_text, target_text)` for ids in the same page of both, stably ordered."""
    for page in sorted(source_pages.keys() & target_pages.keys()):
        source = extract_paragraphs(source_pages[page])
        target = extract_paragraphs(target_pages[page])
        for key, text in source.items():
            if key in target:
                yield f"{page}#{key}", text, target[key]


def collect_pages(files: Iterable[tuple[str, bytes]], language: str) -> dict[str, str]:
    """Maps page key -> HTML for the help files of `language` among `(path, bytes)` pairs."""
    pages = {}
    for path, blob in files:
        key = help_page_key(path, language)
        if key is not None:
            pages[key] = blob.decode("utf-8")
    return pages
