"""Named model sizes: the paper's Table 3 rows and a tiny one for tests and the CPU demo (the
vocabulary size comes from the tokenizer)."""

import copy

from common.errors import UserError

PRESETS = {
    # Table 3, "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (~63M parameters with a 37k vocabulary).
    "base": dict(num_layers=6, hidden_dim=512, intermediate_dim=2048, num_heads=8, dropout=0.1),
    # Table 3, "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (~213M parameters with 37k).
    "big": dict(num_layers=6, hidden_dim=1024, intermediate_dim=4096, num_heads=16, dropout=0.3),
    # Not in the paper: small enough to train on two CPU cores in minutes.
    "tiny": dict(num_layers=2, hidden_dim=128, intermediate_dim=512, num_heads=4, dropout=0.1),
}

MODEL_OPTIONS = (
    "num_layers",
    "hidden_dim",
    "intermediate_dim",
    "num_heads",
    "dropout",
    "attention_dropout",
    "activation_dropout",
    "normalize_first",
    "layer_norm_epsilon",
)


class PresetError(UserError, ValueError):
    """An unknown preset or model option (names it and lists the known ones)."""


def model_config(preset, **overrides):
    """A fresh dict of `Transformer` arguments: the preset's, then `overrides` not None. Raises
    `ValueError` on an unknown preset name or an override that is not a model option."""
    if preset not in PRESETS:
        raise PresetError(f"Unknown preset {preset!r}; expected one of {sorted(PRESETS)}")
    unknown = sorted(set(overrides) - set(MODEL_OPTIONS))
    if unknown:
        raise PresetError(f"Unknown model option(s) {unknown}; expected some of {list(MODEL_OPTIONS)}")
    config = copy.deepcopy(PRESETS[preset])
    config.update({key: value for key, value in overrides.items() if value is not None})
    return config
