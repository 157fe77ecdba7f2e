"""The export reloaded in a process that imports only tensorflow and tensorflow_text translates like
the Python path of evaluate.py (training.translator.Translator) with the same search settings."""

import json

import numpy as np
import pytest

from tests.export.conftest import EXPORT_SETTINGS, SENTENCES, run_fresh_python

pytestmark = pytest.mark.full

SERVE_IN_FRESH_PROCESS = """
import json, sys
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SentencePiece ops)
served = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
outputs = served(inputs=tf.constant(json.loads(sys.argv[2])))
project = sorted(m for m in sys.modules if m.split(".")[0] in ("models", "data", "export", "evaluation", "training"))
print(json.dumps({
    "translations": [t.decode("utf-8") for t in outputs["translations"].numpy()],
    "scores": outputs["scores"].numpy().tolist(),
    "project_modules": project,
}))
"""


def test_fresh_process_matches_the_python_translator(exported):
    import keras

    from data.tokenizer import Tokenizer
    from training.translator import Translator

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
