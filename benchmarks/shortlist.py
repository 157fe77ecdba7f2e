"""The vocabulary shortlist's speed: a run's Python translator (`Translator`, TensorFlow) with and
without `--shortlist=K`, beam `--beam_size`, in batches of `--batch` sentences and one sentence a
call, on the first `--count` sentences of a corpus split. Each configuration is warmed up (its
searches compiled) by one untimed pass, then timed over `--repeats` passes alternated with the
other's (a shared machine's load changes meanwhile); reported: the best pass's sentences/s and the
mean columns of the output projection per batch (the vocabulary without a shortlist). The run
needs its lexical table (`python -m training.shortlist --model_dir=RUN`); BLEU is evaluate.py's
(`--shortlist=K`), benchmarks/README.md has both.

    python benchmarks/shortlist.py --model_dir=runs/demo --checkpoint=average:5 --shortlist=50
    # Random weights (a run of never-trained weights, with its table): outputs of the source's length.
    python benchmarks/shortlist.py --model_dir=RANDOM_RUN --checkpoint=last --min_length_ratio=1 --max_extra_length=1
"""

import argparse
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from common import quiet_logs  # noqa: E402  (after the path above)
from common.json_files import write_json_atomically  # noqa: E402

DEFAULT_OUTPUT = os.path.join(REPO_ROOT, "benchmarks", "results", "shortlist.json")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="A run with its lexical table (shortlist.tsv).")
    parser.add_argument("--checkpoint", default="best", help="The run's weights (as evaluate.py's).")
    parser.add_argument("--shortlist", type=int, default=50, help="Candidates per source piece (default: 50).")
    parser.add_argument("--split", default="test", help="The run's corpus split translated (default: test).")
    parser.add_argument("--count", type=int, default=256, help="Sentences translated (default: 256).")
    parser.add_argument("--batch", type=int, default=32, help="Sentences per call in the batch mode (default: 32).")
    parser.add_argument("--single", type=int, default=32, help="Sentences translated one a call (default: 32).")
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3, help="Timed passes of each, alternated; the best is kept.")
    parser.add_argument(
        "--min_length_ratio",
        type=float,
        default=0.0,
        help="1 with --max_extra_length=1: outputs of the source's length.",
    )
    parser.add_argument(
        "--max_extra_length",
        type=int,
        default=50,
        help="(random weights would run each output to this).",
    )
    parser.add_argument("--output", default=DEFAULT_OUTPUT, help="JSON file written (default: %(default)s).")
    return parser.parse_args(argv)


def test_sentences(model_dir, split, count):
    """The first `count` source sentences of the run's corpus split."""
    from evaluation.evaluator import EvalConfig, load_test_set
    from inference.runs import RunDir

    config = EvalConfig(model_dir=model_dir, split=split)
    sources, _, _, _ = load_test_set(config, RunDir(model_dir).read_config())
    return sources[:count]


def mean_columns(translator, sentences, candidates, batch):
    """The mean number of output columns over the batches of `sentences` (`batch_shortlist`)."""
    import numpy as np

    from models.vocabulary_shortlist import batch_shortlist

    table = translator.shortlist_table(candidates)
    rows = translator.encode(sentences)
    sizes = []
    for start in range(0, len(rows), batch):
        ids = np.asarray([piece for row in rows[start : start + batch] for piece in row], "int32")[None]
        columns = batch_shortlist(table, ids, candidates, translator.model.vocabulary_size).columns
        sizes.append(int(columns.shape[0]))
    return sum(sizes) / len(sizes)


def pass_rate(translator, sentences):
    """Sentences/s of one pass of `translator` over `sentences`."""
    start = time.perf_counter()
    translator.translate_sentences(sentences)
    return len(sentences) / (time.perf_counter() - start)


def measure(args):
    from inference.runs import RunDir
    from inference.translator import Translator
    from models.search_config import SearchConfig

    sentences = test_sentences(args.model_dir, args.split, args.count)
    run = RunDir(args.model_dir)
    model, tokenizer, _ = run.load_model(args.checkpoint, quiet=True)
    table = run.load_shortlist()
    results = []
    for mode, batch, chosen in (("batch", args.batch, sentences), ("single", 1, sentences[: args.single])):
        translators = {}
        for candidates in (0, args.shortlist):
            search = SearchConfig(
                beam_size=args.beam_size,
                shortlist=candidates,
                min_length_ratio=args.min_length_ratio,
                max_extra_length=args.max_extra_length,
            )
            translators[candidates] = Translator(model, tokenizer, search, batch_size=batch, shortlist=table)
            translators[candidates].translate_sentences(chosen)  # Untimed: compiles the searches.
        rates = {candidates: [] for candidates in translators}
        for _ in range(args.repeats):  # Alternated, so that a change in the machine's load hits both.
            for candidates, translator in translators.items():
                rates[candidates].append(pass_rate(translator, chosen))
        for candidates, translator in translators.items():
            columns = mean_columns(translator, chosen, candidates, batch) if candidates else model.vocabulary_size
            rate = max(rates[candidates])
            results.append(
                dict(
                    mode=mode,
                    shortlist=candidates,
                    sentences_per_second=rate,
                    passes=rates[candidates],
                    mean_columns=columns,
                )
            )
            print(f"{mode:6} shortlist={candidates:<4} {rate:8.2f} sentences/s  {columns:8.1f} columns", flush=True)
    return results


def main(argv=None):
    quiet_logs.quiet_tool_output()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = parse_args(argv)
    results = measure(args)
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    write_json_atomically(args.output, {"arguments": vars(args), "results": results})
    return results


if __name__ == "__main__":
    main()
