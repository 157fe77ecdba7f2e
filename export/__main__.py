"""Exports a trained model as a TensorFlow Serving SavedModel version, or converts it for CTranslate2.

    python -m export --model_dir=runs/base --export_dir=exports/transformer
    python -m export --model_dir=runs/base --export_dir=exports/transformer --checkpoint=average:5

writes `exports/transformer/<next version>/` (see export/exporter.py for the layout). Serve it with
`docker run -p 8501:8501 -v "$PWD/exports/transformer:/models/transformer" -e MODEL_NAME=transformer
tensorflow/serving` (docs/serving.md).

    python -m export --format=ctranslate2 --model_dir=runs/base --export_dir=exports/base-ct2 [--ct2_quantization=int8]

writes the CTranslate2 model directory `exports/base-ct2/` (export/ctranslate2_export.py). Errors
print one line `export: error: ...` and exit with status 2 (bad flags or input) or 1 (a failure
while writing, such as a full disk).
"""

import os
import sys

from absl import app, flags
from absl import logging as absl_logging

from cli import checkpoint_flag, search_flags
from common import quiet_logs
from common.errors import BAD_INPUT_STATUS, UserError, run_tool

FLAGS = flags.FLAGS

FORMATS = ("saved_model", "ctranslate2")
# Flags that set the SavedModel's graph (its search, buckets, version): refused with --format=ctranslate2,
# whose search is chosen by the caller of `ctranslate2.Translator.translate_batch`.
# --shortlist applies to both: CTranslate2's is its vocabulary map (`use_vmap=True`).
SAVED_MODEL_FLAGS = (
    "version",
    *(name for name in search_flags.SEARCH_FLAGS if name != "shortlist"),
    "length_buckets",
    "quantize",
    "split_sentences",
    "signatures",
)
CT2_FLAGS = ("ct2_quantization",)
# The exit status of a refused CTranslate2 conversion or a flag of the other format.
REFUSED_STATUS = BAD_INPUT_STATUS

flags.DEFINE_enum(
    "format",
    "saved_model",
    FORMATS,
    "saved_model: a TensorFlow Serving version under --export_dir; ctranslate2: a CTranslate2 model "
    "directory at --export_dir, with the SentencePiece model beside it.",
)
flags.DEFINE_string(
    "model_dir",
    None,
    "Directory written by train.py (checkpoints/, model.keras, spm.model, config.json)."
    + search_flags.RECORDED_SEARCH_HELP,
)
flags.DEFINE_string(
    "export_dir",
    None,
    "saved_model: the model base path for TensorFlow Serving, the version goes under it; ctranslate2: "
    "the model directory to create (it must not exist).",
)
flags.DEFINE_string(
    "ct2_quantization",
    "float32",
    "--format=ctranslate2 only: the type CTranslate2 stores the weights in: float32, int8 (8-bit matmul "
    "weights), int8_float32, int8_float16, int8_bfloat16, int16, float16 or bfloat16.",
)
flags.DEFINE_integer(
    "version", None, "Version directory to write (a positive integer); default the next one.", lower_bound=1
)
search_flags.define_search_flags(export=True)
flags.adopt_module_key_flags(search_flags)  # listed by --help as this tool's own
checkpoint_flag.define_checkpoint_flag()
flags.declare_key_flag("checkpoint")  # listed by --helpshort as this module's own
flags.DEFINE_enum(
    "quantize", None, ["int8"], "int8: the matmul weights as int8 (weight-only; docs/serving.md); default float."
)
flags.DEFINE_list(
    "length_buckets",
    ["16", "32", "64"],
    "Source-length buckets, each with its own traced search (max_input_length is always the last).",
)
flags.DEFINE_boolean(
    "split_sentences",
    True,
    "serving_default, align and markup translate each input sentence by sentence and join the translations "
    "as the input was (docs/serving.md); --nosplit_sentences: each input whole, for pre-segmented text.",
)
flags.DEFINE_list(
    "signatures",
    None,
    "The signatures to export, serving_default among them (default all: serving_default, n_best, score, "
    "translate_ids, prefix, constrain, align, markup). Fewer trace, write and load faster; a request "
    "for another is refused.",
)
flags.mark_flags_as_required(["model_dir", "export_dir"])


@flags.validator("length_buckets", message="--length_buckets must be positive integers, e.g. 16,32,64")
def _check_buckets(values):
    return all(value.strip().isdigit() and int(value) > 0 for value in values)


def format_refusal(export_format, present):
    """The message refusing the flags in `present` (names of flags given) that `export_format` does
    not use, or None."""
    other = SAVED_MODEL_FLAGS if export_format == "ctranslate2" else CT2_FLAGS
    wrong = [name for name in other if name in present]
    if not wrong:
        return None
    names = ", ".join(f"--{name}" for name in wrong)
    if export_format == "ctranslate2":
        return (
            f"{names} set the SavedModel's graph and do not apply to --format=ctranslate2 (CTranslate2 takes "
            "the search settings when it translates: ctranslate2.Translator.translate_batch(beam_size=..., "
            "length_penalty=..., max_decoding_length=...))"
        )
    return f"{names} only applies to --format=ctranslate2"


def _convert_ctranslate2():
    from export.ctranslate2_export import convert_run  # Loads TensorFlow: after the flag checks.

    try:
        return convert_run(
            FLAGS.model_dir,
            FLAGS.export_dir,
            quantization=FLAGS.ct2_quantization,
            checkpoint=FLAGS.checkpoint,
            shortlist=FLAGS.shortlist,
        )
    except UserError as error:
        print(f"export: error: {error}", file=sys.stderr)
        raise SystemExit(error.exit_status) from None


def main(argv):
    quiet_logs.quiet_tool_output()
    if len(argv) > 1:
        raise app.UsageError(f"Unexpected arguments: {argv[1:]}")
    refusal = format_refusal(FLAGS.format, [name for name in SAVED_MODEL_FLAGS + CT2_FLAGS if FLAGS[name].present])
    if refusal:
        print(f"export: error: {refusal}", file=sys.stderr)
        raise SystemExit(REFUSED_STATUS)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # Read once, when TensorFlow is first imported.
    if not FLAGS["verbosity"].present:
        # absl shows INFO; saving a SavedModel logs a dozen lines that name the temporary directory.
        absl_logging.set_verbosity(absl_logging.WARNING)
    if FLAGS.format == "ctranslate2":
        print(_convert_ctranslate2(), file=sys.stdout)
        return
    from export.exporter import export_model  # After flag parsing: TensorFlow is slow to import.

    try:
        search_note = search_flags.apply_run_search(FLAGS, FLAGS.model_dir)
    except UserError as error:
        print(f"export: error: {error}", file=sys.stderr)
        raise SystemExit(error.exit_status) from None
    if search_note:
        print(search_note, file=sys.stderr)
    try:
        path = export_model(
            FLAGS.model_dir,
            FLAGS.export_dir,
            version=FLAGS.version,
            search=search_flags.search_from_flags(FLAGS),
            length_buckets=[int(value) for value in FLAGS.length_buckets],
            checkpoint=FLAGS.checkpoint,
            quantize=FLAGS.quantize,
            split_sentences=FLAGS.split_sentences,
            signatures=FLAGS.signatures,
        )
    except UserError as error:
        print(f"export: error: {error}", file=sys.stderr)
        raise SystemExit(error.exit_status) from None
    print(path, file=sys.stdout)


if __name__ == "__main__":
    run_tool(main, "export")
