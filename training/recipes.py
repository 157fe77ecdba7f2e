"""Named training recipes: flag values chosen together for one kind of run, applied by
`train.py --recipe=NAME` as the defaults of the flags the command line leaves out.

The paper's settings stay the flags' own defaults (`--preset=base`, post-norm, warm-up 4000).
"""

RECIPES = {
    # Small corpora (the built-in deb-en-de's 60k pairs) and short runs on a CPU: the tiny model
    # with pre-norm blocks, which train stably at twice the schedule's learning rate with a short
    # warm-up, no dropout (a run this short underfits: dropout only slows it), a 4k vocabulary,
    # and the tokenized pairs cached after the first pass.
    # benchmarks/README.md ("The demo's recipe") has the runs that chose it.
    "small_data": dict(
        preset="tiny",
        normalize_first=True,
        dropout=0.0,
        vocab_size=4000,
        max_length=96,
        batch_tokens=4096,
        warmup_steps=400,
        learning_rate_scale=2.0,
        cache_tokenized=True,
    ),
}

# The search a recipe's runs translate with, chosen on the dev split for its models and recorded in
# the run's config.json ("search"): evaluate.py, translate.py, the export and `load_translator`
# take it as the default of the flags the command line leaves out.
RECIPE_SEARCH = {
    # A short run's model prefers short outputs: the paper's alpha 0.6 leaves beam 4's output about
    # 15% short on dev; alpha 1.0 with at least 0.8 output tokens per source token was best there.
    "small_data": dict(alpha=1.0, min_length_ratio=0.8),
}


def search_record(name):
    """What config.json records of recipe `name`'s search, or None if it has none."""
    if name not in RECIPE_SEARCH:
        return None
    return {**RECIPE_SEARCH[name], "chosen_for": f"recipe {name}"}


def apply_recipe(flag_values, name):
    """Sets each of recipe `name`'s flags the command line did not give; returns the `--flag=value`
    strings applied. `--subword_alpha` overrides the recipe's `--cache_tokenized` (a cache would
    freeze the sampled segmentation)."""
    applied = []
    for flag, value in RECIPES[name].items():
        if flag_values[flag].present:
            continue
        if flag == "cache_tokenized" and value and flag_values["subword_alpha"].value:
            applied.append("(not --cache_tokenized: --subword_alpha samples at each pass)")
            continue
        flag_values[flag].value = value
        applied.append(f"--{flag}" if value is True else f"--{flag}={value}")
    return applied
