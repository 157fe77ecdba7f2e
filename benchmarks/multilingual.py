"""One multilingual model against one bilingual model per pair: per-pair test BLEU at the same total
training steps, with the wall time of each.

For each pair (default deb-en-de, deb-en-fr, deb-en-es) `train.py` trains the demo's run (`make
demo`'s flags: recipe small_data, checkpoints every 200, the last five kept) for `--steps_per_pair`
steps: the anchors. Then one model trains on all the pairs (`--corpus=deb-en-de,deb-en-fr,...`, the
`<2xx>` tags, `--pair_sampling_temperature`) for the sum of their steps, the same total steps; its
wall time beside theirs says how it compares at the same total time. `evaluation.evaluator.evaluate`
(what `evaluate.py` runs) scores the mean of the last five checkpoints of each on each pair's test
split with the run's recorded search, the multilingual model with `target_language`. A run
directory that is already complete (its model.keras written, of the same corpus, temperature and
steps) is scored as it is, without a train.py (its `train_seconds` null); an unfinished one resumes.
`--json` writes every score and setting.

    python benchmarks/multilingual.py --cache_dir=cache/corpora --pairs=deb-en-de,deb-en-fr,deb-en-es \
        --steps_per_pair=1200 --json=benchmarks/results/multilingual.json
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_runs  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", default="deb-en-de,deb-en-fr,deb-en-es", help="built-in corpora, one per pair")
    parser.add_argument("--steps_per_pair", type=int, default=1200, help="a bilingual run's steps (a multiple of 200)")
    parser.add_argument("--temperature", type=float, default=5.0, help="train.py's --pair_sampling_temperature")
    parser.add_argument("--split", default="test")
    demo_runs.add_run_arguments(parser, "multilingual")
    return parser.parse_args(argv)


def train(args, corpus, steps, model_dir, flags=(), temperature=None):
    """Trains (or resumes) one run with train.py, its dev BLEU at the end only; returns its wall
    seconds, or None for a run already complete (module docstring)."""
    if _complete(model_dir, corpus, steps, temperature):
        print(f"{model_dir}: trained to step {steps} already, scored as it is", flush=True)
        return None
    flags = [f"--eval_every={steps}", *flags, *args.train_flags.split()]
    return demo_runs.train(model_dir, corpus, args.cache_dir, steps, flags, args.deb_dir)


def _complete(model_dir, corpus, steps, temperature):
    """Whether the run at `model_dir` has trained `steps` steps on `corpus` (at `temperature`) to the end."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(os.path.join(model_dir, "model.keras")) or not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as handle:
        config = json.load(handle)
    data = config.get("data", {})
    same_mix = temperature is None or data.get("pair_sampling_temperature") == temperature
    return data.get("corpus") == corpus and config.get("train", {}).get("train_steps") == steps and same_mix


def scores(args, model_dir, target_language=None):
    """BLEU, chrF and BLEU's signature of the run on the split (of `target_language`'s pair)."""
    return demo_runs.scores(model_dir, args.split, args.checkpoint, target_language)


def run(args):
    pairs = args.pairs.split(",")
    results = {"bilingual": {}, "multilingual": {}}

    def save():
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"settings": vars(args), "results": results}, f, indent=1)

    for pair in pairs:
        model_dir = os.path.join(args.output_dir, pair)
        seconds = train(args, pair, args.steps_per_pair, model_dir)
        results["bilingual"][pair] = {
            "model_dir": model_dir,
            "steps": args.steps_per_pair,
            "train_seconds": _rounded(seconds),
        }
        save()
    model_dir = os.path.join(args.output_dir, "multi-" + "-".join(pair.rsplit("-", 1)[-1] for pair in pairs))
    steps = args.steps_per_pair * len(pairs)
    flags = (f"--pair_sampling_temperature={args.temperature:g}",)
    seconds = train(args, ",".join(pairs), steps, model_dir, flags, temperature=args.temperature)
    results["multilingual"] = {"model_dir": model_dir, "steps": steps, "train_seconds": _rounded(seconds), "pairs": {}}
    save()
    for pair in pairs:
        results["bilingual"][pair][args.split] = scores(args, results["bilingual"][pair]["model_dir"])
        language = pair.rsplit("-", 1)[-1]
        results["multilingual"]["pairs"][pair] = {args.split: scores(args, model_dir, language)}
        save()
        print(
            f"{pair}: bilingual {results['bilingual'][pair][args.split]['bleu']:.2f}, "
            f"multilingual {results['multilingual']['pairs'][pair][args.split]['bleu']:.2f} {args.split} BLEU",
            flush=True,
        )
    bilingual = [results["bilingual"][pair]["train_seconds"] for pair in pairs]
    bilingual_seconds = "unknown" if None in bilingual else sum(bilingual)
    multilingual_seconds = results["multilingual"]["train_seconds"]
    print(
        f"training: bilingual {bilingual_seconds} s in all, multilingual {'unknown' if multilingual_seconds is None else multilingual_seconds} s"
    )
    return results


def _rounded(seconds):
    return None if seconds is None else round(seconds)


def main(argv=None):
    run(parse_args(argv))


if __name__ == "__main__":
    main()
