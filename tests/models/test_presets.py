import pytest

from models.presets import PRESETS, model_config


def test_overrides_do_not_mutate_presets():
    before = {name: dict(values) for name, values in PRESETS.items()}
    config = model_config("base", hidden_dim=256, dropout=None)
    config["num_layers"] = 99
    assert config["hidden_dim"] == 256 and config["dropout"] == 0.1
    assert PRESETS == before


def test_paper_rows():
    assert model_config("base") == dict(num_layers=6, hidden_dim=512, intermediate_dim=2048, num_heads=8, dropout=0.1)
    assert model_config("big") == dict(num_layers=6, hidden_dim=1024, intermediate_dim=4096, num_heads=16, dropout=0.3)


def test_unknown_names_are_rejected():
    with pytest.raises(ValueError, match="Unknown preset 'huge'; expected one of"):
        model_config("huge")
    with pytest.raises(ValueError, match=r"Unknown model option\(s\) \['vocab'\]"):
        model_config("tiny", vocab=3)
