"""A model whose weights were written under KERAS_BACKEND=jax loads as the export loads a run
(`export.exporter.load_trained`) and gives the JAX model's logits, and the export's graph of it
(`ServingModule.translate_ids`, traced in this process) the JAX model's translations. (Writing and
loading the SavedModel of a model loaded under TensorFlow: the shared export's tests.)"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from tests.export.helpers import run_fresh_python

pytestmark = pytest.mark.full

SETTINGS = dict(beam_size=4, alpha=0.6, max_input_length=16, max_extra_length=12, length_buckets=())

# Under JAX: load the TensorFlow-trained model, move every weight by seeded noise (so that the
# export can only match if it reads what JAX wrote), save it, and record logits and a beam search.
JAX_SIDE = """
import json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras, numpy as np
import jax
import models.transformer  # noqa: F401
from models.search_config import SearchConfig
from models.translation import translate_ids
assert keras.backend.backend() == "jax"
source_dir, target_dir, settings = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
model = keras.saving.load_model(os.path.join(source_dir, "model.keras"), compile=False)
rng = np.random.default_rng(7)
for variable in model.weights:
    value = keras.ops.convert_to_numpy(variable)
    variable.assign(value + 0.05 * np.std(value) * rng.standard_normal(value.shape).astype(value.dtype))
model.save(os.path.join(target_dir, "model.keras"))
source = np.array(settings["source"], dtype="int32")
target_in = np.array(settings["target_in"], dtype="int32")
logits = model((source, target_in), training=False)
search_config = SearchConfig(beam_size=settings["beam_size"], alpha=settings["alpha"],
                             max_extra_length=settings["max_extra_length"])
search = jax.jit(lambda s: translate_ids(model, s, search_config))
ids, scores = search(source)
print(json.dumps({"backend": keras.backend.backend(), "logits": np.asarray(logits).tolist(),
                  "ids": np.asarray(ids)[:, 0].tolist(), "scores": np.asarray(scores)[:, 0].tolist()}))
"""


def test_weights_written_under_jax_export_with_the_same_outputs(exported, tmp_path):
    import keras

    import models.transformer  # noqa: F401
    from common.special_ids import BOS_ID, EOS_ID, PAD_ID
    from data.tokenizer import Tokenizer
    from export.exporter import load_trained
    from export.serving_module import ServingModule
    from models.search_config import SearchConfig

    model_dir, _ = exported
    jax_dir = tmp_path / "jax_run"
    jax_dir.mkdir()
    for name in ("spm.model", "config.json"):
        shutil.copy(os.path.join(model_dir, name), jax_dir / name)
    tokenizer = Tokenizer.from_file(os.path.join(model_dir, "spm.model"))
    rows = [
        list(r)[:11] + [EOS_ID]
        for r in tokenizer.tokenize(["Open the file.", "Click OK to save your changes now."]).to_list()
    ]
    source = np.full((2, 12), PAD_ID, "int32")
    for index, row in enumerate(rows):
        source[index, : len(row)] = row
    target_in = np.array([[BOS_ID, 20, 30, 40], [BOS_ID, 50, 60, 70]], "int32")
    inputs = dict(SETTINGS, source=source.tolist(), target_in=target_in.tolist())
    jax_side = run_fresh_python(JAX_SIDE, model_dir, jax_dir, json.dumps(inputs), project=True)
    assert jax_side["backend"] == "jax"

    reloaded, _, _ = load_trained(str(jax_dir), checkpoint="last")  # model.keras alone
    logits = keras.ops.convert_to_numpy(reloaded((source, target_in), training=False))
    np.testing.assert_allclose(logits, np.array(jax_side["logits"]), atol=1e-4)

    search = SearchConfig(**{name: value for name, value in SETTINGS.items() if name != "length_buckets"})
    module = ServingModule(reloaded, tokenizer, str(jax_dir / "spm.model"), search, length_buckets=())
    outputs = module.translate_ids(source_ids=tf.constant(source))
    ids, jax_ids = outputs["ids"].numpy(), np.array(jax_side["ids"])
    width = jax_ids.shape[1]
    assert np.all(ids[:, width:] == PAD_ID)
    np.testing.assert_array_equal(ids[:, :width], jax_ids)
    np.testing.assert_allclose(outputs["scores"].numpy(), jax_side["scores"], atol=1e-4)
