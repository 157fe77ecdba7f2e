"""`inference.in_place_cache`: the search written with in-place cache writes equals the plain one,
its graph holds no copying scatter, and runs of one traced search do not share buffers; its loop
reads no weight (`models.translation`'s weights read once)."""

import contextlib
import threading

import numpy as np
import pytest
import tensorflow as tf

from common.special_ids import PAD_ID
from inference.in_place_cache import IN_PLACE, traced_in_place
from models import attention_cache, translation
from models.search_config import SearchConfig
from models.transformer import Transformer
from models.translation import translate_ids

VOCAB = 40
SMALL = dict(num_layers=2, hidden_dim=32, num_heads=4, intermediate_dim=64, dropout=0.0)


def _source(seed, batch=3, length=9):
    rng = np.random.default_rng(seed)
    source = rng.integers(4, VOCAB, size=(batch, length)).astype("int32")
    source[1, 6:] = PAD_ID
    source[2, 3:] = PAD_ID
    return tf.constant(source)


def _searches(model, num_return=1, **settings):
    """The plain tf.function of the search and its in-place twin (`settings`: the SearchConfig's)."""

    def search(source):
        return translate_ids(model, source, SearchConfig(max_extra_length=7, **settings), num_return=num_return)

    return tf.function(search, jit_compile=False, autograph=False), tf.function(
        traced_in_place(search), jit_compile=False, autograph=False
    )


def _op_types(function, source):
    graph = function.get_concrete_function(source).graph.as_graph_def()
    types = {node.op for node in graph.node}
    for library_function in graph.library.function:
        types.update(node.op for node in library_function.node_def)
    return types


@pytest.fixture(scope="module")
def model():
    model = Transformer(VOCAB, **SMALL)
    model((_source(0), _source(0)[:, :4]))
    return model


@pytest.fixture(scope="module")
def traced():
    """The pairs of `_searches` by their options, as test_in_place_search_equals_the_plain_one
    traced them: the other tests reuse those traces."""
    return {}


def _traced_searches(traced, model, **options):
    key = tuple(sorted(options.items()))
    if key not in traced:
        traced[key] = _searches(model, **options)
    return traced[key]


@pytest.mark.parametrize(
    "options",
    [dict(beam_size=4, num_return=4), dict(beam_size=1), dict(beam_size=3, min_length_ratio=1.0, alpha=1.0)],
    ids=["beam4_nbest", "greedy", "beam3_min_length"],
)
def test_in_place_search_equals_the_plain_one(model, traced, options):
    """Traced here (the first call): the buffer ops are the in-place ones for the trace only."""
    plain, in_place = traced[tuple(sorted(options.items()))] = _searches(model, **options)
    for seed in range(3):
        source = _source(seed)
        expected_ids, expected_scores = plain(source)
        ids, scores = in_place(source)
        assert attention_cache.current_buffer_ops() is attention_cache.KERAS_BUFFER_OPS
        np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())
        np.testing.assert_array_equal(scores.numpy(), expected_scores.numpy())


def test_the_in_place_graph_writes_without_copying_scatters(model, traced):
    plain, in_place = _traced_searches(traced, model, beam_size=4, num_return=4)
    source = _source(0)
    plain_ops, in_place_ops = _op_types(plain, source), _op_types(in_place, source)
    assert "TensorScatterUpdate" in plain_ops
    assert "TensorScatterUpdate" not in in_place_ops
    assert {"InplaceUpdate", "Empty"} <= in_place_ops


@pytest.mark.slow  # A second trace of the search, reading at every step.
def test_a_traced_search_reads_each_weight_once_before_its_loop(model, traced, monkeypatch):
    """The loop's steps read no variable: each weight is read once before it, and the search
    translates as one whose layers read their weights at every step."""
    _, in_place = _traced_searches(traced, model, beam_size=1)
    source = _source(1)
    graph = in_place.get_concrete_function(source).graph.as_graph_def()
    bodies = [function for function in graph.library.function if "while_body" in function.signature.name]
    assert bodies and all("ReadVariableOp" not in {node.op for node in body.node_def} for body in bodies)
    reads = sum(node.op == "ReadVariableOp" for node in graph.node) + sum(
        node.op == "ReadVariableOp" for function in graph.library.function for node in function.node_def
    )
    assert reads == len(model.variables)
    monkeypatch.setattr(translation, "_weights_read_once", lambda variables: contextlib.nullcontext())
    _, read_at_each_step = _searches(model, beam_size=1)
    graph = read_at_each_step.get_concrete_function(source).graph.as_graph_def()
    assert any("ReadVariableOp" in {node.op for node in f.node_def} for f in graph.library.function)
    for seed in range(3):
        expected_ids, expected_scores = read_at_each_step(_source(seed))
        ids, scores = in_place(_source(seed))
        np.testing.assert_array_equal(ids.numpy(), expected_ids.numpy())
        np.testing.assert_array_equal(scores.numpy(), expected_scores.numpy())


def test_the_buffer_ops_are_set_within_the_block_only():
    """(After a trace: test_in_place_search_equals_the_plain_one.)"""
    with attention_cache.using_buffer_ops(IN_PLACE):
        assert attention_cache.current_buffer_ops() is IN_PLACE
    assert attention_cache.current_buffer_ops() is attention_cache.KERAS_BUFFER_OPS


def test_the_buffer_ops_are_set_per_thread():
    seen = []
    with attention_cache.using_buffer_ops(IN_PLACE):
        thread = threading.Thread(target=lambda: seen.append(attention_cache.current_buffer_ops()))
        thread.start()
        thread.join()
    assert seen == [attention_cache.KERAS_BUFFER_OPS]


def test_repeated_and_concurrent_runs_do_not_share_buffers(model, traced):
    """Every run allocates its own caches: runs on other sentences, in turn and from threads at
    once, give what each gives alone."""
    plain, in_place = _traced_searches(traced, model, beam_size=4, num_return=4)
    sources = [_source(seed) for seed in range(6)]
    expected = [tuple(t.numpy() for t in plain(source)) for source in sources]
    for source, (ids, scores) in zip(sources, expected):
        got = in_place(source)
        np.testing.assert_array_equal(got[0].numpy(), ids)
        np.testing.assert_array_equal(got[1].numpy(), scores)

    results = [None] * (3 * len(sources))

    def run(index):
        results[index] = tuple(t.numpy() for t in in_place(sources[index % len(sources)]))

    threads = [threading.Thread(target=run, args=(index,)) for index in range(len(results))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, (ids, scores) in enumerate(results):
        np.testing.assert_array_equal(ids, expected[index % len(sources)][0])
        np.testing.assert_array_equal(scores, expected[index % len(sources)][1])
