"""Terminology constraints on a test split: how many phrases the constrained search places, what it
does to BLEU, and what it costs, beside the unconstrained search of the same run in the same process.

The constraints are taken from the references, as Post & Vilar (2018) did: for each sentence one or
two phrases (chosen at random, seeded), each a span of one or two consecutive words of the
reference, not overlapping, with surrounding punctuation stripped. A phrase counts as found when the
translation contains it as a substring, both as SentencePiece normalises text (NFKC: "…" is "...").

    python benchmarks/constraints.py --model_dir=runs/demo --checkpoint=average:5
    python benchmarks/constraints.py --model_dir=runs/demo --sentences=200 --output=results/constraints.json

Printed: one table row per search (unconstrained, constrained) with BLEU and chrF (sacreBLEU), the
share of phrases found and of sentences with every phrase found, the sentences the constrained
search could not satisfy (translated without constraints), seconds and sentences per second. Each
search translates the sentences twice and the second pass is timed: the first traces the search
for every batch shape (the constrained search has more: phrase counts and lengths).
"""

import argparse
import os
import random
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUNCTUATION = ".,;:!?\"'()[]{}«»„“”‚‘’"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="a training run's directory")
    parser.add_argument("--checkpoint", default=None, help="best, last, average:N or ema (default: the tools')")
    parser.add_argument("--split", default="test", help="split of the run's corpus (default test)")
    parser.add_argument("--cache_dir", default=None, help="where the run's corpus is cached (default: the run's)")
    parser.add_argument("--sentences", type=int, default=0, help="the first N sentences of the split (0: all)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=1, help="seeds the choice of phrases")
    parser.add_argument(
        "--constrained_beam_sizes",
        default="",
        help="also search with constraints at these beam sizes, comma-separated (default: the run's beam only)",
    )
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def reference_phrases(references, seed):
    """One or two phrases of one or two words per reference (none for a reference without words)."""
    rng = random.Random(seed)
    constraints = []
    for reference in references:
        words = [word.strip(PUNCTUATION) for word in reference.split()]
        spans = [(start, width) for width in (1, 2) for start in range(len(words) - width + 1)]
        spans = [(start, width) for start, width in spans if all(words[start : start + width])]
        rng.shuffle(spans)
        chosen, used = [], set()
        for start, width in spans:
            if len(chosen) == rng.choice((1, 2)) or len(chosen) == 2:
                break
            covered = set(range(start, start + width))
            if not covered & used:
                chosen.append(" ".join(words[start : start + width]))
                used |= covered
        constraints.append(chosen)
    return constraints


def found(translations, constraints, normal=lambda phrase: phrase):
    """`(phrases found / phrases, sentences with all found / sentences with phrases)`; `normal`
    maps a phrase to the form the translations hold it in."""
    constraints = [[normal(phrase) for phrase in sentence] for sentence in constraints]
    phrases = [(text, phrase) for text, sentence in zip(translations, constraints) for phrase in sentence]
    complete = [
        all(phrase in text for phrase in sentence) for text, sentence in zip(translations, constraints) if sentence
    ]
    return sum(phrase in text for text, phrase in phrases) / max(len(phrases), 1), sum(complete) / max(len(complete), 1)


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import sacrebleu
    import tensorflow as tf

    from common.json_files import write_json_atomically
    from evaluation import evaluator
    from inference.loading import load_translator
    from inference.runs import RunDir

    translator = load_translator(
        args.model_dir, kind="run", checkpoint=args.checkpoint, batch_size=args.batch_size, quiet=True
    )
    config = evaluator.EvalConfig(model_dir=args.model_dir, split=args.split, cache_dir=args.cache_dir)
    sources, references, description, _ = evaluator.load_test_set(config, RunDir(args.model_dir).read_config())
    if args.sentences:
        sources, references = sources[: args.sentences], references[: args.sentences]
    constraints = reference_phrases(references, args.seed)
    print(f"{len(sources)} sentences of {description}, model {args.model_dir}", file=sys.stderr)

    tf.get_logger().setLevel("ERROR")  # one search traced per batch shape is expected here
    phrases = sorted({phrase for sentence in constraints for phrase in sentence})
    normalised = (
        [
            text.decode("utf-8")
            for text in translator.tokenizer.detokenize(translator.tokenizer.tokenize(phrases)).numpy()
        ]
        if phrases
        else []
    )
    normal = dict(zip(phrases, normalised)).get
    results = {}
    beam = translator.search.beam_size
    searches = [("unconstrained", None, beam), ("constrained", constraints, beam)]
    for size in [int(value) for value in args.constrained_beam_sizes.split(",") if value]:
        searches.append((f"constrained, beam {size}", constraints, size))
    for name, steering, beam_size in searches:
        translator.translate(
            sources,
            constraints=steering,
            search=translator.search.override(beam_size=beam_size),
            split_sentences=False,
        )  # traces every shape
        started = time.perf_counter()
        translations, _ = translator.translate(
            sources,
            constraints=steering,
            search=translator.search.override(beam_size=beam_size),
            split_sentences=False,
        )
        seconds = time.perf_counter() - started
        phrases_found, sentences_found = found(translations, constraints, normal)
        results[name] = dict(
            beam_size=beam_size,
            bleu=sacrebleu.corpus_bleu(translations, [references]).score,
            chrf=sacrebleu.corpus_chrf(translations, [references]).score,
            phrases_found=phrases_found,
            sentences_all_found=sentences_found,
            unmet=len(translator.unmet_indices),
            seconds=seconds,
            sentences_per_second=len(sources) / seconds,
        )
    header = "| search | BLEU | chrF | phrases found | sentences, all found | unmet | seconds | sentences/s |"
    print(header)
    print("|" + "---|" * (header.count("|") - 1))
    for name, result in results.items():
        print(
            f"| {name} | {result['bleu']:.2f} | {result['chrf']:.2f} | {100 * result['phrases_found']:.1f}% "
            f"| {100 * result['sentences_all_found']:.1f}% | {result['unmet']} | {result['seconds']:.1f} "
            f"| {result['sentences_per_second']:.1f} |"
        )
    phrase_count = sum(len(sentence) for sentence in constraints)
    summary = dict(
        command=" ".join(["python", "benchmarks/constraints.py", *(argv if argv is not None else sys.argv[1:])]),
        sentences=len(sources),
        phrases=phrase_count,
        search=translator.search.search_settings(),
        results=results,
    )
    if args.output:
        write_json_atomically(args.output, summary)
    return summary


if __name__ == "__main__":
    main()
