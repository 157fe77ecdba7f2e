"""The vocabulary's options against the plain shared one: dev and test BLEU of the demo's run trained
with and without `--subword_alpha` (subword regularization), and with `--vocabulary=shared` or
`separate` (`--vocabularies`), on deb-en-de and on a pair in another script.

For each corpus and alpha, `train.py` trains the demo's run (`make demo`'s flags: recipe small_data,
2,400 steps, checkpoints every 200, the last five kept; all without the recipe's
`--cache_tokenized`, which sampling cannot use, so that only the segmentation differs), then `evaluation.evaluator.evaluate` (what
`evaluate.py` runs) scores the mean of the last five checkpoints on the dev and test splits with the
run's recorded search. Alpha 0 (no sampling) with a shared vocabulary is the anchor, trained by the
same command. A run directory that is already complete is scored as it is (train.py resumes it to
its last step). `--json` writes every score and setting.

    python benchmarks/subword_sampling.py --cache_dir=cache/corpora --corpora=deb-en-de,deb-en-ja \
        --alphas=0,0.1 --json=benchmarks/results/subword-sampling.json
    python benchmarks/subword_sampling.py --cache_dir=cache/corpora --corpora=deb-en-ja \
        --alphas=0 --vocabularies=shared,separate --json=benchmarks/results/vocabularies.json
"""

import argparse
import itertools
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_runs  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpora", default="deb-en-de,deb-en-ja", help="built-in corpora (train.py's --corpus)")
    parser.add_argument("--alphas", default="0,0.1", help="train.py's --subword_alpha values; 0 is the anchor")
    parser.add_argument("--vocabularies", default="shared", help="train.py's --vocabulary values; shared is the anchor")
    parser.add_argument("--train_steps", type=int, default=2400)
    parser.add_argument("--splits", default="dev,test")
    demo_runs.add_run_arguments(parser, "subword_sampling")
    return parser.parse_args(argv)


def train(args, corpus, alpha, vocabulary, model_dir):
    """Trains (or resumes) one run with train.py, without the recipe's token cache (which sampling
    cannot use) so that only the segmentation differs; returns its wall seconds."""
    flags = [
        "--eval_every=1200",
        "--nocache_tokenized",
        f"--subword_alpha={alpha:g}",
        f"--vocabulary={vocabulary}",
        *args.train_flags.split(),
    ]
    return demo_runs.train(model_dir, corpus, args.cache_dir, args.train_steps, flags, args.deb_dir)


def run(args):
    results = []
    for corpus in args.corpora.split(","):
        for alpha, vocabulary in itertools.product(
            (float(a) for a in args.alphas.split(",")), args.vocabularies.split(",")
        ):
            suffix = "" if vocabulary == "shared" else f"-{vocabulary}"
            model_dir = os.path.join(args.output_dir, f"{corpus}-alpha{alpha:g}{suffix}")
            seconds = train(args, corpus, alpha, vocabulary, model_dir)
            row = {
                "corpus": corpus,
                "subword_alpha": alpha,
                "vocabulary": vocabulary,
                "model_dir": model_dir,
                "train_seconds": round(seconds),
            }
            row.update({split: demo_runs.scores(model_dir, split, args.checkpoint) for split in args.splits.split(",")})
            results.append(row)
            print(
                f"{corpus} alpha {alpha:g} {vocabulary} vocabulary: "
                + ", ".join(f"{s} BLEU {row[s]['bleu']:.2f} chrF {row[s]['chrf']:.2f}" for s in args.splits.split(","))
                + f" ({seconds:.0f} s)",
                flush=True,
            )
            if args.json:
                with open(args.json, "w", encoding="utf-8") as f:
                    json.dump({"settings": vars(args), "results": results}, f, indent=1)
    return results


def main(argv=None):
    run(parse_args(argv))


if __name__ == "__main__":
    main()
