"""train.py --recipe: a named set of flag defaults that the command line overrides."""

import dataclasses
import os
import types

import pytest
from absl import flags

from inference.runs import ModelDirError, search_settings
from tests.helpers import train_flags_refusal
from training.config import DataConfig, RunConfig, TrainConfig
from training.recipes import RECIPE_SEARCH, RECIPES, apply_recipe, search_record
from training.trainer import _record


def _flag_values(argv):
    values = flags.FlagValues()
    flags.DEFINE_enum("preset", "base", ["base", "big", "tiny"], "", flag_values=values)
    flags.DEFINE_boolean("normalize_first", None, "", flag_values=values)
    flags.DEFINE_boolean("cache_tokenized", False, "", flag_values=values)
    for name in ("vocab_size", "max_length", "batch_tokens", "warmup_steps"):
        flags.DEFINE_integer(name, 1, "", flag_values=values)
    flags.DEFINE_float("learning_rate_scale", 1.0, "", flag_values=values)
    flags.DEFINE_float("dropout", None, "", flag_values=values)
    flags.DEFINE_float("subword_alpha", 0.0, "", flag_values=values)
    values(["train.py", *argv])
    return values


def test_a_recipe_sets_the_flags_not_given_and_leaves_the_given_ones():
    values = _flag_values(["--warmup_steps=1000", "--preset=base"])
    applied = apply_recipe(values, "small_data")
    recipe = RECIPES["small_data"]
    assert values.warmup_steps == 1000 and values.preset == "base"
    for name in set(recipe) - {"warmup_steps", "preset"}:
        assert values[name].value == recipe[name], name
    assert "--normalize_first" in applied and "--learning_rate_scale=2.0" in applied
    assert "--dropout=0.0" in applied
    assert not any(item.startswith(("--warmup_steps", "--preset")) for item in applied)


def test_the_recipes_token_cache_gives_way_to_subword_sampling():
    """The cache would keep the first pass's segmentation, which --subword_alpha resamples each pass."""
    values = _flag_values(["--subword_alpha=0.1"])
    applied = apply_recipe(values, "small_data")
    assert values.cache_tokenized is False and values.preset == "tiny"
    assert "(not --cache_tokenized: --subword_alpha samples at each pass)" in applied
    assert _flag_values([]).cache_tokenized is False and apply_recipe(plain := _flag_values([]), "small_data")
    assert plain.cache_tokenized is True


def test_the_recipe_flag_is_refused_with_a_parent_run_or_a_config_and_names_an_unknown_recipe(tiny_run, tmp_path):
    """In this process: the checks of train.py's command line and of a flag's value (how train.py
    prints a refusal of either and exits: tests/training/test_train.py)."""
    parent = tiny_run[0]
    refused = train_flags_refusal(tmp_path / "run", ["--recipe=small_data", f"--init_from={parent}"], command_line=True)
    assert refused is not None and "--recipe=small_data does not combine with --init_from" in refused, refused
    config = os.path.join(parent, "config.json")
    refused = train_flags_refusal(tmp_path / "run", ["--recipe=small_data", f"--config={config}"], command_line=True)
    assert refused is not None and f"--recipe=small_data does not combine with --config: {config}" in refused
    refused = train_flags_refusal(tmp_path / "run", ["--recipe=large"])
    assert refused is not None and "flag --recipe=large: value should be one of <small_data>" in refused, refused
    assert not (tmp_path / "run").exists()


def test_a_recipe_records_its_search_and_a_later_start_keeps_it():
    """train.py --recipe=small_data writes the recipe's search into config.json (its run:
    the full-disk test of test_train.py, on weighted files under the recipe); a resumed run without --recipe
    keeps what the first start recorded, a fine-tuning its parent's."""
    assert search_record("small_data") == dict(RECIPE_SEARCH["small_data"], chosen_for="recipe small_data")
    assert search_settings(search_record("small_data"), "config.json") == {"alpha": 1.0, "min_length_ratio": 0.8}
    config = RunConfig(model_dir="run", model={}, data=DataConfig(), train=TrainConfig())
    earlier = {"search": {"alpha": 0.9}}
    parent = types.SimpleNamespace(search={"alpha": 1.2}, record=lambda: {"model_dir": "parent"})
    assert _record(config, None, None, earlier).record == {"search": {"alpha": 0.9}}
    assert _record(config, None, parent, earlier).record == {
        "init_from": {"model_dir": "parent"},
        "search": {"alpha": 1.2},
    }
    own = dataclasses.replace(config, record={"search": {"alpha": 1.0}})
    assert _record(own, None, None, earlier).record == {"search": {"alpha": 1.0}}
    assert _record(config, None, None, None).record == {}


@pytest.mark.parametrize(
    "record, message",
    [
        ({"alpha": -0.5}, '"search" has alpha=-0.5; it must be float >= 0.0'),
        ({"min_length_ratio": float("nan")}, '"search" has min_length_ratio=nan; it must be float >= 0.0'),
        ({"max_extra_length": 0}, '"search" has max_extra_length=0; it must be int >= 1'),
        ({"beam_size": True}, '"search" has beam_size=True; it must be int >= 1'),
        ({"temperature": 1.0}, "\"search\" has 'temperature', which is not one of beam_size, alpha, max_extra_length"),
        ("alpha=1.0", "\"search\" must be an object of search settings, found 'alpha=1.0'"),
    ],
)
def test_a_recorded_search_that_is_not_valid_names_the_file_and_setting(record, message):
    with pytest.raises(ModelDirError) as raised:
        search_settings(record, "runs/x/config.json")
    assert str(raised.value).startswith(f"runs/x/config.json: {message}")
