"""Named model sizes: the paper's Table 3 rows, a tiny one for tests and the CPU demo, and students
for sequence-level distillation (docs/training.md, "Distilled students"); the vocabulary size
comes from the tokenizer."""

import copy

from common.errors import UserError

PRESETS = {
    # Table 3, "base": N=6, d_model=512, d_ff=2048, h=8, P_drop=0.1 (~63M parameters with a 37k vocabulary).
    "base": dict(num_layers=6, hidden_dim=512, intermediate_dim=2048, num_heads=8, dropout=0.1),
    # Table 3, "big": N=6, d_model=1024, d_ff=4096, h=16, P_drop=0.3 (~213M parameters with 37k).
    "big": dict(num_layers=6, hidden_dim=1024, intermediate_dim=4096, num_heads=16, dropout=0.3),
    # Not in the paper: small enough to train on two CPU cores in minutes.
    "tiny": dict(num_layers=2, hidden_dim=128, intermediate_dim=512, num_heads=4, dropout=0.1),
    # Students: a deep encoder and a shallow decoder. The encoder runs once per sentence, the decoder
    # once per output token, so decoding time goes with the decoder's depth. Kasai et al. 2021 ("Deep
    # Encoder, Shallow Decoder"): 12 encoder layers and 1 decoder layer at base width match 6+6 in
    # BLEU after distillation and decode one sentence over twice as fast. The Bergamot students
    # (Firefox Translations) keep 6 encoder and 2 decoder layers at d_model 512 ("base") or 256
    # ("tiny", d_ff 1536). Scaled to what trains on two CPU cores, as `tiny` is:
    # the demo's width (tiny's d_model 128) with twice its encoder and one decoder layer, about tiny's
    # parameters (1.06M beside its 0.93M, embeddings aside)...
    "student": dict(num_layers=4, num_decoder_layers=1, hidden_dim=128, intermediate_dim=512, num_heads=4, dropout=0.1),
    # ... and half that width (0.27M), for the smallest and fastest.
    "student-tiny": dict(
        num_layers=4, num_decoder_layers=1, hidden_dim=64, intermediate_dim=256, num_heads=4, dropout=0.1
    ),
}

MODEL_OPTIONS = (
    "num_layers",
    "num_decoder_layers",
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
    if config.get("num_decoder_layers") == config["num_layers"]:
        del config["num_decoder_layers"]  # Equal stacks are written as before the option.
    return config


def decoder_layers(config):
    """The decoder's layers in a model config (`model_config`'s, or a run's config.json "model")."""
    return config.get("num_decoder_layers") or config.get("num_layers")


def layer_shape(config):
    """`config`'s stacks in words, e.g. "4 encoder and 1 decoder layers of d_model 128"."""
    return f"{config.get('num_layers')} encoder and {decoder_layers(config)} decoder layers of d_model {config.get('hidden_dim')}"
