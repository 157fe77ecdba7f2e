"""Markup through translation (`translate.py --markup`) on LibreOffice help paragraphs with their own
inline markup: the test set `data.sources.help_markup` builds from the corpus's help packages (the
paragraphs of the corpus's test split whose two sides hold the same tags and placeholders).

Each source is translated with markup (`translate_lines(..., markup=True)`, the library call of
`--markup`) and, with its tags taken out, without (`help_markup.plain`), both split into sentences as
translate.py does by default. Measured:

- complete: the share of outputs well-formed (every tag paired, properly nested) that hold every
  tag and placeholder of their source, as many times (target: 100%); invented: the outputs with a
  tag or placeholder their source lacks (the model writing placeholder-like text, e.g. `%CSS`);
- placed: over the reference's paired tags, the share whose output twin (the same tag text, the
  same occurrence) encloses the same set of words as in the reference, words being lower-cased
  `\\w+` runs of the enclosed text with tags taken out; `overlap` is the mean Jaccard index of the
  two sets (a tag missing from the output counts 0 in both);
- BLEU (sacreBLEU) against the references with their tags taken out, of the outputs with theirs
  taken out and of the translations of the tag-free sources, and their difference (target: within
  0.5); notes: the lines with a placeholder put back or a tag placed without an aligned word.

    python benchmarks/markup.py --model_dir=runs/demo --test_set=/tmp/help-markup.tsv
    python benchmarks/markup.py --model_dir=runs/demo --deb_dir=cache/corpora/debs --output=markup.json

`--test_set`: a TSV file of `key<TAB>source<TAB>reference`, read when it exists, else built from the
packages (`--deb_dir`, where `python -m data.prepare` keeps them) and the run's corpus (whose
training and dev sources it leaves out) and written there.
"""

import argparse
import collections
import os
import re
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORDS = re.compile(r"\w+")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_dir", required=True, help="a training run's directory or an export")
    parser.add_argument("--checkpoint", default=None, help="a run's weights: best, last, average:N or ema")
    parser.add_argument("--test_set", default=None, help="the test set's TSV file (read, or built and written)")
    parser.add_argument(
        "--deb_dir", default=None, help="the help packages (default: the run's, else cache/corpora/debs)"
    )
    parser.add_argument("--language", default="de", help="the target language of the help pages (deb-en-XX)")
    parser.add_argument("--pairs", type=int, default=0, help="the first N pairs (0: all)")
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--output", default=None, help="write the results as JSON here")
    return parser.parse_args(argv)


def open_model(path, checkpoint, batch_size):
    """`(translator, run config)` of a run directory or an export."""
    from inference.loading import is_run_dir, load_translator
    from inference.runs import RunDir
    from inference.saved_model_translator import read_export_config, resolve_saved_model

    translator = load_translator(path, batch_size=batch_size, checkpoint=checkpoint, quiet=True)
    if is_run_dir(path):
        return translator, RunDir(path).read_config()
    return translator, read_export_config(resolve_saved_model(path))


def markup_test_set(args, run_config):
    """`[(key, source, reference)]`: read from `--test_set`, else built from the help packages,
    leaving out every source the run's corpus trains on (`help_markup.markup_pairs`)."""
    if args.test_set and os.path.exists(args.test_set):
        with open(args.test_set, encoding="utf-8") as handle:
            return [tuple(line.rstrip("\n").split("\t")) for line in handle if line.strip()]
    from data.sources import builtin_corpora, corpus_cache, deb_packages, help_markup

    language = builtin_corpora.LANGUAGES[args.language]
    pins = {pinned.package: pinned for pinned in (builtin_corpora.ENGLISH_HELP, language.help)}
    data = (run_config or {}).get("data", {})
    cache_dir = data.get("cache_dir") or "cache/corpora"
    debs = deb_packages.fetch_debs(list(pins), args.deb_dir or data.get("deb_dir") or f"{cache_dir}/debs", pinned=pins)
    corpus = corpus_cache.check_corpus(os.path.join(cache_dir, language.corpus))
    trained = set()
    for path in (*corpus.train, corpus.dev):
        with open(path, encoding="utf-8") as handle:
            trained.update(line.split("\t", 1)[0] for line in handle)
    english, foreign = (debs[package] for package in pins)
    rows = help_markup.read_markup_pairs(english, foreign, language.help_dir, trained=trained.__contains__)
    if args.test_set:
        with open(args.test_set, "w", encoding="utf-8") as handle:
            handle.writelines("\t".join(row) + "\n" for row in rows)
    return rows


def tagged(line):
    """`(paired, counts)` of a line: `paired` the `(tag text, set of enclosed words)` of each paired
    opening tag in order, None when a tag is left unpaired (not well-formed); `counts` the tags and
    placeholders (`inference.markup.elements`) counted by their text."""
    from inference import markup

    found = markup.elements(line)
    partners = markup.pairs([kind for kind, *_ in found], [name for *_, name in found])
    counts = collections.Counter(line[start:end] for _, start, end, _ in found)
    paired = []
    for (kind, start, end, _), partner in zip(found, partners):
        if kind in (markup.OPEN, markup.CLOSE) and partner < 0:
            return None, counts
        if kind == markup.OPEN:
            enclosed = strip_tags(line[end : found[partner][1]])
            paired.append((line[start:end], frozenset(WORDS.findall(enclosed.lower()))))
    return paired, counts


def strip_tags(line):
    """A line with its tags (`inference.markup.elements` of kind open, close, empty) taken out, and
    the product-name placeholder written as the pages show it (as in the tag-free sources)."""
    from data.sources import help_markup
    from inference import markup

    parts, cursor = [], 0
    for kind, start, end, _ in markup.elements(line):
        if kind != "mask":
            parts += [line[cursor:start], " " if kind == markup.EMPTY else ""]
            cursor = end
    text = "".join(parts + [line[cursor:]]).replace(help_markup.OFFICENAME, "LibreOffice")
    return " ".join(text.split())


def placement(output_tags, reference_tags):
    """`(same, overlap)` summed over the reference's paired tags: 1 for each whose output twin (the
    same text, the same occurrence) encloses the same words, and the Jaccard index of the two sets."""
    twins = collections.defaultdict(list)
    for text, words in output_tags or ():
        twins[text].append(words)
    seen, same, overlap = collections.Counter(), 0, 0.0
    for text, words in reference_tags:
        occurrence = seen[text]
        seen[text] += 1
        if occurrence >= len(twins[text]):
            continue
        found = twins[text][occurrence]
        same += found == words
        overlap += len(found & words) / len(found | words) if found | words else 1.0
    return same, overlap


def measure(sources, references, outputs, plain_translations, target_language):
    """The scores of the module docstring from the texts (outputs: the markup translations)."""
    import sacrebleu

    from common.bleu_tokenizers import bleu_tokenizer

    complete, invented, same, overlap, reference_tags = 0, 0, 0, 0.0, 0
    for source, reference, output in zip(sources, references, outputs):
        output_tags, output_counts = tagged(output)
        source_counts = tagged(source)[1]
        complete += output_tags is not None and all(
            output_counts[text] == source_counts[text] for text in source_counts
        )
        invented += any(text not in source_counts for text in output_counts)
        expected = tagged(reference)[0] or []
        found = placement(output_tags, expected)
        same, overlap, reference_tags = same + found[0], overlap + found[1], reference_tags + len(expected)
    tokenize = bleu_tokenizer(target_language)
    plain_references = [[strip_tags(reference) for reference in references]]
    bleu_markup = sacrebleu.corpus_bleu([strip_tags(o) for o in outputs], plain_references, tokenize=tokenize).score
    bleu_plain = sacrebleu.corpus_bleu(plain_translations, plain_references, tokenize=tokenize).score
    return dict(
        pairs=len(sources),
        complete=complete / max(len(sources), 1),
        invented=invented,
        tags=reference_tags,
        placed=same / max(reference_tags, 1),
        overlap=overlap / max(reference_tags, 1),
        bleu_markup=bleu_markup,
        bleu_plain=bleu_plain,
        bleu_difference=bleu_markup - bleu_plain,
    )


def main(argv=None):
    args = parse_args(argv)
    sys.path.insert(0, REPO_ROOT)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from common.json_files import write_json_atomically
    from data.sources import help_markup

    translator, run_config = open_model(args.model_dir, args.checkpoint, args.batch_size)
    rows = markup_test_set(args, run_config)[: args.pairs or None]
    sources, references = [row[1] for row in rows], [row[2] for row in rows]
    start = time.monotonic()
    translations = translator.translate_lines(sources, markup=True)
    markup_seconds = time.monotonic() - start
    start = time.monotonic()
    plain_translations = translator.translate([help_markup.plain(source) for source in sources])[0]
    plain_seconds = time.monotonic() - start
    outputs = [translation.text for translation in translations]
    result = measure(sources, references, outputs, plain_translations, args.language)
    result.update(
        notes=sum(bool(translation.notes) for translation in translations),
        seconds={"markup": round(markup_seconds, 1), "plain": round(plain_seconds, 1)},
    )
    print(f"Markup through translation, model {args.model_dir}: LibreOffice help paragraphs with their markup")
    print(
        "| pairs | tags | complete | invented | placed | overlap | BLEU, markup | BLEU, tag-free | difference | notes |"
    )
    print("|" + "---|" * 10)
    print(
        f"| {result['pairs']} | {result['tags']} | {100 * result['complete']:.1f}% | {result['invented']} | "
        f"{100 * result['placed']:.1f}% | "
        f"{100 * result['overlap']:.1f}% | {result['bleu_markup']:.2f} | {result['bleu_plain']:.2f} | "
        f"{result['bleu_difference']:+.2f} | {result['notes']} |"
    )
    summary = {"command": " ".join(["python benchmarks/markup.py", *(argv or sys.argv[1:])]), "results": result}
    if args.output:
        write_json_atomically(args.output, summary)
    return summary


if __name__ == "__main__":
    main()
