"""`train(config)`: corpus -> vocabulary -> tf.data -> Transformer -> `model.fit` with checkpoints.

Steps are optimizer updates (K batches each with `accumulate_steps` K); a Keras epoch is
`checkpoint_every` updates and ends with a checkpoint. Resuming, the best checkpoint and early
stopping: docs/training.md.
"""

import contextlib
import dataclasses
import math
import os
import shutil
import signal
import sys

import keras
import tensorflow as tf

from common import progress
from common.bleu_tokenizers import bleu_tokenizer
from common.errors import UserError, WorkError
from data import corpora, multilingual, pipeline, service
from data.sources import corpus_mix
from data.tokenizer import Tokenizer, train_sentencepiece
from data.vocabulary_options import VOCAB_SAMPLE_LINES, vocabulary_stem
from inference.runs import MODEL_FILE, ModelDirError, describe_score
from inference.translator import Translator
from training import callbacks as training_callbacks
from training import checkpoints, init_from, model_building, preemption
from training import config as run_config
from training.distribution import (
    DistributionError,
    is_chief,
    make_strategy,
    num_replicas,
    reduce_logs_across_workers,
    worker_info,
)
from training.run_dir import RunDir

# Plain progress lines within an epoch (besides one at its end) when stdout is no terminal.
DEFAULT_PROGRESS = progress.Interval(seconds=60.0)


class TrainingError(UserError, RuntimeError):
    """Training stopped for a reason the user must act on (the message says which)."""


class TrainingFailure(WorkError, TrainingError):
    """Training started and failed (a write failed, the loss became NaN): exit status 1, where a
    refused start exits with 2."""


class TrainingInterrupted(RuntimeError):
    """A signal stopped training; a checkpoint was written at `step` (`path`, None on a worker)."""

    def __init__(self, signal_number, step, path):
        name = signal.Signals(signal_number).name
        where = f"wrote {path}" if path else "the chief writes the checkpoint"
        super().__init__(
            f"{name} at step {step}: stopped after that step and {where}; run the same command again to resume"
        )
        self.signal_number, self.step, self.path = signal_number, step, path
        self.exit_status = preemption.exit_status(signal_number)


def _check_writable(directory):
    try:
        os.makedirs(directory, exist_ok=True)
        probe = os.path.join(directory, ".write-test")
        with open(probe, "w") as handle:
            handle.write("ok")
        os.remove(probe)
    except OSError as error:
        raise TrainingError(f"--model_dir {directory!r} is not writable: {error}") from error


def resolve_tokenizer(model_dir, corpus, data, may_train=True, parent=None, reverse=False):
    """The run's SentencePiece model: model_dir/spm.model, trained once per corpus and kept in its
    cache (a fine-tuning, `parent`, takes its parent's). With separate vocabularies each side has its
    own (the source's in spm.source.model, read target-first when `reverse`); the target's is returned."""
    run = RunDir(model_dir)
    separate = getattr(data, "vocabulary", "shared") == "separate"
    if parent is not None and (parent.source_vocabulary_path is not None) != separate:
        kinds = ("separate", "shared") if separate else ("shared", "separate")
        raise TrainingError(
            f"--init_from={parent.model_dir}: --vocabulary={kinds[0]} differs from its {kinds[1]} vocabularies; a "
            "fine-tuning keeps its parent's"
        )
    if separate:
        source_column = 1 if reverse else 0
        user_symbols = tuple(getattr(data, "user_defined_symbols", ()) or ())
        column_symbols = {0: corpora.vocabulary_symbols(data), 1: user_symbols}
        sides = (
            (run.source_vocabulary_path, source_column, column_symbols[source_column], "source"),
            (run.vocabulary_path, 1 - source_column, column_symbols[1 - source_column], "target"),
        )
    else:
        sides = ((run.vocabulary_path, None, corpora.vocabulary_symbols(data), None),)
        if not run.has_trained() and run.has_separate_vocabularies():
            os.remove(run.source_vocabulary_path)  # A failed earlier start's, with --vocabulary=separate.
    for target, column, symbols, side in sides:
        # A run that has trained keeps its vocabulary; one that has not (a failed start, a worker's
        # copy from an earlier start) takes the one its flags name.
        if parent is not None and not run.has_trained():
            init_from.copy_vocabulary(parent, target, side)
        elif not os.path.exists(target) or not run.has_trained():
            cached = _cached_vocabulary(corpus, data, symbols, column, side, may_train)
            checkpoints.write_atomically(target, lambda temporary, cached=cached: shutil.copyfile(cached, temporary))
    return Tokenizer.from_file(run.vocabulary_path)


def _cached_vocabulary(corpus, data, symbols, column, side, may_train):
    """The corpus cache's vocabulary for `data` (one `column`'s, a `side`'s, or both when None),
    trained there first from data.prepare's `VOCAB_SAMPLE_LINES` pairs if missing."""
    vocab_size = data.vocab_size
    model_type = getattr(data, "subword_model", "bpe")
    cached = os.path.join(corpus.root, vocabulary_stem(vocab_size, symbols, model_type, column) + ".model")
    if os.path.exists(cached):
        return cached
    if not may_train:
        how = f"with `{corpora.prepare_command(data, vocab_size)}`"
        if data.corpus == "files" and multilingual.is_multilingual(data.corpus, data.languages):
            how = "by starting this run on one worker (--distribution=one_device), which trains it"
        raise TrainingError(f"{cached} is missing: with several workers, build the vocabulary first {how}")
    of = "" if column is None else f" (the {side} side: column {column + 1} of the files)"
    print(
        f"training a {vocab_size}-piece SentencePiece vocabulary on the training split of {corpus.root}{of}",
        file=sys.stderr,
    )
    try:
        train_sentencepiece(
            list(corpus.train),
            cached[: -len(".model")],
            vocab_size=vocab_size,
            model_type=model_type,
            user_defined_symbols=symbols,
            tsv_column=column,
            input_sentence_size=(2 if column is None else 1) * VOCAB_SAMPLE_LINES,
        )
    except ValueError as error:
        raise TrainingError(f"--vocab_size={vocab_size}: {error}") from error
    return cached


def _check_resume_step(checkpoint_step, start_step, checkpoint_path):
    """Refuses a resume whose optimizer state did not load (the step read back differs from the
    checkpoint's)."""
    if start_step != checkpoint_step:
        raise TrainingError(
            f"{checkpoint_path} is from step {checkpoint_step}, but its optimizer state did not load (the step read "
            f"back is {start_step}): the optimizer differs from the one that wrote it. Resume with the run's "
            "--mixed_precision, --accumulate_steps and --ema_decay (or none), or pass --start_over"
        )


def _epoch_plan(start_step, steps_per_epoch, epochs):
    """`[(first step, first epoch, steps per epoch)]`: the fits from `start_step` to `epochs *
    steps_per_epoch`. A start off an epoch boundary first runs a short epoch up to the next one,
    so checkpoints fall on boundaries."""
    initial_epoch = start_step // steps_per_epoch
    plan = []
    remainder = start_step % steps_per_epoch
    if remainder and initial_epoch < epochs:
        plan.append((start_step, initial_epoch, steps_per_epoch - remainder))
        initial_epoch += 1
    if initial_epoch < epochs:
        plan.append((initial_epoch * steps_per_epoch, initial_epoch, steps_per_epoch))
    return plan


def _fit_epochs(model, train_dataset_from, start_step, steps_per_epoch, epochs, fit_options, accumulate_steps=1):
    """`model.fit` over `_epoch_plan`'s fits, each on a stream seeded by its first step; returns
    the merged history."""
    fits = _epoch_plan(start_step, steps_per_epoch, epochs)
    history = {}
    for step, first_epoch, steps in fits:
        if getattr(model, "stop_training", False):  # A callback (early stopping) ended the previous fit.
            break
        last_epoch = first_epoch + 1 if steps != steps_per_epoch else epochs
        result = model.fit(
            train_dataset_from(step),
            epochs=last_epoch,
            initial_epoch=first_epoch,
            steps_per_epoch=steps * accumulate_steps,
            **fit_options,
        ).history
        if "loss" not in result:
            # No batch was trained: Keras ends an epoch with a warning when its input runs out, and
            # the stream repeats, so only a pass that keeps no pair ends it.
            raise StopIteration
        for key, values in result.items():
            history.setdefault(key, []).extend(values)
    return history


def _validation_epochs(eval_epochs, epochs):
    """Epochs (1-based, as Keras counts them) with dev loss: every `eval_epochs`-th and the last."""
    return sorted(set(range(eval_epochs, epochs + 1, eval_epochs)) | {epochs})


def train(config, start_over=False, callbacks=(), progress_every=DEFAULT_PROGRESS):
    """Trains (or resumes) the run of a `training.config.RunConfig`; returns a summary dict.

    `callbacks`: extra Keras callbacks, after the built-in ones. `progress_every`: a
    `common.progress.Interval` for the plain progress lines written when stdout is not a terminal.

    Raises:
        TrainingError: unwritable model_dir, a non-finite loss, and other conditions to act on.
        ValueError: a model_dir holding a run with another configuration (unless `start_over`).
    """
    train_options = config.train
    refusal = (
        run_config.evaluation_refusal(train_options)
        or run_config.ema_refusal(train_options)
        or run_config.subword_refusal(train_options, getattr(config.data, "subword_model", "bpe"))
    )
    if refusal:
        raise TrainingError(refusal)
    if not isinstance(train_options.accumulate_steps, int) or train_options.accumulate_steps < 1:
        raise ValueError(f"accumulate_steps must be a positive int, received {train_options.accumulate_steps!r}")
    if train_options.accumulate_steps > 1 and train_options.mixed_precision == "fp16":
        raise ValueError(
            "accumulate_steps > 1 does not combine with mixed_precision='fp16' (its loss scaling skips "
            "batches); use bf16 or none"
        )
    if train_options.steps_per_execution < 1 or train_options.checkpoint_every % train_options.steps_per_execution:
        raise ValueError(
            f"checkpoint_every={train_options.checkpoint_every} must be a multiple of "
            f"steps_per_execution={train_options.steps_per_execution} (a positive int)"
        )
    for name in ("train_steps", "eval_every"):
        if getattr(train_options, name) % train_options.checkpoint_every:
            # Epochs are checkpoint_every updates long: the remainder would silently not be trained.
            raise ValueError(
                f"{name}={getattr(train_options, name)} must be a multiple of "
                f"checkpoint_every={train_options.checkpoint_every}"
            )
    # Devices first: splitting the CPU must happen before TensorFlow initialises them.
    try:
        strategy = make_strategy(train_options.distribution, train_options.cpu_replicas)
    except DistributionError as error:
        raise TrainingError(str(error)) from error
    chief = is_chief()
    _, task_index, _ = worker_info()
    chief_run = RunDir(config.model_dir)
    run = chief_run if chief else chief_run.worker(task_index)
    parent = _parent_weights(config, run, start_over)  # Before anything is written to the run directory.
    created = not os.path.exists(run.path)
    _check_writable(run.path)
    try:
        lock = run.lock()  # Each worker of a multi-worker run locks its own directory.
    except ModelDirError as error:
        raise TrainingError(str(error)) from error
    start = _Start(config, start_over, strategy, chief, chief_run, run, parent, progress_every=progress_every)
    try:
        with lock:
            try:
                return _train_locked(start, callbacks)
            except (checkpoints.WriteError, OSError) as error:
                raise TrainingFailure(_write_failure(error, start.model, run)) from None
    except BaseException:
        if created:
            run.remove_if_unused()  # A run refused before it wrote anything (bad data) leaves no directory.
        raise


def _parent_weights(config, run, start_over):
    """The weights of `--init_from`'s parent, or None (no parent, or a resume from own checkpoints);
    TrainingError for a parent that cannot start this run."""
    train_options = config.train
    if not train_options.init_from or (run.latest_checkpoint() is not None and not start_over):
        return None
    if os.path.abspath(train_options.init_from) == os.path.abspath(config.model_dir):
        raise TrainingError(
            f"--init_from={train_options.init_from} is --model_dir itself: fine-tune into another directory"
        )
    try:
        return init_from.load_parent(
            train_options.init_from, train_options.init_checkpoint, config.model, config.data.vocab_size
        )
    except init_from.InitFromError as error:
        raise TrainingError(str(error)) from error


def _record(config, mix, parent, previous):
    """`config` with what this start found: the training mix, the parent (a resume keeps the first
    start's) and the search to translate with (the recipe's, the parent's, or the earlier record)."""
    record = dict(config.record)
    previous = previous or {}
    if mix is not None:
        record["training_corpora"] = corpus_mix.describe(mix)
    if parent is not None:
        record["init_from"] = parent.record()
    elif previous.get("init_from"):
        record["init_from"] = previous["init_from"]
    if "search" not in record:
        search = parent.search if parent is not None else previous.get("search")
        if search is not None:
            record["search"] = search
    return dataclasses.replace(config, record=record)


def _write_failure(error, model, run):
    """The message for a failed write: what, at which step, and what a rerun resumes from."""
    what = str(error) if isinstance(error, checkpoints.WriteError) else f"a write failed: {error}"
    step = f" at step {int(keras.ops.convert_to_numpy(model.optimizer.iterations))}" if model is not None else ""
    newest = run.latest_checkpoint()
    resume = f"the newest good checkpoint is {newest[1]}" if newest else "no checkpoint was written yet"
    return (
        f"{what}{step}; {resume}. Make room (free space, a larger file-size limit or quota, a writable "
        "directory) and run the same command again to resume from it"
    )


@dataclasses.dataclass
class _Start:
    """One start of a run as `train`'s steps pass it on, each step adding its part."""

    config: run_config.RunConfig  # With what this start found recorded, once `_inputs` has run.
    start_over: bool
    strategy: object  # A tf.distribute strategy, or None (one device, or JAX's DataParallel).
    chief: bool
    chief_run: RunDir
    run: RunDir  # The chief's run directory, or this worker's own.
    parent: object  # The `init_from.ParentWeights` of a fine-tuning's first start, or None.
    progress_every: progress.Interval = DEFAULT_PROGRESS  # Plain progress lines, when stdout is no terminal.
    corpus: object = None  # A `corpora` corpus: its train and dev files.
    reverse: bool = False  # Whether the corpus's pairs are read target-first.
    mix: list | None = None  # The sources of a weighted training mix, or None.
    tokenizer: Tokenizer | None = None  # The target's (or the shared one).
    source_tokenizer: Tokenizer | None = None  # The source's: `tokenizer` itself with a shared vocabulary.
    model: keras.Model | None = None
    start_step: int = 0

    @property
    def options(self):
        return self.config.train

    @property
    def epochs(self):
        """Keras epochs of the whole run: each `checkpoint_every` updates long."""
        return self.options.train_steps // self.options.checkpoint_every

    @property
    def eval_epochs(self):
        """Epochs between dev evaluations."""
        return max(1, self.options.eval_every // self.options.checkpoint_every)


@dataclasses.dataclass
class _Callbacks:
    """The Keras callbacks of a fit, the two whose results the summary reports, and whether the
    best checkpoint's record says an earlier start already stopped early."""

    all: list
    bleu: training_callbacks.DevBleu
    best: training_callbacks.BestCheckpoint
    stopped_before: bool


def _train_locked(start, callbacks):
    """`train` once the run directory is locked, step by step; returns the summary."""
    _inputs(start)
    _model(start)
    train_dataset_from, dev_dataset = _datasets(start)
    fit_callbacks = _callbacks(start, callbacks)
    history = _fit(start, train_dataset_from, dev_dataset, fit_callbacks)
    return _final_model(start, fit_callbacks, history)


def _inputs(start):
    """Prepares the run directory, resolves the corpus and its mix, checks and records the config,
    and loads the tokenizer."""
    options, data = start.options, start.config.data
    previous = start.chief_run.previous_config() if not start.start_over else None
    if start.chief:
        try:
            start.chief_run.prepare(start.start_over, options.mixed_precision, options.ema_decay)
        except ModelDirError as error:
            raise TrainingError(str(error)) from error
    keras.utils.set_random_seed(options.seed)  # Before any tokenizer is traced (see data/tokenizer.py).
    keras.config.set_dtype_policy(model_building.POLICIES[options.mixed_precision])
    try:
        start.corpus, start.reverse = corpora.resolve_corpus(data)
        corpora.check_dev_split(start.corpus, data)
    except corpora.CorpusChoiceError as error:
        raise TrainingError(str(error)) from error
    try:
        start.mix = corpora.training_mix(start.corpus, data)
    except corpora.CorpusError as error:
        raise TrainingError(str(error)) from error
    if start.chief:
        # After the corpus (an unset direction means its own), before anything is written into model_dir.
        run_config.check(start.config, default_direction="-".join(start.corpus.languages))
    if start.mix is not None:
        corpora.print_mix(start.mix)
    start.config = _record(start.config, start.mix, start.parent, previous)
    start.tokenizer = resolve_tokenizer(
        start.run.path,
        start.corpus,
        data,
        may_train=options.distribution != "multi_worker",
        parent=start.parent,
        reverse=start.reverse,
    )
    separate = getattr(data, "vocabulary", "shared") == "separate"
    start.source_tokenizer = start.run.load_source_tokenizer() if separate else start.tokenizer


def _model(start):
    """Builds the model, restores the newest checkpoint or the parent's weights, and writes config.json."""
    strategy = start.strategy
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    with scope:
        model = model_building.build_model(
            start.config.model,
            start.tokenizer.vocabulary_size,
            start.options,
            source_vocabulary_size=(
                start.source_tokenizer.vocabulary_size if start.source_tokenizer is not start.tokenizer else None
            ),
        )
    start.model = model
    if strategy is not None and num_replicas(strategy) > 1:
        model_building.build_metrics_before_fit(model, strategy)
    if isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) and worker_info()[2] > 1:
        reduce_logs_across_workers(model)
    restored = start.run.latest_checkpoint()
    if restored is not None:
        model.load_weights(restored[1])
        start.start_step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
        _check_resume_step(restored[0], start.start_step, restored[1])
        print(f"resuming from {restored[1]} at step {start.start_step}", file=sys.stderr)
    elif start.parent is not None:
        _assign_parent(model, start.parent)
    if start.chief:
        run_config.write(start.config)  # Once the run is known to start or resume (a refused resume keeps the old one).
    if start.start_step >= start.epochs * start.options.checkpoint_every:
        print(
            f"{start.config.model_dir} has already trained {start.start_step} of {start.options.train_steps} steps",
            file=sys.stderr,
        )


def _assign_parent(model, parent):
    """Sets `model`'s weights to the parent run's (`init_from.ParentWeights`)."""
    try:
        init_from.assign(model, parent)
    except init_from.InitFromError as error:
        raise TrainingError(str(error)) from error
    step = "" if parent.step is None else f" (step {parent.step})"
    print(
        f"fine-tuning from {parent.path}{step}, the {parent.choice} weights of {parent.model_dir}, with its "
        "vocabulary; the optimizer starts afresh at step 0",
        file=sys.stderr,
    )


def _datasets(start):
    """`(train_dataset_from, dev_dataset)`: the training stream of a fit by its first step, and the
    dev set (its length known, so Keras validates without reading past it)."""
    options, data, corpus, tokenizer = start.options, start.config.data, start.corpus, start.tokenizer
    source_tokenizer = None if start.source_tokenizer is tokenizer else start.source_tokenizer
    # The corpus cache's files were checked as they were written (`data.sources.corpus_writer`) and are
    # checked by size at each start (`corpus_cache.check_corpus`): no line-by-line pass here.
    dataset_options = dict(
        batch_tokens=options.batch_tokens,
        max_length=data.max_length,
        reverse=start.reverse,
        validate=False,
        source_tokenizer=source_tokenizer,
    )
    strategy, replicas = start.strategy, num_replicas(start.strategy)

    if options.data_service:
        try:
            service.check_dispatcher(options.data_service)
        except service.DataServiceError as error:
            raise TrainingError(str(error)) from None

    def train_dataset_from(step):
        """The training stream of a fit starting at `step`, shuffled with a seed derived from it."""
        stream = dict(repeat=True, cache_tokenized=options.cache_tokenized, seed=options.seed + step, **dataset_options)
        if options.data_service:
            stream.update(seed=None, data_service=options.data_service)
        files = list(corpus.train)
        sampled = tokenizer.sampling(options.subword_alpha, options.subword_nbest) if options.subword_alpha else None
        if sampled and source_tokenizer is not None:
            stream["source_tokenizer"] = source_tokenizer.sampling(options.subword_alpha, options.subword_nbest)
        if start.mix is not None:
            files, stream["weights"] = [source.path for source in start.mix], [source.weight for source in start.mix]
        if strategy is not None and replicas > 1:
            return strategy.distribute_datasets_from_function(
                pipeline.make_distributed_dataset_fn(files, sampled or tokenizer, **stream)
            )
        if replicas > 1:  # JAX's DataParallel: one global batch, split over the devices by Keras.
            stream["plan"] = pipeline.data_parallel_plan(options.batch_tokens, data.max_length, replicas)
        return pipeline.make_dataset(files, sampled or tokenizer, **stream)

    dev_dataset = pipeline.make_dataset(corpus.dev, tokenizer, shuffle=False, seed=options.seed, **dataset_options)
    if strategy is None and replicas > 1:
        dev_dataset = pipeline.pad_batch_rows(dev_dataset, replicas)
    dev_batches = sum(1 for _ in dev_dataset)
    if not dev_batches:
        raise TrainingError(
            f"no dev pair of {corpus.dev} fits --max_length={data.max_length} tokens (see the count above); "
            "raise --max_length"
        )
    return train_dataset_from, dev_dataset.apply(tf.data.experimental.assert_cardinality(dev_batches))


def _callbacks(start, extra):
    """The run's Keras callbacks, then `extra` (the caller's)."""
    options, chief, chief_run = start.options, start.chief, start.chief_run
    tokenizer, max_length, data = start.tokenizer, start.config.data.max_length, start.config.data
    pairs = _dev_pairs(start) if multilingual.is_multilingual(data.corpus, data.languages) else None
    dev_sources, dev_references = (
        ([], []) if pairs else training_callbacks.read_pairs(start.corpus.dev, options.eval_sentences, start.reverse)
    )
    bleu = training_callbacks.DevBleu(
        lambda trained: Translator(
            trained,
            tokenizer,
            options.dev_search(max_input_length=max_length),
            batch_size=32,
            source_tokenizer=start.source_tokenizer,
        ),
        dev_sources if chief else [],
        dev_references,
        start.eval_epochs,
        tokenize=bleu_tokenizer(start.corpus.languages[0 if start.reverse else 1]),
        pairs=pairs,
    )
    best = training_callbacks.BestCheckpoint(
        chief_run,
        options.best_metric,
        patience=options.early_stopping,
        min_delta=options.early_stopping_min_delta,
        enabled=chief,
    )
    # The checkpoint before the dev BLEU, which takes minutes on a large model: a kill during it
    # keeps the epoch. The best checkpoint after the dev BLEU, which it ranks.
    keras_callbacks = [
        training_callbacks.TrainingStats(),
        training_callbacks.CheckpointEvery(start.run.checkpoint_dir, options.keep_checkpoints),
        bleu,
        best,
        keras.callbacks.TerminateOnNaN(),
    ]
    if chief:
        keras_callbacks += [
            training_callbacks.TrainingLog(chief_run.training_log, [f"val_bleu_{name}" for name in pairs or ()]),
            keras.callbacks.TensorBoard(chief_run.log_dir, update_freq="epoch"),
        ]
    return _Callbacks(keras_callbacks + list(extra), bleu, best, best.already_stopped())


def _dev_pairs(start):
    """A multilingual run's dev BLEU sets: {pair: (tagged sources, references, BLEU tokenizer)}, the
    first --eval_sentences of each pair's dev split (the chief's; the others score none)."""
    pairs = {}
    for name, entry in multilingual.pairs_of(start.corpus).items():
        dev = os.path.join(os.path.dirname(start.corpus.root), entry["corpus_dir"], "dev.tsv")
        sources, references = training_callbacks.read_pairs(dev, start.options.eval_sentences)
        tagged = [f"{entry['tag']} {source}" for source in sources] if start.chief else []
        pairs[name] = (tagged, references, bleu_tokenizer(entry["language"]))
    return pairs


def _fit(start, train_dataset_from, dev_dataset, fit_callbacks):
    """Trains from `start.start_step` to the last step, unless the run is done or stopped early
    before; returns the fits' history. A signal writes a checkpoint and raises TrainingInterrupted."""
    options, model = start.options, start.model
    if fit_callbacks.stopped_before:
        record = fit_callbacks.best.record
        print(
            f"{start.config.model_dir} stopped early at step {record['stopped_at']} after "
            f"{record['evaluations_without_improvement']} evaluations without improvement "
            f"(--early_stopping={options.early_stopping}); raise --early_stopping to train on",
            file=sys.stderr,
        )
        return {}
    if start.start_step >= start.epochs * options.checkpoint_every:
        return {}
    print(_training_plan(start), file=sys.stderr)
    with preemption.stop_on_signals(enabled=worker_info()[2] == 1) as stop_request:
        fit_callbacks.bleu.stop_request = stop_request
        fit_options = dict(
            shuffle=False,  # The stream is shuffled by tf.data.
            validation_data=dev_dataset,
            validation_freq=_validation_epochs(start.eval_epochs, start.epochs),
            callbacks=[preemption.StopOnSignal(stop_request)] + fit_callbacks.all + _progress_callbacks(start),
            verbose=1 if progress.is_terminal(sys.stdout) else 0,
        )
        try:
            history = _fit_epochs(
                model,
                train_dataset_from,
                start.start_step,
                options.checkpoint_every,
                start.epochs,
                fit_options,
                accumulate_steps=options.accumulate_steps,
            )
        except preemption.Preempted as stop:
            step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
            path = None
            if start.chief:
                path = checkpoints.save_checkpoint(model, start.run.checkpoint_dir, step, options.keep_checkpoints)
            raise TrainingInterrupted(stop.signal_number, step, path) from None
        except StopIteration as error:
            # The training stream repeats forever unless a pass over the data keeps no pair.
            raise TrainingError(
                f"the training data ran out: no training pair of {start.corpus.root} fits "
                f"--max_length={start.config.data.max_length} tokens (see the count above); raise --max_length"
            ) from error
    _check_finite(history, start.run)
    return history


def _progress_callbacks(start):
    """Keras's bar (`verbose=1`) at a terminal; plain lines in a file or a pipe."""
    if progress.is_terminal(sys.stdout):
        return []
    return [training_callbacks.PlainProgress(start.options.train_steps, start.progress_every, epochs=start.epochs)]


def _training_plan(start):
    """The line that announces a fit: the model, the steps, the replicas and the batches."""
    options, model = start.options, start.model
    return (
        f"training {type(model).__name__} ({model.count_params():,} parameters) for steps "
        f"{start.start_step}..{options.train_steps} on {num_replicas(start.strategy)} replica(s), "
        f"{options.batch_tokens} tokens per replica and side"
        + (f", {options.accumulate_steps} batches per update" if options.accumulate_steps > 1 else "")
    )


def _check_finite(history, run):
    """Refuses a history whose training loss became NaN or infinite (TerminateOnNaN stopped the fit)."""
    if any(not math.isfinite(loss) for loss in history.get("loss", [])):
        last = run.latest_checkpoint()
        raise TrainingFailure(
            "the training loss became NaN or infinite; training stopped and no checkpoint was written from "
            f"that state (newest good one: {last[1] if last else 'none'}). Lower --learning_rate_scale, "
            "raise --warmup_steps, or use --mixed_precision=bf16 instead of fp16."
        )


def _final_model(start, fit_callbacks, history):
    """Writes model.keras (from the best checkpoint when the run stopped early); returns the summary."""
    model, best = start.model, fit_callbacks.best
    final_step = int(keras.ops.convert_to_numpy(model.optimizer.iterations))
    stopped_at = best.stopped_at or (best.record["stopped_at"] if fit_callbacks.stopped_before else None)
    if start.chief and stopped_at is not None:
        record = best.record
        model.load_weights(start.chief_run.best_weights_path)
        print(
            f"early stopping at step {stopped_at}: {record['evaluations_without_improvement']} evaluations without "
            f"an improvement of dev {record['metric']} above {start.options.early_stopping_min_delta:g}; "
            f"{MODEL_FILE} holds the best checkpoint, of step {record['step']} ({describe_score(record)})",
            file=sys.stderr,
        )
    model_path = start.run.model_path
    checkpoints.check_room(model_path, checkpoints.expected_bytes(model, start.run.checkpoint_dir))
    checkpoints.write_atomically(model_path, lambda temporary: model.save(temporary))
    return {
        "model_path": model_path,
        "step": final_step,
        "resumed_from": start.start_step,
        "history": {key: [float(v) for v in values] for key, values in history.items()},
        "dev_bleu": fit_callbacks.bleu.last_bleu,
        "dev_bleu_pairs": fit_callbacks.bleu.last_pair_bleu,
        "dev_bleu_sentences": len(fit_callbacks.bleu.sources),
        "best": best.record,
        "stopped_early_at": stopped_at,
        "corpus": dataclasses.asdict(start.corpus),
    }
