"""Translation quality beside a PyTorch baseline: the project and a plain `torch.nn.Transformer`,
trained in one run on the same data for the same steps, scored on every test source.

The project trains through `train.py`'s own code: its flags are parsed by `train.py`'s absl
definitions and validators, `train.config_from_flags()` builds the run's configuration and
`training.trainer.train` trains it, as `python train.py ...` does. Every test source is then
translated and scored by `evaluation.evaluator.evaluate` (what `evaluate.py --split=...` runs), with
greedy search and with beam 4.

The baseline, written here, is the same model in PyTorch: `torch.nn.Transformer` with the run's
sizes (layers, d_model, heads, d_ff, dropout, LayerNorm epsilon, post-norm or pre-norm with a final
LayerNorm on each stack under pre-norm, as the project has), one embedding shared by source, target
and the pre-softmax projection and scaled by sqrt(d_model), interleaved sinusoidal positions, dropout
on their sums. It reads the project run's `spm.model` and the same batches: the project's tf.data
pipeline (`data.pipeline.make_dataset`) with the arguments and seed `train.py`'s first fit uses, read
as NumPy while it trains, so data, order and padding are the project's. It trains with the same Noam
schedule (warm-up, scale), Adam(0.9, 0.98, 1e-9), label smoothing (PyTorch's `cross_entropy`,
summed over non-pad tokens and divided by their number) and steps, on as many threads as TensorFlow
uses. It decodes with its own batched greedy search and beam search (length penalty
((5 + length) / 6) ** alpha, length counting EOS; at most source length + `--max_extra_length` output
tokens and at least floor(source length * `--min_length_ratio`), counted as the project counts them;
incremental: each step runs the decoder on the new position only, over every layer's cached
self-attention keys and values of the prefix and cross-attention ones of the source), and is scored
by the project's `evaluation.scoring` on the same references.

Printed: one table, per system (project / torch, post-norm / pre-norm), test source and search:
sacreBLEU and chrF on detokenized text, sacreBLEU's length ratio (hypothesis / reference words),
training time (the optimizer steps with their input pipeline; the project's dev-loss pass left out)
and target (non-pad) tokens per second, and the mean training loss over the run (each step's loss
weighted by its sentences, as Keras's `fit` reports it). Below it, for every source and search both
systems ran, the project's BLEU and chrF minus the baseline's with sacreBLEU's paired-bootstrap
p-values, then the signatures. `quality.json` in `--output_dir` holds every number, signature and
setting, rewritten after every search is scored; the translations are in `--output_dir`'s
`project-<norm>/` and `torch-<norm>/` (`<source>.beam<k>.hyp`).

    python benchmarks/quality.py --cache_dir=cache/corpora                  # the default setting
    python benchmarks/quality.py --setting=long                            # a longer run by hand
    python benchmarks/quality.py --steps=300 --normalize_first=pre --systems=project,torch

The "test" row is the whole test split. When the per-source test files together hold exactly its
pairs (deb-en-de), it is scored on their translations put together (corpus BLEU and chrF do not
depend on the order of the sentences), so no sentence is translated twice; with `--sentences=N` it
is then the first N sentences of every source.
"""

import argparse
import collections
import dataclasses
import io
import itertools
import json
import math
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Named settings; a flag given on the command line wins over its setting's value.
# Both search with the length penalty and minimum length chosen on the dev split for the demo
# (benchmarks/README.md, "The demo's recipe"); `--alpha=0.6 --min_length_ratio=0` is the paper's.
SEARCH = dict(alpha=1.0, min_length_ratio=0.8)
# Without dropout, as the `small_data` recipe: in runs this short the tiny model underfits, and
# dropout only slowed it (benchmarks/README.md, "The demo's recipe").
SETTINGS = {
    # Four trainings (two systems, post- and pre-norm) and their decoding; the baseline decodes
    # greedily only (what the targets compare): its beam search, then without a key/value cache,
    # took more than 13 minutes on the test split for one model on two cores.
    "default": dict(
        steps=1000,
        batch_tokens=4096,
        warmup_steps=300,
        learning_rate_scale=1.0,
        dropout=0.0,
        torch_beam=False,
        **SEARCH,
    ),
    # For a run by hand (a few hours on two cores).
    "long": dict(
        steps=4000,
        batch_tokens=4096,
        warmup_steps=400,
        learning_rate_scale=2.0,
        dropout=0.0,
        torch_beam=True,
        **SEARCH,
    ),
}
SYSTEMS = ("project", "torch")
NORMS = {"post": False, "pre": True, "false": False, "true": True}


class QualityError(ValueError):
    """The benchmark cannot run as asked (the message names the flag or file)."""


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setting", choices=sorted(SETTINGS), default="default", help="named defaults (see SETTINGS)")
    parser.add_argument("--steps", type=int, help="optimizer steps of every training (default: the setting's)")
    parser.add_argument("--batch_tokens", type=int, help="padded tokens per batch and side (default: the setting's)")
    parser.add_argument("--warmup_steps", type=int, help="learning-rate warm-up steps (default: the setting's)")
    parser.add_argument("--learning_rate_scale", type=float, help="factor on the schedule (default: the setting's)")
    parser.add_argument("--label_smoothing", type=float, default=0.1)
    parser.add_argument("--dropout", type=float, help="train.py's --dropout, for both systems (default: the setting's)")
    parser.add_argument(
        "--normalize_first",
        default="post,pre",
        help="comma-separated residual layouts to train: post (the paper's), pre (pre-norm); or false,true",
    )
    parser.add_argument("--systems", default="project,torch", help=f"comma-separated, some of {','.join(SYSTEMS)}")
    parser.add_argument("--preset", default="tiny", help="train.py's --preset")
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--max_length", type=int, default=128, help="train.py's --max_length (also the input cut)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--corpus", default="deb-en-de", help="a built-in corpus (train.py's --corpus)")
    parser.add_argument("--cache_dir", default=os.path.join(REPO_ROOT, "cache", "corpora"))
    parser.add_argument("--deb_dir", default=None, help="train.py's --deb_dir (where the corpus's packages are)")
    parser.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "runs", "quality"))
    parser.add_argument("--beam_sizes", default="1,4", help="searches to score; 1 is greedy")
    parser.add_argument("--alpha", type=float, help="length-penalty exponent of the beam searches (the setting's)")
    parser.add_argument("--max_extra_length", type=int, default=50, help="output tokens beyond the source length")
    parser.add_argument(
        "--min_length_ratio",
        type=float,
        help="every search's fewest output tokens per source token, EOS counted in both (0: none; the setting's)",
    )
    parser.add_argument("--batch_size", type=int, default=32, help="sentences per search call")
    parser.add_argument(
        "--sentences", type=int, default=0, help="score only the first N sentences of each test source (0: all)"
    )
    parser.add_argument(
        "--torch_beam",
        action=argparse.BooleanOptionalAction,
        help="also score the torch baseline with the beam searches (default: the setting's)",
    )
    args = parser.parse_args(argv)
    for name, value in SETTINGS[args.setting].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def _check_args(args):
    """The parsed lists: `(systems, normalize_first values, beam sizes)`.

    Raises:
        QualityError: a value outside what the flag accepts (named).
    """
    if "," in args.corpus:
        raise QualityError(f"--corpus={args.corpus}: one pair (a multilingual model is benchmarks/multilingual.py's)")
    systems = [name for name in args.systems.split(",") if name]
    if not systems or any(name not in SYSTEMS for name in systems):
        raise QualityError(f"--systems={args.systems!r}: expected a comma-separated list of {', '.join(SYSTEMS)}")
    norms = [name.strip().lower() for name in args.normalize_first.split(",") if name.strip()]
    if not norms or any(name not in NORMS for name in norms):
        raise QualityError(
            f"--normalize_first={args.normalize_first!r}: expected post, pre (or false, true), comma-separated"
        )
    try:
        beams = [int(value) for value in args.beam_sizes.split(",") if value]
    except ValueError:
        beams = []
    if not beams or min(beams) < 1:
        raise QualityError(f"--beam_sizes={args.beam_sizes!r}: expected comma-separated positive ints, e.g. 1,4")
    for name in ("steps", "batch_tokens", "warmup_steps", "batch_size"):
        if getattr(args, name) < 1:
            raise QualityError(f"--{name}={getattr(args, name)} must be at least 1")
    if args.sentences < 0 or args.max_extra_length < 0:
        raise QualityError("--sentences and --max_extra_length must be at least 0")
    if not 0 <= args.dropout < 1:
        raise QualityError(f"--dropout={args.dropout} must be in [0, 1)")
    if not args.min_length_ratio >= 0:
        raise QualityError(f"--min_length_ratio={args.min_length_ratio} must be at least 0")
    return systems, list(dict.fromkeys(NORMS[name] for name in norms)), list(dict.fromkeys(beams))


def norm_name(normalize_first):
    return "pre-norm" if normalize_first else "post-norm"


# ---------------------------------------------------------------------------------------------
# The project, through train.py's code.


def train_flags(args, model_dir, normalize_first):
    """train.py's command-line flags for one project run (one epoch, one checkpoint, no dev BLEU)."""
    flags = [
        f"--model_dir={model_dir}",
        f"--corpus={args.corpus}",
        f"--cache_dir={args.cache_dir}",
        f"--preset={args.preset}",
        f"--vocab_size={args.vocab_size}",
        f"--max_length={args.max_length}",
        f"--train_steps={args.steps}",
        f"--batch_tokens={args.batch_tokens}",
        f"--warmup_steps={args.warmup_steps}",
        f"--learning_rate_scale={args.learning_rate_scale}",
        f"--label_smoothing={args.label_smoothing}",
        f"--dropout={args.dropout}",
        "--normalize_first" if normalize_first else "--nonormalize_first",
        f"--checkpoint_every={args.steps}",
        f"--eval_every={args.steps}",
        "--eval_sentences=0",
        "--keep_checkpoints=1",
        f"--seed={args.seed}",
    ]
    if args.deb_dir:
        flags.append(f"--deb_dir={args.deb_dir}")
    return flags


def project_config(flags):
    """The `RunConfig` train.py builds from `flags`, by its own flag definitions and validators.

    Raises:
        QualityError: flags train.py refuses (its message).
    """
    from absl import app
    from absl import flags as absl_flags

    sys.path.insert(0, REPO_ROOT)
    import train as train_script  # train.py: its absl flags and config_from_flags().

    parsed = train_script.FLAGS
    parsed.unparse_flags()
    try:
        parsed(["train.py", *flags])
        return train_script.config_from_flags()
    except (absl_flags.Error, app.UsageError) as error:
        raise QualityError(f"train.py refuses {' '.join(flags)}: {error}") from error
    finally:
        parsed.unparse_flags()


def training_clock():
    """A Keras callback timing `model.fit`'s training (its dev-loss passes left out) and summing the
    `target_tokens` metric (non-pad target tokens) over its epochs, and after every step."""
    import keras

    class TrainingClock(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.started, self.validation_seconds, self.tokens, self.step_tokens = time.perf_counter(), 0.0, 0.0, []

        def on_test_begin(self, logs=None):
            self.test_started = time.perf_counter()

        def on_test_end(self, logs=None):
            self.validation_seconds += time.perf_counter() - self.test_started

        def on_train_batch_end(self, batch, logs=None):
            # The metric counts from the epoch's start.
            self.step_tokens.append(self.tokens + float((logs or {}).get("target_tokens", 0.0)))

        def on_epoch_end(self, epoch, logs=None):
            self.tokens += float((logs or {}).get("target_tokens", 0.0))

        def on_train_end(self, logs=None):
            self.seconds = time.perf_counter() - self.started - self.validation_seconds

    return TrainingClock()


def train_project(args, model_dir, normalize_first):
    """Trains one project run from scratch; returns `(RunConfig, training record)`."""
    from training.trainer import train

    config = project_config(train_flags(args, model_dir, normalize_first))
    clock = training_clock()
    summary = train(config, start_over=True, callbacks=[clock])
    losses = summary["history"].get("loss", [])
    record = dict(
        steps=summary["step"],
        seconds=clock.seconds,
        target_tokens=clock.tokens,
        target_tokens_per_second=clock.tokens / max(clock.seconds, 1e-9),
        # Keras's epoch loss: the mean of the steps' losses weighted by their sentences.
        mean_train_loss=losses[-1] if losses else None,
        step_tokens=clock.step_tokens,
    )
    return config, record


def evaluate_project(model_dir, test_sources, args, beam_size):
    """`{name: (hypotheses, references)}`: each test source translated by `evaluation.evaluator`."""
    from evaluation import evaluator
    from models.search_config import SearchConfig

    results = {}
    for test_set in test_sources:
        output = os.path.join(model_dir, f"{test_set.name}.beam{beam_size}.hyp")
        config = evaluator.EvalConfig(
            model_dir=model_dir,
            checkpoint="last",  # The run's one checkpoint: it decodes no dev sentence, so it keeps no best.
            split=test_set.name if test_set.src is None else "test",
            src=test_set.src,
            ref=test_set.ref,
            cache_dir=args.cache_dir,
            search=SearchConfig(
                beam_size=beam_size,
                alpha=args.alpha,
                max_extra_length=args.max_extra_length,
                min_length_ratio=args.min_length_ratio,
            ),
            batch_size=args.batch_size,
            output=output,
            progress=False,
        )
        evaluator.evaluate(config, out=io.StringIO())
        with open(output, encoding="utf-8") as handle:
            hypotheses = handle.read().split("\n")[: len(test_set.references)]
        results[test_set.name] = (hypotheses, test_set.references)
    return results


# ---------------------------------------------------------------------------------------------
# Test sources.


@dataclasses.dataclass(frozen=True)
class TestSource:
    """One test source: its pairs, and for a cut (`--sentences`) the files evaluate() reads."""

    name: str
    sources: list
    references: list
    src: str | None = None
    ref: str | None = None


def test_sources(corpus, reverse, sentences, directory):
    """`(sources to translate, combine)`: the per-source test files (each cut to its first
    `sentences` pairs when that is not 0) when together they hold exactly the test split's pairs,
    and then `combine` is True: the "test" row is scored on their translations put together.
    Otherwise the test split (cut likewise) and the per-source files are each translated."""
    from evaluation import reference_sets

    names = ["test"] + [f"test.{source}" for source in sorted(corpus.test_by_source)]
    pairs = {name: reference_sets.read_tsv_pairs(reference_sets.split_path(corpus, name), reverse) for name in names}
    per_source = names[1:]
    union = collections.Counter(pair for name in per_source for pair in zip(*pairs[name]))
    combine = bool(per_source) and union == collections.Counter(zip(*pairs["test"]))
    result = []
    for name in per_source if combine else names:
        sources, references = pairs[name]
        src = ref = None
        if sentences:
            sources, references = sources[:sentences], references[:sentences]
            os.makedirs(directory, exist_ok=True)
            src, ref = os.path.join(directory, f"{name}.src"), os.path.join(directory, f"{name}.ref")
            for path, lines in ((src, sources), (ref, references)):
                with open(path, "w", encoding="utf-8") as handle:
                    handle.writelines(line + "\n" for line in lines)
        result.append(TestSource(name, sources, references, src=src, ref=ref))
    return result, combine


def with_whole_test(translations, combine):
    """`translations` plus the "test" row put together from the per-source ones when `combine`."""
    if not combine:
        return translations
    hypotheses = [text for hyps, _ in translations.values() for text in hyps]
    references = [text for _, refs in translations.values() for text in refs]
    return {"test": (hypotheses, references), **translations}


# ---------------------------------------------------------------------------------------------
# The PyTorch baseline.


@dataclasses.dataclass(frozen=True)
class DecoderState:
    """What `TorchTransformer.decode_step` keeps of the outputs decoded so far, one row per output.

    `length`: the tokens fed so far (BOS included), the position of the next one. `target_padding`
    [rows, length]: True at the fed PAD tokens (keys the self-attention leaves out, as `decode`'s
    `tgt_key_padding_mask`). `self_keys`, `self_values`: per decoder layer, its self-attention's
    projected keys and values of the fed positions, [rows, heads, length, head_dim].
    `memory_keys`, `memory_values`: per decoder layer, its cross-attention's projected keys and
    values of the encoder output, [rows, heads, source, head_dim]; `source_padding` [rows, source].
    """

    length: int
    target_padding: object
    self_keys: tuple
    self_values: tuple
    memory_keys: tuple
    memory_values: tuple
    source_padding: object

    def reorder(self, rows):
        """The state of the outputs `rows` (an int64 tensor of row indices, repeats allowed)."""
        pick = lambda tensors: tuple(tensor.index_select(0, rows) for tensor in tensors)
        return DecoderState(
            length=self.length,
            target_padding=self.target_padding.index_select(0, rows),
            self_keys=pick(self.self_keys),
            self_values=pick(self.self_values),
            memory_keys=pick(self.memory_keys),
            memory_values=pick(self.memory_values),
            source_padding=self.source_padding.index_select(0, rows),
        )


def sinusoidal_positions(length, hidden_dim):
    """`[length, hidden_dim]` float32: sin on even dimensions, cos on odd ones (the paper's 3.5)."""
    import numpy as np

    positions = np.arange(length, dtype=np.float64)[:, None]
    rates = 1.0 / 10000.0 ** (np.arange(0, hidden_dim, 2, dtype=np.float64) / hidden_dim)
    encoding = np.zeros((length, hidden_dim), dtype=np.float32)
    encoding[:, 0::2] = np.sin(positions * rates)
    encoding[:, 1::2] = np.cos(positions * rates)
    return encoding


def torch_transformer(vocabulary_size, model_config, max_positions=1024):
    """The baseline `torch.nn.Module` for a project model config (see the module docstring)."""
    import torch
    import torch.nn.functional as functional
    from torch import nn

    from common.special_ids import PAD_ID

    def heads(attention, inputs, part):
        """`inputs` [rows, length, d_model] through the query (part 0), key (1) or value (2)
        in-projection of `attention` (an `nn.MultiheadAttention`), split into its heads:
        [rows, heads, length, head_dim]."""
        weight = attention.in_proj_weight.chunk(3)[part]
        bias = None if attention.in_proj_bias is None else attention.in_proj_bias.chunk(3)[part]
        rows, length, _ = inputs.shape
        projected = functional.linear(inputs, weight, bias)
        return projected.view(rows, length, attention.num_heads, attention.head_dim).transpose(1, 2)

    def attend(attention, query, keys, values, key_padding):
        """`attention`'s output [rows, 1, d_model] for the one position `query` [rows, 1, d_model]
        over projected `keys` and `values` ([rows, heads, length, head_dim]; the keys True in
        `key_padding` [rows, length] left out), as its forward computes it (attention dropout in
        training, no bias_k or zero attention, as built here)."""
        dropout = attention.dropout if attention.training else 0.0
        mixed = functional.scaled_dot_product_attention(
            heads(attention, query, 0), keys, values, attn_mask=~key_padding[:, None, None, :], dropout_p=dropout
        )
        return attention.out_proj(mixed.transpose(1, 2).reshape(query.shape))

    def layer_step(layer, x, past_keys, past_values, target_padding, memory_keys, memory_values, source_padding):
        """`nn.TransformerDecoderLayer.forward` for the last position alone, `x` [rows, 1, d_model]:
        `(its output, the self-attention's keys and values with that position's)`."""

        def self_block(inputs):
            keys = torch.cat([past_keys, heads(layer.self_attn, inputs, 1)], 2)
            values = torch.cat([past_values, heads(layer.self_attn, inputs, 2)], 2)
            return layer.dropout1(attend(layer.self_attn, inputs, keys, values, target_padding)), keys, values

        def cross_block(inputs):
            return layer.dropout2(attend(layer.multihead_attn, inputs, memory_keys, memory_values, source_padding))

        def feed_forward(inputs):
            return layer.dropout3(layer.linear2(layer.dropout(layer.activation(layer.linear1(inputs)))))

        if layer.norm_first:
            attended, keys, values = self_block(layer.norm1(x))
            x = x + attended
            x = x + cross_block(layer.norm2(x))
            x = x + feed_forward(layer.norm3(x))
        else:
            attended, keys, values = self_block(x)
            x = layer.norm1(x + attended)
            x = layer.norm2(x + cross_block(x))
            x = layer.norm3(x + feed_forward(x))
        return x, keys, values

    class TorchTransformer(nn.Module):
        """`nn.Transformer` with a shared, scaled embedding tied to the output and sinusoidal positions."""

        def __init__(self):
            super().__init__()
            hidden_dim = model_config["hidden_dim"]
            dropout = model_config["dropout"]
            normalize_first = bool(model_config.get("normalize_first"))
            epsilon = model_config.get("layer_norm_epsilon", 1e-6)
            layer_options = dict(
                d_model=hidden_dim,
                nhead=model_config["num_heads"],
                dim_feedforward=model_config["intermediate_dim"],
                dropout=dropout,
                activation="relu",
                layer_norm_eps=epsilon,
                batch_first=True,
                norm_first=normalize_first,
            )
            layers = model_config["num_layers"]
            # Post-norm stacks end in their last layer's LayerNorm; nn.Transformer's own stacks would add another.
            final_norm = lambda: nn.LayerNorm(hidden_dim, eps=epsilon) if normalize_first else None  # noqa: E731
            encoder = nn.TransformerEncoder(
                nn.TransformerEncoderLayer(**layer_options), layers, norm=final_norm(), enable_nested_tensor=False
            )
            decoder = nn.TransformerDecoder(nn.TransformerDecoderLayer(**layer_options), layers, norm=final_norm())
            # Glorot-uniform weight matrices (nn.Transformer's reset), as Keras's Dense default.
            self.transformer = nn.Transformer(
                d_model=hidden_dim,
                nhead=model_config["num_heads"],
                custom_encoder=encoder,
                custom_decoder=decoder,
                batch_first=True,
            )
            self.embedding = nn.Embedding(vocabulary_size, hidden_dim)
            nn.init.normal_(self.embedding.weight, std=hidden_dim**-0.5)  # As models/shared_embedding.py.
            self.register_buffer("positions", torch.from_numpy(sinusoidal_positions(max_positions, hidden_dim)))
            self.dropout = nn.Dropout(dropout)
            self.scale = math.sqrt(hidden_dim)

        def embed(self, ids):
            return self.dropout(self.embedding(ids) * self.scale + self.positions[: ids.shape[1]])

        def encode(self, source_ids):
            """`(memory [batch, source, d_model], source padding mask [batch, source], True at PAD)`."""
            source_padding = source_ids == PAD_ID
            memory = self.transformer.encoder(self.embed(source_ids), src_key_padding_mask=source_padding)
            return memory, source_padding

        def decode(self, target_ids, memory, source_padding):
            """Logits `[batch, target, vocabulary]` of the next token at every target position."""
            length = target_ids.shape[1]
            causal = torch.triu(torch.ones(length, length, dtype=torch.bool, device=target_ids.device), diagonal=1)
            hidden = self.transformer.decoder(
                self.embed(target_ids),
                memory,
                tgt_mask=causal,
                tgt_key_padding_mask=target_ids == PAD_ID,
                memory_key_padding_mask=source_padding,
                tgt_is_causal=True,
            )
            return hidden @ self.embedding.weight.T

        def start_decoding(self, memory, source_padding):
            """The `DecoderState` of outputs with no token fed yet, for `decode_step`: each decoder
            layer's cross-attention keys and values of `memory` projected once, no self-attention ones."""
            layers = self.transformer.decoder.layers
            rows = memory.shape[0]
            empty = [memory.new_zeros(rows, layer.self_attn.num_heads, 0, layer.self_attn.head_dim) for layer in layers]
            return DecoderState(
                length=0,
                target_padding=source_padding.new_zeros(rows, 0),
                self_keys=tuple(empty),
                self_values=tuple(empty),
                memory_keys=tuple(heads(layer.multihead_attn, memory, 1) for layer in layers),
                memory_values=tuple(heads(layer.multihead_attn, memory, 2) for layer in layers),
                source_padding=source_padding,
            )

        def decode_step(self, token_ids, state):
            """`(logits [rows, vocabulary] of the token after `token_ids` [rows], the state with them)`:
            `decode`'s last-position logits for the outputs `state` holds followed by `token_ids`,
            computed for that position alone (embedded at position `state.length`)."""
            x = self.dropout(self.embedding(token_ids[:, None]) * self.scale + self.positions[state.length])
            target_padding = torch.cat([state.target_padding, (token_ids == PAD_ID)[:, None]], 1)
            self_keys, self_values = [], []
            for index, layer in enumerate(self.transformer.decoder.layers):
                x, keys, values = layer_step(
                    layer,
                    x,
                    state.self_keys[index],
                    state.self_values[index],
                    target_padding,
                    state.memory_keys[index],
                    state.memory_values[index],
                    state.source_padding,
                )
                self_keys.append(keys)
                self_values.append(values)
            if self.transformer.decoder.norm is not None:
                x = self.transformer.decoder.norm(x)
            state = dataclasses.replace(
                state,
                length=state.length + 1,
                target_padding=target_padding,
                self_keys=tuple(self_keys),
                self_values=tuple(self_values),
            )
            return (x @ self.embedding.weight.T)[:, 0], state

        def forward(self, source_ids, target_input_ids):
            memory, source_padding = self.encode(source_ids)
            return self.decode(target_input_ids, memory, source_padding)

    return TorchTransformer()


def label_smoothed_loss(logits, target_ids, label_smoothing):
    """`(mean label-smoothed cross entropy per non-pad target token, that token count)`, with the
    project's target distribution q = (1 - eps) one_hot + eps / V."""
    import torch.nn.functional as functional

    from common.special_ids import PAD_ID

    tokens = (target_ids != PAD_ID).sum()
    total = functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]).float(),
        target_ids.reshape(-1).long(),
        ignore_index=PAD_ID,
        label_smoothing=label_smoothing,
        reduction="sum",
    )
    return total / tokens.clamp(min=1), tokens


def noam_rate(iteration, hidden_dim, warmup_steps, scale):
    """Equation 3 at step iteration + 1, times `scale` (as `models.learning_rate_schedule`)."""
    step = iteration + 1.0
    return scale * hidden_dim**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)


def training_batches(corpus, tokenizer, reverse, run_config, project_step_tokens=None, tries=64):
    """The NumPy batches of the project's fit: `data.pipeline.make_dataset` with the arguments and
    seed `training.trainer` gives it for a run started at step 0, read by a second iterator.

    The dataset reshuffles its lines at every pass and for every iterator, from one seed generator
    shared by its iterators, so an iterator's order depends on the passes started before it.
    `model.fit` under a distribution strategy (train.py's, on every device) first reads a batch from
    an iterator of its own to build the model's metrics (Keras's `_maybe_symbolic_build`), then
    trains from a new one; on a small corpus that first read (the batch shuffle's buffer fills
    first) starts more than one pass. So the baseline's first iterator reads 1, 2, ... batches
    until the second one's first steps hold the project's target tokens (`project_step_tokens`,
    cumulative; without them, one batch). `run` then checks every step.

    Raises:
        QualityError: no number of batches up to `tries` gives the project's first steps.
    """
    import keras

    from common.special_ids import PAD_ID
    from data import pipeline

    def stream(first_reads):
        keras.utils.set_random_seed(run_config.train.seed)
        dataset = pipeline.make_dataset(
            list(corpus.train),
            tokenizer,
            batch_tokens=run_config.train.batch_tokens,
            max_length=run_config.data.max_length,
            seed=run_config.train.seed,
            reverse=reverse,
            repeat=True,
            cache_tokenized=run_config.train.cache_tokenized,
        )
        first = iter(dataset)
        for _ in range(first_reads):
            next(first)
        del first
        return dataset.as_numpy_iterator()

    if not project_step_tokens:
        return stream(1)
    wanted = project_step_tokens[: min(4, len(project_step_tokens))]
    for first_reads in range(1, tries + 1):
        batches = stream(first_reads)
        head = [next(batches) for _ in wanted]
        if list(itertools.accumulate(float((batch[1] != PAD_ID).sum()) for batch in head)) == wanted:
            return itertools.chain(head, batches)
    raise QualityError(
        f"no stream of the project's pipeline gives its first {len(wanted)} steps' target tokens {wanted} "
        "(see training_batches)"
    )


def train_torch(model, batches, steps, run_config):
    """Trains `model` for `steps` batches; returns the training record (as `train_project`'s)."""
    import torch

    options = run_config.train
    hidden_dim = run_config.model["hidden_dim"]
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda iteration: noam_rate(iteration, hidden_dim, options.warmup_steps, options.learning_rate_scale)
    )
    model.train()
    tokens, loss, step_tokens = 0, None, []
    weighted_loss, sentences = 0.0, 0  # The mean loss as Keras's fit reports it: weighted by sentences.
    started = time.perf_counter()
    for step in range(steps):
        (source, target_input), target_output = next(batches)
        # Copies: the pipeline's arrays are read-only.
        source, target_input, target_output = (
            torch.from_numpy(array.astype("int64")) for array in (source, target_input, target_output)
        )
        loss, count = label_smoothed_loss(model(source, target_input), target_output, options.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        tokens += int(count)
        step_tokens.append(float(tokens))
        weighted_loss += loss.item() * source.shape[0]
        sentences += source.shape[0]
        if not math.isfinite(loss.item()):
            raise QualityError(f"the torch baseline's loss became {loss.item()} at step {step + 1}")
        if (step + 1) % 100 == 0 or step + 1 == steps:
            elapsed = time.perf_counter() - started
            print(
                f"torch step {step + 1}/{steps}: loss {loss.item():.4f}, {tokens / elapsed:.0f} target tokens/s",
                file=sys.stderr,
            )
    seconds = time.perf_counter() - started
    return dict(
        steps=steps,
        seconds=seconds,
        target_tokens=float(tokens),
        target_tokens_per_second=tokens / max(seconds, 1e-9),
        mean_train_loss=weighted_loss / sentences if sentences else None,
        step_tokens=step_tokens,
    )


def _check_same_batches(project_tokens, torch_tokens):
    """Raises QualityError unless both systems read the same target tokens up to every step."""
    for step, (project, baseline) in enumerate(itertools.zip_longest(project_tokens, torch_tokens), start=1):
        if project != baseline:
            raise QualityError(
                f"the torch baseline's batches are not the project's: after step {step} the project had read "
                f"{project} target tokens and the baseline {baseline} (see training_batches)"
            )


def length_penalty(length, alpha):
    """Wu et al. (2016), eq. 14: ((5 + length) / 6) ** alpha."""
    return ((5.0 + length) / 6.0) ** alpha


def min_output_lengths(source_padding, min_length_ratio):
    """`[batch]` floor(n * min_length_ratio) for sentences of n source tokens (EOS included): the
    fewest output tokens (EOS included) a search may end with, as the project's searches count."""
    import torch

    return torch.floor((~source_padding).sum(1).double() * min_length_ratio).long()


def no_early_eos(scores, length, min_lengths):
    """`scores` ([rows, vocab]) with EOS at -inf in the rows whose output would end shorter than
    their minimum at this `length` (EOS included): EOS is taken out of the choice, the other
    scores stay as they are (the project's `min_lengths`, fairseq's `--min-len`)."""
    import torch

    from common.special_ids import EOS_ID

    scores = scores.clone()
    scores[:, EOS_ID] = torch.where(length < min_lengths, -math.inf, scores[:, EOS_ID])
    return scores


class NextLogits:
    """The logits of the token after each of a search's outputs ([rows, steps] int64, BOS first),
    one call a step: by `TorchTransformer.decode_step` on the state of the outputs so far
    (`incremental`), or by `decode` over the whole outputs (the reference it must equal)."""

    def __init__(self, model, memory, source_padding, incremental=True):
        self.model, self.memory, self.source_padding = model, memory, source_padding
        self.state = model.start_decoding(memory, source_padding) if incremental else None

    def __call__(self, output):
        if self.state is None:
            return self.model.decode(output, self.memory, self.source_padding)[:, -1]
        if self.state.length != output.shape[1] - 1:
            raise ValueError(
                f"the state holds {self.state.length} tokens, the outputs {output.shape[1] - 1} before the last"
            )
        logits, self.state = self.model.decode_step(output[:, -1], self.state)
        return logits

    def reorder(self, rows):
        """Makes the state that of the outputs `rows` (int64 row indices), as `output[rows]`."""
        if self.state is None:
            self.memory, self.source_padding = self.memory[rows], self.source_padding[rows]
        else:
            self.state = self.state.reorder(rows)


def greedy_search(model, source_ids, max_extra_length, min_length_ratio=0.0, incremental=True):
    """Batched greedy decoding: int64 `[batch, source]` (tokens + EOS, PAD-padded) -> token lists,
    EOS excluded. A sentence of n source tokens (EOS included) gets at most n + max_extra_length
    output tokens and at least floor(n * min_length_ratio) (EOS included). `incremental=False`
    recomputes the decoder over the whole output at every step (the reference; see `NextLogits`)."""
    import torch

    from common.special_ids import BOS_ID, EOS_ID, PAD_ID

    with torch.no_grad():
        memory, source_padding = model.encode(source_ids)
        max_lengths = (~source_padding).sum(1) + max_extra_length  # [batch]
        min_lengths = min_output_lengths(source_padding, min_length_ratio)
        next_logits = NextLogits(model, memory, source_padding, incremental)
        batch = source_ids.shape[0]
        output = torch.full((batch, 1), BOS_ID, dtype=torch.long)
        done = torch.zeros(batch, dtype=torch.bool)
        for step in range(int(max_lengths.max())):
            logits = no_early_eos(next_logits(output), step + 1, min_lengths)
            token = torch.where(done, PAD_ID, logits.argmax(-1))
            output = torch.cat([output, token[:, None]], dim=1)
            done |= (token == EOS_ID) | (step + 1 >= max_lengths)
            if bool(done.all()):
                break
    rows = []
    for row in output[:, 1:].tolist():
        row = [token for token in row if token != PAD_ID]
        rows.append(row[: row.index(EOS_ID)] if EOS_ID in row else row)
    return rows


def beam_search(model, source_ids, beam_size, alpha, max_extra_length, min_length_ratio=0.0, incremental=True):
    """Batched beam search: the `beam_size` best alive hypotheses are extended each step (the top
    2 x beam candidates, so that EOS ones never starve them); a candidate ending in EOS joins the
    sentence's finished set scored log P / length_penalty(length with EOS). At a sentence's maximum
    length its alive hypotheses join the finished set as they are; below its minimum length
    (`min_length_ratio`, as in `greedy_search`) EOS is not a candidate. A sentence stops when it has
    `beam_size` finished hypotheses and no alive one can still beat the worst of them (its log P
    only falls, and the penalty grows at most to that of the maximum length). Returns the best
    finished hypothesis per sentence, EOS excluded. `incremental=False`: as `greedy_search`'s."""
    import torch

    from common.special_ids import BOS_ID, EOS_ID

    with torch.no_grad():
        memory, source_padding = model.encode(source_ids)
        batch = source_ids.shape[0]
        max_lengths = ((~source_padding).sum(1) + max_extra_length).tolist()
        min_lengths = min_output_lengths(source_padding, min_length_ratio).repeat_interleave(beam_size)
        next_logits = NextLogits(
            model, memory.repeat_interleave(beam_size, 0), source_padding.repeat_interleave(beam_size, 0), incremental
        )
        output = torch.full((batch * beam_size, 1), BOS_ID, dtype=torch.long)
        scores = torch.full((batch, beam_size), -math.inf)
        scores[:, 0] = 0.0  # One hypothesis to start from.
        finished = [[] for _ in range(batch)]  # (normalised score, tokens)
        done = [False] * batch
        for step in range(max(max_lengths)):
            length = step + 1
            log_probs = torch.log_softmax(next_logits(output).float(), -1)
            log_probs = no_early_eos(log_probs, length, min_lengths)
            vocabulary = log_probs.shape[-1]
            candidates = (scores[:, :, None] + log_probs.view(batch, beam_size, -1)).view(batch, -1)
            top_scores, top_index = candidates.topk(2 * beam_size, dim=1)  # [batch, 2 beam]
            top_beams, top_tokens = top_index // vocabulary, top_index % vocabulary
            is_eos = top_tokens == EOS_ID
            for sentence in range(batch):
                if done[sentence]:
                    continue
                for score, beam, token in zip(
                    top_scores[sentence].tolist(), top_beams[sentence].tolist(), top_tokens[sentence].tolist()
                ):
                    if token == EOS_ID and math.isfinite(score):
                        prefix = output[sentence * beam_size + beam, 1:].tolist()
                        finished[sentence].append((score / length_penalty(length, alpha), prefix))
            # The alive set: the best non-EOS candidates (each beam has one EOS candidate, so the
            # top 2 x beam hold at least beam_size others).
            alive_scores, order = torch.where(is_eos, -math.inf, top_scores).topk(beam_size, dim=1)
            alive_beams = top_beams.gather(1, order)
            alive_tokens = top_tokens.gather(1, order)
            rows = (torch.arange(batch)[:, None] * beam_size + alive_beams).reshape(-1)
            output = torch.cat([output[rows], alive_tokens.reshape(-1, 1)], dim=1)
            next_logits.reorder(rows)
            scores = alive_scores
            for sentence in range(batch):
                if done[sentence]:
                    continue
                alive = scores[sentence].tolist()
                if length >= max_lengths[sentence]:
                    for beam, score in enumerate(alive):
                        if math.isfinite(score):
                            tokens = output[sentence * beam_size + beam, 1:].tolist()
                            finished[sentence].append((score / length_penalty(length, alpha), tokens))
                    done[sentence] = True
                    continue
                best = sorted((item[0] for item in finished[sentence]), reverse=True)[:beam_size]
                reachable = max(alive) / length_penalty(max_lengths[sentence], alpha)
                if len(best) == beam_size and reachable < best[-1]:
                    done[sentence] = True
            if all(done):
                break
    return [max(hypotheses, key=lambda item: item[0])[1] for hypotheses in finished]


def translate_torch(model, tokenizer, sentences, beam_size, args):
    """Detokenized translations of `sentences`, in order, by `greedy_search` or `beam_search`;
    inputs cut to `--max_length` tokens (EOS included) as `inference.translator.Translator` cuts them,
    sentences without tokens translated to ""."""
    import numpy as np
    import torch

    from common.special_ids import EOS_ID, PAD_ID

    model.eval()
    rows = [row + [EOS_ID] for row in tokenizer.tokenize(sentences).to_list()]
    rows = [row if len(row) <= args.max_length else row[: args.max_length - 1] + [EOS_ID] for row in rows]
    outputs = [[] for _ in rows]
    order = sorted((index for index, row in enumerate(rows) if len(row) > 1), key=lambda index: len(rows[index]))
    for start in range(0, len(order), args.batch_size):
        indices = order[start : start + args.batch_size]
        width = max(len(rows[index]) for index in indices)
        source = np.full((len(indices), width), PAD_ID, dtype=np.int64)
        for position, index in enumerate(indices):
            source[position, : len(rows[index])] = rows[index]
        source = torch.from_numpy(source)
        if beam_size == 1:
            found = greedy_search(model, source, args.max_extra_length, args.min_length_ratio)
        else:
            found = beam_search(model, source, beam_size, args.alpha, args.max_extra_length, args.min_length_ratio)
        for index, tokens in zip(indices, found):
            outputs[index] = tokens
    width = max([len(row) for row in outputs] + [1])
    padded = np.full((len(outputs), width), PAD_ID, dtype=np.int32)
    for position, row in enumerate(outputs):
        padded[position, : len(row)] = row
    return [text.decode("utf-8") for text in tokenizer.detokenize(padded).numpy()]


# ---------------------------------------------------------------------------------------------
# The run.


def score_rows(system, normalize_first, beam_size, translations, record, target_language):
    """Table rows (dicts) of one system, layout and search over every test source."""
    from common.bleu_tokenizers import bleu_tokenizer
    from evaluation import scoring

    rows = []
    for name, (hypotheses, references) in translations.items():
        scores = scoring.score(hypotheses, references, tokenize=bleu_tokenizer(target_language))
        rows.append(
            dict(
                system=system,
                norm=norm_name(normalize_first),
                source=name,
                search="greedy" if beam_size == 1 else f"beam {beam_size}",
                sentences=len(references),
                bleu=scores["bleu"],
                chrf=scores["chrf"],
                length_ratio=scores["length_ratio"],
                bleu_signature=scores["bleu_signature"],
                chrf_signature=scores["chrf_signature"],
                train_seconds=record["seconds"],
                target_tokens_per_second=record["target_tokens_per_second"],
                mean_train_loss=record["mean_train_loss"],
            )
        )
    return rows


def paired_bootstrap(project_hypotheses, torch_hypotheses, references, target_language, samples=1000):
    """The project's BLEU and chrF minus the baseline's on the same sentences, with sacreBLEU's
    paired bootstrap p-values (`samples` resamples, sacreBLEU's fixed seed): the chance of a
    difference this large if both systems were equally good. Keys: `project_minus_torch_bleu`,
    `p_bleu`, `project_minus_torch_chrf`, `p_chrf`."""
    import sacrebleu
    from sacrebleu.significance import PairedTest

    from common.bleu_tokenizers import bleu_tokenizer

    metrics = {"bleu": sacrebleu.BLEU(tokenize=bleu_tokenizer(target_language)), "chrf": sacrebleu.CHRF()}
    test = PairedTest(
        [("torch", torch_hypotheses), ("project", project_hypotheses)],
        {name.upper(): metric for name, metric in metrics.items()},
        [references],
        test_type="bs",
        n_samples=samples,
    )
    _, results = test()
    found = {}
    for name, (baseline, project) in zip(metrics, (results[key] for key in results if key != "System")):
        found[f"project_minus_torch_{name}"] = project.score - baseline.score
        found[f"p_{name}"] = project.p_value
    return found


TABLE_HEADER = (
    "| system | norm | test source | search | sentences | BLEU | chrF | length ratio | train s | target tokens/s "
    "| mean train loss |"
)


def table(rows):
    """The markdown table of `rows`, then the distinct signatures."""
    lines = [TABLE_HEADER, "|" + "---|" * (TABLE_HEADER.count("|") - 1)]
    for row in rows:
        loss = "" if row["mean_train_loss"] is None else f"{row['mean_train_loss']:.3f}"
        lines.append(
            f"| {row['system']} | {row['norm']} | {row['source']} | {row['search']} | {row['sentences']} "
            f"| {row['bleu']:.2f} | {row['chrf']:.1f} | {row['length_ratio']:.3f} | {row['train_seconds']:.0f} "
            f"| {row['target_tokens_per_second']:.0f} | {loss} |"
        )
    lines.append("")
    for row in rows:
        if "p_bleu" in row:
            lines.append(
                f"project - torch, {row['norm']}, {row['search']}, {row['source']}: "
                f"BLEU {row['project_minus_torch_bleu']:+.2f} (p = {row['p_bleu']:.3f}), "
                f"chrF {row['project_minus_torch_chrf']:+.2f} (p = {row['p_chrf']:.3f})"
            )
    if any("p_bleu" in row for row in rows):
        lines += [
            "(sacreBLEU's paired bootstrap, 1000 resamples: p is the chance of such a difference between equals)",
            "",
        ]
    lines += [f"BLEU signature: {value}" for value in dict.fromkeys(row["bleu_signature"] for row in rows)]
    lines += [f"chrF signature: {value}" for value in dict.fromkeys(row["chrf_signature"] for row in rows)]
    return "\n".join(lines)


def run(args):
    """Trains and scores every system and layout asked for; returns the table's rows."""
    systems, norms, beams = _check_args(args)
    os.makedirs(args.output_dir, exist_ok=True)
    from data import corpora
    from data.tokenizer import Tokenizer

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    rows, records = [], {}
    project_translations = {}  # (normalize_first, beam size) -> {source: (hypotheses, references)}

    def save():
        """Writes quality.json with what is measured so far: a run stopped later keeps it."""
        summary = dict(settings=dict(vars(args)), threads=threads, training=records, rows=rows)
        path = os.path.join(args.output_dir, "quality.json")
        with open(path + ".tmp", "w", encoding="utf-8") as handle:
            json.dump(summary, handle, indent=2)
        os.replace(path + ".tmp", path)

    for normalize_first in norms:
        model_dir = os.path.join(args.output_dir, f"project-{norm_name(normalize_first)}")
        config = project_config(train_flags(args, model_dir, normalize_first))
        corpus, reverse = corpora.resolve_corpus(config.data)
        target_language = (corpus.languages[::-1] if reverse else corpus.languages)[1]
        sources, combine = test_sources(corpus, reverse, args.sentences, os.path.join(args.output_dir, "test-sets"))
        if "project" in systems:
            print(f"training the project ({norm_name(normalize_first)}) in {model_dir}", file=sys.stderr)
            config, record = train_project(args, model_dir, normalize_first)
            records[f"project {norm_name(normalize_first)}"] = record
            for beam_size in beams:
                translations = with_whole_test(evaluate_project(model_dir, sources, args, beam_size), combine)
                project_translations[normalize_first, beam_size] = translations
                rows += score_rows("project", normalize_first, beam_size, translations, record, target_language)
                save()
        if "torch" in systems:
            import torch

            from training.trainer import resolve_tokenizer

            torch.set_num_threads(threads)  # TensorFlow's default: every core the process may use.
            torch.manual_seed(args.seed)
            tokenizer_dir = model_dir if "project" in systems else os.path.join(args.output_dir, "torch-vocabulary")
            os.makedirs(tokenizer_dir, exist_ok=True)
            tokenizer = (
                Tokenizer.from_file(os.path.join(model_dir, "spm.model"))
                if "project" in systems
                else resolve_tokenizer(tokenizer_dir, corpus, config.data)
            )
            model = torch_transformer(
                tokenizer.vocabulary_size, config.model, max_positions=args.max_length + args.max_extra_length + 2
            )
            print(
                f"training the torch baseline ({norm_name(normalize_first)}, "
                f"{sum(p.numel() for p in model.parameters()):,} parameters, {threads} threads)",
                file=sys.stderr,
            )
            project_record = records.get(f"project {norm_name(normalize_first)}")
            batches = training_batches(
                corpus, tokenizer, reverse, config, project_record and project_record["step_tokens"]
            )
            record = train_torch(model, batches, args.steps, config)
            records[f"torch {norm_name(normalize_first)}"] = record
            if project_record:
                _check_same_batches(project_record["step_tokens"], record["step_tokens"])
            torch_beams = beams if args.torch_beam else [1]
            for beam_size in torch_beams:
                translations = {
                    test_set.name: (
                        translate_torch(model, tokenizer, test_set.sources, beam_size, args),
                        test_set.references,
                    )
                    for test_set in sources
                }
                # Beside the project's own .hyp files (evaluate.py writes them in its run directory).
                torch_dir = os.path.join(args.output_dir, f"torch-{norm_name(normalize_first)}")
                os.makedirs(torch_dir, exist_ok=True)
                for name, (hypotheses, _) in translations.items():
                    with open(os.path.join(torch_dir, f"{name}.beam{beam_size}.hyp"), "w", encoding="utf-8") as handle:
                        handle.writelines(line + "\n" for line in hypotheses)
                translations = with_whole_test(translations, combine)
                torch_rows = score_rows("torch", normalize_first, beam_size, translations, record, target_language)
                if (normalize_first, beam_size) in project_translations:
                    for row in torch_rows:
                        row.update(
                            paired_bootstrap(
                                project_translations[normalize_first, beam_size][row["source"]][0],
                                *translations[row["source"]],
                                target_language,
                            )
                        )
                rows += torch_rows
                save()
    save()
    return rows


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        rows = run(args)
    except QualityError as error:
        print(f"quality.py: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    print(table(rows))
    return rows


if __name__ == "__main__":
    sys.path.insert(0, REPO_ROOT)
    from common import quiet_logs

    quiet_logs.quiet_tool_output()  # As the tools: no TensorFlow start-up lines or retracing warnings.
    main()
