"""Translates a test set with beam search and prints detokenized sacreBLEU (with its signature)
and chrF.

    python evaluate.py --model_dir=runs/base                          # the run's own test split
    python evaluate.py --model_dir=runs/base --checkpoint=average:5 --output=hyp.de
    python evaluate.py --model_dir=runs/a,runs/b                      # an ensemble of two runs
    python evaluate.py --model_dir=runs/base --split=test.ding        # one source's test file
    python evaluate.py --model_dir=runs/base --src=newstest.en --ref=newstest.de
    python evaluate.py --export_dir=exports/base --src=newstest.en --ref=newstest.de
    python evaluate.py --model_dir=runs/en-zh --src=test.en --ref=test.zh  # BLEU with sacreBLEU's zh tokenizer
    python evaluate.py --model_dir=runs/base --plot_attention="Open the file." --plot_dir=plots
"""

import os
import sys

from absl import flags
from sacrebleu.metrics.bleu import BLEU

from cli import search_flags
from cli.search_flags import SEARCH_FLAGS
from common import quiet_logs
from common.errors import UserError, run_tool

FLAGS = flags.FLAGS

search_flags.define_model_and_search_flags()
flags.adopt_module_key_flags(search_flags)  # listed by --help as this tool's own
# Test set.
flags.DEFINE_string("corpus", None, "Corpus whose split to translate (default: the run's own, from config.json).")
flags.DEFINE_string(
    "split", "test", "Split of the corpus: train, dev, test, or a per-source test file such as test.ding."
)
flags.DEFINE_string("cache_dir", None, "Where corpora are built and cached (default: the run's).")
flags.DEFINE_string(
    "deb_dir", None, "Directory of already-downloaded .deb files for a deb-en-XX corpus (default: the run's)."
)
flags.DEFINE_string(
    "direction",
    None,
    "Translation direction, e.g. de-en (default: the run's); with --src it names the target language (for BLEU's tokenizer).",
)
flags.DEFINE_string("src", None, "Source sentences, one per line (instead of a corpus split).")
flags.DEFINE_string("ref", None, "Reference translations of --src, line-aligned; without it nothing is scored.")
# Outputs.
flags.DEFINE_string("output", None, "Write the translations here, one per line, in input order.")
flags.DEFINE_multi_string(
    "plot_attention",
    [],
    "A source sentence whose encoder-decoder attention to draw as a PNG heatmap; repeat for several.",
)
flags.DEFINE_string("plot_dir", "attention", "Directory for the --plot_attention heatmaps (attention-<n>.png).")
flags.DEFINE_boolean("progress", True, "Show a progress line on stderr.")
flags.DEFINE_enum(
    "bleu_tokenize",
    None,
    sorted(BLEU.TOKENIZERS),
    "sacreBLEU's tokenizer for BLEU (default: zh for a Chinese target language, char for Japanese and the Thai, "
    "Khmer, Lao, Burmese and Dzongkha scripts, else 13a; ja-mecab and ko-mecab need MeCab packages installed).",
)


@flags.multi_flags_validator(["src", "ref", "corpus"], message="")
def _check_test_set(values):
    if values["ref"] and not values["src"]:
        raise flags.ValidationError("--ref needs --src")
    if values["src"] and values["corpus"]:
        raise flags.ValidationError("pass --src/--ref files or --corpus/--split, not both")
    return True


@flags.multi_flags_validator(["export_dir", "plot_attention"], message="")
def _check_export(values):
    if values["export_dir"] and values["plot_attention"]:
        raise flags.ValidationError("--plot_attention needs --model_dir (a SavedModel has no attention to plot)")
    return True


def _export_conflict(export_dir):
    """The error message for flags given with --export_dir that only apply to --model_dir, or None."""
    given = [f"--{name}" for name in SEARCH_FLAGS + ("checkpoint",) if FLAGS[name].present]
    if given:
        return search_flags.export_dir_refusal(export_dir, given)
    if FLAGS["plot_dir"].present:
        return "--plot_dir needs --model_dir and --plot_attention (a SavedModel has no attention to plot)"
    return None


def main(argv):
    del argv
    quiet_logs.quiet_tool_output()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from evaluation import evaluator  # Loads TensorFlow: after the flag checks.

    try:
        conflict = FLAGS.export_dir and _export_conflict(FLAGS.export_dir)
        search_note = FLAGS.model_dir and search_flags.apply_run_search(FLAGS, FLAGS.model_dir)
    except UserError as error:
        conflict = str(error)
    if conflict:
        print(f"evaluate.py: error: {conflict}", file=sys.stderr)
        return 2
    if search_note:
        print(search_note, file=sys.stderr)

    config = evaluator.EvalConfig(
        model_dir=FLAGS.model_dir,
        export_dir=FLAGS.export_dir,
        corpus=FLAGS.corpus,
        split=FLAGS.split,
        cache_dir=FLAGS.cache_dir,
        deb_dir=FLAGS.deb_dir,
        direction=FLAGS.direction,
        src=FLAGS.src,
        ref=FLAGS.ref,
        search=search_flags.search_from_flags(FLAGS),
        batch_size=FLAGS.batch_size,
        checkpoint=FLAGS.checkpoint if FLAGS.model_dir else None,
        output=FLAGS.output,
        plot_attention=tuple(FLAGS.plot_attention),
        plot_dir=FLAGS.plot_dir,
        progress=FLAGS.progress,
        bleu_tokenize=FLAGS.bleu_tokenize,
        target_language=FLAGS.target_language,
        # --plot_attention alone draws its plots without translating a test set.
        plot_only=bool(FLAGS.plot_attention)
        and not any(FLAGS[name].present for name in ("src", "ref", "corpus", "split", "output")),
    )
    try:
        evaluator.evaluate(config)
    except UserError as error:  # 2: bad input; 1: a failure during the work (an --output not written).
        print(f"evaluate.py: error: {error}", file=sys.stderr)
        return error.exit_status
    return 0


if __name__ == "__main__":
    run_tool(main, "evaluate.py")
