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


@pytest.mark.full  # saved_model_cli in a fresh process
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


# saved_model_cli run, TensorFlow Serving's session loader, loads the int8 export, whose op types
# include all of this one's: tests/export/test_quantize.py.
