"""The tools' `--checkpoint` flag: which weights of a run evaluate.py, translate.py, `python -m export`
and `python -m training.average_checkpoints` load (`inference.runs.parse_checkpoint` reads it)."""

from absl import flags

from inference.runs import DEFAULT_CHECKPOINT, ModelDirError, parse_checkpoint

CHECKPOINT_HELP = (
    "Which weights of --model_dir to load: best (the checkpoint of the best dev evaluation, "
    "train.py --best_metric), last (the newest checkpoint; model.keras where no checkpoint is kept), "
    "average:N (the mean of the newest N checkpoints, section 6.1 of the paper) or ema (the exponential moving "
    "average of the weights at the newest checkpoint, of a run trained with train.py --ema_decay)."
)


def define_checkpoint_flag(default=DEFAULT_CHECKPOINT, help_text=CHECKPOINT_HELP):
    """Defines the tools' `--checkpoint` flag (absl), its value checked by `parse_checkpoint`."""

    flags.DEFINE_string("checkpoint", default, help_text)

    def check(value):
        try:
            parse_checkpoint(value)
        except ModelDirError as error:
            raise flags.ValidationError(str(error)) from None
        return True

    flags.register_validator("checkpoint", check)
