"""The export reloaded in a process that imports only tensorflow and tensorflow_text translates like
the Python path of evaluate.py (inference.translator.Translator) with the same search settings."""

import json

import numpy as np
import pytest

from tests.export.helpers import SENTENCES, SERVE_IN_FRESH_PROCESS, run_fresh_python
from tests.helpers import EXPORT_SETTINGS

pytestmark = pytest.mark.full


def test_fresh_process_matches_the_python_translator(exported):
    import keras

    from data.tokenizer import Tokenizer
    from inference.translator import Translator

    model_dir, path = exported
    sentences = SENTENCES + ["", "Click " * 60]
    served = run_fresh_python(SERVE_IN_FRESH_PROCESS, path, json.dumps(sentences))
    assert served["project_modules"] == []

    model = keras.saving.load_model(f"{model_dir}/model.keras", compile=False)
    translator = Translator(
        model,
        Tokenizer.from_file(f"{model_dir}/spm.model"),
        beam_size=EXPORT_SETTINGS["beam_size"],
        alpha=EXPORT_SETTINGS["alpha"],
        max_extra_length=EXPORT_SETTINGS["max_extra_length"],
        max_input_length=EXPORT_SETTINGS["max_input_length"],
    )
    translations, scores = translator.translate(sentences)
    assert translator.truncated == 1
    assert served["translations"] == translations
    np.testing.assert_allclose(served["scores"], scores, atol=1e-4)
