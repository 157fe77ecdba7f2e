"""training/config.py: each default of a config field with a flag is written once, in the field."""

import dataclasses
import inspect
import re
import subprocess
import sys

import pytest

from data.vocabulary_size import DEFAULT_VOCAB_SIZE
from tests.helpers import REPO_ROOT
from training.config import DataConfig, TrainConfig, eval_sentences_from_flag, flag_default, flag_fields, from_flag


@pytest.mark.parametrize("config_class", [DataConfig, TrainConfig])
def test_a_flag_default_read_back_is_the_field_default(config_class):
    for field, flag in flag_fields(config_class):
        assert from_flag(flag, flag_default(field, flag)) == field.default, field.name
        assert flag.help and flag.kind in ("boolean", "enum", "float", "integer", "list", "string"), field.name
        if flag.kind == "enum":
            assert field.default in flag.arguments["enum_values"], field.name


def test_the_fields_without_a_flag_are_those_train_py_translates():
    flagged = {field.name for config_class in (DataConfig, TrainConfig) for field, _ in flag_fields(config_class)}
    plain = {field.name for config_class in (DataConfig, TrainConfig) for field in dataclasses.fields(config_class)}
    assert plain - flagged == {"train_files", "train_weights", "source_weights", "dev_files", "test_files"}


def test_eval_sentences_reads_a_number_or_all():
    assert eval_sentences_from_flag("all") is None and eval_sentences_from_flag(" ALL ") is None
    assert eval_sentences_from_flag("0") == 0 and eval_sentences_from_flag("200") == 200


def test_the_vocabulary_size_default_is_one_constant():
    from data.tokenizer import train_sentencepiece

    assert DataConfig().vocab_size == DEFAULT_VOCAB_SIZE
    assert inspect.signature(train_sentencepiece).parameters["vocab_size"].default == DEFAULT_VOCAB_SIZE


def _help_blocks(text):
    """`{flag name: its help text}` of an absl --helpfull listing."""
    blocks = re.findall(r"^  --(?:\[no\])?(\w+): (.*?)(?=^  --|^\S|\Z)", text, flags=re.MULTILINE | re.DOTALL)
    return {name: " ".join(block.split()) for name, block in blocks}


def test_train_py_help_shows_each_field_help_and_default():
    result = subprocess.run(
        [sys.executable, "train.py", "--helpfull"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    blocks = _help_blocks(result.stdout + result.stderr)
    for config_class in (DataConfig, TrainConfig):
        for field, flag in flag_fields(config_class):
            block, help_text = blocks[field.name], " ".join(flag.help.split())
            assert help_text in block, field.name
            default = flag_default(field, flag)
            if default is None:
                assert "(default:" not in block.replace(help_text, ""), field.name
            else:
                shown = str(default).lower() if isinstance(default, bool) else str(default)
                shown = ",".join(default) if isinstance(default, list) else shown
                assert f"(default: '{shown}')" in block, field.name


def test_subword_sampling_refusals_name_the_flags():
    from training.config import subword_refusal

    assert subword_refusal(TrainConfig()) is None and subword_refusal(TrainConfig(subword_alpha=0.1)) is None
    assert subword_refusal(TrainConfig(subword_alpha=0.5, subword_nbest=8), "unigram") is None
    refusals = {
        "--subword_nbest=8 needs --subword_alpha": TrainConfig(subword_nbest=8),
        "--subword_nbest=8 picks among a unigram vocabulary's segmentations": TrainConfig(
            subword_alpha=0.1, subword_nbest=8
        ),
        "--cache_tokenized keeps the first pass's": TrainConfig(subword_alpha=0.1, cache_tokenized=True),
        "--subword_alpha=2 must lie in (0, 1]": TrainConfig(subword_alpha=2),
    }
    for message, train in refusals.items():
        assert message in subword_refusal(train), message
