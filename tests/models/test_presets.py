import pytest

from models.presets import PRESETS, decoder_layers, layer_shape, model_config


def test_overrides_do_not_mutate_presets():
    before = {name: dict(values) for name, values in PRESETS.items()}
    config = model_config("base", hidden_dim=256, dropout=None)
    config["num_layers"] = 99
    assert config["hidden_dim"] == 256 and config["dropout"] == 0.1
    assert PRESETS == before


def test_paper_rows():
    assert model_config("base") == dict(num_layers=6, hidden_dim=512, intermediate_dim=2048, num_heads=8, dropout=0.1)
    assert model_config("big") == dict(num_layers=6, hidden_dim=1024, intermediate_dim=4096, num_heads=16, dropout=0.3)


def test_students_have_a_deep_encoder_and_a_shallow_decoder():
    for name in ("student", "student-tiny"):
        config = model_config(name)
        assert config["num_layers"] > model_config("tiny")["num_layers"] and config["num_decoder_layers"] == 1
        assert decoder_layers(config) == 1 and layer_shape(config).startswith(
            "4 encoder and 1 decoder layers of d_model "
        )
    assert model_config("student-tiny")["hidden_dim"] < model_config("student")["hidden_dim"] == 128
    # A decoder as deep as the encoder is written as a model of equal stacks always was.
    assert "num_decoder_layers" not in model_config("student", num_decoder_layers=4)
    assert model_config("student", num_layers=2, num_decoder_layers=2) == model_config("tiny")
    assert decoder_layers(model_config("base")) == 6 and decoder_layers(model_config("base", num_decoder_layers=2)) == 2


def test_unknown_names_are_rejected():
    with pytest.raises(ValueError, match="Unknown preset 'huge'; expected one of"):
        model_config("huge")
    with pytest.raises(ValueError, match=r"Unknown model option\(s\) \['vocab'\]"):
        model_config("tiny", vocab=3)
