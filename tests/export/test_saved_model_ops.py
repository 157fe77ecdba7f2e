"""What the SavedModel holds: core TensorFlow ops plus tensorflow-text's SentencePiece ops, no XLA,
no Python; and what `saved_model_cli` sees."""

import os
import subprocess
import sys

import pytest

from tests.export.helpers import (
    FORBIDDEN_OPS,
    REGISTERED_WITHOUT_TF_TEXT,
    SENTENCEPIECE_OPS,
    run_fresh_python,
    saved_model_cli_run,
    saved_model_ops,
)


@pytest.mark.full
def test_only_core_and_sentencepiece_ops(exported):
    import json

    op_types, jit_functions = saved_model_ops(exported[1])
    print(f"{len(op_types)} op types: {sorted(op_types)}")
    assert {"While", "Case", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp"} <= op_types
    assert jit_functions == []
    assert sorted(op_types & FORBIDDEN_OPS) == []
    assert sorted(op for op in op_types if op.startswith(("Xla", "_Xla"))) == []
    unknown_to_tensorflow = run_fresh_python(REGISTERED_WITHOUT_TF_TEXT, json.dumps(sorted(op_types)))
    assert set(unknown_to_tensorflow) <= SENTENCEPIECE_OPS, set(unknown_to_tensorflow) - SENTENCEPIECE_OPS


def test_saved_model_cli_show_lists_both_signatures(exported):
    cli = os.path.join(os.path.dirname(sys.executable), "saved_model_cli")
    result = subprocess.run([cli, "show", "--dir", exported[1], "--all"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    for expected in (
        "signature_def['serving_default']",
        "signature_def['translate_ids']",
        "inputs['inputs']",
        "outputs['translations']",
        "outputs['scores']",
        "inputs['source_ids']",
        "DT_STRING",
    ):
        assert expected in result.stdout, expected


def test_saved_model_cli_run_with_the_session_loader_tensorflow_serving_uses(exported):
    stdout = saved_model_cli_run(exported[1], '["Open the file.", ""]')
    assert "Result for output key translations:" in stdout
    assert "Result for output key scores:" in stdout
