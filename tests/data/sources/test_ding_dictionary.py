from data.sources import ding_dictionary

# Real lines of usr/share/trans/de-en (trans-de-en 1.9).
_ENTRY_WITH_EXAMPLES = (
    "Ablösung {f} (Wache) [mil.] | Ich muss warten, bis meine Ablösung kommt. | "
    "Sie verbrachte ihre Jugend in einem kleinen Dorf. :: relief | "
    "I have to wait until my relief comes/arrives. | She spent her teens in a small village."
)


def test_parse_line_keeps_sentence_sub_entries_only():
    # The first sub-entry is a word; the second has a slash alternative; the third is a sentence.
    assert ding_dictionary.parse_line(_ENTRY_WITH_EXAMPLES) == [
        ("She spent her teens in a small village.", "Sie verbrachte ihre Jugend in einem kleinen Dorf.")
    ]


def test_parse_line_takes_first_synonym_and_strips_annotations():
    line = (
        "Die Zukunft der Tagesklinik ist mit einem (großen) Fragezeichen versehen. [übtr.] :: "
        "There’s a question mark (hanging) over the day-care hospital’s future.; "
        "A big question mark hangs over the day-care hospital’s future."
    )
    assert ding_dictionary.parse_line(line) == [
        (
            "There’s a question mark (hanging) over the day-care hospital’s future.",
            "Die Zukunft der Tagesklinik ist mit einem (großen) Fragezeichen versehen.",
        )
    ]


def test_parse_line_rejects_non_sentences():
    assert ding_dictionary.parse_line("# Version :: devel 2023-01-30") == []
    assert ding_dictionary.parse_line("Aalfang {m} :: eel fishing") == []
    assert ding_dictionary.parse_line("Peng! :: Bang!") == []  # fewer than 4 words
    assert (
        ding_dictionary.parse_line("jdm. etw. vorlesen. Er liest es vor. :: to read sth. to sb. He reads it out.") == []
    )
    assert ding_dictionary.parse_line("Ein Satz hier. | Zwei :: One sentence here.") == []  # uneven


def test_is_sentence():
    assert ding_dictionary.is_sentence("I think so, too.")
    assert not ding_dictionary.is_sentence("i think so, too.")
    assert not ding_dictionary.is_sentence("I think so, too")
    assert not ding_dictionary.is_sentence("Give sth. to me now.")
