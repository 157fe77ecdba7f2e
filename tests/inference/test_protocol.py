"""`inference.protocol.TextTranslator`: both translators declare it and match its signatures."""

import inspect

import pytest

from inference.protocol import PairScore, Sampling, TextTranslator
from inference.saved_model_translator import SavedModelTranslator
from inference.translator import Translator
from models.search_config import SearchConfig

METHODS = [
    name for name, member in vars(TextTranslator).items() if inspect.isfunction(member) and not name.startswith("_")
]


def test_the_protocol_has_translate_translate_lines_and_score():
    assert sorted(METHODS) == ["score", "translate", "translate_lines"]


@pytest.mark.parametrize("translator_class", [Translator, SavedModelTranslator])
def test_each_translator_declares_the_protocol(translator_class):
    assert TextTranslator in translator_class.__mro__


@pytest.mark.parametrize("translator_class", [Translator, SavedModelTranslator])
@pytest.mark.parametrize("method", METHODS)
def test_each_translator_has_the_protocols_signature(translator_class, method):
    expected = inspect.signature(getattr(TextTranslator, method))
    assert inspect.signature(getattr(translator_class, method)) == expected


def test_a_translator_has_the_protocols_attributes():
    translator = Translator(model=None, tokenizer=None, search=SearchConfig(beam_size=2, max_input_length=16))
    for name in TextTranslator.__annotations__:
        assert hasattr(translator, name), name
    assert translator.search == SearchConfig(beam_size=2, max_input_length=16)
    assert translator.max_input_length == 16


def test_the_value_types_are_shared():
    from inference import translator

    assert (translator.PairScore, translator.Sampling) == (PairScore, Sampling)
