"""The shared tiny model exported once per session (float32 in this process, int8 by the export
command), the float32 export loaded once, the one fresh process that runs the int8 one by
saved_model_cli, and the run's model and tokenizer."""

import json
import os
import random
import shutil

import keras
import numpy as np
import pytest

from tests.export.helpers import (
    COMPARED_BATCH_SIZE,
    FRESH_PROCESS,
    compared_sentences,
    run_export,
    run_fresh_python,
    saved_model_ops,
)
from tests.helpers import EXPORT_SETTINGS, export_arguments, once_per_session


@pytest.fixture(autouse=True)
def _seed_and_policy():
    """Overrides tests/conftest.py's: seeds Python and NumPy only.

    `keras.utils.set_random_seed` also sets TensorFlow's seed, which destroys the SentencePiece
    resources of everything loaded before it (data/tokenizer.py), so the SavedModel of `served`
    could not be loaded once for all tests. These tests draw no TensorFlow random numbers.
    """
    random.seed(1234)
    np.random.seed(1234)
    policy = keras.config.dtype_policy()
    yield
    keras.config.set_dtype_policy(policy)


@pytest.fixture(scope="session")
def exported(tiny_run, tiny_export):
    """`(model_dir, version_path)`: the shared export of the tiny run (EXPORT_SETTINGS, version 1)."""
    return tiny_run[0], os.path.join(tiny_export, "1")


# What a recipe's run records (config.json "search"): the export command takes max_extra_length from
# it, and --alpha given on its command line beats the recorded alpha.
RECORDED_SEARCH = {
    "alpha": 1.0,
    "max_extra_length": EXPORT_SETTINGS["max_extra_length"],
    "chosen_for": "recipe small_data",
}
# The command's flags for EXPORT_SETTINGS but max_extra_length, left to the run's record, and the
# length buckets: max_input_length alone (a sentence's translation does not depend on its bucket;
# the float32 export checks the buckets).
COMMAND_FLAGS = (
    "--quantize=int8",
    f"--beam_size={EXPORT_SETTINGS['beam_size']}",
    f"--alpha={EXPORT_SETTINGS['alpha']}",
    f"--max_input_length={EXPORT_SETTINGS['max_input_length']}",
    "--length_buckets=",
)


@pytest.fixture(scope="session")
def command_export(tiny_run, tmp_path_factory):
    """`python -m export --quantize=int8` run once per session on a copy of the tiny run that records
    RECORDED_SEARCH, into an export directory that holds a killed export's leftover: a dict of the
    copy's `model_dir`, the `export_dir`, the `leftover`, and the command's `returncode`, `stdout` and
    `stderr`. With the record, the export's settings are EXPORT_SETTINGS (one length bucket) and int8
    weights."""

    def build(directory):
        model_dir = os.path.join(directory, "run")
        os.makedirs(model_dir)
        for name in ("spm.model", "config.json", "model.keras", "checkpoints"):
            source = os.path.join(tiny_run[0], name)
            (shutil.copytree if os.path.isdir(source) else shutil.copy)(source, os.path.join(model_dir, name))
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
        config["search"] = RECORDED_SEARCH
        with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(config, handle)
        export_dir = os.path.join(directory, "transformer")
        leftover = os.path.join(export_dir, ".tmp-1-k1ll3d_x")
        os.makedirs(leftover)
        with open(os.path.join(leftover, "saved_model.pb"), "wb") as handle:
            handle.write(b"partial")
        environment = dict(os.environ)
        environment.pop("TF_CPP_MIN_LOG_LEVEL", None)  # the command's own default, not the test suite's
        result = run_export(f"--model_dir={model_dir}", f"--export_dir={export_dir}", *COMMAND_FLAGS, env=environment)
        return dict(
            model_dir=model_dir,
            export_dir=export_dir,
            leftover=leftover,
            returncode=result.returncode,
            stdout=result.stdout,
            stderr=result.stderr,
        )

    return once_per_session(tmp_path_factory, "exports-int8", build)


@pytest.fixture(scope="session")
def quantized(command_export):
    """The version path of the int8 export the command wrote (`command_export`)."""
    assert command_export["returncode"] == 0, command_export["stderr"][-4000:]
    return os.path.join(command_export["export_dir"], "1")


@pytest.fixture(scope="session")
def fresh_process(exported, quantized, tiny_run, tmp_path_factory):
    """The one fresh process of the export tests (FRESH_PROCESS), run once per session: the op types
    of both exports looked up in TensorFlow's registry, and the int8 export run by saved_model_cli
    on `compared_sentences`. A dict of the `sentences`, the process's `unknown_to_tensorflow` op
    types and `project_modules`, saved_model_cli's `stdout`, and the `translations` and `scores` of
    serving_default."""

    def build(directory):
        sentences = compared_sentences(tiny_run[1])
        op_types = saved_model_ops(exported[1])[0] | saved_model_ops(quantized)[0]
        inputs, outdir = os.path.join(directory, "inputs.npy"), os.path.join(directory, "outputs")
        np.save(inputs, np.array([sentence.encode("utf-8") for sentence in sentences], dtype=object))
        request = dict(op_types=sorted(op_types), saved_model_cli=[quantized, inputs, outdir])
        outputs = run_fresh_python(FRESH_PROCESS, json.dumps(request))
        int8 = {
            name: np.load(os.path.join(outdir, f"{name}.npy"), allow_pickle=True) for name in ("translations", "scores")
        }
        return dict(
            sentences=sentences,
            unknown_to_tensorflow=outputs["unknown_to_tensorflow"],
            project_modules=outputs["project_modules"],
            stdout=outputs["saved_model_cli"],
            translations=[text.decode("utf-8") for text in int8["translations"].tolist()],
            scores=int8["scores"].tolist(),
        )

    return once_per_session(tmp_path_factory, "fresh-process", build)


@pytest.fixture(scope="session")
def python_compared(request, tmp_path_factory):
    """The Python translator of the exported run, with the export's search settings, on
    `compared_sentences`, once per session: a dict of the `sentences`, their `translations`,
    `scores` and word `alignments`, and how many were `truncated`."""

    def build(directory):
        from inference.translator import Translator

        model, tokenizer = request.getfixturevalue("tiny_model_and_tokenizer")
        sentences = compared_sentences(request.getfixturevalue("tiny_run")[1])
        search = export_arguments(EXPORT_SETTINGS)["search"]
        translator = Translator(model, tokenizer, search, batch_size=COMPARED_BATCH_SIZE)
        translations, scores, alignments = translator.translate(sentences, alignments=True)
        return dict(
            sentences=sentences,
            translations=translations,
            scores=[float(score) for score in scores],
            alignments=alignments,
            truncated=translator.truncated,
        )

    return once_per_session(tmp_path_factory, "python-compared", build)


@pytest.fixture(scope="session")
def quantized_served(fresh_process):
    """The int8 export run by saved_model_cli, TensorFlow Serving's session loader, in `fresh_process`:
    a dict of its `stdout`, the `sentences` and the `translations` and `scores` of serving_default."""
    return {name: fresh_process[name] for name in ("stdout", "sentences", "translations", "scores")}


@pytest.fixture(scope="session")
def served(tiny_export_translator):
    """`(loaded, serving_default, translate_ids)`: the shared export as `tiny_export_translator` loaded
    it, once per process (loading and the first call of its graph take seconds)."""
    loaded = tiny_export_translator._loaded
    return loaded, loaded.signatures["serving_default"], loaded.signatures["translate_ids"]


@pytest.fixture(scope="session")
def tiny_model_and_tokenizer(tiny_run):
    """The exported run's model and tokenizer, loaded in this process."""
    from inference.runs import RunDir

    model, tokenizer, _ = RunDir(tiny_run[0]).load_model()
    return model, tokenizer
