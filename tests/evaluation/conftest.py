"""Fixtures of the evaluation tests: the shared tiny model loaded once, its export, and a model
wrapper that biases the EOS logit (to force or forbid ending)."""

import keras
import pytest

from data.special_ids import EOS_ID


@pytest.fixture(scope="module")
def tiny_model(tiny_run):
    """`(model, tokenizer, run_config, model_dir)` of the shared tiny run."""
    from training.run_dir import RunDir

    model_dir, _ = tiny_run
    model, tokenizer, run_config = RunDir(model_dir).load_model()
    return model, tokenizer, run_config, model_dir


class EosBiasModel:
    """A `Transformer` seen through `translate_ids`'s interface (encode, initial_cache, decode,
    pad_id, variables) with `bias` added to the EOS logit of every decoding step: +1e9 forces EOS
    first, -1e9 forbids it so every hypothesis runs to its maximum length."""

    def __init__(self, model, bias):
        self.model = model
        self.pad_id = model.pad_id
        self.variables = model.variables
        values = [0.0] * model.vocabulary_size
        values[EOS_ID] = bias
        self.bias = keras.ops.convert_to_tensor(values, "float32")

    def encode(self, *args, **kwargs):
        return self.model.encode(*args, **kwargs)

    def initial_cache(self, *args, **kwargs):
        return self.model.initial_cache(*args, **kwargs)

    def decode(self, *args, **kwargs):
        outputs = self.model.decode(*args, **kwargs)
        if isinstance(outputs, tuple):
            return (outputs[0] + self.bias,) + tuple(outputs[1:])
        return outputs + self.bias

    def __call__(self, inputs, training=False):
        return self.model(inputs, training=training) + self.bias


@pytest.fixture
def eos_bias_model():
    return EosBiasModel


@pytest.fixture(scope="module")
def tiny_export(tiny_run, tmp_path_factory):
    """An export of the shared tiny run (max_input_length 16, one length bucket): its base
    directory, as --export_dir takes it."""
    exporter = pytest.importorskip("export.exporter")
    model_dir, _ = tiny_run
    export_dir = tmp_path_factory.mktemp("tiny_export") / "export"
    exporter.export_model(model_dir, str(export_dir), max_input_length=16, length_buckets=())
    return str(export_dir)
