import keras
import numpy as np
import pytest
from keras import ops

from models import attention_cache
from models.multi_head_attention import MultiHeadAttention, grouped_bias, shared_key_bias
from models.transformer_decoder import causal_attention_mask
from tests.models.layer_contract import run_layer_test

BATCH, QUERY_LENGTH, KEY_LENGTH, HIDDEN, HEADS = 2, 5, 7, 16, 4


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _random(*shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype("float32")


def _padding_mask():
    mask = np.ones((BATCH, KEY_LENGTH), bool)
    mask[1, 4:] = False  # The second sequence has 4 real keys and 3 padded ones.
    return mask


def test_layer_contract_self_attention():
    run_layer_test(
        MultiHeadAttention,
        {"hidden_dim": HIDDEN, "num_heads": HEADS, "attention_dropout": 0.0},
        {"query": _random(BATCH, QUERY_LENGTH, HIDDEN)},
        (BATCH, QUERY_LENGTH, HIDDEN),
    )


def test_layer_contract_cross_attention_with_mask():
    mask = np.broadcast_to(_padding_mask()[:, None, :], (BATCH, QUERY_LENGTH, KEY_LENGTH)).copy()
    run_layer_test(
        MultiHeadAttention,
        {"hidden_dim": HIDDEN, "num_heads": HEADS},
        {
            "query": _random(BATCH, QUERY_LENGTH, HIDDEN),
            "key_value": _random(BATCH, KEY_LENGTH, HIDDEN, seed=1),
            "attention_mask": mask,
        },
        (BATCH, QUERY_LENGTH, HIDDEN),
    )


def test_matches_numpy_reference():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    query, memory = _random(BATCH, QUERY_LENGTH, HIDDEN), _random(BATCH, KEY_LENGTH, HIDDEN, seed=1)
    mask = np.broadcast_to(_padding_mask()[:, None, :], (BATCH, QUERY_LENGTH, KEY_LENGTH))
    outputs = _numpy(layer(query, memory, attention_mask=mask))

    wq, bq = (_numpy(w) for w in layer.query_dense.weights)
    wkv, bkv = (_numpy(w) for w in layer.key_value_dense.weights)
    wo, bo = (_numpy(w) for w in layer.output_dense.weights)
    head_dim = HIDDEN // HEADS
    q = (query @ wq + bq).reshape(BATCH, QUERY_LENGTH, HEADS, head_dim).transpose(0, 2, 1, 3)
    kv = (memory @ wkv + bkv).reshape(BATCH, KEY_LENGTH, 2, HEADS, head_dim)
    k, v = kv[:, :, 0].transpose(0, 2, 1, 3), kv[:, :, 1].transpose(0, 2, 1, 3)
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head_dim)
    logits = np.where(mask[:, None], logits, -np.inf)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    expected = (weights @ v).transpose(0, 2, 1, 3).reshape(BATCH, QUERY_LENGTH, HIDDEN) @ wo + bo
    assert np.max(np.abs(outputs - expected)) < 1e-5


def test_key_and_value_from_kernel_halves_match_the_fused_projection():
    """`_key_and_value_heads` (JAX's training path) equals the split of the fused projection."""
    layer = MultiHeadAttention(HIDDEN, HEADS)
    layer.build((BATCH, QUERY_LENGTH, HIDDEN), (BATCH, KEY_LENGTH, HIDDEN))
    layer.key_value_dense.bias.assign(_random(2 * HIDDEN, seed=2))  # non-zero: the bias halves count
    memory = ops.convert_to_tensor(_random(BATCH, KEY_LENGTH, HIDDEN, seed=1))
    fused = [_numpy(t) for t in ops.unstack(layer._key_value_heads(memory), 2, axis=2)]
    halves = [_numpy(t) for t in layer._key_and_value_heads(memory)]
    assert halves[0].shape == (BATCH, KEY_LENGTH, HEADS, HIDDEN // HEADS)
    for from_halves, from_fused in zip(halves, fused):
        np.testing.assert_allclose(from_halves, from_fused, atol=1e-5)
    assert np.max(np.abs(halves[0] - halves[1])) > 0.1  # keys and values are different halves


def test_a_decoding_step_projects_the_keys_and_values_of_the_full_projection():
    # One position takes a path without the transpose; it must give project_key_value's keys/values.
    layer = MultiHeadAttention(hidden_dim=16, num_heads=4)
    query = np.random.default_rng(3).normal(size=(3, 1, 16)).astype("float32")
    layer(query)
    for got, expected in zip(layer._new_keys_and_values(query), layer.project_key_value(query)):
        assert tuple(got.shape) == (3, 4, 1, 4)
        np.testing.assert_array_equal(ops.convert_to_numpy(got), ops.convert_to_numpy(expected))


def test_padded_keys_get_zero_weight_and_do_not_change_outputs():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    query, memory = _random(BATCH, QUERY_LENGTH, HIDDEN), _random(BATCH, KEY_LENGTH, HIDDEN, seed=1)
    mask = np.broadcast_to(_padding_mask()[:, None, :], (BATCH, QUERY_LENGTH, KEY_LENGTH))
    outputs, scores = layer(query, memory, attention_mask=mask, return_attention_scores=True)
    scores = _numpy(scores)
    assert scores.shape == (BATCH, HEADS, QUERY_LENGTH, KEY_LENGTH)
    assert np.all(scores[1, :, :, 4:] == 0.0)
    assert np.all(scores[1, :, :, :4] > 0.0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-6)
    # The fused path agrees with the explicit one.
    fused = _numpy(layer(query, memory, attention_mask=mask))
    assert np.max(np.abs(fused - _numpy(outputs))) < 1e-5
    # Whatever sits in the padded positions does not reach the output.
    changed = memory.copy()
    changed[1, 4:] = 100.0
    assert np.max(np.abs(_numpy(layer(query, changed, attention_mask=mask)) - fused)) < 1e-5


def test_mixed_precision_masks_do_not_overflow():
    query = _random(BATCH, QUERY_LENGTH, HIDDEN) * 30.0
    mask = np.broadcast_to(_padding_mask()[:, None, :], (BATCH, QUERY_LENGTH, KEY_LENGTH))
    for policy in ("mixed_float16", "mixed_bfloat16"):
        layer = MultiHeadAttention(HIDDEN, HEADS, dtype=policy)
        outputs = layer(query, _random(BATCH, KEY_LENGTH, HIDDEN, seed=1) * 30.0, attention_mask=mask)
        assert np.all(np.isfinite(_numpy(ops.cast(outputs, "float32")))), policy


@pytest.mark.skipif(keras.backend.backend() != "tensorflow", reason="the TensorFlow graph's ops")
@pytest.mark.parametrize("batch", [BATCH, None])
def test_a_mask_shared_by_the_batch_is_added_with_the_batch_rows(batch):
    """The full pass's causal mask `[1, T, T]` reaches the logits broadcast over the batch (oneDNN's
    fused batched matmul adds a bias shared by the batch many times slower), with the same outputs."""
    import tensorflow as tf

    layer = MultiHeadAttention(HIDDEN, HEADS)
    query = _random(BATCH, QUERY_LENGTH, HIDDEN)
    mask = causal_attention_mask(QUERY_LENGTH, QUERY_LENGTH)
    function = tf.function(lambda x: layer(x, attention_mask=mask), autograph=False)
    graph = function.get_concrete_function(tf.TensorSpec((batch, QUERY_LENGTH, HIDDEN))).graph
    logit_adds = [op for op in graph.get_operations() if op.type == "AddV2" and op.outputs[0].shape.rank == 4]
    assert logit_adds
    for op in logit_adds:
        assert [tensor.shape[0] for tensor in op.inputs] == [batch, batch], op.name
    repeated = np.broadcast_to(_numpy(mask), (BATCH, QUERY_LENGTH, QUERY_LENGTH))
    np.testing.assert_array_equal(_numpy(function(query)), _numpy(layer(query, attention_mask=repeated)))


def test_incremental_self_attention_with_cache_equals_full_pass():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    sequence = _random(BATCH, QUERY_LENGTH, HIDDEN)
    full = _numpy(layer(sequence, attention_mask=causal_attention_mask(QUERY_LENGTH, QUERY_LENGTH)))
    cache_length = QUERY_LENGTH + 3
    cache = layer.empty_cache(BATCH, cache_length)
    steps = []
    for index in range(QUERY_LENGTH):
        step_output, cache = layer(
            sequence[:, index : index + 1],
            attention_mask=causal_attention_mask(1, cache_length, index),
            cache=cache,
            cache_index=index,
        )
        steps.append(_numpy(step_output))
    assert np.max(np.abs(np.concatenate(steps, axis=1) - full)) < 1e-5
    # Head-major (keys, values); the unused tail of both buffers is untouched.
    for buffer in cache:
        assert tuple(buffer.shape) == (BATCH, HEADS, cache_length, HIDDEN // HEADS)
        assert np.all(_numpy(buffer)[:, :, QUERY_LENGTH:] == 0.0)
        assert np.all(np.any(_numpy(buffer)[:, :, :QUERY_LENGTH] != 0.0, axis=-1))


def test_beam_slots_of_a_shared_self_cache_read_through_the_ancestry():
    """Beam search's self caches: `SLOTS` slots per sentence, row r writing slot r % SLOTS at each step
    and reading every earlier position in the slot its mask names (its ancestor's). Each row's output
    must be the full causal pass over the inputs of its own ancestry."""
    slots, length = 3, QUERY_LENGTH
    layer = MultiHeadAttention(HIDDEN, HEADS)
    rows = BATCH * slots
    inputs = _random(rows, length, HIDDEN)  # inputs[r, t]: what the row in slot r % slots feeds at step t
    ancestry = np.random.default_rng(2).integers(0, slots, size=(rows, length))  # slot of the ancestor at p
    own, positions = np.arange(rows) % slots, np.arange(length)
    first = np.arange(rows) - own  # The row of its sentence's slot 0.
    layer(inputs[:, :1])
    cache = layer.empty_cache(BATCH, slots * length)
    for step in range(length):
        read = ancestry.copy()
        read[:, step] = own  # The row's own key at its own step, its ancestors' before.
        visible = (positions <= step)[None, None, :] & (read[:, None, :] == np.arange(slots)[None, :, None])
        outputs, cache = layer(
            inputs[:, step : step + 1],
            attention_mask=visible.reshape(rows, 1, slots * length),
            cache=cache,
            cache_index=step,
        )
        # Every row's history (what its ancestors fed, then its own input), causal: the positions
        # after `step` do not reach it.
        history = inputs[first[:, None] + read, positions[None, :]]
        full = layer(history, attention_mask=causal_attention_mask(length, length))
        np.testing.assert_allclose(_numpy(outputs)[:, 0], _numpy(full)[:, step], atol=1e-5)
    assert [tuple(x.shape) for x in cache] == [(BATCH, HEADS, slots * length, HIDDEN // HEADS)] * 2


def test_a_grouped_bias_and_a_planned_write_attend_as_the_mask_and_the_position_do():
    # What a decoder stack makes once for its layers must give each layer what its own mask and
    # cache index give: the same outputs and the same caches, step after step.
    slots, steps = 2, 3
    rows = BATCH * slots
    layer = MultiHeadAttention(HIDDEN, HEADS)
    inputs = _random(rows, steps, HIDDEN)
    layer(inputs[:, :1])
    plain = planned = layer.empty_cache(BATCH, slots * steps)
    rng = np.random.default_rng(5)
    for step in range(steps):
        visible = rng.random((rows, 1, slots * steps)) < 0.6
        visible[np.arange(rows), 0, (np.arange(rows) % slots) * steps + step] = True  # Its own position.
        expected, plain = layer(inputs[:, step : step + 1], attention_mask=visible, cache=plain, cache_index=step)
        plan = attention_cache.plan_write(planned[0], rows, 1, step, "decoder")
        bias = grouped_bias(visible, rows, 1, planned[0], "decoder")
        got, planned = layer(inputs[:, step : step + 1], attention_mask=bias, cache=planned, cache_index=plan)
        np.testing.assert_allclose(_numpy(got), _numpy(expected), atol=1e-6)
        for got_cache, expected_cache in zip(planned, plain):
            np.testing.assert_array_equal(_numpy(got_cache), _numpy(expected_cache))
    with pytest.raises(ValueError, match="decoder: attention_mask must be boolean"):
        grouped_bias(visible.astype("float32"), rows, 1, planned[0], "decoder")
    with pytest.raises(ValueError, match="decoder: 4 query rows cannot share the keys/values of 3 cache rows"):
        grouped_bias(visible[:4], 4, 1, np.zeros((3, HEADS, slots * steps, HIDDEN // HEADS)), "decoder")


def test_a_shared_key_bias_is_the_grouped_bias_of_the_mask_repeated_per_query_row():
    # A search's encoder mask, made once for all its steps: each sentence's beams see its keys.
    slots = 3
    padding = _padding_mask()
    encoder_keys = np.zeros((BATCH, HEADS, KEY_LENGTH, HIDDEN // HEADS), "float32")
    repeated = np.repeat(padding, slots, axis=0)[:, None, :]
    expected = grouped_bias(repeated, BATCH * slots, 1, encoder_keys, "decoder")
    got = shared_key_bias(padding, slots)
    for got_part, expected_part in zip(got, expected):
        np.testing.assert_array_equal(_numpy(got_part), _numpy(expected_part))
    layer = MultiHeadAttention(HIDDEN, HEADS)
    queries, source = _random(BATCH * slots, 1, HIDDEN), _random(BATCH, KEY_LENGTH, HIDDEN, seed=1)
    layer(queries[:BATCH], source)  # Builds it.
    cache = layer.project_key_value(source)
    attended, _ = layer(queries, attention_mask=got, cache=cache)
    plain = layer(queries, np.repeat(source, slots, axis=0), attention_mask=repeated)
    np.testing.assert_allclose(_numpy(attended), _numpy(plain), atol=1e-5)


def test_slot_positions_beyond_the_slot_are_rejected():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    cache = layer.empty_cache(BATCH, 2 * 4)  # Two slots of 4 positions for 2 * BATCH query rows.
    with pytest.raises(
        ValueError, match=r"positions \[4, 5\) do not fit in a slot of length 4 \(a cache of 8 positions in 2 slots"
    ):
        layer(
            _random(2 * BATCH, 1, HIDDEN), attention_mask=np.ones((2 * BATCH, 1, 8), bool), cache=cache, cache_index=4
        )
    with pytest.raises(ValueError, match="a cache of length 8 cannot hold 3 equal slots"):
        layer(
            _random(3 * BATCH, 1, HIDDEN), attention_mask=np.ones((3 * BATCH, 1, 8), bool), cache=cache, cache_index=0
        )


def test_prefix_then_steps_with_cache_equals_full_pass():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    sequence = _random(BATCH, QUERY_LENGTH, HIDDEN)
    full = _numpy(layer(sequence, attention_mask=causal_attention_mask(QUERY_LENGTH, QUERY_LENGTH)))
    cache = layer.empty_cache(BATCH, QUERY_LENGTH)
    prefix, cache = layer(
        sequence[:, :3], attention_mask=causal_attention_mask(3, QUERY_LENGTH), cache=cache, cache_index=0
    )
    rest, cache = layer(
        sequence[:, 3:], attention_mask=causal_attention_mask(2, QUERY_LENGTH, 3), cache=cache, cache_index=3
    )
    assert np.max(np.abs(np.concatenate([_numpy(prefix), _numpy(rest)], axis=1) - full)) < 1e-5


def test_precomputed_cross_attention_cache_equals_recomputing():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    query, memory = _random(BATCH, QUERY_LENGTH, HIDDEN), _random(BATCH, KEY_LENGTH, HIDDEN, seed=1)
    mask = _padding_mask()[:, None, :]
    direct = _numpy(layer(query, memory, attention_mask=mask))
    cross_cache = layer.project_key_value(memory)
    assert [tuple(x.shape) for x in cross_cache] == [(BATCH, HEADS, KEY_LENGTH, HIDDEN // HEADS)] * 2
    cached, returned_cache = layer(query, attention_mask=mask, cache=cross_cache)
    assert np.max(np.abs(_numpy(cached) - direct)) < 1e-5
    for returned, given in zip(returned_cache, cross_cache, strict=True):
        assert np.array_equal(_numpy(returned), _numpy(given))


def _beams_and_shared_cache(beams):
    """A cross-attention layer, `BATCH * beams` query rows (beam k of sentence b at row b * beams + k),
    the encoder keys/values of the `BATCH` sentences, and the padding mask tiled to the rows."""
    layer = MultiHeadAttention(HIDDEN, HEADS)
    query, memory = _random(BATCH * beams, QUERY_LENGTH, HIDDEN), _random(BATCH, KEY_LENGTH, HIDDEN, seed=1)
    layer(query[:BATCH], memory)
    mask = np.repeat(_padding_mask(), beams, axis=0)[:, None, :]  # [BATCH * beams, 1, KEY_LENGTH]
    return layer, query, layer.project_key_value(memory), mask


def test_beams_read_one_cross_attention_cache_per_sentence():
    beams = 3
    layer, query, shared_cache, mask = _beams_and_shared_cache(beams)
    tiled_cache = tuple(ops.repeat(x, beams, axis=0) for x in shared_cache)
    tiled, _, tiled_weights = layer(query, attention_mask=mask, cache=tiled_cache, return_attention_scores=True)
    shared, returned_cache, shared_weights = layer(
        query, attention_mask=mask, cache=shared_cache, return_attention_scores=True
    )
    assert tuple(shared.shape) == (BATCH * beams, QUERY_LENGTH, HIDDEN)
    np.testing.assert_allclose(_numpy(shared), _numpy(tiled), atol=1e-5)
    assert tuple(shared_weights.shape) == (BATCH * beams, HEADS, QUERY_LENGTH, KEY_LENGTH)
    np.testing.assert_allclose(_numpy(shared_weights), _numpy(tiled_weights), atol=1e-6)
    assert np.all(_numpy(shared_weights)[beams:, :, :, 4:] == 0.0)  # The second sentence's padding.
    for returned, given in zip(returned_cache, shared_cache, strict=True):
        assert returned is given
    # Each row against its own sentence alone: beam k of sentence b reads sentence b's keys.
    for row in (0, beams - 1, beams, 2 * beams - 1):
        sentence = row // beams
        alone = layer(
            query[row : row + 1],
            attention_mask=mask[row : row + 1],
            cache=tuple(x[sentence : sentence + 1] for x in shared_cache),
        )
        np.testing.assert_allclose(_numpy(shared)[row], _numpy(alone[0])[0], atol=1e-5)


@pytest.mark.skipif(
    keras.backend.backend() != "tensorflow", reason="unknown batch sizes exist in TensorFlow graphs only"
)
def test_beams_share_the_cross_attention_cache_with_unknown_batch_sizes():
    import tensorflow as tf

    beams = 2
    layer, query, shared_cache, mask = _beams_and_shared_cache(beams)
    expected = _numpy(
        layer(query, attention_mask=mask, cache=tuple(ops.repeat(x, beams, axis=0) for x in shared_cache))[0]
    )
    head_dim = HIDDEN // HEADS
    attend = tf.function(
        lambda q, m, k, v: layer(q, attention_mask=m, cache=(k, v))[0],
        input_signature=[
            tf.TensorSpec([None, None, HIDDEN], "float32"),
            tf.TensorSpec([None, 1, None], "bool"),
            tf.TensorSpec([None, HEADS, None, head_dim], "float32"),
            tf.TensorSpec([None, HEADS, None, head_dim], "float32"),
        ],
        autograph=False,
    )
    np.testing.assert_allclose(_numpy(attend(query, mask, *shared_cache)), expected, atol=1e-5)


def test_query_rows_not_a_multiple_of_the_cross_cache_batch_are_rejected():
    layer, query, shared_cache, mask = _beams_and_shared_cache(3)
    with pytest.raises(ValueError, match="5 query rows cannot share the keys/values of 2 cache rows"):
        layer(query[:5], attention_mask=mask[:5], cache=shared_cache)


def test_attention_dropout_acts_in_training_only():
    query, memory = _random(BATCH, QUERY_LENGTH, HIDDEN), _random(BATCH, KEY_LENGTH, HIDDEN, seed=1)
    mask = _padding_mask()[:, None, :]
    layer = MultiHeadAttention(HIDDEN, HEADS, attention_dropout=0.5)
    inference = _numpy(layer(query, memory, attention_mask=mask))
    fused = MultiHeadAttention(HIDDEN, HEADS)  # Same weights, no attention dropout: the fused kernel.
    fused(query, memory, attention_mask=mask)
    for name in ("query_dense", "key_value_dense", "output_dense"):
        getattr(fused, name).set_weights(getattr(layer, name).get_weights())
    assert np.max(np.abs(_numpy(fused(query, memory, attention_mask=mask)) - inference)) < 1e-5
    trained, weights = layer(query, memory, attention_mask=mask, training=True, return_attention_scores=True)
    assert np.max(np.abs(_numpy(trained) - inference)) > 1e-2
    # The returned weights are the softmax before dropout: distributions over the real keys.
    np.testing.assert_allclose(_numpy(weights).sum(axis=-1), 1.0, rtol=1e-5)
    assert np.all(_numpy(weights)[1, :, :, 4:] == 0.0)


def test_hidden_dim_not_divisible_by_heads_is_rejected():
    with pytest.raises(ValueError, match="multiple of num_heads=3.*hidden_dim=16"):
        MultiHeadAttention(16, 3)


def test_wrong_rank_and_dtype_are_rejected():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    with pytest.raises(ValueError, match="rank 3.*received shape"):
        layer(_random(QUERY_LENGTH, HIDDEN))
    with pytest.raises(ValueError, match="last dimension hidden_dim=16.*received shape"):
        layer(_random(BATCH, QUERY_LENGTH, HIDDEN + 1))
    with pytest.raises(ValueError, match="boolean.*received dtype"):
        layer(
            _random(BATCH, QUERY_LENGTH, HIDDEN), attention_mask=np.ones((BATCH, QUERY_LENGTH, QUERY_LENGTH), "float32")
        )
    with pytest.raises(ValueError, match="attention_mask must have rank 3"):
        layer(_random(BATCH, QUERY_LENGTH, HIDDEN), attention_mask=np.ones((BATCH, QUERY_LENGTH), bool))


def test_malformed_cache_is_rejected():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    step = _random(BATCH, 1, HIDDEN)
    keys, values = layer.empty_cache(BATCH, 4)
    mask = causal_attention_mask(1, 4, 0)
    with pytest.raises(
        ValueError, match=r"cache must be a pair \(keys, values\), each \[batch, 4, cache_length, 4\], received \w+"
    ):
        layer(step, attention_mask=mask, cache=ops.stack([keys, values], axis=1), cache_index=0)
    with pytest.raises(ValueError, match=r"each \[batch, 4, cache_length, 4\]; its values have shape \(2, 4, 4\)"):
        layer(step, attention_mask=mask, cache=(keys, values[..., 0]), cache_index=0)


def test_decode_step_beyond_cache_is_rejected():
    layer = MultiHeadAttention(HIDDEN, HEADS)
    cache = layer.empty_cache(BATCH, 4)
    with pytest.raises(ValueError, match=r"positions \[4, 5\) do not fit in a cache of length 4"):
        layer(_random(BATCH, 1, HIDDEN), attention_mask=causal_attention_mask(1, 4, 4), cache=cache, cache_index=4)
