"""Documents of several sentences: does translating them sentence by sentence (translate.py's default)
score as well as translating their sentences one per line, and how much better than translating each
document whole (`--nosplit_sentences`, the behaviour before segmentation)?

Each split's pairs are taken in corpus order and grouped into documents of 2 to 6 consecutive pairs
(the sizes drawn at random, seeded; a last pair left alone joins the document before it). A document
is laid out as a text file holds one: pairs joined by a space into a paragraph, one paragraph per
line, and a pair without a sentence end (a heading, an interface string, a dictionary entry) closes
its paragraph, since no text runs a heading into the sentence after it (`--one_line`: every document
one line, joined by spaces, which no segmentation can cut at a heading). Four translations of the
same pairs, by the library calls translate.py makes (`inference.loading.load_translator`):

- pairs: every pair's source alone, one per line, without segmentation (as evaluate.py scores), the
  translations then joined into the documents (the anchor);
- pairs_split: the same, each pair split into its sentences (translate.py's default on a pair);
- segmented: each document's lines split into sentences (`split_sentences=True`, the default);
- whole: each document's lines translated whole (`split_sentences=False`, cut to the model's input
  length as before).

Printed: a row per split with the documents' corpus BLEU (sacreBLEU, the target language's
tokenizer; a document's lines and references joined by a space) of each, segmented minus pairs_split
(target: within 0.5), the pairs' own sentence-level corpus BLEU, and the share of the joins inside a
line where the segmentation cuts.

    python benchmarks/documents.py --model_dir=runs/demo
    python benchmarks/documents.py --model_dir=runs/demo --splits=test.libreoffice-help --output=documents.json
    python benchmarks/documents.py --model_dir=runs/demo --one_line          # headings run into sentences
    python benchmarks/documents.py --model_dir=runs/demo --sentence_pairs    # every join a sentence end
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
    parser.add_argument(
        "--one_line",
        action="store_true",
        help="every document one line (pairs joined by spaces), a pair without a sentence end not closing its line",
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


def paragraphs(texts, sizes, breaks):
    """Each document of `sizes` consecutive texts as its lines, each line the list of its texts: a line
    is closed after each text whose `breaks` entry is true (join a line's texts by a space to read it)."""
    documents, start = [], 0
    for size in sizes:
        lines, line = [], []
        for text, ends_line in zip(texts[start : start + size], breaks[start : start + size]):
            line.append(text)
            if ends_line:
                lines.append(line)
                line = []
        documents.append(lines + [line] if line else lines)
        start += size
    return documents


def translate_documents(translator, documents, split_sentences):
    """The translations of `documents` (each a list of lines), each document's lines joined by a space."""
    lines = [" ".join(line) for document in documents for line in document]
    translations, start, joined_documents = translator.translate(lines, split_sentences=split_sentences)[0], 0, []
    for document in documents:
        joined_documents.append(" ".join(translations[start : start + len(document)]))
        start += len(document)
    return joined_documents


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
    breaks = [not args.one_line and not SENTENCE_END.search(source) for source in sources]
    documents, document_references = paragraphs(sources, sizes, breaks), joined(references, sizes)
    tokenize = bleu_tokenizer(target_language)
    translations, seconds = {}, {}
    for kind, split_sentences in (("pairs", False), ("pairs_split", True), ("segmented", True), ("whole", False)):
        start = time.monotonic()
        if kind.startswith("pairs"):
            translations[kind] = translator.translate(sources, split_sentences=split_sentences)[0]
        else:
            translations[kind] = translate_documents(translator, documents, split_sentences)
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
        lines=sum(map(len, documents)),
        joins_cut=joins_cut(documents),
        bleu=bleu,
        sentence_bleu=sentence_bleu,
        seconds=seconds,
    )


def joins_cut(documents):
    """The share of the joins between consecutive texts of a line of `documents` (`paragraphs`'s
    value) at which `inference.segmentation.segment` cuts the line (None without a join)."""
    from inference.segmentation import segment

    cut, joins = 0, 0
    for line in (line for document in documents for line in document):
        offsets, offset = set(), 0
        for text in line[:-1]:
            offset += len(text) + 1
            offsets.add(offset)
        found, position, starts = segment(" ".join(line)), 0, set()
        for separator, piece in zip(found.separators, found.pieces):
            position += len(separator)
            starts.add(position)
            position += len(piece)
        cut, joins = cut + len(offsets & starts), joins + len(offsets)
    return cut / joins if joins else None


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from common.json_files import write_json_atomically

    translator, run_config, where = open_model(args.model_dir, args.checkpoint, args.batch_size)
    results = {split: measure_split(translator, args, split, run_config, where) for split in args.splits.split(",")}
    which = "pairs that end a sentence" if args.sentence_pairs else "pairs"
    layout = "one line each" if args.one_line else "a line per paragraph"
    print(
        f"Documents of 2-6 consecutive {which} ({layout}), model {args.model_dir}, seed {args.seed}: "
        "corpus BLEU of the documents"
    )
    print(
        "| split | pairs | documents | lines | pairs, one per line | pairs, split | segmented | whole "
        "| segmented - pairs | segmented - pairs, split | sentence BLEU | joins cut |"
    )
    print("|" + "---|" * 12)
    for split, result in results.items():
        bleu, cut = result["bleu"], result["joins_cut"]
        print(
            f"| {split} | {result['pairs']} | {result['documents']} | {result['lines']} | {bleu['pairs']:.2f} | "
            f"{bleu['pairs_split']:.2f} | {bleu['segmented']:.2f} | {bleu['whole']:.2f} | "
            f"{bleu['segmented'] - bleu['pairs']:+.2f} | {bleu['segmented'] - bleu['pairs_split']:+.2f} | "
            f"{result['sentence_bleu']:.2f} | {'-' if cut is None else f'{100 * cut:.0f}%'} |"
        )
    summary = {"command": " ".join(["python benchmarks/documents.py", *(argv or sys.argv[1:])]), "results": results}
    if args.output:
        write_json_atomically(args.output, summary)
    return summary


if __name__ == "__main__":
    main()
