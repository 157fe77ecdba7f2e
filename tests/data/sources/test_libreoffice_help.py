import os

from data.sources import libreoffice_help
from tests.data.helpers import FIXTURES

HELP = os.path.join(FIXTURES, "libreoffice_help")


def _pages(language):
    root = os.path.join(HELP, language, "text")
    pages = {}
    for directory, _, files in os.walk(root):
        for name in files:
            path = os.path.join(directory, name)
            with open(path, encoding="utf-8") as f:
                pages[os.path.relpath(path, root)] = f.read()
    return pages


def test_extract_paragraphs_strips_markup_and_hidden_alternatives():
    paragraphs = libreoffice_help.extract_paragraphs(_pages("en-US")["shared/02/20040000.html"])
    assert list(paragraphs)[:3] == ["hd_id3149748", "par_id3152363", "par_id3154422"]
    assert paragraphs["hd_id3149748"] == "Insert Mode"
    # The Calc-only `hidden` sentence of the switch is not appended to the paragraph.
    assert paragraphs["par_id3152363"] == (
        "Displays the current insert mode. You can toggle between INSRT = insert and OVER = overwrite."
    )
    assert paragraphs["par_id3149388"] == "INSRT"
    # The footer's debug paragraphs carry no id and are not text units.
    assert not any("This page is" in text for text in paragraphs.values())


def test_align_pages_joins_on_page_and_id():
    english, german = _pages("en-US"), _pages("de")
    aligned = {key: (en, de) for key, en, de in libreoffice_help.align_pages(english, german)}
    assert len(aligned) == 3 + 9  # 06000000: 2 headings, 1 paragraph; 20040000: 1 + 2 + 2 + 4
    assert aligned["shared/02/20040000.html#par_id3148539"] == ("OVER", "ÜBER")
    assert aligned["shared/autokorr/06000000.html#hd_id3158421"] == (
        'Double quotation marks (") have been replaced',
        "Doppelte Anführungszeichen wurden ersetzt",
    )
    en, de = aligned["shared/autokorr/06000000.html#par_id3146060"]
    assert en.startswith("Your text was corrected by Autocorrect so that")
    assert de.startswith("AutoKorrektur hat doppelte Anführungszeichen in Ihrem Text")


def test_align_pages_skips_ids_and_pages_missing_on_one_side():
    english = {"a.html": '<p id="par_id1">One</p><p id="par_id2">Two</p>', "b.html": '<h1 id="hd_id9">B</h1>'}
    german = {"a.html": '<p id="par_id2">Zwei</p><p id="par_id3">Drei</p>'}
    assert list(libreoffice_help.align_pages(english, german)) == [("a.html#par_id2", "Two", "Zwei")]


def test_help_page_key():
    key = libreoffice_help.help_page_key("usr/share/libreoffice/help/de/text/swriter/main.html", "de")
    assert key == "swriter/main.html"
    assert libreoffice_help.help_page_key("usr/share/libreoffice/help/de/text/x.js", "de") is None
    assert libreoffice_help.help_page_key("usr/share/libreoffice/help/en-US/text/a.html", "de") is None
