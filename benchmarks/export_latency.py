"""Latency and throughput of the exported SavedModel beside evaluate.py's Python path, on one model.

Measures, on the same sentences and search settings:

- `export`: the SavedModel's `serving_default` signature (loaded with `tf.saved_model.load`), one
  sentence per call (latency p50/p95) and batches of `--batch` sentences (sentences / s);
- `python_path`: `inference.translator.Translator` (what evaluate.py runs: tokenize in Python,
  sort by length, pad to multiples of 8, `translate_ids` under `tf.function`, detokenize), with
  `batch_size=1` for the latency and `batch_size=--batch` for the throughput.

`--signatures` times other signatures of the export the same way, each request built from the
sentences: `n_best`, `align` and `markup` take them alone; `score` takes them with their
`serving_default` translations; `prefix` and `constrain` with the first word of that translation as
the prefix or the one phrase. `--baseline_export_dir` times the same signatures of another export
(another tree's, for an A/B) in the same process, after each signature of this one, with the same
requests, and reports this export's rate over the baseline's.

Every configuration first translates the whole sentence set once untimed (graph initialisation and
tracing for every shape), then is timed over `--repeats` passes. Each call's result is fetched as
NumPy / Python strings, so the clock covers the whole request. With `--export_dir` absent the model
is exported first into a temporary directory with the given settings (`--length_buckets` picks the
buckets; `--length_buckets=` with nothing gives the single fixed cache of max_input_length).

Example (the numbers in benchmarks/README.md were measured like this on the 2-core CPU machine):

    python benchmarks/export_latency.py --model_dir=runs/tiny --sentences=cache/corpora/deb-en-de/test.tsv \
        --count=64 --batch=32
    python benchmarks/export_latency.py --model_dir=runs/demo --export_dir=EXPORT/1 --baseline_export_dir=OLD/1 \
        --sentences=cache/corpora/deb-en-de/test.tsv --count=32 --batch=32 --repeats=5 --skip_python_path \
        --signatures=serving_default,n_best,align,markup,prefix,score
"""

import argparse
import json
import os
import platform
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model_dir", required=True, help="A directory written by train.py.")
    parser.add_argument("--export_dir", default=None, help="An existing version directory; default: export now.")
    parser.add_argument(
        "--sentences", default=None, help="Text or TSV file (first column); default built-in sentences."
    )
    parser.add_argument("--count", type=int, default=64, help="Sentences used (default: 64).")
    parser.add_argument("--batch", type=int, default=32, help="Batch size of the throughput runs (default: 32).")
    parser.add_argument("--repeats", type=int, default=1, help="Timed passes over the sentences (default: 1).")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--alpha", type=float, default=0.6)
    parser.add_argument("--max_input_length", type=int, default=256)
    parser.add_argument("--max_extra_length", type=int, default=50)
    parser.add_argument(
        "--length_buckets",
        default="16,32,64",
        help="Comma-separated buckets for the export made here; empty: one fixed cache.",
    )
    parser.add_argument("--skip_python_path", action="store_true", help="Time only the export.")
    parser.add_argument(
        "--signatures",
        default="serving_default",
        help=f"Comma-separated signatures to time besides the Python path, of {', '.join(SIGNATURES)}.",
    )
    parser.add_argument(
        "--baseline_export_dir", default=None, help="Another export's version directory, timed beside (--signatures)."
    )
    args = parser.parse_args(argv)
    unknown = [name for name in args.signatures.split(",") if name not in SIGNATURES]
    if unknown or not args.signatures:
        parser.error(f"--signatures={args.signatures}: {unknown or 'none'} not of {', '.join(SIGNATURES)}")
    return args


# The signatures whose requests this script builds from the sentences (module docstring).
SIGNATURES = ("serving_default", "n_best", "align", "markup", "score", "prefix", "constrain")


def read_sentences(path, count):
    if path is None:
        from export.warmup import SAMPLE_SENTENCES

        sentences = list(SAMPLE_SENTENCES)
    else:
        with open(path, encoding="utf-8") as handle:
            sentences = [line.rstrip("\n").split("\t")[0] for line in handle if line.strip()]
    return [sentences[index % len(sentences)] for index in range(count)]


def percentile(values, q):
    import numpy as np

    return float(np.percentile(np.array(values), q))


def time_single(translate, sentences, repeats):
    """Per-sentence latencies in milliseconds: `translate` called with a list of one item of `sentences`."""
    latencies = []
    for _ in range(repeats):
        for sentence in sentences:
            start = time.perf_counter()
            translate([sentence])
            latencies.append(1000.0 * (time.perf_counter() - start))
    return {"p50_ms": percentile(latencies, 50), "p95_ms": percentile(latencies, 95), "calls": len(latencies)}


def time_batches(translate, sentences, batch, repeats):
    start = time.perf_counter()
    for _ in range(repeats):
        for offset in range(0, len(sentences), batch):
            translate(sentences[offset : offset + batch])
    seconds = time.perf_counter() - start
    return {"sentences_per_second": repeats * len(sentences) / seconds, "batch": batch}


def signature_requests(serving, sentences):
    """`{signature: function(indices) -> its keyword inputs}` for the sentences at `indices`
    (module docstring); the translations `score`, `prefix` and `constrain` read are made here, once."""
    import tensorflow as tf

    translations = [t.decode("utf-8") for t in serving(inputs=tf.constant(sentences))["translations"].numpy()]
    first_words = [(translation.split() or [""])[0] for translation in translations]

    def strings(values, indices):
        return tf.constant([values[index] for index in indices])

    def alone(indices):
        return {"inputs": strings(sentences, indices)}

    return {
        "serving_default": alone,
        "n_best": alone,
        "align": alone,
        "markup": alone,
        "score": lambda indices: {**alone(indices), "targets": strings(translations, indices)},
        "prefix": lambda indices: {**alone(indices), "prefixes": strings(first_words, indices)},
        "constrain": lambda indices: {**alone(indices), "constraints": strings(first_words, indices)},
    }


def time_signature(signature, request, sentences, args):
    """One signature's single-sentence latency and batched rate, each call's outputs fetched."""

    def call(indices):
        return {name: value.numpy() for name, value in signature(**request(indices)).items()}

    every = list(range(len(sentences)))
    call(every)  # Traces and warms every bucket the requests reach.
    for index in every:
        call([index])
    return {
        "single": time_single(call, every, args.repeats),
        "batched": time_batches(call, every, args.batch, args.repeats),
    }


def over_baseline(results, signatures):
    """The export's batched rate and single p50 latency over the baseline's, per signature."""
    ratios = {}
    for name in signatures:
        mine, theirs = (
            (results[which] if name == "serving_default" else results[f"{which}_signatures"][name])
            for which in ("export", "baseline")
        )
        ratios[name] = {
            "batched_rate": mine["batched"]["sentences_per_second"] / theirs["batched"]["sentences_per_second"],
            "single_speed": theirs["single"]["p50_ms"] / mine["single"]["p50_ms"],
        }
    return ratios


def main(argv=None):
    args = parse_args(argv)
    import tensorflow as tf

    from data.multilingual import model_languages
    from export.exporter import export_model
    from inference.runs import RunDir
    from inference.translator import Translator
    from models.search_config import SearchConfig

    if model_languages((RunDir(args.model_dir).read_config() or {}).get("data", {})):
        raise SystemExit(f"{args.model_dir} is a multilingual model: this benchmark times one pair's model")
    sentences = read_sentences(args.sentences, args.count)
    search = SearchConfig(
        beam_size=args.beam_size,
        alpha=args.alpha,
        max_extra_length=args.max_extra_length,
        max_input_length=args.max_input_length,
    )
    buckets = [int(value) for value in args.length_buckets.split(",") if value.strip()]
    results = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs",
        "tensorflow": tf.__version__,
        "model_dir": args.model_dir,
        "sentences": len(sentences),
        "search": {name: value for name, value in search.search_settings().items() if name != "min_length_ratio"},
    }
    with tempfile.TemporaryDirectory() as scratch:
        path = args.export_dir
        if path is None:
            start = time.perf_counter()
            path = export_model(args.model_dir, scratch, search=search, length_buckets=buckets)
            results["export_seconds"] = time.perf_counter() - start
        results["length_buckets"] = json.load(open(os.path.join(path, "assets.extra", "export_config.json")))["export"][
            "length_buckets"
        ]
        exports = {"export": tf.saved_model.load(path)}
        if args.baseline_export_dir:
            same = os.path.realpath(args.baseline_export_dir) == os.path.realpath(path)
            # The export itself as its baseline (a check of the timing alone): loaded once.
            exports["baseline"] = exports["export"] if same else tf.saved_model.load(args.baseline_export_dir)
        requests = signature_requests(exports["export"].signatures["serving_default"], sentences)
        for name in args.signatures.split(","):
            for which, loaded in exports.items():
                timed = time_signature(loaded.signatures[name], requests[name], sentences, args)
                if name == "serving_default":
                    results[which] = timed
                else:
                    results.setdefault(f"{which}_signatures", {})[name] = timed
        if "baseline" in exports:
            results["over_baseline"] = over_baseline(results, args.signatures.split(","))

    if not args.skip_python_path:
        model, tokenizer, _ = RunDir(args.model_dir).load_model("last")
        source_tokenizer = RunDir(args.model_dir).separate_source_tokenizer()
        python_path = {}
        for name, batch in (("single", 1), ("batched", args.batch)):
            translator = Translator(
                model,
                tokenizer,
                search,
                batch_size=batch,
                source_tokenizer=source_tokenizer,
            )
            translator.translate(sentences)  # traces every padded shape once
            if name == "single":
                python_path[name] = time_single(translator.translate, sentences, args.repeats)
            else:
                python_path[name] = time_batches(translator.translate, sentences, batch, args.repeats)
        results["python_path"] = python_path
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
