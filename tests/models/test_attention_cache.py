import numpy as np
import pytest
from keras import ops

from models import attention_cache

HEADS, HEAD_DIM = 2, 3


def test_empty_cache_is_two_zero_buffers_of_the_documented_shape():
    keys, values = attention_cache.empty_cache(4, HEADS, 6, HEAD_DIM, "float32")
    for buffer in (keys, values):
        assert tuple(buffer.shape) == (4, HEADS, 6, HEAD_DIM)
        assert not np.any(ops.convert_to_numpy(buffer))


def test_query_rows_write_their_own_slots_at_the_cache_index():
    # 2 cache rows of 2 slots of 3 positions, 4 query rows of 1 position each, written at position 1.
    cache = attention_cache.empty_cache(2, HEADS, 6, HEAD_DIM, "float32")
    new = np.arange(4 * HEADS * HEAD_DIM, dtype="float32").reshape(4, HEADS, 1, HEAD_DIM) + 1
    keys, values = attention_cache.write_cache(cache, new, -new, 1, "attention")
    expected = np.zeros((2, HEADS, 6, HEAD_DIM), "float32")
    for row in range(4):
        expected[row // 2, :, (row % 2) * 3 + 1] = new[row, :, 0]
    np.testing.assert_array_equal(ops.convert_to_numpy(keys), expected)
    np.testing.assert_array_equal(ops.convert_to_numpy(values), -expected)


def test_rows_per_cache_row_and_its_errors():
    queries, keys = np.zeros((6, 1, HEADS, HEAD_DIM)), np.zeros((2, HEADS, 4, HEAD_DIM))
    assert attention_cache.rows_per_cache_row(queries.shape[0], keys, "attention") == 3
    with pytest.raises(ValueError, match="attention: 6 query rows cannot share"):
        attention_cache.rows_per_cache_row(queries.shape[0], np.zeros((4, HEADS, 4, HEAD_DIM)), "attention")


def test_positions_beyond_a_slot_and_malformed_caches_are_rejected():
    cache = attention_cache.empty_cache(1, HEADS, 4, HEAD_DIM, "float32")
    new = np.zeros((2, HEADS, 1, HEAD_DIM), "float32")  # two slots of 2 positions
    with pytest.raises(ValueError, match=r"decoding positions \[2, 3\) do not fit in a slot of length 2"):
        attention_cache.write_cache(cache, new, new, 2, "attention")
    with pytest.raises(ValueError, match="cache must be a pair"):
        attention_cache.check_cache(cache[0], HEADS, HEAD_DIM, "attention")
    with pytest.raises(ValueError, match="its keys have shape"):
        attention_cache.check_cache((cache[0][:, :1], cache[1]), HEADS, HEAD_DIM, "attention")


def test_a_planned_write_writes_as_the_position_does_in_every_cache_of_the_shape():
    # One plan (2 cache rows of 2 slots, 4 query rows at position 2) serves two layers' caches.
    plan = attention_cache.plan_write(np.zeros((2, HEADS, 6, HEAD_DIM)), 4, 1, 2, "decoder")
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        cache = tuple(ops.convert_to_tensor(rng.normal(size=(2, HEADS, 6, HEAD_DIM)).astype("float32")) for _ in "kv")
        new = rng.normal(size=(4, HEADS, 1, HEAD_DIM)).astype("float32")
        planned = attention_cache.write_cache(cache, new, -new, plan, "layer")
        plain = attention_cache.write_cache(cache, new, -new, 2, "layer")
        for got, expected in zip(planned, plain):
            np.testing.assert_array_equal(ops.convert_to_numpy(got), ops.convert_to_numpy(expected))
    assert int(attention_cache.position_of(plan)) == 2 and attention_cache.position_of(2) == 2
    with pytest.raises(ValueError, match=r"decoder: decoding positions \[3, 4\) do not fit in a slot of length 3"):
        attention_cache.plan_write(np.zeros((2, HEADS, 6, HEAD_DIM)), 4, 1, 3, "decoder")
