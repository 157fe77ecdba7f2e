"""Keras callbacks of `train.py`: checkpoints, learning rate and throughput, dev-set BLEU, the best
checkpoint and early stopping, and plain progress lines for a log file."""

import csv
import math
import os
import sys
import time

import keras
import sacrebleu

from common import progress
from inference import runs
from training import checkpoints


def _step(model):
    return int(keras.ops.convert_to_numpy(model.optimizer.iterations))


class CheckpointEvery(keras.callbacks.Callback):
    """Writes a checkpoint at each epoch's end when its loss is finite, keeping the newest `keep`;
    the chief only."""

    def __init__(self, directory, keep, enabled=True):
        super().__init__()
        self.directory = directory
        self.keep = keep
        self.enabled = enabled
        self.last_path = None

    def on_epoch_end(self, epoch, logs=None):
        loss = (logs or {}).get("loss")
        if not self.enabled or loss is None or not math.isfinite(loss):
            return
        self.last_path = checkpoints.save_checkpoint(self.model, self.directory, _step(self.model), self.keep)


class TrainingStats(keras.callbacks.Callback):
    """Adds `learning_rate` and `target_tokens_per_second` (from the `target_tokens` metric) to each
    epoch's logs."""

    def on_epoch_begin(self, epoch, logs=None):
        self._started = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        elapsed = time.perf_counter() - self._started
        tokens = logs.get("target_tokens")
        if tokens is not None:
            logs["target_tokens_per_second"] = float(tokens) / max(elapsed, 1e-9)
        optimizer = self.model.optimizer
        logs["learning_rate"] = float(keras.ops.convert_to_numpy(optimizer.learning_rate))


class DevBleu(keras.callbacks.Callback):
    """Logs detokenized dev sacreBLEU as `val_bleu` every `every_epochs` epochs and at the last.

    Args:
        translator_factory: `model -> inference.translator.Translator`, called once, lazily.
        sources, references: the dev subset, lists of str.
        tokenize: sacreBLEU's tokenizer for the target language, as evaluate.py scores it.
        pairs: a multilingual model's `{pair: (sources, references, tokenize)}` instead; each logs
            `val_bleu_<pair>`, and `val_bleu` is their mean.
    """

    def __init__(self, translator_factory, sources, references, every_epochs, tokenize="13a", pairs=None):
        super().__init__()
        self.pairs = dict(pairs) if pairs is not None else {"": (list(sources), list(references), tokenize)}
        self.translator_factory = translator_factory
        self.sources = [source for pair_sources, _, _ in self.pairs.values() for source in pair_sources]
        self.every_epochs = every_epochs
        self.translator = None
        self.last_bleu = None
        self.last_pair_bleu = {}
        self.stop_request = None  # A `training.preemption.StopRequest`: once it fires, no more BLEU.

    def on_train_begin(self, logs=None):
        self._final_epoch = self.params.get("epochs", 0) - 1

    def on_epoch_end(self, epoch, logs=None):
        if not self.sources or ((epoch + 1) % self.every_epochs and epoch != self._final_epoch):
            return
        if self.stop_request is not None and self.stop_request.signal_number is not None:
            return  # Stopping: the checkpoint matters, the score does not.
        if self.translator is None:
            self.translator = self.translator_factory(self.model)
        scores = {}
        for name, (sources, references, tokenize) in self.pairs.items():
            if sources:
                # Each source whole, as the dev set aligned it with its reference.
                hypotheses, _ = self.translator.translate(sources, split_sentences=False)
                scores[name] = sacrebleu.corpus_bleu(hypotheses, [references], tokenize=tokenize).score
        self.last_bleu = sum(scores.values()) / len(scores)
        self.last_pair_bleu = {name: score for name, score in scores.items() if name}
        if logs is not None:
            logs["val_bleu"] = float(self.last_bleu)
            logs.update({f"val_bleu_{name}": float(score) for name, score in self.last_pair_bleu.items()})
        beam = self.translator.search.beam_size
        search = "greedy" if beam == 1 else f"beam {beam}"
        each = ", ".join(f"{name} {score:.2f}" for name, score in self.last_pair_bleu.items())
        print(
            ("\n" if progress.is_terminal(sys.stdout) else "")  # Below Keras's bar, not on it.
            + f"step {_step(self.model)}: dev BLEU {self.last_bleu:.2f} on {len(self.sources)} sentences ({search})"
            + (f": {each} (their mean)" if each else "")
        )


class BestCheckpoint(keras.callbacks.Callback):
    """Keeps the run's best checkpoint and, with `patience`, ends training once the dev score stops
    improving by more than `min_delta` (`stopped_at`). An epoch is an evaluation when its logs hold
    the metric. The record (`RunDir.write_best`) keeps the count, so a resume goes on with it; one of
    another metric is started anew.

    Args:
        run: the chief's `training.run_dir.RunDir`.
        metric: "bleu" (higher is better) or "loss" (lower is better).
        patience: evaluations without improvement that stop training; 0: never.
        enabled: False on the workers that do not write the run directory.
    """

    LOG_KEYS = {"bleu": "val_bleu", "loss": "val_loss"}

    def __init__(self, run, metric, patience=0, min_delta=0.0, enabled=True):
        super().__init__()
        if metric not in self.LOG_KEYS:
            raise ValueError(f"metric must be one of {sorted(self.LOG_KEYS)}, received {metric!r}")
        self.run, self.metric, self.patience, self.min_delta, self.enabled = run, metric, patience, min_delta, enabled
        self.record = None
        self.stopped_at = None
        if enabled:
            try:
                record = run.read_best() if os.path.exists(run.best_weights_path) else None
            except runs.ModelDirError as error:
                print(f"{error}: the best checkpoint is chosen anew", file=sys.stderr)
                record = None
            if record is not None and record.get("metric") != metric:
                print(
                    f"{run.best_record_path} ranks by dev {record.get('metric')}, this run by dev {metric}: "
                    "the best checkpoint is chosen anew",
                    file=sys.stderr,
                )
                record = None
            self.record = record

    def already_stopped(self):
        """Whether the restored record says the run stopped early and the patience still says so."""
        return bool(
            self.record
            and self.patience
            and self.record.get("stopped_at") is not None
            and self.record["evaluations_without_improvement"] >= self.patience
        )

    def _gain(self, score):
        """How much `score` betters the best so far (positive: better)."""
        best = self.record["score"]
        return score - best if self.metric == "bleu" else best - score

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        score = logs.get(self.LOG_KEYS[self.metric])
        if not self.enabled or score is None or not math.isfinite(score):
            return
        if not math.isfinite(logs.get("loss", 0.0)):
            return  # Weights gone to NaN: the run stops with nothing kept from this state.
        step = _step(self.model)
        scores = {"dev_loss": logs.get("val_loss"), "dev_bleu": logs.get("val_bleu")}
        scores = {key: float(value) for key, value in scores.items() if value is not None}
        gain = None if self.record is None else self._gain(float(score))
        count = 0 if gain is None or gain > self.min_delta else self.record["evaluations_without_improvement"] + 1
        if gain is None or gain > 0:
            record = dict(metric=self.metric, score=float(score), step=step, **scores)
            write_weights = self._write_weights
        else:
            record, write_weights = dict(self.record), None
        record.update(evaluations_without_improvement=count, evaluated_step=step, stopped_at=None)
        stopping = bool(self.patience) and count >= self.patience
        if stopping:
            record["stopped_at"] = step
        self.run.write_best(record, write_weights)
        self.record = record
        score = runs.describe_score(record)
        if write_weights is not None:
            line = f"step {step}: new best checkpoint ({score})"
        else:
            line = f"step {step}: the best checkpoint remains step {record['step']} ({score})"
        if self.patience:
            line += f"; {count} of {self.patience} evaluations without an improvement above {self.min_delta:g}"
        print(line)
        if stopping:
            self.stopped_at = step
            self.model.stop_training = True

    def _write_weights(self, path):
        checkpoints.check_room(path, checkpoints.expected_bytes(self.model, self.run.checkpoint_dir))
        self.model.save_weights(path)


class PlainProgress(keras.callbacks.Callback):
    """Progress as plain lines for a file or a pipe: `step S/T: loss ..., lr ..., N steps/s` every
    `interval` (`common.progress.Interval`) and one per epoch end with its dev values.

    `total_steps`: the run's last update; `epochs`: the run's (default: the fit's); `stream`:
    default stdout at the time of the line.
    """

    def __init__(self, total_steps, interval, epochs=None, stream=None):
        super().__init__()
        self.total_steps, self.interval, self.epochs, self._stream = total_steps, interval, epochs, stream

    def _write(self, text):
        stream = self._stream if self._stream is not None else sys.stdout
        stream.write(text + "\n")
        stream.flush()

    def _mark(self):
        self._last_step, self._last_time = _step(self.model), time.perf_counter()

    def _rate(self, step):
        return (step - self._last_step) / max(time.perf_counter() - self._last_time, 1e-9)

    def on_epoch_begin(self, epoch, logs=None):
        self._mark()
        self._epoch_start = (self._last_step, self._last_time)

    def on_train_batch_end(self, batch, logs=None):
        if self.interval.seconds and time.perf_counter() - self._last_time < self.interval.seconds:
            return  # Checked first: reading the step waits for the device.
        if not (self.interval.seconds or self.interval.steps):
            return
        step = _step(self.model)
        if self.interval.steps and step - self._last_step < self.interval.steps:
            return
        learning_rate = float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate))
        line = f"step {step}/{self.total_steps}: " + _values(
            dict(logs or {}, learning_rate=learning_rate), ("loss", "learning_rate")
        )
        self._write(f"{line}, {self._rate(step):.2f} steps/s")
        self._mark()

    def on_epoch_end(self, epoch, logs=None):
        step = _step(self.model)
        self._last_step, self._last_time = self._epoch_start
        line = f"epoch {epoch + 1}/{self.epochs or self.params.get('epochs', '?')}, step {step}/{self.total_steps}: "
        line += _values(logs, ("loss", "accuracy", "learning_rate"))
        line += f", {self._rate(step):.2f} steps/s"
        if (logs or {}).get("target_tokens_per_second") is not None:
            line += f", {logs['target_tokens_per_second']:,.0f} target tokens/s"
        dev = _values(logs, ("val_loss", "val_accuracy", "val_bleu"))
        self._write(line + (f"; dev {dev}" if dev else ""))
        self._mark()


_SHORT_NAMES = {"learning_rate": "lr", "val_loss": "loss", "val_accuracy": "accuracy", "val_bleu": "BLEU"}


def _values(logs, names):
    """`name value, ...` of those of `names` that `logs` holds (Keras's per-epoch or running values)."""
    logs = logs or {}
    shown = []
    for name in names:
        if logs.get(name) is None:
            continue
        value = float(logs[name])
        text = f"{value:.3g}" if name == "learning_rate" else f"{value:.2f}" if name == "val_bleu" else f"{value:.4f}"
        shown.append(f"{_SHORT_NAMES.get(name, name)} {text}")
    return ", ".join(shown)


class TrainingLog(keras.callbacks.Callback):
    """Appends one CSV row per epoch under fixed columns, blank where an epoch has no value (Keras's
    `CSVLogger` takes its columns from the first epoch, which has no dev values). A file with other
    columns is rewritten once under these, its rows kept. `extra_columns` follow COLUMNS."""

    COLUMNS = (
        "epoch",
        "step",
        "loss",
        "accuracy",
        "learning_rate",
        "target_tokens_per_second",
        "val_loss",
        "val_accuracy",
        "val_bleu",
    )

    def __init__(self, path, extra_columns=()):
        super().__init__()
        self.path = path
        self.columns = self.COLUMNS + tuple(extra_columns)

    def on_train_begin(self, logs=None):
        if not os.path.exists(self.path):
            return
        with open(self.path, newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            if tuple(reader.fieldnames or ()) == self.columns:
                return
            # Keras's logger appended rows of other lengths after a resume: short rows read as
            # None for the missing cells, long ones put the surplus under the key None.
            rows = [
                {key: value for key, value in row.items() if key is not None and value is not None} for row in reader
            ]
        checkpoints.write_atomically(self.path, lambda temporary: self._write(temporary, rows, "w"))

    def on_epoch_end(self, epoch, logs=None):
        row = {key: value for key, value in (logs or {}).items() if key in self.columns}
        row.update(epoch=epoch, step=_step(self.model))
        self._write(self.path, [row], "a")

    def _write(self, path, rows, mode):
        header = mode == "w" or not os.path.exists(path) or os.path.getsize(path) == 0
        with open(path, mode, newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, self.columns, extrasaction="ignore", restval="")
            if header:
                writer.writeheader()
            for row in rows:
                writer.writerow({key: _cell(value) for key, value in row.items()})


def _cell(value):
    """A CSV cell: ints and strings as they are, other numbers (floats, NumPy scalars) as Python floats."""
    return str(value) if isinstance(value, (int, str)) else repr(float(value))


def read_pairs(tsv_path, limit, reverse=False):
    """The first `limit` (source, reference) pairs of a corpus TSV (None: all), in translation direction."""
    sources, references = [], []
    with open(tsv_path, encoding="utf-8") as handle:
        for line in handle:
            if limit is not None and len(sources) >= limit:
                break
            english, foreign = line.rstrip("\n").split("\t")
            source, reference = (foreign, english) if reverse else (english, foreign)
            sources.append(source)
            references.append(reference)
    return sources, references
