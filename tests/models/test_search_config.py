"""`models.search_config`: the paper's search settings (section 6.1), one frozen value every tool
takes its defaults from."""

import dataclasses

import pytest

from models.search_config import DEFAULT_SEARCH, SearchConfig


def test_default_search_is_the_papers():
    assert (DEFAULT_SEARCH.beam_size, DEFAULT_SEARCH.alpha, DEFAULT_SEARCH.max_extra_length) == (4, 0.6, 50)
    assert DEFAULT_SEARCH.max_input_length is None


def test_search_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        DEFAULT_SEARCH.beam_size = 1
    assert dataclasses.replace(DEFAULT_SEARCH, beam_size=1) == SearchConfig(beam_size=1)
