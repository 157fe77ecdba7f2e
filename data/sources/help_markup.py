"""A test set of LibreOffice help paragraphs with their inline markup kept, for measuring markup
through translation (benchmarks/markup.py). The pairs are joined on (page, paragraph id) as the
corpus's (`libreoffice_help.align_pages`), and a pair is kept only where the corpus puts that
paragraph in its test split and no training pair has its text (`markup_pairs`). The help pages'
markup becomes the inline tags `inference.markup` handles:

- `<span class="emph">` -> `<b>`; `<a href="LANG/text/...">` -> `<a href="text/...">` (the language
  left out, so that both sides link alike); `<br>` -> `<br/>`;
- item spans (menuitem, literal, input, keycode, widget, productname, ...) -> `<span class="...">`;
- a `switchinline` -> `<span class="switchinline">` around its default alternative (what the page
  shows outside the applications and systems that have their own);
- "LibreOffice" -> `$[officename]`, the variable the help's sources write for it;
- other elements (the `avis` span around a paragraph, name anchors, images) are left out, their
  text kept, and alternatives of one application or system dropped, as the corpus drops them.
"""

import collections
import html.parser
import re
from collections.abc import Callable

from data.sources import cleaning, deb_packages, libreoffice_help

OFFICENAME = "$[officename]"
_PRODUCT = re.compile(r"LibreOffice(?![A-Za-z])")
# Span classes that stand for no inline markup: the extended-help wrapper of a whole paragraph, and
# classes of no meaning to a reader.
_TRANSPARENT_CLASSES = frozenset(["avis", "", None])
_SWITCH = "switchinline"
_LANGUAGE_PREFIX = re.compile(r"^[A-Za-z]{2,3}(?:-[A-Za-z0-9]+)?/(?=text/)")


class _MarkupParser(html.parser.HTMLParser):
    """Collects each paragraph's text with its inline markup as tags (`paragraphs`, `{id: text}`)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.paragraphs: dict[str, str] = {}
        self._order: list[str] = []
        # One entry per open element: (tag, paragraph id it opened or None, skips its text, its
        # closing inline tag, whether it is a switch).
        self._stack: list[tuple[str, str | None, bool, str, bool]] = []
        self._buffers: dict[str, list[str]] = {}

    def _emit(self, text: str) -> None:
        if any(entry[2] for entry in self._stack):
            return
        for _, opened, *_ in self._stack:
            if opened is not None:
                self._buffers[opened].append(text)

    def handle_starttag(self, tag, attrs):
        if tag in libreoffice_help._VOID_TAGS:
            if tag == "br":
                self._emit("<br/>")
            return
        attributes = dict(attrs)
        element_id = attributes.get("id") or ""
        opened = None
        if libreoffice_help._TEXT_ID.match(element_id) and element_id not in self._buffers:
            opened = element_id
            self._buffers[element_id] = []
            self._order.append(element_id)
        default_case = bool(self._stack) and self._stack[-1][4] and element_id.startswith("default")
        skip = tag in libreoffice_help._SKIPPED_TAGS or ("hidden" in attributes and not default_case)
        opening, closing = ("", "") if opened or skip else _mapped(tag, attributes)
        self._emit(opening)
        self._stack.append((tag, opened, skip, closing, attributes.get("class") == _SWITCH))

    def handle_startendtag(self, tag, attrs):
        if tag == "br":
            self._emit("<br/>")

    def handle_endtag(self, tag):
        for depth in range(len(self._stack) - 1, -1, -1):
            if self._stack[depth][0] == tag:
                for _, _, _, closing, _ in reversed(self._stack[depth:]):
                    self._emit(closing)
                for _, opened, *_ in self._stack[depth:]:
                    if opened is not None:
                        self.paragraphs[opened] = "".join(self._buffers[opened])
                del self._stack[depth:]
                return

    def handle_data(self, data):
        # A literal bracket would read as markup: NUL marks the paragraph unusable (`markup_pairs`).
        self._emit(data.replace("<", "\x00").replace(">", "\x00"))

    def close(self):
        super().close()
        for _, opened, *_ in self._stack:
            if opened is not None:
                self.paragraphs[opened] = "".join(self._buffers[opened])
        self._stack = []


def _mapped(tag: str, attributes: dict) -> tuple[str, str]:
    """The opening and closing inline tags an element of the help pages becomes ("" for none)."""
    css = attributes.get("class")
    if tag == "span" and css == "emph":
        return "<b>", "</b>"
    if tag == "span" and css == _SWITCH:
        return f'<span class="{_SWITCH}">', "</span>"
    if tag == "span" and css not in _TRANSPARENT_CLASSES and "hidden" not in attributes:
        return f'<span class="{css}">', "</span>"
    if tag in ("sup", "sub"):
        return f'<span class="{tag}">', "</span>"
    if tag == "a" and attributes.get("href"):
        return f'<a href="{_LANGUAGE_PREFIX.sub("", attributes["href"])}">', "</a>"
    return "", ""


_EMPTY_PAIR = re.compile(r"<(b|span|a)(?: [^<>]*)?>(\s*)</\1>")
_TAG = re.compile(r"</?[a-z]+(?: [^<>]*)?/?>")


def marked_up(text: str) -> str:
    """A paragraph's collected text made a line: tags around nothing dropped, the product name
    made the placeholder, whitespace collapsed as the corpus's."""
    while True:
        text, count = _EMPTY_PAIR.subn(r"\2", text)
        if not count:
            break
    return " ".join(_PRODUCT.sub(OFFICENAME, text).split())


def markup_of(line: str) -> collections.Counter:
    """The tags and product-name placeholders of a line, counted."""
    return collections.Counter(_TAG.findall(line) + [OFFICENAME] * line.count(OFFICENAME))


def plain(line: str) -> str:
    """A line with its tags taken out and the placeholder written as the pages show it."""
    return " ".join(_TAG.sub("", line.replace("<br/>", " ")).replace(OFFICENAME, "LibreOffice").split())


def extract_marked_up(page_html: str) -> dict[str, str]:
    """`{id: line}` for one help page's paragraphs and headings with their markup, in page order."""
    parser = _MarkupParser()
    parser.feed(page_html)
    parser.close()
    return {key: marked_up(parser.paragraphs[key]) for key in parser._order if key in parser.paragraphs}


def markup_pairs(
    source_pages: dict[str, str],
    target_pages: dict[str, str],
    split: Callable[[str], str] = cleaning.split_of,
    trained: Callable[[str], bool] | None = None,
) -> list[tuple[str, str, str]]:
    """`(page/id, source line, target line)` of the aligned paragraphs that hold markup, the same on
    both sides, whose source as the corpus writes it falls in the test split, and whose source with
    its markup taken out (which differs where a switch shows its default) was not trained on:
    `trained(text)` says whether a normalised source is one of the corpus's training or dev pairs;
    None: it must fall in the test split too."""
    found = []
    for page in sorted(source_pages.keys() & target_pages.keys()):
        source_plain = libreoffice_help.extract_paragraphs(source_pages[page])
        target_plain = libreoffice_help.extract_paragraphs(target_pages[page])
        source, target = extract_marked_up(source_pages[page]), extract_marked_up(target_pages[page])
        for key, line in source.items():
            if key not in target or key not in target_plain or "\x00" in line + target[key]:
                continue
            corpus_source = cleaning.normalize_text(source_plain.get(key, ""))
            corpus_target = cleaning.normalize_text(target_plain[key])
            shown = cleaning.normalize_text(plain(line))
            tags = markup_of(line)
            if (
                tags
                and tags == markup_of(target[key])
                and cleaning.rejection_reason(corpus_source, corpus_target) is None
                and cleaning.rejection_reason(shown, plain(target[key])) is None
                and split(corpus_source) == "test"
                and (split(shown) == "test" if trained is None else shown == corpus_source or not trained(shown))
            ):
                found.append((f"{page}#{key}", line, target[key]))
    return found


def read_markup_pairs(
    english_deb: str, foreign_deb: str, foreign_language: str = "de", trained: Callable[[str], bool] | None = None
) -> list[tuple[str, str, str]]:
    """`markup_pairs` of two `libreoffice-help-*` packages (`foreign_language`: the directory of the
    foreign pages, as `builtin_corpora.libreoffice_help_pairs` takes it)."""
    is_html = lambda path: path.endswith(".html")  # noqa: E731
    english = libreoffice_help.collect_pages(deb_packages.iter_deb_files(english_deb, is_html), "en-US")
    foreign = libreoffice_help.collect_pages(deb_packages.iter_deb_files(foreign_deb, is_html), foreign_language)
    return markup_pairs(english, foreign, trained=trained)
