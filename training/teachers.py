"""`--teacher`: the runs whose translations a distilled student trains on (docs/training.md,
"Distilled students"), checked to translate the student's direction before anything is written."""

from data import multilingual
from inference.runs import ModelDirError, RunDir


def refusal(value, data):
    """Why `--teacher=value` cannot be the teacher of a run of data section `data`, or None."""
    if data.get("corpus") != "files":
        return (
            f"--teacher={value} names the runs whose translations --train_tsv holds: it needs --corpus=files "
            f"(not --corpus={data.get('corpus')})"
        )
    student = multilingual.side_languages(data)
    for path in value.split(","):
        run = RunDir(path)
        try:
            config = run.read_config()
        except ModelDirError as error:
            return f"--teacher={path}: {error}"
        if not isinstance(config, dict) or not isinstance(config.get("data"), dict):
            return f"--teacher={path}: {run.config_path} is missing or has no data section: not a run train.py wrote"
        teacher = multilingual.side_languages(config["data"])
        if any(theirs and ours and theirs != ours for theirs, ours in zip(teacher, student)):
            return (
                f"--teacher={path} translates {_direction(teacher)} ({run.config_path}); this run trains "
                f"{_direction(student)} on its translations: give a teacher of this direction, or this run "
                "the teacher's languages (--languages, --direction)"
            )
    return None


def _direction(sides):
    return "-".join(side or "several languages" for side in sides)
