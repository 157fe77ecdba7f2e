"""Writes the weights `--checkpoint` names as a `.keras` model; by default the average of the newest
5 checkpoints (section 6.1 of the paper: the last 5 for base models, the last 20 for big ones).

    python -m training.average_checkpoints --model_dir=runs/base --output=runs/base/averaged.keras
    python -m training.average_checkpoints --model_dir=runs/big --checkpoint=average:20
    python -m training.average_checkpoints --model_dir=runs/base --checkpoint=best --output=best.keras
    python -m training.average_checkpoints --model_dir=runs/base --checkpoint=ema --output=ema.keras
"""

import os

from absl import app, flags

from cli import checkpoint_flag
from common import quiet_logs
from common.errors import run_tool
from inference.runs import RunDir

FLAGS = flags.FLAGS


def define_flags():
    """The command's flags: defined when it runs, not on import, so `write_chosen` can be imported
    beside another tool's flags (train.py's `--model_dir`)."""
    flags.DEFINE_string("model_dir", None, "A model directory written by train.py.", required=True)
    checkpoint_flag.define_checkpoint_flag("average:5")
    flags.declare_key_flag("checkpoint")  # listed by --helpshort as this module's own
    flags.DEFINE_string("output", None, "Where to write the model (default: MODEL_DIR/averaged.keras).")


def write_chosen(model_dir, checkpoint, output):
    """Writes the weights `checkpoint` names in `model_dir` (the rule of `RunDir.load_model`, as
    `evaluate.py --checkpoint`) to `output`; returns the `inference.runs.ChosenWeights`."""
    # Loads Keras: after the flags are parsed.
    from training import checkpoints

    model, chosen = RunDir(model_dir).chosen_model(checkpoint)
    checkpoints.write_atomically(output, lambda temporary: model.save(temporary))
    return chosen


def main(argv):
    quiet_logs.quiet_tool_output()
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    output = FLAGS.output or os.path.join(FLAGS.model_dir, "averaged.keras")
    chosen = write_chosen(FLAGS.model_dir, FLAGS.checkpoint, output)  # A UserError: one line (`run_tool`).
    print(f"wrote {chosen.describe()} to {output}")


if __name__ == "__main__":
    define_flags()
    run_tool(main, "average_checkpoints")
