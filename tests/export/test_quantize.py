"""`python -m export --quantize=int8`: the same text-to-text SavedModel with int8 matmul weights, cast
once per search, that TensorFlow Serving's session loader (saved_model_cli) runs. The export is the
`quantized` fixture's (tests/export/conftest.py), written by the command once per session; its op
allow-list is checked in one fresh process with the float32 export's, and its saved_model_cli
translations there against the Python translator's: tests/export/test_fresh_process.py."""

import json
import os

import pytest
import tensorflow as tf

from tests.export.helpers import run_export


def _matmul_weights(path):
    """`{checkpoint key: (dtype name, shape)}` of the kernels and embedding matrix of a SavedModel."""
    reader = tf.train.load_checkpoint(os.path.join(path, "variables", "variables"))
    dtypes, shapes = reader.get_variable_to_dtype_map(), reader.get_variable_to_shape_map()
    return {
        key: (dtypes[key].name, shapes[key])
        for key in dtypes
        if key.startswith("model/")
        and key.endswith(("/kernel/.ATTRIBUTES/VARIABLE_VALUE", "/embeddings/.ATTRIBUTES/VARIABLE_VALUE"))
    }


@pytest.mark.slow  # the int8 export, written by the command
def test_matmul_weights_are_int8_and_the_settings_record_it(exported, quantized):
    floats, int8s = _matmul_weights(exported[1]), _matmul_weights(quantized)
    assert floats and sorted(floats) == sorted(int8s)
    assert {dtype for dtype, _ in floats.values()} == {"float32"}
    assert {key: ("int8", shape) for key, (_, shape) in floats.items()} == int8s
    sizes = [
        sum(
            os.path.getsize(os.path.join(path, "variables", name))
            for name in os.listdir(os.path.join(path, "variables"))
        )
        for path in (exported[1], quantized)
    ]
    print(f"variables: {sizes[0]} bytes float32, {sizes[1]} bytes int8")
    assert sizes[1] < 0.4 * sizes[0]
    settings = json.load(open(os.path.join(quantized, "assets.extra", "export_config.json")))["export"]
    assert settings["quantize"] == "int8"
    assert (
        json.load(open(os.path.join(exported[1], "assets.extra", "export_config.json")))["export"]["quantize"] is None
    )


@pytest.mark.slow  # the int8 export, written by the command
def test_the_decoding_loops_cast_no_int8_matrix(quantized):
    """The matrices are cast to the product dtype once per search, before its loop: inside a
    decoding loop only the embedding rows of the step's tokens are."""
    from tensorflow.core.framework import types_pb2
    from tensorflow.core.protobuf import saved_model_pb2

    from export import graph_alignment

    saved_model = saved_model_pb2.SavedModel()
    with open(os.path.join(quantized, "saved_model.pb"), "rb") as handle:
        saved_model.ParseFromString(handle.read())
    int8_casts = {}
    for function in saved_model.meta_graphs[0].graph_def.library.function:
        int8_casts[function.signature.name] = sum(
            1 for node in function.node_def if node.op == "Cast" and node.attr["SrcT"].type == types_pb2.DT_INT8
        )
    # The decoding loops: the loops that read a weight (not the align signature's word numbering,
    # nor the text steps' loops: segmentation, markup).
    loops = {
        name: count
        for name, count in int8_casts.items()
        if "while_body" in name and graph_alignment.WORD_NUMBERING not in name and count
    }
    print(f"int8 casts per decoding loop: {loops}; elsewhere: {sum(int8_casts.values()) - sum(loops.values())}")
    assert loops and set(loops.values()) == {1}
    assert sum(int8_casts.values()) > sum(loops.values())


@pytest.mark.full  # saved_model_cli in a fresh process
def test_saved_model_cli_runs_it_with_the_session_loader_tensorflow_serving_uses(quantized_served):
    """The one saved_model_cli run of the tests: the int8 export holds every op type of the float32
    one (tests/export/test_fresh_process.py, test_ops_stay_within_the_allow_list), so this load
    covers both. Its translations against the Python translator's, with int8 and float32 weights:
    tests/export/test_fresh_process.py."""
    assert "Result for output key translations:" in quantized_served["stdout"]
    assert "Result for output key scores:" in quantized_served["stdout"]
    assert (
        len(quantized_served["translations"]) == len(quantized_served["scores"]) == len(quantized_served["sentences"])
    )
    assert all(isinstance(text, str) for text in quantized_served["translations"])


# Its ops checked against TensorFlow's registry in a fresh process, and its translations against the
# Python translator's: tests/export/test_fresh_process.py.


def test_command_refuses_an_unknown_quantize_value(tmp_path):
    result = run_export(f"--model_dir={tmp_path}", f"--export_dir={tmp_path}/e", "--quantize=int4", timeout=120)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "--quantize=int4: value should be one of <int8>" in result.stderr, result.stderr[-2000:]
    assert not os.path.exists(tmp_path / "e")
