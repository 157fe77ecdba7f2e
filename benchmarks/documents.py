"""Documents of several sentences: does translating them sentence by sentence (translate.py's default)
score as well as translating their sentences one per line, and how much better than translating each
document whole (`--nosplit_sentences`, the behaviour before segmentation)?

Each split's pairs are taken in corpus order and grouped into documents of 2 to 6 consecutive pairs
(the sizes drawn at random, seeded; a last pair left alone joins the document before it), sources
and references joined by a space. Three translations of the same pairs, by the library calls
translate.py makes (`inference.loading.load_translator`, its `translate`):

- pairs: every pair's source alone, one per line, without segmentation (as evaluate.py scores), the
  translations then joined into the documents (the anchor);
- pairs_split: the same, each pair split into its sentences (translate.py's default on a pair);
- segmented: each document one line, split into sentences (`split_sentences=True`, the default);
- whole: each document one line, translated whole (`split_sentences=False`, cut to the model's
  input length as before).

Printed: a row per split with the documents' corpus BLEU (sacreBLEU, the target language's
tokenizer) of each, segmented minus pairs (target: within 0.5), the pairs' own sentence-level
corpus BLEU, and the share of the joins between pairs where the segmentation cuts (a heading or an
interface string joined to the next pair has no sentence end: the two are translated as one).

    python benchmarks/documents.py --model_dir=runs/demo
    python benchmarks/documents.py --model_dir=runs/demo --splits=test.libreoffice-help --output=documents.json
    python benchmarks/documents.py --model_dir=runs/demo --sentence_pairs     # every join a sentence end
"""

import argparse
import os
import random
import re
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("pairs", "pairs_split", "segmented", "whole")
SENTENCE_END = re.compile(r"[.!?][\"'”’»)\]]*$")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="a training run's directory or an export")
    parser.add_argument("--checkpoint", default=None, help="a run's weights: best, last, average:N or ema")
    parser.add_argument("--splits", default="test,test.libreoffice-help", help="splits of the run's corpus")
    parser.add_argument("--cache_dir", default=None, help="where the run's corpus is cached (default: the run's)")
    parser.add_argument("--pairs", type=int, default=0, help="the first N pairs of each split (0: all)")
    parser.add_argument("--seed", type=int, default=1, help="seeds the documents' sizes")
    parser.add_argument(
        "--sentence_pairs",
        action="store_true",
        help="only the pairs whose two sides end a sentence (. ! ?), so that every join is a sentence end",
    )
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def document_sizes(count, seed, smallest=2, largest=6):
    """Sizes of consecutive documents covering `count` pairs, each in [smallest, largest] (a last
    pair left alone joins the document before it, which may then hold largest + 1)."""
    rng, sizes, left = random.Random(seed), [], count
    while left > 0:
        size = min(rng.randint(smallest, largest), left)
        if size < smallest and sizes:
            sizes[-1] += size
        else:
            sizes.append(size)
        left -= size
    return sizes


def joined(texts, sizes):
    """`texts` joined by a space into documents of `sizes` consecutive texts."""
    documents, start = [], 0
    for size in sizes:
        documents.append(" ".join(texts[start : start + size]))
        start += size
    return documents


def open_model(path, checkpoint, batch_size):
    """`(translator, run config, EvalConfig keywords naming it)` of a run directory or an export."""
    from inference.loading import is_run_dir, load_translator
    from inference.runs import RunDir
    from inference.saved_model_translator import read_export_config, resolve_saved_model

    translator = load_translator(path, batch_size=batch_size, checkpoint=checkpoint, quiet=True)
    if is_run_dir(path):
        return translator, RunDir(path).read_config(), {"model_dir": path}
    return translator, read_export_config(resolve_saved_model(path)), {"export_dir": path}


def measure_split(translator, args, split, run_config, where):
    """`{"pairs", "documents", "bleu": {kind: BLEU}, "sentence_bleu", "seconds": {kind: s}}` of one split."""
    import sacrebleu

    from common.bleu_tokenizers import bleu_tokenizer
    from evaluation import evaluator

    config = evaluator.EvalConfig(split=split, cache_dir=args.cache_dir, **where)
    sources, references, _, target_language = evaluator.load_test_set(config, run_config)
    if args.sentence_pairs:
        kept = [(s, r) for s, r in zip(sources, references) if SENTENCE_END.search(s) and SENTENCE_END.search(r)]
        sources, references = [s for s, _ in kept], [r for _, r in kept]
    if args.pairs:
        sources, references = sources[: args.pairs], references[: args.pairs]
    sizes = document_sizes(len(sources), args.seed)
    documents, document_references = joined(sources, sizes), joined(references, sizes)
    tokenize = bleu_tokenizer(target_language)
    translations, seconds = {}, {}
    for kind, lines, split_sentences in (
        ("pairs", sources, False),
        ("pairs_split", sources, True),
        ("segmented", documents, True),
        ("whole", documents, False),
    ):
        start = time.monotonic()
        translations[kind] = translator.translate(lines, split_sentences=split_sentences)[0]
        seconds[kind] = round(time.monotonic() - start, 1)
    sentence_bleu = sacrebleu.corpus_bleu(translations["pairs"], [references], tokenize=tokenize).score
    translations["pairs"] = joined(translations["pairs"], sizes)
    translations["pairs_split"] = joined(translations["pairs_split"], sizes)
    bleu = {
        kind: sacrebleu.corpus_bleu(translations[kind], [document_references], tokenize=tokenize).score
        for kind in KINDS
    }
    return dict(
        pairs=len(sources),
        documents=len(sizes),
        joins_cut=joins_cut(sources, sizes),
        bleu=bleu,
        sentence_bleu=sentence_bleu,
        seconds=seconds,
    )


def joins_cut(sources, sizes):
    """The share of the joins between consecutive pairs of a document at which
    `inference.segmentation.segment` cuts the document (None without a join)."""
    from inference.segmentation import segment

    cut, joins, start = 0, 0, 0
    for size in sizes:
        offsets, offset = set(), 0
        for source in sources[start : start + size - 1]:
            offset += len(source) + 1
            offsets.add(offset)
        found, position = segment(" ".join(sources[start : start + size])), 0
        starts = set()
        for separator, piece in zip(found.separators, found.pieces):
            position += len(separator)
            starts.add(position)
            position += len(piece)
        cut, joins, start = cut + len(offsets & starts), joins + len(offsets), start + size
    return cut / joins if joins else None


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from common.json_files import write_json_atomically

    translator, run_config, where = open_model(args.model_dir, args.checkpoint, args.batch_size)
    results = {split: measure_split(translator, args, split, run_config, where) for split in args.splits.split(",")}
    which = "pairs that end a sentence" if args.sentence_pairs else "pairs"
    print(
        f"Documents of 2-6 consecutive {which}, model {args.model_dir}, seed {args.seed}: corpus BLEU of the documents"
    )
    print(
        "| split | pairs | documents | pairs, one per line | pairs, split | segmented | whole | segmented - pairs "
        "| sentence BLEU | joins cut |"
    )
    print("|" + "---|" * 10)
    for split, result in results.items():
        bleu, cut = result["bleu"], result["joins_cut"]
        print(
            f"| {split} | {result['pairs']} | {result['documents']} | {bleu['pairs']:.2f} | {bleu['pairs_split']:.2f} | "
            f"{bleu['segmented']:.2f} | {bleu['whole']:.2f} | {bleu['segmented'] - bleu['pairs']:+.2f} | "
            f"{result['sentence_bleu']:.2f} | {'-' if cut is None else f'{100 * cut:.0f}%'} |"
        )
    summary = {"command": " ".join(["python benchmarks/documents.py", *(argv or sys.argv[1:])]), "results": results}
    if args.output:
        write_json_atomically(args.output, summary)
    return summary


if __name__ == "__main__":
    main()
