"""Averages the newest N checkpoints of a run into a new `.keras` model (section 6.1 of the paper:
the last 5 checkpoints for base models, the last 20 for big ones).

    python -m training.average_checkpoints --model_dir=runs/base --last=5 --output=runs/base/averaged.keras
"""

import os

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "A model directory written by train.py.", required=True)
flags.DEFINE_integer("last", 5, "Number of newest checkpoints to average.", lower_bound=1)
flags.DEFINE_string("output", None, "Where to write the averaged model (default: MODEL_DIR/averaged.keras).")


def average_last(model_dir, last, output):
    """Writes the average of the newest `last` checkpoints of `model_dir` to `output` (the rule of
    `RunDir.average_checkpoints`, as `evaluate.py --average_last`); returns the checkpoint paths used."""
    from training import checkpoints
    from training.run_dir import RunDir

    model, chosen = RunDir(model_dir).average_checkpoints(last, flag="--last")
    checkpoints.write_atomically(output, lambda temporary: model.save(temporary))
    return [path for _, path in chosen]


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    from training.run_dir import ModelDirError

    output = FLAGS.output or os.path.join(FLAGS.model_dir, "averaged.keras")
    try:
        paths = average_last(FLAGS.model_dir, FLAGS.last, output)
    except ModelDirError as error:
        raise SystemExit(f"average_checkpoints: error: {error}") from None
    print(
        f"averaged {len(paths)} checkpoints ({os.path.basename(paths[0])} .. {os.path.basename(paths[-1])}) into {output}"
    )


if __name__ == "__main__":
    app.run(main)
