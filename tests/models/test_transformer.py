import os
import time

import keras
import numpy as np
import pytest

from common.special_ids import BOS_ID, EOS_ID, PAD_ID
from models.learning_rate_schedule import transformer_optimizer
from models.losses import LabelSmoothedCrossEntropy
from models.metrics import MaskedAccuracy
from models.presets import model_config
from models.search_config import SearchConfig
from models.transformer import Transformer
from models.translation import translate_ids
from tests.helpers import build_before_fit
from tests.models import small_model
from tests.models.small_model import VOCAB, small_batch

SMALL = dict(small_model.SMALL, num_layers=2, dropout=0.1)


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def test_call_gives_float32_logits():
    model = Transformer(VOCAB, **SMALL)
    source, target = small_batch()
    logits = model((source, target))
    assert tuple(logits.shape) == (3, 6, VOCAB)
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"


def test_one_shared_embedding_variable():
    model = Transformer(VOCAB, **SMALL)
    model.build()
    tables = [w for w in model.weights if tuple(w.shape) == (VOCAB, SMALL["hidden_dim"])]
    assert len(tables) == 1
    assert "shared_embedding" in tables[0].path
    # Changing that one matrix changes the embedding of a source token, of a target token and the logits.
    source, target = small_batch()
    before = _numpy(model((source, target)))
    table = _numpy(tables[0]).copy()
    table[5] += 1.0
    tables[0].assign(table)
    assert np.max(np.abs(_numpy(model((source, target)))[..., 5] - before[..., 5])) > 1e-3


def test_separate_vocabularies_give_the_encoder_its_own_matrix(tmp_path):
    source_vocab = VOCAB + 9
    model = Transformer(VOCAB, source_vocabulary_size=source_vocab, **dict(SMALL, num_layers=1))
    model.build()
    tables = {w.path.split("/")[-2]: w for w in model.weights if w.path.endswith("embeddings")}
    assert {name: tuple(table.shape) for name, table in tables.items()} == {
        "target_embedding": (VOCAB, SMALL["hidden_dim"]),
        "source_embedding": (source_vocab, SMALL["hidden_dim"]),
    }
    # Source ids beyond the target vocabulary are valid; the logits span the target vocabulary.
    source, target = small_batch()
    source[0, 0] = source_vocab - 1
    before = _numpy(model((source, target)))
    assert before.shape == (3, 6, VOCAB)
    # The target matrix is the projection: a change to one row moves that token's logits alone
    # where the target does not hold it; the source matrix moves the logits through the encoder.
    for name, row in (("target_embedding", 3), ("source_embedding", source_vocab - 1)):
        table = _numpy(tables[name]).copy()
        table[row] += (
            np.arange(SMALL["hidden_dim"]) / SMALL["hidden_dim"]
        )  # not constant: the logits' LayerNorm input sums to 0
        tables[name].assign(table)
        after = _numpy(model((source, target)))
        changed = np.abs(after - before).max(axis=(0, 1)) > 1e-4
        assert changed.tolist() == ([i == 3 for i in range(VOCAB)] if name == "target_embedding" else [True] * VOCAB)
        before = after
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config()["source_vocabulary_size"] == source_vocab
    assert np.array_equal(_numpy(loaded((source, target))), before)
    # Int8 weights quantize both matrices.
    loaded.quantize("int8")
    assert [keras.backend.standardize_dtype(e.embeddings.dtype) for e in loaded.embeddings] == ["int8", "int8"]
    assert np.max(np.abs(_numpy(loaded((source, target))) - before)) < 0.1


def _expected_parameters(vocab, layers, d_model, d_ff, decoder_layers=None):
    attention = 4 * d_model * d_model + 4 * d_model  # W^Q, W^K, W^V, W^O and their biases.
    feed_forward = 2 * d_model * d_ff + d_ff + d_model
    layer_norm = 2 * d_model
    encoder_layer = attention + feed_forward + 2 * layer_norm
    decoder_layer = 2 * attention + feed_forward + 3 * layer_norm
    return (
        vocab * d_model
        + layers * encoder_layer
        + (layers if decoder_layers is None else decoder_layers) * decoder_layer
    )


# Each preset's count from its shapes (the paper's with a 37k vocabulary), and a built model of its
# widths counted as the formula counts it: one layer of each stack (the depth's share is the
# deep-encoder test's). JAX builds the base preset's widths, the TensorFlow run every preset's.
PRESET_COUNTS = [("base", 63.1)] + ([("big", 214.2)] if keras.backend.backend() != "jax" else [])


@pytest.mark.parametrize("preset, expected_millions", PRESET_COUNTS)
def test_parameter_counts(preset, expected_millions):
    config = model_config(preset)
    widths = config["hidden_dim"], config["intermediate_dim"]
    assert abs(_expected_parameters(37000, config["num_layers"], *widths) / 1e6 - expected_millions) < 0.05
    model = Transformer(VOCAB, **dict(config, num_layers=1))
    model.build()
    assert model.count_params() == _expected_parameters(VOCAB, 1, *widths)


def test_a_deep_encoder_and_a_shallow_decoder(tmp_path):
    """A student's stacks (3 encoder layers, 1 decoder layer): its weights, their names, the cache,
    a `.keras` round trip, int8 weights and a beam search with them."""
    model = Transformer(VOCAB, **dict(SMALL, num_layers=3), num_decoder_layers=1)
    model.build()
    assert (len(model.encoder.encoder_layers), len(model.decoder.decoder_layers)) == (3, 1)
    paths = {w.path.split("/", 1)[1] for w in model.weights}  # Without the model's own name.
    layers = {tuple(path.split("/")[:2]) for path in paths if path.startswith(("encoder/", "decoder/"))}
    assert layers == {("encoder", f"layer_{i}") for i in range(3)} | {("decoder", "layer_0")}
    assert model.count_params() == _expected_parameters(VOCAB, 3, 16, 32, decoder_layers=1)
    # The weights of an encoder and a decoder layer are named as in a model of equal stacks.
    equal = Transformer(VOCAB, **dict(SMALL, num_layers=3))
    equal.build()
    assert paths < {w.path.split("/", 1)[1] for w in equal.weights}
    source, target = small_batch()
    full = _numpy(model((source, target)))
    encoder_output, padding_mask = model.encode(source)
    cache = model.initial_cache(encoder_output, cache_length=target.shape[1])
    assert len(cache["self"]) == len(cache["cross"]) == 1
    logits, _ = model.decode(target, encoder_padding_mask=padding_mask, cache=cache, cache_index=0)
    assert np.max(np.abs(_numpy(logits) - full)) < 1e-4
    path = os.path.join(tmp_path, "student.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_config() == model.get_config() and loaded.get_config()["num_decoder_layers"] == 1
    assert np.array_equal(_numpy(loaded((source, target))), full)
    loaded.quantize("int8")  # As the int8 export does.
    assert np.max(np.abs(_numpy(loaded((source, target))) - full)) < 0.1
    ids, scores = translate_ids(loaded, source, SearchConfig(beam_size=2, max_extra_length=4))
    assert tuple(ids.shape) == (3, 1, source.shape[1] + 4) and np.all(np.isfinite(_numpy(scores)))


def test_equal_stacks_keep_the_config_of_models_without_num_decoder_layers():
    """Every model, .keras file and config.json written before `num_decoder_layers` has equal stacks."""
    assert "num_decoder_layers" not in Transformer(VOCAB, **SMALL).get_config()
    assert "num_decoder_layers" not in Transformer(VOCAB, **SMALL, num_decoder_layers=2).get_config()
    assert Transformer(VOCAB, **SMALL).num_decoder_layers == SMALL["num_layers"]
    for value in (0, -1, 1.5):
        with pytest.raises(ValueError, match=f"num_decoder_layers must be a positive int or None, received {value}"):
            Transformer(VOCAB, **SMALL, num_decoder_layers=value)


@pytest.mark.parametrize("normalize_first", [False, True])
def test_incremental_decoding_with_cache_equals_full_pass(normalize_first):
    model = Transformer(VOCAB, normalize_first=normalize_first, **SMALL)
    source, target = small_batch()
    full = _numpy(model((source, target)))
    encoder_output, padding_mask = model.encode(source)
    cache = model.initial_cache(encoder_output, cache_length=10)
    steps = []
    for index in range(target.shape[1]):
        logits, cache = model.decode(
            target[:, index : index + 1], encoder_padding_mask=padding_mask, cache=cache, cache_index=index
        )
        steps.append(_numpy(logits))
    assert np.max(np.abs(np.concatenate(steps, axis=1) - full)) < 1e-4
    # A whole prefix at once, then one step, gives the same logits too.
    cache = model.initial_cache(encoder_output, cache_length=10)
    prefix, cache = model.decode(target[:, :4], encoder_padding_mask=padding_mask, cache=cache, cache_index=0)
    last, cache = model.decode(target[:, 4:5], encoder_padding_mask=padding_mask, cache=cache, cache_index=4)
    assert np.max(np.abs(_numpy(prefix) - full[:, :4])) < 1e-4
    assert np.max(np.abs(_numpy(last) - full[:, 4:5])) < 1e-4


def test_causality_on_target_tokens():
    model = Transformer(VOCAB, **SMALL)
    source, target = small_batch()
    base = _numpy(model((source, target)))
    for position in range(1, target.shape[1]):
        changed = target.copy()
        changed[:, position] = (changed[:, position] + 1 - 4) % (VOCAB - 4) + 4
        logits = _numpy(model((source, changed)))
        assert np.max(np.abs(logits[:, :position] - base[:, :position])) < 1e-5
        assert np.max(np.abs(logits[:, position] - base[:, position])) > 1e-4


def test_source_padding_does_not_change_the_translation_logits():
    model = Transformer(VOCAB, **SMALL)
    source, target = small_batch()
    longer = np.concatenate([source, np.full((3, 4), PAD_ID, "int32")], axis=1)
    assert np.max(np.abs(_numpy(model((longer, target))) - _numpy(model((source, target))))) < 1e-5


# One layer of each stack (what each layer does), trained under a mixed policy, then through a
# `.keras` file: its config, its logits and its optimizer's step count come back. The stacks' naming
# goes through a file in the deep-encoder test. Float16 trains under TensorFlow only: XLA:CPU has no
# float16 dot_general with float32 accumulation (the gradient of JAX's attention), so float16
# training under JAX runs on GPUs only (the layers' contract calls each layer in float16 there).
POLICIES = [pytest.param("mixed_bfloat16", marks=pytest.mark.slow)]
POLICIES += ["mixed_float16"] if keras.backend.backend() != "jax" else []


@pytest.mark.parametrize("policy", POLICIES)
def test_mixed_precision_trains_and_the_trained_model_round_trips_through_a_keras_file(policy, tmp_path):
    keras.config.set_dtype_policy(policy)
    model = Transformer(VOCAB, normalize_first=True, **dict(SMALL, num_layers=1))
    source, target = small_batch()
    logits = model((source, target))
    assert keras.backend.standardize_dtype(logits.dtype) == "float32"
    assert all(keras.backend.standardize_dtype(w.dtype) == "float32" for w in model.weights)
    optimizer = transformer_optimizer(16, 10)
    if policy == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
    model.compile(optimizer=optimizer, loss=LabelSmoothedCrossEntropy(), metrics=[MaskedAccuracy()])
    history = build_before_fit(model).fit((source, target), target, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    expected = _numpy(model((source, target)))
    path = os.path.join(tmp_path, "model.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, Transformer)
    assert loaded.get_config() == model.get_config()
    assert np.array_equal(_numpy(loaded((source, target))), expected)
    assert int(_numpy(loaded.optimizer.iterations)) == int(_numpy(model.optimizer.iterations)) > 0


def test_mixed_precision_decoding_keeps_caches_in_the_compute_dtype():
    keras.config.set_dtype_policy("mixed_bfloat16")
    model = Transformer(VOCAB, **SMALL)
    source, target = small_batch()
    full = _numpy(model((source, target)))
    encoder_output, padding_mask = model.encode(source)
    cache = model.initial_cache(encoder_output, cache_length=target.shape[1])
    steps = []
    for index in range(target.shape[1]):
        logits, cache = model.decode(
            target[:, index : index + 1], encoder_padding_mask=padding_mask, cache=cache, cache_index=index
        )
        steps.append(_numpy(logits))
    buffers = keras.tree.flatten(cache)
    assert len(buffers) == 2 * 2 * SMALL["num_layers"]  # self and cross (keys, values) per layer
    assert {keras.backend.standardize_dtype(x.dtype) for x in buffers} == {"bfloat16"}
    incremental = np.concatenate(steps, axis=1)
    assert incremental.dtype == np.float32
    # bfloat16 keeps 8 bits of mantissa: the two orders of computation agree to about 1%.
    np.testing.assert_allclose(incremental, full, atol=0.05 * np.abs(full).max())


def test_bad_inputs_are_rejected():
    with pytest.raises(ValueError, match="divisible by num_heads"):
        Transformer(VOCAB, num_layers=1, hidden_dim=30, num_heads=4)
    with pytest.raises(ValueError, match="hidden_size"):  # A misspelt option is not ignored.
        Transformer(VOCAB, num_layers=1, hidden_size=16)
    with pytest.raises(TypeError):  # Options after num_layers are keyword-only.
        Transformer(VOCAB, 1, 16)
    model = Transformer(VOCAB, **SMALL)
    source, target = small_batch()
    with pytest.raises(ValueError, match=r"expects inputs \(source_ids, target_input_ids\), received"):
        model(source)
    with pytest.raises(ValueError, match=r"`source_ids` must have rank 2 \[batch, length\], received shape"):
        model((source[0], target))
    with pytest.raises(ValueError, match="`target_ids` must hold integer token ids, received dtype bool"):
        model((source, target > 5))
    with pytest.raises(ValueError, match="`source_ids` must hold integer token ids, received dtype float32"):
        model.encode(source.astype("float32"))
    encoder_output, padding_mask = model.encode(source)
    cache = model.initial_cache(encoder_output, cache_length=3)
    with pytest.raises(ValueError, match=r"positions \[3, 4\) do not fit in a cache of length 3"):
        model.decode(target[:, :1], encoder_padding_mask=padding_mask, cache=cache, cache_index=3)
    with pytest.raises(ValueError, match="cache_length must be a positive int, received 0"):
        model.initial_cache(encoder_output, cache_length=0)


def _copy_task(rng, batch, length):
    """Sources of random digit ids (4..13); the target is the source reversed, then EOS."""
    digits = rng.integers(4, 14, size=(batch, length)).astype("int32")
    source = np.concatenate([digits, np.full((batch, 1), EOS_ID, "int32")], axis=1)
    reversed_digits = digits[:, ::-1]
    target_in = np.concatenate([np.full((batch, 1), BOS_ID, "int32"), reversed_digits], axis=1)
    target_out = np.concatenate([reversed_digits, np.full((batch, 1), EOS_ID, "int32")], axis=1)
    return source, target_in, target_out


@pytest.mark.slow
def test_tiny_model_learns_to_reverse_digit_strings():
    rng = np.random.default_rng(0)
    source, target_in, target_out = _copy_task(rng, 1024, 5)
    model = Transformer(14, num_layers=1, hidden_dim=64, num_heads=4, intermediate_dim=128, dropout=0.0)
    # Scale 0.25 (at 0.5 the last epochs can end on a loss spike): in 128 steps, seeds 1-4 and 1234
    # all end at loss <= 0.045, held-out accuracy >= 0.99 (chance: 0.1).
    model.compile(
        optimizer=transformer_optimizer(64, warmup_steps=50, scale=0.25),
        loss=LabelSmoothedCrossEntropy(label_smoothing=0.0),
        metrics=[MaskedAccuracy()],
    )
    start = time.perf_counter()
    build_before_fit(model).fit((source, target_in), target_out, batch_size=64, epochs=8, verbose=0)
    elapsed = time.perf_counter() - start
    loss = model.evaluate((source, target_in), target_out, batch_size=256, verbose=0, return_dict=True)["loss"]
    test_source, test_in, test_out = _copy_task(np.random.default_rng(1), 256, 5)
    predictions = np.argmax(_numpy(model((test_source, test_in))), axis=-1)
    accuracy = np.mean(predictions == test_out)
    print(f"reverse task: training loss {loss:.4f}, held-out accuracy {accuracy:.4f}, {elapsed:.1f}s")
    assert loss < 0.1
    assert accuracy > 0.98
