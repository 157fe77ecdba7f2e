"""`train.py --config=RUN/config.json` (training/config_file.py): a run's config.json read back as
train.py's flags, the flags on the command line winning, and what it refuses, in this process."""

import dataclasses
import json
import os

import pytest
from absl import flags

from common.errors import refused_flags_message
from models.presets import model_config
from tests.helpers import tool_flags
from training import config as run_config
from training import config_file, train_flags


@pytest.fixture(scope="module")
def train_flag_values():
    """train.py's flags defined in absl's global FLAGS for this module's tests; flags another tool
    defined there before are set aside meanwhile and put back (`tool_flags`)."""
    with tool_flags() as flag_values:
        train_flags.define_train_flags()
        yield flag_values


def _config(flag_values, *argv):
    flag_values.unparse_flags()
    try:
        flag_values(["train.py", *argv])
        return train_flags.config_from_flags()
    finally:
        flag_values.unparse_flags()


def test_a_run_config_read_back_is_the_same_run_with_the_flags_given_winning(train_flag_values, tmp_path):
    for name in ("general.tsv", "domain.tsv", "dev.tsv"):
        (tmp_path / name).write_text("a\tb\n", encoding="utf-8")
    first = _config(
        train_flag_values,
        f"--model_dir={tmp_path / 'first'}",
        "--corpus=files",
        "--languages=en-de",
        f"--train_tsv={tmp_path / 'general.tsv'}:3,{tmp_path / 'domain.tsv'}:1",
        f"--dev_tsv={tmp_path / 'dev.tsv'}",
        "--preset=tiny",
        "--num_layers=3",
        "--eval_sentences=all",
        "--user_defined_symbols=<bt>",
        "--learning_rate_schedule=constant",
        "--learning_rate=0.001",
        "--train_steps=2000",
    )
    os.makedirs(first.model_dir)
    path = run_config.write(dataclasses.replace(first, record={"search": {"alpha": 1.0}}))
    # A flag before --config wins as one after it does.
    second = _config(
        train_flag_values, "--seed=7", f"--model_dir={tmp_path / 'second'}", f"--config={path}", "--learning_rate=0.002"
    )
    assert (second.model, second.data) == (first.model, first.data)
    assert second.train == dataclasses.replace(first.train, seed=7, learning_rate=0.002)
    assert second.record == {"search": {"alpha": 1.0}}
    assert second.model_dir == str(tmp_path / "second")


@pytest.mark.parametrize(
    "text, reason",
    [
        (None, "cannot read: No such file or directory"),
        ("{bad", "not valid JSON (Expecting property name"),
        ('{"model": {}, "extra": 1}', "unknown key 'extra'; expected model, data, train or a record"),
        ('{"data": {"colour": 1}}', "unknown key data.colour: not a field of train.py's data"),
        ('{"model": {"layer_norm_epsilon": 1e-6}}', "unknown key model.layer_norm_epsilon: not a model option with"),
        ('{"train": {"seed": "7"}}', "train.seed is '7', expected an integer"),
        ('{"train": {"cache_tokenized": 1}}', "train.cache_tokenized is 1, expected true or false"),
        ('{"data": {"train_weights": ["3"]}}', "data.train_weights is ['3'], expected a list of numbers"),
    ],
)
def test_a_config_file_is_refused_naming_the_file_and_the_key(tmp_path, text, reason):
    path = tmp_path / "config.json"
    if text is not None:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(config_file.ConfigFileError) as refused:
        config_file.flag_values(str(path))
    assert str(refused.value).startswith(f"{path}: {reason}")


def test_train_py_refuses_a_bad_file_or_value_on_one_line(train_flag_values, tmp_path):
    path = tmp_path / "config.json"
    for text, line in [
        ('{"train": {"seed": "x"}}', f"flag --config={path}: train.seed is 'x', expected an integer"),
        ('{"train": {"train_steps": 0}}', f"flag --config={path}: --train_steps=0: 0 is not a positive integer"),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(flags.Error) as refused:
            _config(train_flag_values, f"--model_dir={tmp_path}", f"--config={path}")
        assert refused_flags_message(refused.value) == line
    path.write_text(json.dumps({"train": {"learning_rate_schedule": "constant"}}), encoding="utf-8")
    with pytest.raises(flags.Error) as refused:  # The merged values go through the validators.
        _config(train_flag_values, f"--model_dir={tmp_path}", f"--config={path}")
    assert "--learning_rate_schedule=constant needs --learning_rate above 0" in refused_flags_message(refused.value)


def test_a_students_decoder_depth_is_recorded_and_read_back(train_flag_values, tmp_path):
    """--preset=student and --num_decoder_layers give the model section's num_decoder_layers, which
    --config reads back; a decoder as deep as the encoder is recorded as before the flag."""
    student = _config(train_flag_values, f"--model_dir={tmp_path / 'student'}", "--preset=student")
    assert student.model == model_config("student") and student.model["num_decoder_layers"] == 1
    shallow = _config(train_flag_values, f"--model_dir={tmp_path / 'a'}", "--preset=tiny", "--num_decoder_layers=1")
    assert shallow.model == dict(model_config("tiny"), num_decoder_layers=1)
    equal = _config(train_flag_values, f"--model_dir={tmp_path / 'b'}", "--preset=tiny", "--num_decoder_layers=2")
    assert equal.model == model_config("tiny")
    os.makedirs(shallow.model_dir)
    path = run_config.write(shallow)
    again = _config(train_flag_values, f"--model_dir={tmp_path / 'c'}", f"--config={path}")
    assert again.model == shallow.model
    with pytest.raises(flags.Error) as refused:
        _config(train_flag_values, f"--model_dir={tmp_path / 'd'}", "--num_decoder_layers=0")
    assert refused_flags_message(refused.value) == "flag --num_decoder_layers=0: 0 is not a positive integer"
    assert not os.path.exists(tmp_path / "d")
