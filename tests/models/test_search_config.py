"""`models.search_config`: the paper's search settings (section 6.1), one frozen value every tool
takes its defaults from."""

import dataclasses
import inspect

import pytest

from common.errors import UserError
from models.search_config import DEFAULT_SEARCH, Sampling, SearchConfig, SearchConfigError, check_setting
from models.translation import translate_ids


def test_default_search_is_the_papers():
    assert (DEFAULT_SEARCH.beam_size, DEFAULT_SEARCH.alpha, DEFAULT_SEARCH.max_extra_length) == (4, 0.6, 50)
    assert DEFAULT_SEARCH.max_input_length is None


def test_search_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_SEARCH.beam_size = 1
    assert dataclasses.replace(DEFAULT_SEARCH, beam_size=1) == SearchConfig(beam_size=1)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(beam_size=0), "beam_size must be >= 1 (an int), received 0"),
        (dict(beam_size=2.0), "beam_size must be >= 1 (an int), received 2.0"),
        (dict(beam_size=True), "beam_size must be >= 1 (an int), received True"),
        (dict(alpha=-0.5), "alpha must be >= 0 (a number), received -0.5"),
        (dict(alpha=float("nan")), "alpha must be >= 0 (a number), received nan"),
        (dict(alpha="0.6"), "alpha must be >= 0 (a number), received '0.6'"),
        (dict(max_extra_length=0), "max_extra_length must be >= 1 (an int), received 0"),
        (dict(min_length_ratio=-1), "min_length_ratio must be >= 0 (a number), received -1"),
        (dict(max_input_length=1), "max_input_length must be >= 2 (an int), received 1"),
        (dict(no_repeat_ngram_size=-1), "no_repeat_ngram_size must be >= 0 (an int), received -1"),
        (dict(no_repeat_ngram_size=2.0), "no_repeat_ngram_size must be >= 0 (an int), received 2.0"),
        (dict(stopping="early"), "stopping must be one of 'exact', 'heuristic' (a string), received 'early'"),
        (dict(stopping=1), "stopping must be one of 'exact', 'heuristic' (a string), received 1"),
    ],
)
def test_each_bad_setting_is_one_clear_error_naming_it(settings, message):
    with pytest.raises(SearchConfigError) as raised:
        SearchConfig(**settings)
    assert str(raised.value) == message
    ((name, value),) = settings.items()
    assert (raised.value.name, raised.value.value) == (name, value) or value != value  # NaN
    assert isinstance(raised.value, UserError) and isinstance(raised.value, ValueError)


def test_settings_are_stored_as_their_type():
    search = SearchConfig(alpha=1, min_length_ratio=0)
    assert (type(search.alpha), type(search.min_length_ratio)) == (float, float)
    assert search == SearchConfig(alpha=1.0, min_length_ratio=0.0)
    assert check_setting("max_input_length", None) is None


def test_override_replaces_the_settings_given_and_checks_them():
    search = SearchConfig(beam_size=2, alpha=1.0)
    assert search.override(alpha=None, max_extra_length=10) == SearchConfig(beam_size=2, alpha=1.0, max_extra_length=10)
    assert search.override() is not None and search.override() == search
    with pytest.raises(SearchConfigError, match="beam_size must be >= 1"):
        search.override(beam_size=0)
    with pytest.raises(TypeError):
        search.override(length_penalty=1.0)


def test_translate_ids_takes_the_value_not_its_settings_one_by_one():
    accepted = inspect.signature(translate_ids).parameters
    assert accepted["search"].default is DEFAULT_SEARCH
    assert not set(accepted) & {field.name for field in dataclasses.fields(SearchConfig)}
    search = SearchConfig(beam_size=2, min_length_ratio=0.5, max_input_length=16)
    assert search.search_settings() == dict(
        beam_size=2,
        alpha=0.6,
        max_extra_length=50,
        min_length_ratio=0.5,
        max_input_length=16,
        no_repeat_ngram_size=0,
        shortlist=0,
        stopping="exact",
    )
    assert (DEFAULT_SEARCH.no_repeat_ngram_size, SearchConfig(no_repeat_ngram_size=1).no_repeat_ngram_size) == (0, 1)


@pytest.mark.parametrize(
    "settings, message",
    [
        (dict(top_k=-1), "top_k must be >= 0 (an int), received -1"),
        (dict(temperature=0), "temperature must be > 0 (a number), received 0"),
        (dict(top_p=1.5), "top_p must be in (0, 1] (a number), received 1.5"),
        (dict(top_p=0.0), "top_p must be in (0, 1] (a number), received 0.0"),
        (dict(seed=1.0), "seed must be an int, received 1.0"),
    ],
)
def test_sampling_settings_are_checked_as_the_search_settings_are(settings, message):
    with pytest.raises(SearchConfigError) as raised:
        Sampling(**settings)
    assert str(raised.value) == message
    assert SearchConfig(sampling=Sampling(top_p=1, temperature=2)).sampling == Sampling(top_p=1.0, temperature=2.0)
    with pytest.raises(TypeError, match="sampling must be a Sampling"):
        SearchConfig(sampling=dict(top_p=0.9))
