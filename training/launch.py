"""What train.py runs once its flags are parsed: the run configuration from the flags, the training,
and the summary it prints."""

import sys

from absl import app, flags

from common import progress, quiet_logs
from data import multilingual
from inference.runs import describe_score
from training.recipes import apply_recipe
from training.run_dir import RunDir
from training.train_flags import config_from_flags

FLAGS = flags.FLAGS


def checked_config(argv):
    """The run configuration of the parsed flags, after the checks that need the command line itself
    (what it gave, which recipe it applies)."""
    quiet_logs.quiet_tool_output()
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    if FLAGS.recipe and FLAGS.init_from:
        raise app.UsageError(
            f"--recipe={FLAGS.recipe} does not combine with --init_from: a fine-tuned run keeps its parent's model "
            "and vocabulary; give the training flags themselves"
        )
    if FLAGS.recipe and FLAGS.config:
        raise app.UsageError(
            f"--recipe={FLAGS.recipe} does not combine with --config: {FLAGS.config} holds the run's values "
            "already; give the flags to change"
        )
    if FLAGS.recipe:
        applied = apply_recipe(FLAGS, FLAGS.recipe)
        print(f"recipe {FLAGS.recipe}: {' '.join(applied) or 'every flag given on the command line'}", file=sys.stderr)
    if FLAGS["pair_sampling_temperature"].present and not multilingual.is_multilingual(FLAGS.corpus, FLAGS.languages):
        raise app.UsageError(
            f"--pair_sampling_temperature draws among several pairs: name them, --corpus=deb-en-de,deb-en-fr "
            f"(received --corpus={FLAGS.corpus})"
        )
    return config_from_flags()


def train_run(config):
    """Trains `config`'s run; its summary (training.trainer.train's). A signal's stop is printed and
    ends the process with its status; a UserError passes to train.py (`exit_after_error`)."""
    from training.trainer import TrainingInterrupted, train  # TensorFlow/JAX imports: after the flag checks.

    try:
        return train(
            config,
            start_over=FLAGS.start_over,
            progress_every=progress.parse_interval("progress_every", FLAGS.progress_every),
        )
    except TrainingInterrupted as stop:
        print(f"train.py: {stop}", file=sys.stderr)
        raise SystemExit(stop.exit_status) from None


def exit_after_error(error):
    """Prints `error` (a UserError) and ends the process with its status: 2, refused before training;
    1, failed during it (a full disk, NaN)."""
    from training import checkpoints  # TensorFlow/JAX imports: after the flag checks.

    print(f"train.py: error: {error}", file=sys.stderr)
    quiet_logs.restore_stderr()
    checkpoints.exit_after_failed_write(error.exit_status)
    raise SystemExit(error.exit_status) from None


def print_summary(summary):
    """The training's summary on stdout: where the model went, the dev BLEU, the best checkpoint."""
    if summary["stopped_early_at"] is not None:
        print(
            f"stopped early at step {summary['stopped_early_at']}; model written to {summary['model_path']} from the "
            f"best checkpoint, of step {summary['best']['step']}"
        )
    else:
        print(f"trained to step {summary['step']}; model written to {summary['model_path']}")
    if summary["dev_bleu"] is not None:
        search = "greedy" if FLAGS.eval_beam_size == 1 else f"beam {FLAGS.eval_beam_size}"
        each = ", ".join(f"{name} {score:.2f}" for name, score in summary["dev_bleu_pairs"].items())
        print(
            f"dev BLEU ({search}, {summary['dev_bleu_sentences']} sentences): {summary['dev_bleu']:.2f}"
            + (f", the mean of {each}" if each else "")
        )
    if summary["best"]:
        best = summary["best"]
        print(
            f"best checkpoint: step {best['step']} ({describe_score(best)}), {RunDir(FLAGS.model_dir).best_weights_path}"
        )
