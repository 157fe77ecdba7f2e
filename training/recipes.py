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


def apply_recipe(flag_values, name):
    """Sets each of recipe `name`'s flags that the command line did not give; returns the
    `--flag=value` strings applied, for the run's log."""
    applied = []
    for flag, value in RECIPES[name].items():
        if flag_values[flag].present:
            continue
        flag_values[flag].value = value
        applied.append(f"--{flag}" if value is True else f"--{flag}={value}")
    return applied
