import keras
import numpy as np
import pytest

from models.transformer_decoder import TransformerDecoder, TransformerDecoderLayer, causal_attention_mask
from tests.models.layer_contract import run_layer_test

OPTIONS = dict(hidden_dim=16, num_heads=4, intermediate_dim=32, dropout=0.1)
TARGET_LENGTH = 5


def _inputs():
    rng = np.random.default_rng(0)
    target = rng.normal(size=(2, TARGET_LENGTH, 16)).astype("float32")
    memory = rng.normal(size=(2, 6, 16)).astype("float32")
    mask = np.ones((2, 6), bool)
    mask[1, 3:] = False
    return target, memory, mask


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_causal_mask_values():
    expected = np.array([[True, False, False], [True, True, False], [True, True, True]])
    assert np.array_equal(_numpy(causal_attention_mask(3, 3))[0], expected)
    # Two queries at positions 2 and 3 over a cache of 5.
    expected_offset = np.array([[True, True, True, False, False], [True, True, True, True, False]])
    assert np.array_equal(_numpy(causal_attention_mask(2, 5, 2))[0], expected_offset)


def test_layer_contract():
    target, memory, mask = _inputs()
    run_layer_test(
        TransformerDecoderLayer,
        OPTIONS,
        {"inputs": target, "encoder_output": memory, "encoder_padding_mask": mask},
        (2, TARGET_LENGTH, 16),
    )


@pytest.mark.parametrize("normalize_first", [False, True])
def test_stack_contract(normalize_first):
    target, memory, mask = _inputs()
    # One layer: the stack's own config, weights and final norm around it (layers in a chain: the
    # incremental decoding tests' two).
    # A fit step where the stack has a weight of its own, the pre-norm final norm: post-norm its
    # weights are its layer's, which test_layer_contract's fit step moves.
    run_layer_test(
        TransformerDecoder,
        {"num_layers": 1, "normalize_first": normalize_first, **OPTIONS},
        {"inputs": target, "encoder_output": memory, "encoder_padding_mask": mask},
        (2, TARGET_LENGTH, 16),
        fit=normalize_first,
    )


def test_layer_incremental_decoding_equals_full_pass():
    target, memory, mask = _inputs()
    layer = TransformerDecoderLayer(**OPTIONS)
    full = _numpy(layer(target, memory, mask))
    self_cache = layer.self_attention.empty_cache(2, TARGET_LENGTH + 2)
    cross_cache = layer.cross_attention.project_key_value(memory)
    steps = []
    for index in range(TARGET_LENGTH):
        output, self_cache = layer(
            target[:, index : index + 1], None, mask, self_cache=self_cache, cross_cache=cross_cache, cache_index=index
        )
        steps.append(_numpy(output))
    assert np.max(np.abs(np.concatenate(steps, axis=1) - full)) < 1e-5


@pytest.mark.parametrize("normalize_first", [False, True])
def test_stack_incremental_decoding_equals_full_pass(normalize_first):
    target, memory, mask = _inputs()
    decoder = TransformerDecoder(num_layers=3, normalize_first=normalize_first, **OPTIONS)
    full = _numpy(decoder(target, memory, mask))
    self_caches = decoder.empty_self_caches(2, TARGET_LENGTH)
    cross_caches = decoder.cross_caches(memory)
    steps = []
    for index in range(TARGET_LENGTH):
        output, self_caches = decoder(
            target[:, index : index + 1],
            None,
            mask,
            self_caches=self_caches,
            cross_caches=cross_caches,
            cache_index=index,
        )
        steps.append(_numpy(output))
    assert np.max(np.abs(np.concatenate(steps, axis=1) - full)) < 1e-5


def test_causality_by_perturbation():
    target, memory, mask = _inputs()
    decoder = TransformerDecoder(num_layers=2, **OPTIONS)
    base = _numpy(decoder(target, memory, mask))
    for position in range(1, TARGET_LENGTH):
        changed = target.copy()
        changed[:, position] += 5.0
        outputs = _numpy(decoder(changed, memory, mask))
        assert np.max(np.abs(outputs[:, :position] - base[:, :position])) < 1e-5
        assert np.max(np.abs(outputs[:, position] - base[:, position])) > 1e-3


def test_returns_last_layer_cross_attention():
    target, memory, mask = _inputs()
    decoder = TransformerDecoder(num_layers=2, **OPTIONS)
    outputs, scores = decoder(target, memory, mask, return_attention_scores=True)
    scores = _numpy(scores)
    assert scores.shape == (2, 4, TARGET_LENGTH, 6)
    assert np.all(scores[1, :, :, 3:] == 0.0)
    assert np.max(np.abs(_numpy(outputs) - _numpy(decoder(target, memory, mask)))) < 1e-5


def test_attention_layer_picks_the_layer_whose_cross_attention_is_returned():
    target, memory, mask = _inputs()
    decoder = TransformerDecoder(num_layers=2, **OPTIONS)
    _, first = decoder(target, memory, mask, return_attention_scores=True, attention_layer=0)
    _, own = decoder.decoder_layers[0](target, memory, mask, return_attention_scores=True)
    assert np.max(np.abs(_numpy(first) - _numpy(own))) < 1e-6
    _, last = decoder(target, memory, mask, return_attention_scores=True, attention_layer=-1)
    _, second = decoder(target, memory, mask, return_attention_scores=True, attention_layer=1)
    assert np.array_equal(_numpy(last), _numpy(second)) and np.max(np.abs(_numpy(last) - _numpy(first))) > 1e-3
    with pytest.raises(ValueError, match=r"attention_layer must be in \[-2, 1\], received 2"):
        decoder(target, memory, mask, return_attention_scores=True, attention_layer=2)


def test_bad_calls_are_rejected():
    target, memory, mask = _inputs()
    decoder = TransformerDecoder(num_layers=2, **OPTIONS)
    decoder(target, memory, mask)
    with pytest.raises(ValueError, match="needs `encoder_output` or a precomputed `cross_cache`"):
        decoder(target, None, mask)
    with pytest.raises(ValueError, match="expected 2 self_caches, received 1"):
        decoder(target, memory, mask, self_caches=decoder.empty_self_caches(2, 8)[:1], cache_index=0)
    # The stack plans one write for every layer's cache, so the caches must share their shape.
    mixed = [decoder.empty_self_caches(2, 8)[0], decoder.empty_self_caches(2, 6)[1]]
    with pytest.raises(
        ValueError, match=r"self caches must share one shape, received \[\(2, 4, 6, 4\), \(2, 4, 8, 4\)\]"
    ):
        decoder(target[:, :1], memory, mask, self_caches=mixed, cache_index=0)
    cross = decoder.cross_caches(memory)
    with pytest.raises(
        ValueError, match=r"cross caches must share one shape, received \[\(2, 4, 5, 4\), \(2, 4, 6, 4\)\]"
    ):
        decoder(target[:, :1], None, mask[:, :5], cross_caches=[cross[0], decoder.cross_caches(memory[:, :5])[1]])


def test_slotted_self_cache_without_a_mask_is_rejected():
    # A self cache of one row for two input rows holds a slot per row: the causal mask would show
    # every row slot 0 only, so the layer asks for the mask that says which slots each row reads.
    target, memory, mask = _inputs()
    layer = TransformerDecoderLayer(**OPTIONS)
    layer(target, memory, mask)
    shared = layer.self_attention.empty_cache(1, 2 * TARGET_LENGTH)
    with pytest.raises(ValueError, match="self cache of 1 rows for 2 input rows .* needs `self_attention_mask`"):
        layer(target[:, :1], memory, mask, self_cache=shared, cache_index=0)
    visible = np.zeros((2, 1, 2 * TARGET_LENGTH), bool)
    visible[0, 0, 0] = visible[1, 0, TARGET_LENGTH] = True  # Each row's own first position.
    output, _ = layer(target[:, :1], memory, mask, self_cache=shared, cache_index=0, self_attention_mask=visible)
    own = layer(
        target[:, :1], memory, mask, self_cache=layer.self_attention.empty_cache(2, TARGET_LENGTH), cache_index=0
    )[0]
    np.testing.assert_allclose(_numpy(output), _numpy(own), atol=1e-5)
