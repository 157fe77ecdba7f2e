"""Translates a test set with beam search and prints detokenized sacreBLEU (with its signature)
and chrF.

    python evaluate.py --model_dir=runs/base                          # the run's own test split
    python evaluate.py --model_dir=runs/base --average_last=5 --output=hyp.de
    python evaluate.py --model_dir=runs/base --split=test.ding        # one source's test file
    python evaluate.py --model_dir=runs/base --src=newstest.en --ref=newstest.de
    python evaluate.py --export_dir=exports/base --src=newstest.en --ref=newstest.de
    python evaluate.py --model_dir=runs/base --plot_attention="Open the file." --plot_dir=plots
"""

import os
import sys

from absl import app, flags

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None, "A training run's directory (model.keras, spm.model, config.json, checkpoints/).")
flags.DEFINE_string("export_dir", None, "A SavedModel written by `python -m export` (or its base directory of versions).")
# Test set.
flags.DEFINE_string("corpus", None, "Corpus whose split to translate (default: the run's own, from config.json).")
flags.DEFINE_string("split", "test", "Split of the corpus: train, dev, test, or a per-source test file such as test.ding.")
flags.DEFINE_string("cache_dir", None, "Where corpora are built and cached (default: the run's).")
flags.DEFINE_string("deb_dir", None, "Directory of already-downloaded .deb files for deb-en-de (default: the run's).")
flags.DEFINE_string("direction", None, "Translation direction, e.g. de-en (default: the run's).")
flags.DEFINE_string("src", None, "Source sentences, one per line (instead of a corpus split).")
flags.DEFINE_string("ref", None, "Reference translations of --src, line-aligned; without it nothing is scored.")
# Search.
flags.DEFINE_integer("beam_size", 4, "Beam size (section 6.1: 4); 1 is greedy decoding.", lower_bound=1)
flags.DEFINE_float("alpha", 0.6, "Length-penalty exponent (section 6.1: 0.6).", lower_bound=0.0)
flags.DEFINE_integer("max_extra_length", 50, "Output tokens allowed beyond the input length (section 6.1: 50).", lower_bound=1)
flags.DEFINE_integer("batch_size", 32, "Sentences per search call.", lower_bound=1)
flags.DEFINE_integer("max_input_length", None, "Source tokens kept, EOS included (default: the run's max_length); longer lines are cut and reported.", lower_bound=2)
flags.DEFINE_integer("average_last", 0, "Average the newest N checkpoints of --model_dir instead of model.keras (0: don't).", lower_bound=0)
# Outputs.
flags.DEFINE_string("output", None, "Write the translations here, one per line, in input order.")
flags.DEFINE_multi_string("plot_attention", [], "A source sentence whose encoder-decoder attention to draw as a PNG heatmap; repeat for several.")
flags.DEFINE_string("plot_dir", "attention", "Directory for the --plot_attention heatmaps (attention-<n>.png).")
flags.DEFINE_boolean("progress", True, "Show a progress line on stderr.")


@flags.multi_flags_validator(["model_dir", "export_dir"], message="pass exactly one of --model_dir and --export_dir")
def _check_model(values):
    return bool(values["model_dir"]) != bool(values["export_dir"])


@flags.multi_flags_validator(["src", "ref", "corpus"], message="")
def _check_test_set(values):
    if values["ref"] and not values["src"]:
        raise flags.ValidationError("--ref needs --src")
    if values["src"] and values["corpus"]:
        raise flags.ValidationError("pass --src/--ref files or --corpus/--split, not both")
    return True


@flags.multi_flags_validator(["export_dir", "average_last", "plot_attention"], message="")
def _check_export(values):
    if values["export_dir"] and (values["average_last"] or values["plot_attention"]):
        raise flags.ValidationError("--average_last and --plot_attention need --model_dir (a SavedModel has no checkpoints or attention)")
    return True


def main(argv):
    del argv
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from evaluation import evaluator
    from evaluation.test_sets import TestSetError

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
        beam_size=FLAGS.beam_size,
        alpha=FLAGS.alpha,
        max_extra_length=FLAGS.max_extra_length,
        batch_size=FLAGS.batch_size,
        average_last=FLAGS.average_last,
        max_input_length=FLAGS.max_input_length,
        output=FLAGS.output,
        plot_attention=tuple(FLAGS.plot_attention),
        plot_dir=FLAGS.plot_dir,
        progress=FLAGS.progress,
    )
    try:
        evaluator.evaluate(config)
    except (evaluator.EvaluationError, evaluator.ModelDirError, evaluator.ExportDirError, TestSetError) as error:
        print(f"evaluate.py: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    app.run(main)
