"""train.py --recipe: a named set of flag defaults that the command line overrides."""

from absl import flags

from tests.conftest import assert_train_refuses
from training.recipes import RECIPES, apply_recipe


def _flag_values(argv):
    values = flags.FlagValues()
    flags.DEFINE_enum("preset", "base", ["base", "big", "tiny"], "", flag_values=values)
    flags.DEFINE_boolean("normalize_first", None, "", flag_values=values)
    flags.DEFINE_boolean("cache_tokenized", False, "", flag_values=values)
    for name in ("vocab_size", "max_length", "batch_tokens", "warmup_steps"):
        flags.DEFINE_integer(name, 1, "", flag_values=values)
    flags.DEFINE_float("learning_rate_scale", 1.0, "", flag_values=values)
    flags.DEFINE_float("dropout", None, "", flag_values=values)
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


def test_the_recipe_flag_is_refused_with_a_parent_run_and_names_an_unknown_recipe(tiny_run, tmp_path):
    for argv, message in (
        (
            ["--recipe=small_data", f"--init_from={tiny_run[0]}"],
            "--recipe=small_data does not combine with --init_from",
        ),
        (["--recipe=large"], "flag --recipe=large: value should be one of <small_data>"),
    ):
        assert_train_refuses(tmp_path / "run", argv, message)
