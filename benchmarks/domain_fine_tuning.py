"""Fine-tuning on a small in-domain file: does `--init_from` teach a model a domain it did not see?

A parent trained on deb-en-de's LibreOffice help pairs only is fine-tuned (train.py's `--init_from`,
a constant learning rate) on the first `--domain_pairs` pairs of the LibreOffice interface strings.
Both are scored on the interface's test pairs, which neither run saw: dev loss (label-smoothed
cross-entropy), greedy sacreBLEU and chrF on detokenized text. Printed: one line per run and the
gains; `--json` writes every number and setting. `--min_bleu_gain` / `--min_chrf_gain` make the
script exit 1 when the child does not beat the parent by that much.

    python benchmarks/domain_fine_tuning.py --cache_dir=cache/corpora --deb_dir=cache/test-debs \
        --min_bleu_gain=1.0 --min_chrf_gain=4.0

The defaults are the setting benchmarks/README.md records ("Fine-tuning the recipe's model on a
domain"): the demo's architecture (tiny, pre-norm, no dropout) with a 2,000-piece vocabulary, 300
parent steps, 150 child steps at 1e-3 on 3,000 pairs.
"""

import argparse
import json
import os
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

MODEL = dict(num_layers=2, hidden_dim=128, num_heads=4, intermediate_dim=512, dropout=0.0, normalize_first=True)
GENERAL_SOURCE, DOMAIN_SOURCE = "libreoffice-help", "libreoffice-ui"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache_dir", default=os.path.join(REPO_ROOT, "cache", "corpora"))
    parser.add_argument("--deb_dir", default=None, help="train.py's --deb_dir (where the corpus's packages are)")
    parser.add_argument("--output_dir", default=os.path.join(REPO_ROOT, "runs", "domain_fine_tuning"))
    parser.add_argument("--sizes", default="", help="overrides of MODEL, e.g. num_layers=1,hidden_dim=32")
    parser.add_argument("--vocab_size", type=int, default=2000)
    parser.add_argument("--max_length", type=int, default=64)
    parser.add_argument("--batch_tokens", type=int, default=4096)
    parser.add_argument("--parent_steps", type=int, default=300)
    parser.add_argument("--warmup_steps", type=int, default=200, help="the parent's learning-rate warm-up")
    parser.add_argument("--child_steps", type=int, default=150)
    parser.add_argument("--child_learning_rate", type=float, default=1e-3, help="constant, for the fine-tuning")
    parser.add_argument("--domain_pairs", type=int, default=3000, help="interface pairs the child trains on")
    parser.add_argument("--dev_sentences", type=int, default=None, help="score the first N test pairs (default: all)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--min_bleu_gain", type=float, default=None, help="exit 1 below this greedy BLEU gain")
    parser.add_argument("--min_chrf_gain", type=float, default=None, help="exit 1 below this chrF gain")
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    model = dict(MODEL)
    for item in filter(None, args.sizes.split(",")):
        name, _, value = item.partition("=")
        if name not in MODEL:
            parser.error(f"--sizes: {name!r} is not one of {', '.join(MODEL)}")
        model[name] = json.loads(value.lower()) if isinstance(MODEL[name], bool) else type(MODEL[name])(value)
    args.model = model
    return args


def run_config(args, name, train_tsv, dev_tsv, **train_options):
    """The RunConfig train.py builds for `--corpus=files --train_tsv=... --dev_tsv=...` here."""
    from training.config import DataConfig, RunConfig, TrainConfig

    model_dir = os.path.join(args.output_dir, name)
    data = DataConfig(
        corpus="files",
        cache_dir=model_dir + "-cache",
        languages="en-de",
        train_files=(train_tsv,),
        dev_files=(dev_tsv,),
        vocab_size=args.vocab_size,
        max_length=args.max_length,
    )
    train = TrainConfig(
        preset="tiny",
        batch_tokens=args.batch_tokens,
        learning_rate_scale=2.0,
        distribution="one_device",
        eval_sentences=0,
        seed=args.seed,
        checkpoint_every=train_options["train_steps"],
        eval_every=train_options["train_steps"],
        **train_options,
    )
    return RunConfig(model_dir=model_dir, model=dict(args.model), data=data, train=train)


def dev_scores(model_dir, dev_tsv, pairs, max_length):
    """`{loss, bleu, chrf}` of a run's newest weights on the domain's dev pairs (greedy search)."""
    from data import pipeline
    from evaluation import scoring
    from inference.runs import RunDir
    from inference.translator import Translator
    from models.losses import LabelSmoothedCrossEntropy
    from models.search_config import SearchConfig

    model, tokenizer, _ = RunDir(model_dir).load_model(checkpoint="last", quiet=True)
    model.compile(loss=LabelSmoothedCrossEntropy())
    dev = pipeline.make_dataset(dev_tsv, tokenizer, batch_tokens=2048, max_length=max_length, shuffle=False)
    loss = float(model.evaluate(dev, verbose=0))
    translator = Translator(
        model, tokenizer, search=SearchConfig(beam_size=1, max_input_length=max_length), batch_size=32
    )
    hypotheses, _ = translator.translate([source for source, _ in pairs], split_sentences=False)
    scores = scoring.score(hypotheses, [target for _, target in pairs])
    return dict(loss=loss, bleu=scores["bleu"], chrf=scores["chrf"], signature=scores["bleu_signature"])


def run(args):
    """Trains the parent and the child, scores both; returns the results (a JSON-able dict)."""
    from data.sources import builtin_corpora, corpus_mix, parallel_files
    from training.trainer import train

    corpus = builtin_corpora.prepare_corpus("deb-en-de", args.cache_dir, args.deb_dir)
    files = corpus_mix.source_training_files(corpus, [GENERAL_SOURCE, DOMAIN_SOURCE])
    os.makedirs(args.output_dir, exist_ok=True)
    domain_train = os.path.join(args.output_dir, "domain-train.tsv")
    parallel_files.write_tsv(domain_train, list(parallel_files.read_tsv(files[DOMAIN_SOURCE][0]))[: args.domain_pairs])
    dev_pairs = list(parallel_files.read_tsv(corpus.test_by_source[DOMAIN_SOURCE]))[: args.dev_sentences]
    dev_tsv = os.path.join(args.output_dir, "domain-dev.tsv")
    parallel_files.write_tsv(dev_tsv, dev_pairs)

    parent = run_config(
        args, "parent", files[GENERAL_SOURCE][0], dev_tsv, train_steps=args.parent_steps, warmup_steps=args.warmup_steps
    )
    child = run_config(
        args,
        "child",
        domain_train,
        dev_tsv,
        train_steps=args.child_steps,
        init_from=parent.model_dir,
        learning_rate_schedule="constant",
        learning_rate=args.child_learning_rate,
    )
    results = dict(settings={k: v for k, v in vars(args).items() if k != "json"}, dev_pairs=len(dev_pairs))
    for name, config in (("parent", parent), ("child", child)):
        start = time.monotonic()
        train(config)
        results[name] = dict(train_seconds=time.monotonic() - start)
        results[name].update(dev_scores(config.model_dir, dev_tsv, dev_pairs, args.max_length))
    results["gain"] = {key: results["child"][key] - results["parent"][key] for key in ("loss", "bleu", "chrf")}
    return results


def main(argv=None):
    args = parse_args(argv)
    results = run(args)
    print(f"{DOMAIN_SOURCE} test ({results['dev_pairs']} pairs), greedy search:")
    for name in ("parent", "child"):
        scores = results[name]
        print(
            f"  {name}: loss {scores['loss']:.3f}, BLEU {scores['bleu']:.2f}, chrF {scores['chrf']:.1f} "
            f"(trained in {scores['train_seconds']:.0f} s)"
        )
    gain = results["gain"]
    print(f"  gain: loss {gain['loss']:+.3f}, BLEU {gain['bleu']:+.2f}, chrF {gain['chrf']:+.1f}")
    print(f"  {results['child']['signature']}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(results, handle, indent=1)
    short = [
        f"{metric} gain {gain[metric]:+.2f} is below {minimum}"
        for metric, minimum in (("bleu", args.min_bleu_gain), ("chrf", args.min_chrf_gain))
        if minimum is not None and gain[metric] < minimum
    ]
    if short:
        print("domain_fine_tuning.py: " + "; ".join(short), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
