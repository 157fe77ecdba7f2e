"""What the SavedModel holds: core TensorFlow ops plus tensorflow-text's SentencePiece ops, no XLA,
no Python (the align signature's word alignments included: its string ops, AsString and
UnsortedSegmentJoin, and its tf.scan are core ops); and the signatures that `saved_model_cli show`
lists."""

import pytest
from tensorflow.core.framework import types_pb2
from tensorflow.core.protobuf import saved_model_pb2

from tests.export.helpers import FORBIDDEN_OPS, saved_model_ops


@pytest.mark.full
def test_only_core_and_sentencepiece_ops(exported):
    """That TensorFlow alone registers every op but the SentencePiece ones is checked in a fresh
    process on the int8 export, which holds every op type of this one:
    tests/export/test_fresh_process.py, test_ops_stay_within_the_allow_list."""
    op_types, jit_functions = saved_model_ops(exported[1])
    print(f"{len(op_types)} op types: {sorted(op_types)}")
    assert {"StatelessWhile", "Case", "SentencepieceTokenizeOp", "SentencepieceDetokenizeOp"} <= op_types
    assert jit_functions == []
    assert sorted(op_types & FORBIDDEN_OPS) == []
    assert sorted(op for op in op_types if op.startswith(("Xla", "_Xla"))) == []


@pytest.mark.full
def test_the_serve_meta_graph_lists_the_signatures(exported):
    """The signature defs of the "serve" meta graph, which `saved_model_cli show --all` prints: the
    text signatures and the ids one, with their inputs' and outputs' types."""
    saved_model = saved_model_pb2.SavedModel()
    with open(f"{exported[1]}/saved_model.pb", "rb") as handle:
        saved_model.ParseFromString(handle.read())
    [meta_graph] = [graph for graph in saved_model.meta_graphs if "serve" in graph.meta_info_def.tags]
    signatures = meta_graph.signature_def
    assert {"serving_default", "translate_ids"} <= set(signatures)
    text = signatures["serving_default"]
    assert text.inputs["inputs"].dtype == types_pb2.DT_STRING
    assert set(text.outputs) == {"translations", "scores", "confidence"}
    assert text.outputs["translations"].dtype == types_pb2.DT_STRING
    assert text.outputs["scores"].dtype == text.outputs["confidence"].dtype == types_pb2.DT_FLOAT
    ids = signatures["translate_ids"]
    assert ids.inputs["source_ids"].dtype == types_pb2.DT_INT32
    assert {"ids", "scores"} <= set(ids.outputs)
    prefix, align = signatures["prefix"], signatures["align"]
    assert {name: spec.dtype for name, spec in prefix.inputs.items()} == dict.fromkeys(
        ["inputs", "prefixes"], types_pb2.DT_STRING
    )
    assert set(prefix.outputs) == {"translations", "scores", "confidence"}
    assert align.inputs["inputs"].dtype == align.outputs["alignments"].dtype == types_pb2.DT_STRING
    tokens = {"tokens", "token_scores", "token_counts"}
    assert set(align.outputs) == {"translations", "scores", "confidence", "alignments"} | tokens
    assert align.outputs["token_scores"].dtype == types_pb2.DT_FLOAT
    assert align.outputs["token_counts"].dtype == types_pb2.DT_INT32
    assert set(signatures["markup"].outputs) == {"translations", "scores", "confidence", "notes"} | tokens
    assert signatures["markup"].outputs["notes"].dtype == types_pb2.DT_STRING
    constrain = signatures["constrain"]
    assert {name: spec.dtype for name, spec in constrain.inputs.items()} == dict.fromkeys(
        ["inputs", "constraints"], types_pb2.DT_STRING
    )
    assert constrain.outputs["constraints_met"].dtype == types_pb2.DT_BOOL
    assert set(constrain.outputs) == {"translations", "scores", "confidence", "constraints_met"}


# saved_model_cli run, TensorFlow Serving's session loader, loads the int8 export, whose op types
# include all of this one's: tests/export/test_quantize.py.
