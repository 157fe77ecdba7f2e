"""Fixtures for tests/data: a small generated parallel corpus and a tokenizer trained on it (the
real deb-en-de corpus is built once per session by tests/conftest.py)."""

import pytest

from data import tokenizer
from data.sources import parallel_files
from tests.data.helpers import make_pairs


@pytest.fixture(scope="session")
def small_tsv(tmp_path_factory) -> str:
    """A 600-pair en-de TSV of generated sentences."""
    path = str(tmp_path_factory.mktemp("small") / "pairs.tsv")
    parallel_files.write_tsv(path, make_pairs(600))
    return path


@pytest.fixture(scope="session")
def small_tokenizer(small_tsv, tmp_path_factory) -> tokenizer.Tokenizer:
    """A 400-piece BPE model trained on `small_tsv`."""
    prefix = str(tmp_path_factory.mktemp("spm") / "small")
    return tokenizer.Tokenizer.from_file(tokenizer.train_sentencepiece(small_tsv, prefix, vocab_size=400))
