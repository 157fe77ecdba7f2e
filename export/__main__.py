"""Exports a trained model as a TensorFlow Serving SavedModel version.

    python -m export --model_dir=runs/base --export_dir=exports/transformer

writes `exports/transformer/<next version>/` (see export/exporter.py for the layout). Serve it with
`docker run -p 8501:8501 -v "$PWD/exports/transformer:/models/transformer" -e MODEL_NAME=transformer
tensorflow/serving` (README, "Serving").
"""

import logging
import os
import sys

from absl import app, flags
from absl import logging as absl_logging

from data import quiet_logs
from models.search_config import DEFAULT_SEARCH, EXPORT_MAX_INPUT_LENGTH

FLAGS = flags.FLAGS

flags.DEFINE_string("model_dir", None, "Directory written by train.py (model.keras, spm.model, config.json).")
flags.DEFINE_string("export_dir", None, "Model base path for TensorFlow Serving; the version goes under it.")
flags.DEFINE_integer(
    "version", None, "Version directory to write (a positive integer); default the next one.", lower_bound=1
)
flags.DEFINE_integer(
    "beam_size", DEFAULT_SEARCH.beam_size, "Beam size baked into the graph (1: greedy decoding).", lower_bound=1
)
flags.DEFINE_float("alpha", DEFAULT_SEARCH.alpha, "Length-penalty exponent.", lower_bound=0.0)
flags.DEFINE_integer(
    "max_input_length",
    EXPORT_MAX_INPUT_LENGTH,
    "SentencePiece tokens kept per input sentence, EOS included; longer inputs keep their first "
    "max_input_length - 1 tokens.",
    lower_bound=2,
)
flags.DEFINE_integer(
    "max_extra_length",
    DEFAULT_SEARCH.max_extra_length,
    "A sentence of n source tokens gets at most n + this many output tokens.",
    lower_bound=1,
)
flags.DEFINE_float(
    "min_length_ratio",
    DEFAULT_SEARCH.min_length_ratio,
    "A sentence of n source tokens gets at least floor(n * this) output tokens (EOS barred before); 0: no minimum.",
    lower_bound=0.0,
)
flags.DEFINE_integer(
    "average_last",
    0,
    "Export the mean of the newest N checkpoints of --model_dir instead of model.keras (0: don't), as "
    "evaluate.py --average_last does.",
    lower_bound=0,
)
flags.DEFINE_enum(
    "quantize", None, ["int8"], "int8: the matmul weights as int8 (weight-only; README, Serving); default float."
)
flags.DEFINE_list(
    "length_buckets",
    ["16", "32", "64"],
    "Source-length buckets, each with its own traced search (max_input_length is always the last).",
)
flags.mark_flags_as_required(["model_dir", "export_dir"])


@flags.validator("length_buckets", message="--length_buckets must be positive integers, e.g. 16,32,64")
def _check_buckets(values):
    return all(value.strip().isdigit() and int(value) > 0 for value in values)


def main(argv):
    quiet_logs.quiet_tool_output()
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # Read once, when TensorFlow is first imported.
    if not FLAGS["verbosity"].present:
        # absl shows INFO; saving a SavedModel logs a dozen lines that name the temporary directory.
        absl_logging.set_verbosity(absl_logging.WARNING)
        logging.getLogger("tensorflow").setLevel(logging.WARNING)
    from export.exporter import ExportError, export_model  # After flag parsing: TensorFlow is slow to import.

    try:
        path = export_model(
            FLAGS.model_dir,
            FLAGS.export_dir,
            version=FLAGS.version,
            beam_size=FLAGS.beam_size,
            alpha=FLAGS.alpha,
            max_input_length=FLAGS.max_input_length,
            max_extra_length=FLAGS.max_extra_length,
            min_length_ratio=FLAGS.min_length_ratio,
            length_buckets=[int(value) for value in FLAGS.length_buckets],
            average_last=FLAGS.average_last,
            quantize=FLAGS.quantize,
        )
    except ExportError as error:
        raise SystemExit(f"export: error: {error}") from None
    print(path, file=sys.stdout)


if __name__ == "__main__":
    app.run(main)
