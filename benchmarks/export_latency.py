"""Latency and throughput of the exported SavedModel beside evaluate.py's Python path, on one model.

Measures, on the same sentences and search settings:

- `export`: the SavedModel's `serving_default` signature (loaded with `tf.saved_model.load`), one
  sentence per call (latency p50/p95) and batches of `--batch` sentences (sentences / s);
- `python_path`: `inference.translator.Translator` (what evaluate.py runs: tokenize in Python,
  sort by length, pad to multiples of 8, `translate_ids` under `tf.function`, detokenize), with
  `batch_size=1` for the latency and `batch_size=--batch` for the throughput.

Every configuration first translates the whole sentence set once untimed (graph initialisation and
tracing for every shape), then is timed over `--repeats` passes. Each call's result is fetched as
NumPy / Python strings, so the clock covers the whole request. With `--export_dir` absent the model
is exported first into a temporary directory with the given settings (`--length_buckets` picks the
buckets; `--length_buckets=` with nothing gives the single fixed cache of max_input_length).

Example (the numbers in benchmarks/README.md were measured like this on the 2-core CPU machine):

    python benchmarks/export_latency.py --model_dir=runs/tiny --sentences=cache/corpora/deb-en-de/test.tsv \
        --count=64 --batch=32
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
    return parser.parse_args(argv)


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
    """Per-sentence latencies in milliseconds."""
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
        serving = tf.saved_model.load(path).signatures["serving_default"]

        def exported(batch):
            outputs = serving(inputs=tf.constant(batch))
            return [t.decode("utf-8") for t in outputs["translations"].numpy()], outputs["scores"].numpy()

        exported(sentences)
        for sentence in sentences:
            exported([sentence])
        results["export"] = {
            "single": time_single(exported, sentences, args.repeats),
            "batched": time_batches(exported, sentences, args.batch, args.repeats),
        }

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
