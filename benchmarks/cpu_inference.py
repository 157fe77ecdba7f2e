"""Translation on CPUs: the project's SavedModels beside CTranslate2 and keras-hub's sampler, in one run.

For each size (`--sizes`, presets of `models.presets`), one model (the trained `--model_dir` for
the size of its run, random weights of the preset's shape and `--vocabulary` otherwise), measured as:

- `saved_model_float32`: `python -m export`'s SavedModel, its `serving_default` signature (loaded
  with `tf.saved_model.load`): strings in, strings out;
- `saved_model_int8`: the same export with `--quantize=int8`;
- `ct2_float32`, `ct2_int8`: `python -m export --format=ctranslate2` (`--ct2_quantization=int8`),
  run by `ctranslate2.Translator(device="cpu", intra_threads=--ct2_threads)`; the clock covers the text
  in and out as for the SavedModel: SentencePiece pieces of the sentences (Python `sentencepiece`,
  the run's spm.model), `translate_batch(beam_size, length_penalty=alpha)`, the pieces joined again;
- `keras_hub`: keras-hub's `BeamSampler` driving its cached `TransformerDecoder`, as
  `benchmarks/beam_search_speed.py` builds it (random weights of the same sizes and vocabulary):
  token ids in, token ids out (tokenization is not timed), compiled with `tf.function`.

Two modes: one sentence per call (`single`) and batches of `--batch` sentences (`batch`; the
sentences sorted by length first, as `inference.translator.Translator` and a batching server
group them). Reported per system, size and mode: sentences/s (sentences over the summed call
times), the p50 and p95 latency of one call, and the mean output length in tokens, EOS not counted
(SavedModels: what their `translate_ids` signature returns for the same tokens, untimed, the same
search; CTranslate2: the pieces of its hypothesis; keras-hub: the tokens generated). Then the issue's
ratios: int8 / float32 SavedModel (target 1.5x on `base`), float32 SavedModel / CTranslate2
float32 (issue 46's target: 1.0x, level) and, with `--baseline_tree`, float32 SavedModel / the
other checkout's export (no target).

Output lengths. Random weights would end a search at once or let it run to its maximum, so with
random weights every system decodes about as many tokens as the source has, n = its SentencePiece
tokens + EOS (`FORCED`):

- SavedModels: exported with `--min_length_ratio=1 --max_extra_length=1`, so each sentence gets n
  or n + 1 output tokens, EOS included (a random model nearly always runs to n + 1);
- CTranslate2: `min_decoding_length` = n - 1 (CTranslate2 does not count the EOS there) and
  `max_decoding_length` = n + 1 (it does), for one sentence; for a batch, whose bounds CTranslate2
  takes per call, the least n - 1 and the largest n + 1 of the batch;
- keras-hub: no stop token, n + 1 tokens generated (the batch's largest for a batch).

So in batches CTranslate2 and keras-hub produce every sentence at the batch's longest length, while
the SavedModels stop each at its own: their mean output tokens show it. `--equal_lengths` takes sentences of one
SentencePiece length only (the file's median), so that in batches too every system decodes the
same tokens and the ratios compare like with like. A trained `--model_dir`
ends its translations itself (`FREE`): the exports' default search (no minimum, at most n + 50
tokens), CTranslate2 up to the batch's largest n + 50; keras-hub, whose weights are random, as above.

Every configuration runs over all its calls once untimed (tracing, bucket graphs, caches), then
`--repeats` timed passes. Each system is measured in a process of its own, which loads only it:
in one process, the threads of the systems measured before (TensorFlow's pools, CTranslate2's
OpenMP) slow the next, CTranslate2 most. `--no-isolate` measures them all in this process, taking
turns pass by pass (the order rotating every repeat). TensorFlow runs with `--threads` intra-op
and inter-op threads, CTranslate2 with `--ct2_threads` intra-op threads (default `--threads`; on
an AMD EPYC, its int8 path translates one sentence far faster with 1 than with 2).

`--profile` also traces one call of each mode (the first sentence; the first batch, its shortest
sentences) through each SavedModel with `tf.profiler.experimental` and prints the op time by op type
(summed over threads, as `benchmarks/tf_step_profile.py` sums it) with each type's share, then per
decoding step (the ops of the search loop's body): the traced ops, the products among them, the
traced ops of each decoder layer, the loop's wall time, the op time and the products' time (warm,
the executor leaves cheap ops untraced: the wall time less the op time is mostly theirs).

`--floor` also times `benchmarks/step_floor.py`'s floor step (the fewest core TensorFlow ops a
decoding step of the size's model can run in, with no search bookkeeping) for one sentence and for
`--batch`, in this process after the systems, and prints it beside each system's time per decoding
step: a mode's mean call time over the output tokens plus the EOS. That time includes the call's
encoder, tokenization and search, so a floor above a system's time per step means that no SavedModel
run op by op (TensorFlow Serving without XLA) can be level with that system there.

    python benchmarks/cpu_inference.py --model_dir=runs/demo-c           # tiny: the trained run; base: random
    python benchmarks/cpu_inference.py --sizes=base --systems=saved_model_float32,saved_model_int8 \\
        --profile --repeats=1                                            # where base's time goes

Defaults: sizes tiny,base; the first column of cache/corpora/deb-en-de/test.tsv, 64 sentences;
batch 32, beam 4, alpha 0.6, 3 repeats; random weights use the --model_dir's spm.model, else
cache/corpora/deb-en-de/spm-bpe-4000.model; the JSON goes to benchmarks/results/cpu_inference.json.
"""

import argparse
import collections
import dataclasses
import glob
import json
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(BENCHMARKS)
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, BENCHMARKS)

from export_latency import percentile, read_sentences  # noqa: E402 (after the path)

from inference.runs import CONFIG_FILE, DEFAULT_CHECKPOINT, ModelDirError, RunDir  # noqa: E402
from models.presets import PRESETS  # noqa: E402
from models.search_config import DEFAULT_SEARCH, EXPORT_MAX_INPUT_LENGTH, STOPPING_RULES, SearchConfig  # noqa: E402

SYSTEMS = ("saved_model_float32", "saved_model_int8", "ct2_float32", "ct2_int8", "keras_hub")
LABELS = {
    "saved_model_float32": "SavedModel float32",
    "saved_model_int8": "SavedModel int8",
    "ct2_float32": "CTranslate2 float32",
    "ct2_int8": "CTranslate2 int8",
    "keras_hub": "keras-hub BeamSampler (ids)",
    "saved_model_baseline": "SavedModel float32, --baseline_tree",
}
MODES = ("single", "batch")


@dataclasses.dataclass(frozen=True)
class OutputLength:
    """The exports' output length bounds (`python -m export --min_length_ratio --max_extra_length`)
    and whether the other systems are held to n + 1 tokens (module docstring, "Output lengths")."""

    min_length_ratio: float
    max_extra_length: int
    forced: bool


# Random weights: pinned to the source length n (tokens + EOS), n or n + 1 output tokens with EOS.
FORCED = OutputLength(min_length_ratio=1.0, max_extra_length=1, forced=True)
# Trained weights: the search's own defaults, the model ends each translation.
FREE = OutputLength(DEFAULT_SEARCH.min_length_ratio, DEFAULT_SEARCH.max_extra_length, forced=False)
# (numerator, denominator, target) of the ratios of sentences/s: the issues' targets (None: none).
RATIOS = (
    ("saved_model_int8", "saved_model_float32", 1.5),
    ("saved_model_float32", "ct2_float32", 1.0),
    ("saved_model_float32", "saved_model_baseline", None),
)
DEFAULT_SENTENCES = os.path.join(REPO_ROOT, "cache", "corpora", "deb-en-de", "test.tsv")
DEFAULT_VOCABULARY = os.path.join(REPO_ROOT, "cache", "corpora", "deb-en-de", "spm-bpe-4000.model")
DEFAULT_OUTPUT = os.path.join(BENCHMARKS, "results", "cpu_inference.json")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="tiny,base", help="Comma-separated presets (default: tiny,base).")
    parser.add_argument(
        "--model_dir", default=None, help="A run written by train.py: measured as the size of its preset."
    )
    parser.add_argument(
        "--checkpoint", default=DEFAULT_CHECKPOINT, help="The --model_dir's weights (best, last, average:N)."
    )
    parser.add_argument(
        "--vocabulary",
        default=None,
        help="SentencePiece model of the random-weight models (default: the --model_dir's, else "
        "cache/corpora/deb-en-de/spm-bpe-4000.model).",
    )
    parser.add_argument("--sentences", default=DEFAULT_SENTENCES, help="Text or TSV file (first column).")
    parser.add_argument("--count", type=int, default=64, help="Sentences used (default: 64).")
    parser.add_argument(
        "--equal_lengths",
        action="store_true",
        help="Only sentences of one SentencePiece length (the file's median, or the nearest with --count of "
        "them), so that every system decodes every sentence of a batch to its own length.",
    )
    parser.add_argument("--batch", type=int, default=32, help="Sentences per call in the batch mode (default: 32).")
    parser.add_argument("--repeats", type=int, default=3, help="Timed passes per configuration (default: 3).")
    parser.add_argument("--beam_size", type=int, default=DEFAULT_SEARCH.beam_size)
    parser.add_argument("--alpha", type=float, default=DEFAULT_SEARCH.alpha, help="Length penalty exponent.")
    parser.add_argument(
        "--stopping",
        choices=STOPPING_RULES,
        default=DEFAULT_SEARCH.stopping,
        help="When the SavedModels' search ends a sentence (models.search_config.SearchConfig.stopping); "
        "CTranslate2 stops once its best hypothesis has ended, as heuristic does.",
    )
    parser.add_argument("--max_input_length", type=int, default=EXPORT_MAX_INPUT_LENGTH, help="The exports'.")
    parser.add_argument("--length_buckets", default="16,32,64", help="The SavedModel exports' buckets.")
    parser.add_argument("--threads", type=int, default=os.cpu_count(), help="CPU threads (default: all cores).")
    parser.add_argument(
        "--ct2_threads", type=int, default=None, help="CTranslate2's intra-op threads (default: --threads)."
    )
    parser.add_argument("--systems", default=",".join(SYSTEMS), help=f"Comma-separated, of {', '.join(SYSTEMS)}.")
    parser.add_argument(
        "--baseline_tree",
        default=None,
        help="Another checkout of this repository (e.g. `git worktree add ../base HEAD~3`): its `python -m "
        "export` makes a float32 SavedModel of each size, measured beside the others as saved_model_baseline "
        "(the anchor of a change to the exported graph); it searches without --shortlist.",
    )
    parser.add_argument(
        "--shortlist",
        type=int,
        default=0,
        help="The vocabulary shortlist (K candidates per source piece; the --model_dir's shortlist.tsv) in the "
        "SavedModels and CTranslate2's vmap (default: 0, off).",
    )
    parser.add_argument("--profile", action="store_true", help="Also profile one batch through each SavedModel.")
    parser.add_argument(
        "--floor",
        action="store_true",
        help="Also time step_floor.py's least decoding step in core TensorFlow ops at each size's shapes, beside "
        "each system's call time per decoding step.",
    )
    parser.add_argument("--top", type=int, default=12, help="Op types printed per profile (default: 12).")
    parser.add_argument("--seed", type=int, default=0, help="Seed of the random weights.")
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="JSON file written (default: %(default)s).")
    parser.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Measure each system in a process of its own (default); --no-isolate: all in this one.",
    )
    # An isolated run's child: the JSON of `measure_alone`'s request.
    parser.add_argument("--measure_one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.sizes = [size.strip() for size in args.sizes.split(",") if size.strip()]
    args.systems = [name.strip() for name in args.systems.split(",") if name.strip()]
    check_args(parser, args)
    return args


def check_args(parser, args):
    """Refuses, with `parser.error`, what the run could only fail on later: before TensorFlow loads."""
    unknown = [size for size in args.sizes if size not in PRESETS]
    if unknown or not args.sizes:
        parser.error(f"--sizes={','.join(args.sizes)}: expected presets among {', '.join(PRESETS)}")
    unknown = [name for name in args.systems if name not in SYSTEMS]
    if unknown or not args.systems:
        parser.error(f"--systems={','.join(args.systems)}: expected some of {', '.join(SYSTEMS)}")
    args.ct2_threads = args.threads if args.ct2_threads is None else args.ct2_threads
    for name in ("count", "batch", "repeats", "beam_size", "threads", "ct2_threads", "top"):
        if getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: expected a positive integer")
    if args.floor and args.shortlist:
        parser.error(
            f"--floor with --shortlist={args.shortlist}: the floor step projects onto the whole vocabulary, so it "
            "is no floor for a shortlist's search; measure the floor without --shortlist"
        )
    try:
        args.length_buckets = [int(value) for value in args.length_buckets.split(",") if value.strip()]
    except ValueError:
        parser.error(f"--length_buckets={args.length_buckets}: expected comma-separated integers, e.g. 16,32,64")
    if args.baseline_tree is not None:
        if not os.path.isfile(os.path.join(args.baseline_tree, "export", "__main__.py")):
            parser.error(
                f"--baseline_tree={args.baseline_tree}: not a checkout of this repository (no export/__main__.py)"
            )
    if not os.path.isfile(args.sentences):
        parser.error(f"--sentences={args.sentences}: no such file (a text file, or a TSV whose first column is read)")
    args.run_preset = None
    if args.model_dir is not None:
        run = RunDir(args.model_dir)
        try:
            run.check_loadable(args.checkpoint)
            preset = ((run.read_config() or {}).get("train") or {}).get("preset")
        except ModelDirError as error:
            parser.error(f"--model_dir: {error}")
        if preset is None:
            parser.error(
                f"--model_dir={args.model_dir} has no {CONFIG_FILE} naming its preset: expected a train.py run"
            )
        if preset not in args.sizes:
            parser.error(
                f"--model_dir={args.model_dir} is a {preset} run, and --sizes={','.join(args.sizes)} does not "
                f"measure {preset}: add it to --sizes"
            )
        args.run_preset = preset
        if RunDir(args.model_dir).has_separate_vocabularies():
            parser.error(
                f"--model_dir={args.model_dir} has separate source and target vocabularies; the systems compared "
                "here share one (train it with --vocabulary=shared)"
            )
    if args.shortlist < 0 or (args.shortlist and (args.run_preset is None or args.sizes != [args.run_preset])):
        parser.error(
            f"--shortlist={args.shortlist}: expected 0 (off), or K > 0 with --model_dir and --sizes of its preset "
            "only (the random-weight models have no lexical table)"
        )
    if args.shortlist and not os.path.isfile(RunDir(args.model_dir).shortlist_path):
        parser.error(
            f"--shortlist={args.shortlist}: {args.model_dir} has no shortlist.tsv; build it with "
            f"python -m training.shortlist --model_dir={args.model_dir}"
        )
    if args.vocabulary is None:
        args.vocabulary = RunDir(args.model_dir).vocabulary_path if args.model_dir else DEFAULT_VOCABULARY
    if any(size != args.run_preset for size in args.sizes) and not os.path.isfile(args.vocabulary):
        parser.error(
            f"--vocabulary={args.vocabulary}: no such file; the random-weight models need a SentencePiece model "
            "(`make demo` has train.py write this one into the corpus cache; any run's spm.model will do)"
        )


@dataclasses.dataclass
class System:
    """One way of translating, seen by the timing loop.

    `prepare(sentences)` -> the call's input (untimed); `run(input)` -> its outputs (timed, fetched
    to Python or NumPy); `lengths(input, outputs)` -> output tokens per sentence (untimed).
    `resources` keeps alive what `run` uses (a loaded SavedModel).
    """

    prepare: Callable
    run: Callable
    lengths: Callable
    resources: object = None


def source_tokens(processor, sentences):
    """n per sentence: its SentencePiece tokens and EOS."""
    return [len(pieces) + 1 for pieces in processor.encode(list(sentences))]


def padded_ids(processor, sentences, multiple=1):
    """int32 `[batch, length]`: each sentence's SentencePiece ids and EOS, PAD after, the length a
    multiple of `multiple`."""
    import numpy as np

    from common.special_ids import EOS_ID, PAD_ID

    ids = [pieces + [EOS_ID] for pieces in processor.encode(list(sentences))]
    source = np.full((len(ids), round_up(max(len(row) for row in ids), multiple)), PAD_ID, dtype="int32")
    for row, tokens in zip(source, ids):
        row[: len(tokens)] = tokens
    return source


def output_tokens(ids):
    """Tokens of each row of int `[batch, length]` search output (EOS, then PAD), EOS not counted."""
    from common.special_ids import EOS_ID, PAD_ID

    lengths = []
    for row in ids.tolist():
        while row and row[-1] == PAD_ID:
            row.pop()
        lengths.append(len(row) - (1 if row and row[-1] == EOS_ID else 0))
    return lengths


# What `saved_model_system` calls: the export has only these (written and loaded faster).
SAVED_MODEL_SIGNATURES = ("serving_default", "translate_ids")


def saved_model_system(path, processor):
    """`serving_default`, text to text; the output lengths from the `translate_ids` signature (the
    same search on the same tokens, untimed)."""
    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the SentencePiece ops of the export's graph)

    loaded = tf.saved_model.load(path)
    serving = loaded.signatures["serving_default"]
    search = loaded.signatures["translate_ids"]

    def run(sentences):
        translations = serving(inputs=tf.constant(sentences))["translations"].numpy()
        return [text.decode("utf-8") for text in translations]

    def lengths(sentences, _):
        return output_tokens(search(source_ids=tf.constant(padded_ids(processor, sentences)))["ids"].numpy())

    return System(prepare=list, run=run, lengths=lengths, resources=loaded)


def ctranslate2_system(path, processor, output_length, args):
    import ctranslate2

    translator = ctranslate2.Translator(path, device="cpu", intra_threads=args.ct2_threads)

    def prepare(sentences):
        lengths = source_tokens(processor, sentences)
        if output_length.forced:
            return list(sentences), min(lengths) - 1, max(lengths) + 1
        return list(sentences), 1, max(lengths) + output_length.max_extra_length

    def run(call):
        sentences, min_length, max_length = call
        results = translator.translate_batch(
            processor.encode(sentences, out_type=str),
            beam_size=args.beam_size,
            length_penalty=args.alpha,
            min_decoding_length=min_length,
            max_decoding_length=max_length,
            use_vmap=bool(args.shortlist),
        )
        pieces = [result.hypotheses[0] for result in results]
        return [processor.decode_pieces(hypothesis) for hypothesis in pieces], [
            len(hypothesis) for hypothesis in pieces
        ]

    def lengths(_, outputs):
        return outputs[1]

    return System(prepare=prepare, run=run, lengths=lengths, resources=translator)


def round_up(value, multiple=8):
    return -(-value // multiple) * multiple


def keras_hub_system(model_config, processor, sentences, args):
    """keras-hub's sampler on ids, at the sizes of `model_config` (the run's): a source padded to a
    multiple of 8, a prompt of a multiple of 8 positions whose last `n + 1` (the call's largest) are
    generated after a BOS."""
    import keras
    import numpy as np
    from beam_search_speed import keras_hub_search

    from common.special_ids import BOS_ID, PAD_ID

    longest = max(source_tokens(processor, sentences))
    sizes = {key: model_config[key] for key in ("num_layers", "hidden_dim", "intermediate_dim", "num_heads")}
    vocabulary_size = processor.get_piece_size()
    generate = keras_hub_search(vocabulary_size, sizes, args.beam_size, round_up(longest), round_up(longest + 2))

    def prepare(call):
        generated = max(source_tokens(processor, call)) + 1
        source = padded_ids(processor, call, multiple=8)
        prompt = np.full((len(source), round_up(generated + 1)), PAD_ID, dtype="int32")
        start = prompt.shape[1] - generated
        prompt[:, start - 1] = BOS_ID
        tensors = [keras.ops.convert_to_tensor(value) for value in (source, prompt)]
        return (*tensors, keras.ops.convert_to_tensor(start, "int32")), generated

    def run(call):
        inputs, _ = call
        return keras.ops.convert_to_numpy(generate(*inputs))

    def lengths(call, outputs):
        _, generated = call
        return [generated] * len(outputs)

    return System(prepare=prepare, run=run, lengths=lengths)


def write_random_run(size, vocabulary_path, directory):
    """A run directory (config.json, spm.model, model.keras) of a never-trained `Transformer` of
    preset `size`, which the exports load as `--checkpoint=last`."""
    import sentencepiece

    from models.presets import model_config
    from models.transformer import Transformer

    run = RunDir(directory)
    os.makedirs(run.path)
    config = model_config(size)
    vocabulary_size = sentencepiece.SentencePieceProcessor(model_file=vocabulary_path).get_piece_size()
    model = Transformer(vocabulary_size, **config)
    model.build()
    model.save(run.model_path)
    shutil.copyfile(vocabulary_path, run.vocabulary_path)
    with open(run.config_path, "w", encoding="utf-8") as handle:
        json.dump({"model": config, "data": {}, "train": {"preset": size}}, handle, indent=2)
    return run.path


def build_artefacts(run_path, checkpoint, output_length, scratch, args):
    """`({name: path}, {name: seconds to export or convert})` for `args.systems` of the run
    `run_path`: each SavedModel's export, each CTranslate2 conversion (keras-hub's: None, built
    where it is measured)."""
    from export.ctranslate2_export import convert_run
    from export.exporter import export_model

    paths, seconds = {}, {}
    for name in args.systems + (["saved_model_baseline"] if args.baseline_tree else []):
        start = time.perf_counter()
        target = os.path.join(scratch, name)
        if name == "saved_model_baseline":
            paths[name] = baseline_export(run_path, checkpoint, output_length, target, args)
        elif name.startswith("saved_model"):
            paths[name] = export_model(
                run_path,
                target,
                search=SearchConfig(
                    beam_size=args.beam_size,
                    alpha=args.alpha,
                    max_input_length=args.max_input_length,
                    max_extra_length=output_length.max_extra_length,
                    min_length_ratio=output_length.min_length_ratio,
                    shortlist=args.shortlist,
                    stopping=args.stopping,
                ),
                length_buckets=args.length_buckets,
                checkpoint=checkpoint,
                quantize="int8" if name.endswith("int8") else None,
                signatures=SAVED_MODEL_SIGNATURES,
            )
        elif name.startswith("ct2"):
            paths[name] = convert_run(
                run_path, target, quantization=name.split("_")[1], checkpoint=checkpoint, shortlist=args.shortlist
            )
        else:
            paths[name] = None
        seconds[name] = round(time.perf_counter() - start, 1)
    return paths, seconds


def baseline_export(run_path, checkpoint, output_length, target, args):
    """The float32 SavedModel version directory that `args.baseline_tree`'s `python -m export` writes
    under `target` for the run `run_path`, with the search and buckets of this script's exports but
    the tree's default stopping rule (a tree before `--stopping` has no such flag) and no shortlist
    (the plain search, the anchor of what `--shortlist` and the rest buy)."""
    import subprocess

    command = [
        sys.executable,
        "-m",
        "export",
        f"--model_dir={os.path.abspath(run_path)}",
        f"--export_dir={os.path.abspath(target)}",
        f"--checkpoint={checkpoint}",
        f"--beam_size={args.beam_size}",
        f"--alpha={args.alpha}",
        f"--max_input_length={args.max_input_length}",
        f"--max_extra_length={output_length.max_extra_length}",
        f"--min_length_ratio={output_length.min_length_ratio}",
        f"--length_buckets={','.join(str(length) for length in args.length_buckets)}",
        "--version=1",
    ]
    if subprocess.run(command, cwd=args.baseline_tree, check=False).returncode != 0:
        raise SystemExit(
            f"cpu_inference.py: --baseline_tree={args.baseline_tree}: its export failed; its error is above"
        )
    return os.path.join(target, "1")


def load_system(name, path, run_path, inputs, args):
    """The `System` of `name`, its artefact at `path` (`build_artefacts`), for `inputs` (`SizeInputs`)."""
    if name.startswith("saved_model"):
        return saved_model_system(path, inputs.processor)
    if name.startswith("ct2"):
        return ctranslate2_system(path, inputs.processor, inputs.output_length, args)
    return keras_hub_system(RunDir(run_path).read_config()["model"], inputs.processor, inputs.sentences, args)


@dataclasses.dataclass(frozen=True)
class SizeInputs:
    """What one size's measurements read: its run's SentencePiece `processor`, the `sentences`, the
    `checkpoint` exported and the `output_length` bounds."""

    processor: object
    sentences: list
    checkpoint: str
    output_length: OutputLength


def size_inputs(size, run_path, args):
    import sentencepiece

    processor = sentencepiece.SentencePieceProcessor(model_file=RunDir(run_path).vocabulary_path)
    sentences = (
        equal_length_sentences(args.sentences, processor, args.count)
        if args.equal_lengths
        else read_sentences(args.sentences, args.count)
    )
    trained = size == args.run_preset
    checkpoint, output_length = (args.checkpoint, FREE) if trained else ("last", FORCED)
    return SizeInputs(processor, sentences, checkpoint, output_length)


def measure_alone(args):
    """An isolated run's child (`--measure_one`): one system measured in this process, which loads
    nothing else; writes `{"results": ..., "profile": ... or None}` to the request's output."""
    request = json.loads(args.measure_one)
    name = request["system"]
    if not name.startswith("ct2"):
        import keras
        import tensorflow as tf

        set_threads(tf, args.threads)
        keras.utils.set_random_seed(args.seed)
    inputs = size_inputs(request["size"], request["run_path"], args)
    calls = mode_calls(inputs.sentences, inputs.processor, args.batch)
    results, profiles = measure_here({name: request["path"]}, request["run_path"], inputs, calls, args)
    with open(request["output"], "w", encoding="utf-8") as handle:
        json.dump({"results": results, "profile": profiles.get(name)}, handle)


def measure_isolated(size, paths, run_path, scratch, args):
    """`({name: {mode: result}}, {name: profile})`, each system measured by a process of its own
    (`measure_alone`), in turn."""
    import subprocess

    results, profiles = {}, {}
    for name, path in paths.items():
        output = os.path.join(scratch, f"{name}-measured.json")
        request = dict(size=size, system=name, path=path, run_path=run_path, output=output)
        command = [sys.executable, os.path.abspath(__file__), *args.argv, f"--measure_one={json.dumps(request)}"]
        returncode = subprocess.run(command, check=False).returncode
        if returncode != 0:
            raise SystemExit(
                f"cpu_inference.py: measuring {LABELS[name]} ({size}) in a process of its own failed with "
                f"status {returncode}; its error is above"
            )
        with open(output, encoding="utf-8") as handle:
            measured = json.load(handle)
        results[name] = measured["results"][name]
        if measured["profile"] is not None:
            profiles[name] = measured["profile"]
    return results, profiles


def measure_here(paths, run_path, inputs, calls, args):
    """`({name: {mode: result}}, {name: profile})`, every system loaded and measured in this process."""
    systems = {name: load_system(name, path, run_path, inputs, args) for name, path in paths.items()}
    results, prepared = measure(systems, calls, args.repeats)
    profiles = {}
    if args.profile:
        for name in (name for name in systems if name.startswith("saved_model")):
            profiles[name] = {
                mode: profile_call(systems[name].run, prepared[name, mode][0], args.top) for mode in MODES
            }
    return results, profiles


def equal_length_sentences(path, processor, count):
    """The first `count` sentences of `path` (first column) of one SentencePiece length: the median
    length of all its sentences when `count` have it, else the nearest length that `count` have.

    Raises:
        SystemExit: no length has `count` sentences (the message says how many the file has).
    """
    with open(path, encoding="utf-8") as handle:
        sentences = [line.rstrip("\n").split("\t")[0] for line in handle if line.strip()]
    by_length = collections.defaultdict(list)
    for sentence, length in zip(sentences, source_tokens(processor, sentences)):
        by_length[length].append(sentence)
    median = sorted(source_tokens(processor, sentences))[len(sentences) // 2] if sentences else 0
    lengths = sorted(
        (length for length, group in by_length.items() if len(group) >= count), key=lambda n: abs(n - median)
    )
    if not lengths:
        raise SystemExit(
            f"cpu_inference.py: --equal_lengths: no SentencePiece length has --count={count} of the "
            f"{len(sentences)} sentences of {path}; lower --count"
        )
    return by_length[lengths[0]][:count]


def mode_calls(sentences, processor, batch):
    """{mode: [sentences of each call]}: one by one, and batches of `batch` in order of length."""
    lengths = source_tokens(processor, sentences)
    ordered = [sentences[index] for index in sorted(range(len(sentences)), key=lambda index: lengths[index])]
    return {
        "single": [[sentence] for sentence in sentences],
        "batch": [ordered[offset : offset + batch] for offset in range(0, len(ordered), batch)],
    }


def measure(systems, calls, repeats):
    """{name: {mode: result}} after one untimed pass of every configuration and `repeats` timed
    ones, the systems taking turns pass by pass; and the prepared inputs, {(name, mode): [input]}."""
    prepared = {
        (name, mode): [system.prepare(call) for call in calls[mode]]
        for name, system in systems.items()
        for mode in calls
    }
    output_lengths = {}
    for (name, mode), inputs in prepared.items():
        system = systems[name]
        output_lengths[name, mode] = [n for call in inputs for n in system.lengths(call, system.run(call))]
    latencies = collections.defaultdict(list)
    names = list(systems)
    for repeat in range(repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        for mode in calls:
            for name in order:
                for call in prepared[name, mode]:
                    start = time.perf_counter()
                    systems[name].run(call)
                    latencies[name, mode].append(time.perf_counter() - start)
    sentences = sum(len(call) for call in calls["single"])
    results = {name: {} for name in systems}
    for (name, mode), seconds in latencies.items():
        results[name][mode] = {
            "sentences_per_second": repeats * sentences / sum(seconds),
            "p50_ms": 1000 * percentile(seconds, 50),
            "p95_ms": 1000 * percentile(seconds, 95),
            "calls": len(seconds),
            "sentences_per_call": sentences / len(calls[mode]),
            "mean_output_tokens": sum(output_lengths[name, mode]) / len(output_lengths[name, mode]),
        }
    return results, prepared


def ratios(results):
    """{mode: {"a / b": ratio of sentences/s}} of `RATIOS` whose systems were measured."""
    found = {}
    for mode in MODES:
        for numerator, denominator, target in RATIOS:
            if numerator in results and denominator in results:
                value = (
                    results[numerator][mode]["sentences_per_second"]
                    / results[denominator][mode]["sentences_per_second"]
                )
                found.setdefault(mode, {})[f"{numerator} / {denominator}"] = {"ratio": value, "target": target}
    return found


def profile_call(run, call, top):
    """One traced `run(call)`: its wall time and the op time by op type, summed over threads."""
    import tensorflow as tf
    from tf_step_profile import op_time_by_type

    with tempfile.TemporaryDirectory() as log_dir:
        tf.profiler.experimental.start(log_dir)
        start = time.perf_counter()
        run(call)
        wall = time.perf_counter() - start
        tf.profiler.experimental.stop()
        (path,) = glob.glob(os.path.join(log_dir, "**", "*.xplane.pb"), recursive=True)
        by_type, _, _, events = op_time_by_type(path, 1)
    total = sum(by_type.values())
    return {
        "wall_ms_traced": 1000 * wall,
        "op_ms": total,
        "top": [{"op": op, "ms": ms, "share": ms / total} for op, ms in by_type.most_common(top)],
        "step": step_breakdown(events),
    }


_DECODER_LAYER = re.compile(r"/decoder(?:_\d+)?/layer_(\d+)")


def step_breakdown(events):
    """Per decoding step (the ops of the search loop's body, each run once a step): the steps, the
    traced ops and their time (ms, summed over threads), the products (`MatMul` op types) apart, the
    traced ops of each decoder layer, and the loop's wall time; None without a loop. Once warm, the
    executor runs the ops it measured as cheap inline and untraced: the loop's wall time less the
    op time is mostly theirs."""
    body = [(start, end, name) for start, end, name in events if "while/body/" in name]
    if not body:
        return None
    steps = max(collections.Counter(name for _, _, name in body).values())
    products = [end - start for start, end, name in body if "MatMul" in name.rsplit(":", 1)[1]]
    layers = collections.Counter()
    for _, _, name in body:
        found = _DECODER_LAYER.search(name.split("while/body/", 1)[1])
        if found:
            layers[int(found.group(1))] += 1
    return {
        "steps": steps,
        "traced_ops": len(body) / steps,
        "products": len(products) / steps,
        "traced_ops_per_layer": {str(layer): count / steps for layer, count in sorted(layers.items())},
        "op_ms": sum(end - start for start, end, _ in body) / 1e9 / steps,
        "product_ms": sum(products) / 1e9 / steps,
        "wall_ms": (max(end for _, end, _ in body) - min(start for start, _, _ in body)) / 1e9 / steps,
    }


def print_profile(size, name, batch, profiles):
    for mode, profile in profiles.items():
        call = "one sentence" if mode == "single" else f"one batch of {batch}"
        print(
            f"\nprofile, {size}, {LABELS[name]}, {call}: {profile['wall_ms_traced']:.0f} ms wall (traced), "
            f"{profile['op_ms']:.0f} ms of ops summed over threads; by op type:"
        )
        for entry in profile["top"]:
            print(f"  {entry['ms']:9.1f} ms  {100 * entry['share']:5.1f}%  {entry['op']}")
        step = profile["step"]
        if step:
            layers = ", ".join(f"{count:.0f}" for count in step["traced_ops_per_layer"].values())
            print(
                f"  per step ({step['steps']} steps): {step['traced_ops']:.0f} traced ops ({step['products']:.0f} products; "
                f"decoder layers {layers}), {step['wall_ms']:.2f} ms wall, {step['op_ms']:.2f} ms of ops, "
                f"{step['product_ms']:.2f} ms of products"
            )


def table_rows(size, results, batch):
    mode_names = {"single": "1 sentence", "batch": f"batch {batch}"}
    rows = []
    for mode in MODES:
        for name, by_mode in results.items():
            result = by_mode[mode]
            rows.append(
                f"| {LABELS[name]} | {size} | {mode_names[mode]} | {result['sentences_per_second']:.2f} | "
                f"{result['p50_ms']:.0f} | {result['p95_ms']:.0f} | {result['mean_output_tokens']:.1f} |"
            )
    return rows


def ms_per_step(result):
    """A system's mean call time (ms) of a mode over its decoding steps: the output tokens and the EOS."""
    call_ms = 1000.0 * result["sentences_per_call"] / result["sentences_per_second"]
    return call_ms / (result["mean_output_tokens"] + 1)


def step_floors(entry, results, calls, args):
    """`--floor`: per mode, `step_floor.floor_ms_per_step` at the size's shapes (the call's sentences,
    the beam, the mean source length for the cross caches and the self caches' positions) and each
    system's `ms_per_step`."""
    from step_floor import floor_ms_per_step

    length = max(1, round(entry["mean_source_tokens"]))
    floors = {}
    for mode in MODES:
        sentences = max(len(call) for call in calls[mode])
        forms = floor_ms_per_step(entry["model"], entry["vocabulary_size"], sentences, args.beam_size, length, length)
        floors[mode] = {
            "sentences": sentences,
            "floor_ms_per_step": forms,
            "systems_ms_per_step": {name: ms_per_step(by_mode[mode]) for name, by_mode in results.items()},
        }
    return floors


def floor_rows(size, floors):
    """The printed lines of `step_floors`: the floor, each system's time per step, and their ratio."""
    lines = []
    for found in floors.values():
        form, floor = min(found["floor_ms_per_step"].items(), key=lambda item: item[1])
        systems = ", ".join(
            f"{LABELS[name]} {ms:.3f} ms ({floor / ms:.2f}x)" for name, ms in found["systems_ms_per_step"].items()
        )
        lines.append(
            f"{size}, {found['sentences']} sentence(s) a call: the core-op floor step {floor:.3f} ms ({form} "
            f"attention); a call's time per step, and the floor over it: {systems}"
        )
    return lines


def machine():
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs"


def set_threads(tf, threads):
    """TensorFlow's intra-op and inter-op threads set to `threads`, where this process's TensorFlow
    has not started yet; `main` called from a process whose TensorFlow runs (a test) keeps that
    process's. Returns the setting the run has (0: TensorFlow's default, every core)."""
    try:
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(threads)
    except RuntimeError:
        pass  # "cannot be modified after initialization"
    return tf.config.threading.get_intra_op_parallelism_threads()


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if args.measure_one is not None:
        return measure_alone(args)
    import keras
    import tensorflow as tf

    threads = set_threads(tf, args.threads)
    keras.utils.set_random_seed(args.seed)  # Before any tokenizer is loaded (data/tokenizer.py).
    summary = {
        "machine": machine(),
        "load_average_at_start": os.getloadavg(),
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
        "settings": {
            key: value
            for key, value in vars(args).items()
            if key not in ("output", "run_preset", "argv", "measure_one")
        },
        "tensorflow_threads": threads,
        "sizes": {},
    }
    if any(name.startswith("ct2") for name in args.systems):
        import ctranslate2

        summary["versions"]["ctranslate2"] = ctranslate2.__version__
    rows, floor_lines = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for size in args.sizes:
            trained = size == args.run_preset
            run_path = (
                args.model_dir if trained else write_random_run(size, args.vocabulary, os.path.join(scratch, size))
            )
            inputs = size_inputs(size, run_path, args)
            exports = os.path.join(scratch, f"{size}-exports")
            paths, ready_seconds = build_artefacts(run_path, inputs.checkpoint, inputs.output_length, exports, args)
            for name, seconds in ready_seconds.items():
                print(f"{size}: {LABELS[name]} ready in {seconds} s", file=sys.stderr, flush=True)
            calls = mode_calls(inputs.sentences, inputs.processor, args.batch)
            if args.isolate:
                results, profiles = measure_isolated(size, paths, run_path, scratch, args)
            else:
                results, profiles = measure_here(paths, run_path, inputs, calls, args)
            entry = {
                "weights": f"{args.model_dir} ({inputs.checkpoint})" if trained else "random",
                "model": RunDir(run_path).read_config()["model"],
                "vocabulary_size": inputs.processor.get_piece_size(),
                "output_length": dataclasses.asdict(inputs.output_length),
                "mean_source_tokens": sum(source_tokens(inputs.processor, inputs.sentences)) / len(inputs.sentences),
                "ready_seconds": ready_seconds,
                "isolated": args.isolate,
                "results": results,
                "ratios": ratios(results),
            }
            rows += table_rows(size, results, args.batch)
            if args.profile:
                entry["profile"] = profiles
                for name, profile in profiles.items():
                    print_profile(size, name, len(calls["batch"][0]), profile)
            if args.floor:
                entry["floor"] = step_floors(entry, results, calls, args)
                floor_lines += floor_rows(size, entry["floor"])
            summary["sizes"][size] = entry
    summary["load_average_at_end"] = os.getloadavg()
    print(
        f"\n{machine()}, {args.threads} threads (CTranslate2 {args.ct2_threads}), beam {args.beam_size}, "
        f"{args.count} sentences, {args.repeats} repeat(s)"
    )
    print("| system | size | mode | sentences/s | p50 ms | p95 ms | mean output tokens |")
    print("|---|---|---|---:|---:|---:|---:|")
    print("\n".join(rows))
    for size, entry in summary["sizes"].items():
        for mode, found in entry["ratios"].items():
            for name, ratio in found.items():
                target = "" if ratio["target"] is None else f" (target: {ratio['target']}x)"
                print(f"{size}, {mode}: {name} = {ratio['ratio']:.2f}x{target}")
    if floor_lines:
        print("\n".join(floor_lines))
    if os.path.dirname(args.output):
        os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=1)
        handle.write("\n")
    print(f"wrote {args.output}")
    return summary


if __name__ == "__main__":
    main()
