"""Beam-search translation speed of `models/` beside keras-hub's `BeamSampler`, in one run.

Both candidates get random weights of the same sizes, the same batch of random source sentences,
beam 4, and produce exactly `--output_length` tokens per hypothesis (no early stop), so they do the
same number of decoder steps over the same shapes:

- `ours`: `models.translation.translate_ids` (encoder once, decoder one position per step over a
  preallocated key/value cache, `models.beam_search.beam_search` with its alive/finished sets and
  length penalty), compiled the way `inference.translator.Translator` compiles it (`tf.function`
  without XLA on TensorFlow, `jax.jit` on JAX). Equal lengths: `max_decode_length =
  --output_length` caps every hypothesis (a hypothesis reaching it is finished there), and the
  model is wrapped so that `decode` adds a -1e9 bias to the EOS logit, hence no hypothesis ends
  earlier and the search cannot stop early.
- `keras_hub`: keras-hub's cached `TransformerDecoder` layers (with `TransformerEncoder`,
  `ReversibleEmbedding` tied output, `PositionEmbedding`) driven by `keras_hub.samplers.BeamSampler`
  exactly as keras-hub's `BartSeq2SeqLM.generate_step` drives them: one decoder pass over the whole
  prompt seeds the self and cross caches, then the sampler's loop feeds one token per step, with the
  encoder output, its mask and the caches riding in the sampler's cache (which it tiles per beam and
  reorders every step). The prompt is BOS + `--output_length` free positions and no stop token is
  given, so the loop runs `--output_length` steps. Compiled the same way as ours.

Each candidate is called once to compile (not timed), then `--repeats` times; the result is
fetched to NumPy inside the timed region. Reported: median seconds per batch, sentences per second
and the ratio ours / keras_hub.

    python benchmarks/beam_search_speed.py            # the issue's setting: d_model 256, d_ff 1024,
                                                     # 4 heads, 3 layers, 8k vocab, batch 32, 40 tokens
"""

import argparse
import json
import os
import platform
import statistics
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_PREFIX = "BEAM_SEARCH_SPEED_RESULT "


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend",
        default=None,
        choices=("tensorflow", "jax"),
        help="Keras backend (default: $KERAS_BACKEND, else tensorflow).",
    )
    parser.add_argument("--num_layers", type=int, default=3)
    parser.add_argument("--hidden_dim", type=int, default=256)
    parser.add_argument("--intermediate_dim", type=int, default=1024)
    parser.add_argument("--num_heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--batch", type=int, default=32, help="sentences per call (default: 32).")
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--output_length", type=int, default=40, help="tokens produced per hypothesis.")
    parser.add_argument(
        "--source_lengths",
        default="10,31",
        help="min,max source tokens before EOS (uniform); padded to a multiple of 8.",
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per candidate (median).")
    parser.add_argument("--candidates", default="ours,keras_hub")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the result to this JSON file.")
    parser.add_argument(
        "--profile_dir",
        default=None,
        help="under JAX, trace one more call per candidate into DIR/<candidate> "
        "(summarise with benchmarks/jax_trace_summary.py --steps 1).",
    )
    return parser.parse_args(argv)


def source_batch(args):
    """int32 `[batch, padded_length]`: random tokens (ids >= 4), EOS, PAD; and the lengths."""
    import numpy as np

    from common.special_ids import EOS_ID, PAD_ID

    low, high = (int(v) for v in args.source_lengths.split(","))
    rng = np.random.default_rng(args.seed)
    lengths = rng.integers(low, high + 1, size=args.batch)
    padded = 8 * -(-(int(lengths.max()) + 1) // 8)
    source = np.full((args.batch, padded), PAD_ID, dtype="int32")
    for row, length in enumerate(lengths):
        source[row, :length] = rng.integers(4, args.vocab, size=length)
        source[row, length] = EOS_ID
    return source


def build_ours(args):
    from inference.translator import compile_search
    from models.search_config import SearchConfig
    from models.transformer import Transformer
    from models.translation import translate_ids
    from tests.helpers import EosBiasModel

    model = Transformer(
        args.vocab,
        num_layers=args.num_layers,
        hidden_dim=args.hidden_dim,
        num_heads=args.num_heads,
        intermediate_dim=args.intermediate_dim,
        dropout=0.0,
    )
    model.build()
    wrapped = EosBiasModel(model, -1e9)  # no hypothesis ends before the maximum length

    def translate(source_ids):
        return translate_ids(
            wrapped,
            source_ids,
            search=SearchConfig(beam_size=args.beam, alpha=0.6, max_extra_length=args.output_length),
            max_decode_length=args.output_length,
        ).ids

    return compile_search(translate, model.variables)


def build_keras_hub(args):
    import numpy as np
    from keras import ops

    from common.special_ids import BOS_ID, PAD_ID

    source_length = source_batch(args).shape[1]
    prompt_length = args.output_length + 1  # BOS + the generated tokens
    sizes = dict(
        num_layers=args.num_layers,
        hidden_dim=args.hidden_dim,
        intermediate_dim=args.intermediate_dim,
        num_heads=args.num_heads,
    )
    generate = keras_hub_search(args.vocab, sizes, args.beam, source_length, prompt_length)
    prompt = np.full((args.batch, prompt_length), PAD_ID, dtype="int32")
    prompt[:, 0] = BOS_ID
    prompt, start = ops.convert_to_tensor(prompt), ops.convert_to_tensor(1, "int32")
    return lambda source_ids: generate(source_ids, prompt, start)


def keras_hub_search(vocab, sizes, beam, max_source_length, max_prompt_length):
    """keras-hub's random-weight encoder-decoder and `BeamSampler`, compiled, as the module docstring
    describes: `generate(source_ids, prompt, start)`.

    Args:
        vocab: vocabulary size.
        sizes: `num_layers`, `hidden_dim`, `intermediate_dim` and `num_heads`.
        beam: the sampler's beams.
        max_source_length, max_prompt_length: the longest source and prompt the position embeddings
            take.

    `generate` takes source ids int32 `[batch, source_length]` (tokens, EOS, PAD), a prompt int32
    `[batch, prompt_length]` and a scalar int32 tensor `start`: the prompt's positions before `start`
    are kept (the last of them is the first decoder input), the `prompt_length - start` after it are
    generated, with no stop token. It returns the prompt with them filled in, `[batch, prompt_length]`.
    One trace per shape of the source and the prompt; `start` is an input, so it needs none.
    """
    import keras_hub
    from keras import ops

    from common.special_ids import BOS_ID, PAD_ID
    from inference.translator import compile_search

    num_layers, hidden_dim, num_heads = sizes["num_layers"], sizes["hidden_dim"], sizes["num_heads"]
    head_dim = hidden_dim // num_heads
    embedding = keras_hub.layers.ReversibleEmbedding(vocab, hidden_dim, tie_weights=True)
    encoder_positions = keras_hub.layers.PositionEmbedding(max_source_length)
    decoder_positions = keras_hub.layers.PositionEmbedding(max_prompt_length)
    layer_options = dict(intermediate_dim=sizes["intermediate_dim"], num_heads=num_heads, dropout=0.0)
    encoder_layers = [keras_hub.layers.TransformerEncoder(**layer_options) for _ in range(num_layers)]
    decoder_layers = [keras_hub.layers.TransformerDecoder(**layer_options) for _ in range(num_layers)]
    sampler = keras_hub.samplers.BeamSampler(num_beams=beam)

    def encode(source_ids):
        padding_mask = ops.not_equal(source_ids, PAD_ID)
        tokens = embedding(source_ids)
        x = tokens + encoder_positions(tokens)
        for layer in encoder_layers:
            x = layer(x, padding_mask=padding_mask)
        return x, padding_mask

    def decode_with_cache(token_ids, encoder_output, encoder_mask, self_cache, self_index, cross_cache, cross_index):
        """`BartSeq2SeqLM.call_decoder_with_cache`: caches `[batch, layers, 2, length, heads, head_dim]`."""
        tokens = embedding(token_ids)
        x = tokens + decoder_positions(tokens, start_index=self_index)
        self_caches, cross_caches = [], []
        for index, layer in enumerate(decoder_layers):
            x, layer_self, layer_cross = layer(
                decoder_sequence=x,
                encoder_sequence=encoder_output,
                encoder_padding_mask=encoder_mask,
                self_attention_cache=self_cache[:, index, ...],
                self_attention_cache_update_index=self_index,
                cross_attention_cache=cross_cache[:, index, ...],
                cross_attention_cache_update_index=cross_index,
            )
            self_caches.append(layer_self)
            cross_caches.append(layer_cross)
        logits = embedding(x, reverse=True)
        return logits, x, ops.stack(self_caches, axis=1), ops.stack(cross_caches, axis=1)

    def generate(source_ids, prompt, start):
        encoder_output, encoder_mask = encode(source_ids)
        batch, prompt_length = ops.shape(prompt)
        source_length = ops.shape(source_ids)[1]
        prompt_mask = ops.arange(prompt_length)[None, :] < start
        prompt_mask = ops.broadcast_to(prompt_mask, (batch, prompt_length))
        self_cache = ops.zeros((batch, num_layers, 2, prompt_length, num_heads, head_dim))
        cross_cache = ops.zeros((batch, num_layers, 2, source_length, num_heads, head_dim))
        # Seed both caches with one pass over the prompt, as `BartSeq2SeqLM._build_cache` does.
        _, hidden, self_cache, cross_cache = decode_with_cache(
            prompt, encoder_output, encoder_mask, self_cache, 0, cross_cache, 0
        )

        def next_fn(prompt, cache, index):
            cache_index = index - 1
            token = ops.slice(prompt, [0, cache_index], [ops.shape(prompt)[0], 1])
            self_cache, encoder_output, encoder_mask, cross_cache = cache
            logits, hidden, self_cache, _ = decode_with_cache(
                token, encoder_output, encoder_mask, self_cache, cache_index, cross_cache, None
            )
            return (
                ops.squeeze(logits, axis=1),
                ops.squeeze(hidden, axis=1),
                (self_cache, encoder_output, encoder_mask, cross_cache),
            )

        return sampler(
            next=next_fn,
            prompt=prompt,
            cache=(self_cache, encoder_output, encoder_mask, cross_cache),
            index=start,
            mask=prompt_mask,
            stop_token_ids=None,
            hidden_states=hidden,
        )

    # Build every layer eagerly once, outside the compiled function.
    sample = ops.full((1, max_source_length), BOS_ID, "int32")
    encoder_output, encoder_mask = encode(sample)
    decode_with_cache(
        ops.full((1, max_prompt_length), BOS_ID, "int32"),
        encoder_output,
        encoder_mask,
        ops.zeros((1, num_layers, 2, max_prompt_length, num_heads, head_dim)),
        0,
        ops.zeros((1, num_layers, 2, max_source_length, num_heads, head_dim)),
        0,
    )
    layers = [embedding, encoder_positions, decoder_positions, *encoder_layers, *decoder_layers]
    return compile_search(generate, [variable for layer in layers for variable in layer.variables])


def time_candidate(function, source, repeats):
    import keras

    inputs = keras.ops.convert_to_tensor(source)
    start = time.perf_counter()
    output = keras.ops.convert_to_numpy(function(inputs))
    compile_seconds = time.perf_counter() - start
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        output = keras.ops.convert_to_numpy(function(inputs))
        seconds.append(time.perf_counter() - start)
    return output, compile_seconds, seconds


def main(argv=None):
    args = parse_args(argv)
    if args.backend:
        os.environ["KERAS_BACKEND"] = args.backend
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, REPO_ROOT)
    import keras

    keras.utils.set_random_seed(args.seed)
    source = source_batch(args)
    builders = {"ours": build_ours, "keras_hub": build_keras_hub}
    results = {}
    for name in args.candidates.split(","):
        function = builders[name](args)
        output, compile_seconds, seconds = time_candidate(function, source, args.repeats)
        if args.profile_dir and keras.backend.backend() == "jax":
            import jax

            with jax.profiler.trace(os.path.join(args.profile_dir, name), create_perfetto_trace=True):
                keras.ops.convert_to_numpy(function(keras.ops.convert_to_tensor(source)))
        median = statistics.median(seconds)
        results[name] = {
            "seconds_per_batch": median,
            "all_seconds": [round(s, 3) for s in seconds],
            "first_call_seconds": round(compile_seconds, 2),
            "sentences_per_second": args.batch / median,
            "output_shape": list(output.shape),
        }
        print(
            f"{name:10s} {args.batch / median:7.2f} sentences/s  ({median:.3f} s per batch of {args.batch}; "
            f"runs {results[name]['all_seconds']}; first call {compile_seconds:.1f} s; output {list(output.shape)})",
            flush=True,
        )
    summary = {
        "backend": keras.backend.backend(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "settings": {k: v for k, v in vars(args).items() if k not in ("candidates", "json", "profile_dir")},
        "results": results,
    }
    if "ours" in results and "keras_hub" in results:
        ratio = results["ours"]["sentences_per_second"] / results["keras_hub"]["sentences_per_second"]
        summary["ratio_ours_over_keras_hub"] = ratio
        print(f"ratio ours / keras_hub: {ratio:.2f}x")
    print(RESULT_PREFIX + json.dumps(summary))
    if args.json:
        with open(args.json, "w") as file:
            json.dump(summary, file, indent=1)


if __name__ == "__main__":
    main()
