import glob
import os

from data.sources import help_markup
from tests.data.helpers import FIXTURES


def _pages(language):
    root = os.path.join(FIXTURES, "libreoffice_help", language, "text")
    paths = glob.glob(os.path.join(root, "**", "*.html"), recursive=True)
    return {os.path.relpath(path, root): open(path, encoding="utf-8").read() for path in paths}


_ALL_TEST = lambda text: "test"  # noqa: E731


def test_the_fixture_pages_pairs_keep_their_markup_as_inline_tags():
    pairs = {key: (en, de) for key, en, de in help_markup.markup_pairs(_pages("en-US"), _pages("de"), _ALL_TEST)}
    assert pairs["shared/autokorr/06000000.html#par_id3146060"] == (
        'Your text was corrected by <a href="text/shared/01/06040000.html">Autocorrect</a> so that double quotation '
        'marks were replaced by <a href="text/shared/01/06040400.html">typographical quotation marks</a>.',
        '<a href="text/shared/01/06040000.html">AutoKorrektur</a> hat doppelte Anführungszeichen in Ihrem Text durch '
        '<a href="text/shared/01/06040400.html">typografische Anführungszeichen</a> ersetzt.',
    )
    # The avis span is no markup; the Calc-only alternative is dropped, as the corpus drops it.
    assert pairs["shared/02/20040000.html#par_id3152363"][0] == (
        "Displays the current insert mode. You can toggle between <b>INSRT</b> = insert and <b>OVER</b> = overwrite."
    )
    en, de = pairs["shared/02/20040000.html#par_id3154422"]
    assert en.startswith("Click in the field to toggle the modes (except in the $[officename] Basic IDE, where only")
    assert help_markup.markup_of(de) == {"<b>": 2, "</b>": 2, "$[officename]": 1}
    assert help_markup.plain(en) == (
        "Click in the field to toggle the modes (except in the LibreOffice Basic IDE, where only the Insert mode is "
        "active). If the cursor is positioned in a text document, you may also use the Insert key (if available on "
        "your keyboard) to toggle the modes."
    )
    # Paragraphs without markup, or not in the test split, are not pairs of the set.
    assert "shared/02/20040000.html#par_id3148539" not in pairs
    assert help_markup.markup_pairs(_pages("en-US"), _pages("de"), lambda text: "train") == []


def test_switches_show_their_default_and_sides_with_other_tags_are_left_out():
    page = (
        '<p id="par_id1">Press <span class="switchinline"><span hidden="true" id="MACx" class="MAC">'
        '<span class="keycode">Command</span></span><span hidden="true" id="defaultx">'
        '<span class="keycode">Ctrl</span></span></span><span class="keycode">+N</span><img src="i.svg">.</p>'
        '<p id="par_id2">Type <span class="literal">a &lt; b</span>.</p>'
        '<p id="par_id3">One <span class="emph">two</span>.<br>Three.</p>'
    )
    german = page.replace("Press", "Drücken Sie").replace("Type", "Tippen Sie").replace("One", "Eins")
    pairs = help_markup.markup_pairs({"a.html": page}, {"a.html": german.replace("<br>", " ")}, _ALL_TEST)
    assert pairs == [
        (
            "a.html#par_id1",
            'Press <span class="switchinline"><span class="keycode">Ctrl</span></span><span class="keycode">+N</span>.',
            'Drücken Sie <span class="switchinline"><span class="keycode">Ctrl</span></span>'
            '<span class="keycode">+N</span>.',
        )
    ]  # par_id2: a literal bracket; par_id3: a <br/> on one side only.


def test_a_switch_shown_with_its_default_is_kept_only_when_its_text_was_not_trained_on():
    page = (
        '<p id="par_id1">Hold <span class="switchinline"><span hidden="true" id="defaultx">Ctrl</span></span> down.</p>'
    )
    german = page.replace("Hold", "Halten Sie").replace("down", "gedrückt")
    split = lambda text: "train" if "Ctrl" in text else "test"  # noqa: E731 (the corpus's text has no Ctrl)
    pages = ({"a.html": page}, {"a.html": german})
    assert help_markup.markup_pairs(*pages, split) == []
    assert help_markup.markup_pairs(*pages, split, trained=lambda text: text == "Hold Ctrl down.") == []
    assert help_markup.markup_pairs(*pages, split, trained=lambda text: False) == [
        (
            "a.html#par_id1",
            'Hold <span class="switchinline">Ctrl</span> down.',
            'Halten Sie <span class="switchinline">Ctrl</span> gedrückt.',
        )
    ]
