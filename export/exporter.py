"""Writes a trained model_dir as a TensorFlow Serving version, `export_dir/<version>/` (layout in
docs/serving.md). The version is written under `.tmp-<version>-*` (a name the server ignores) and
renamed into place when complete, under an exclusive `flock`; an unlocked leftover of a killed
export is removed by the next one."""

import fcntl
import json
import os
import re
import shutil
import sys
import tempfile

import keras
import tensorflow as tf

import models.transformer  # Also registers the Keras classes that model.keras names.
from common.errors import UserError, WorkError
from data import multilingual
from export import warmup
from export.serving_module import DEFAULT_LENGTH_BUCKETS, SIGNATURES, ServingModule, check_signatures
from inference.runs import CONFIG_FILE as RUN_CONFIG_FILE
from inference.runs import DEFAULT_CHECKPOINT, SOURCE_VOCABULARY_FILE, ModelDirError, RunDir
from models.search_config import DEFAULT_SEARCH
from training import checkpoints

EXPORT_CONFIG_FILE = "export_config.json"
SAVED_MODEL_FILES = ("saved_model.pb", "saved_model.pbtxt")
TEMPORARY_PREFIX = ".tmp-"
# `export_model(quantize=...)`: None keeps the float weights.
QUANTIZE_MODES = (None, "int8")
# `tempfile.mkdtemp(prefix=".tmp-<version>-")`: the prefix, then 8 of [a-z0-9_].
_TEMPORARY_NAME = re.compile(r"\.tmp-\d+-[a-z0-9_]+")


class ExportError(UserError, ValueError):
    """A model_dir, export_dir or version the export cannot use (the message names the flag and path)."""


class ExportWriteError(WorkError, ExportError):
    """The export could not be written (a full disk, a file-size limit): a failure during the work."""


def existing_versions(export_dir):
    """The integer version directories under `export_dir`, sorted."""
    if not os.path.isdir(export_dir):
        return []
    return sorted(
        int(name) for name in os.listdir(export_dir) if name.isdigit() and os.path.isdir(os.path.join(export_dir, name))
    )


def next_version(export_dir):
    """One more than the highest existing version, or 1."""
    versions = existing_versions(export_dir)
    return versions[-1] + 1 if versions else 1


def check_model_dir(model_dir, checkpoint=DEFAULT_CHECKPOINT):
    """Raises `ExportError` unless `model_dir` holds what the export loads; reads no model. Returns
    the `inference.runs.ChosenWeights`.

    Args:
        model_dir: a directory written by train.py.
        checkpoint: the weights to export: "best", "last", "average:N" or "ema"
            (`inference.runs.parse_checkpoint`).
    """
    try:
        chosen = RunDir(model_dir).check_loadable(checkpoint)
    except ModelDirError as error:
        raise ExportError(str(error)) from error
    if not os.path.isfile(RunDir(model_dir).config_path):  # The export records the run's config.
        raise ExportError(f"--model_dir={model_dir} has no {RUN_CONFIG_FILE}: expected a directory written by train.py")
    return chosen


def check_export_dir(export_dir, version):
    """Raises `ExportError` if `export_dir/<version>` cannot be written; creates nothing.

    Refused: an export_dir that is a file or lies under one, one that is itself a SavedModel version
    directory (the new version would nest inside it), and a version that exists.
    """
    existing = export_dir
    while existing and not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if existing and not os.path.isdir(existing):
        where = "is" if existing == export_dir else f"lies under {existing}, which is"
        raise ExportError(f"--export_dir {export_dir} {where} a file, not a directory")
    for name in SAVED_MODEL_FILES:
        if os.path.isfile(os.path.join(export_dir, name)):
            raise ExportError(
                f"--export_dir {export_dir} is itself a SavedModel version directory ({name}); pass its parent"
            )
    final_path = os.path.join(export_dir, str(version))
    if os.path.exists(final_path):
        raise ExportError(
            f"--version={version}: {final_path} already exists and versions are never overwritten; pass another "
            f"--version or leave it out for the next one ({next_version(export_dir)})"
        )


def load_trained(model_dir, checkpoint=DEFAULT_CHECKPOINT):
    """`(model, tokenizer, run_config dict)` of a model_dir written by train.py.

    Args:
        checkpoint: "best", "last", "average:N" or "ema" (`inference.runs.RunDir.load_model`, as
            `evaluate.py --checkpoint`).

    Raises:
        ExportError: a file the export needs is missing or does not fit the others (names it).
    """
    check_model_dir(model_dir, checkpoint)  # The config.json too, which only checkpoints need to load.
    try:
        model, tokenizer, run_config = RunDir(model_dir).load_model(checkpoint)
    except ModelDirError as error:
        raise ExportError(str(error)) from error
    if not isinstance(model, models.transformer.Transformer):
        raise ExportError(
            f"{RunDir(model_dir).model_path} holds a {type(model).__name__}, not the Transformer train.py saves"
        )
    run = RunDir(model_dir)
    if (model.source_vocabulary_size is not None) != run.has_separate_vocabularies():
        has = "has" if run.has_separate_vocabularies() else "has no"
        built = "with" if model.source_vocabulary_size is not None else "without"
        raise ExportError(
            f"{run.path} {has} {SOURCE_VOCABULARY_FILE} but its model was built {built} a source vocabulary of its own"
        )
    sizes = [(run.vocabulary_path, tokenizer.vocabulary_size, model.vocabulary_size)]
    if run.has_separate_vocabularies():
        size = model.source_vocabulary_size
        sizes.append((run.source_vocabulary_path, run.load_source_tokenizer().vocabulary_size, size))
    for path, pieces, built_for in sizes:
        if pieces != built_for:
            raise ExportError(f"{path} has {pieces} pieces but {run.model_path} was built for {built_for}")
    return model, tokenizer, run_config


def remove_stale_temporaries(export_dir, pattern=_TEMPORARY_NAME):
    """Removes the temporary directories that killed exports left in `export_dir`; returns their names.

    Only names that `pattern` matches in full (default this exporter's, `.tmp-<version>-<mkdtemp
    suffix>`) and that no running export holds locked are removed; where the file system has no
    `flock`, nothing is.
    """
    removed = []
    for name in sorted(os.listdir(export_dir)):
        path = os.path.join(export_dir, name)
        if not pattern.fullmatch(name) or os.path.islink(path) or not os.path.isdir(path):
            continue
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # Renamed or removed meanwhile.
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(descriptor)
            continue  # A running export holds it (or no flock here: cannot tell).
        try:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(name)
        finally:
            os.close(descriptor)
    return removed


def locked_temporary_directory(export_dir, prefix):
    """`(path, descriptor)` of a new `<prefix>*` directory in `export_dir` this process holds a `flock` on.

    The lock (released by the kernel when the process dies, however it dies) tells
    `remove_stale_temporaries` of another export that the directory is in use.
    """
    while True:
        path = tempfile.mkdtemp(dir=export_dir, prefix=prefix)
        descriptor = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(descriptor)  # Another export's cleanup took it between mkdtemp and flock.
            continue
        except OSError:
            return path, descriptor  # No flock on this file system: unlocked, never cleaned up.
        if os.fstat(descriptor).st_nlink > 0:
            return path, descriptor
        os.close(descriptor)  # Removed by another export's cleanup before the lock: make another.


def _write_failure_reason(error):
    """The reason of a failed write, without the op and temporary names TensorFlow's errors carry."""
    if isinstance(error, OSError) and error.errno:
        return os.strerror(error.errno)
    text = re.sub(r"\s*\[Op:\w+\]\s*$", "", getattr(error, "message", str(error)))
    return text.rsplit("; ", 1)[-1].strip()


def write_saved_model(module, path):
    """Traces the `ServingModule`'s signatures and saves it (graph, variables, assets) to `path`.
    Serving takes no gradients: the fast paths' custom gradients (over half of the graph's functions)
    are left out, so that the export loads in about half the time."""
    options = tf.saved_model.SaveOptions(experimental_custom_gradients=False)
    tf.saved_model.save(module, path, signatures=module.signatures(), options=options)


def _export_settings(module, version, chosen, quantize):
    """The "export" section of export_config.json: the search built in, the attention `align`
    reads, and how it was made."""
    alignment_layer, alignment_head = module.alignment_attention()
    return {
        "version": version,
        **module.search_config.search_settings(),
        "length_buckets": list(module.length_buckets),
        "alignment_layer": alignment_layer,
        "alignment_head": alignment_head,
        "split_sentences": module.split_sentences,
        "signatures": list(module.signature_names),
        "checkpoint": str(chosen.choice),
        "checkpoint_steps": list(chosen.steps),
        "quantize": quantize,
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
    }


def export_model(
    model_dir,
    export_dir,
    *,
    version=None,
    search=DEFAULT_SEARCH,
    length_buckets=DEFAULT_LENGTH_BUCKETS,
    checkpoint=DEFAULT_CHECKPOINT,
    quantize=None,
    split_sentences=True,
    signatures=None,
):
    """Exports `model_dir` to `export_dir/<version>/` and returns that path.

    Args:
        model_dir: a directory written by train.py (model.keras, spm.model, config.json).
        export_dir: the model base path TensorFlow Serving watches; created if missing.
        version: positive int; default `next_version(export_dir)`.
        search: the `SearchConfig` baked into the graph; its `max_input_length` is the source
            tokens kept per sentence, EOS included (longer inputs are cut), None meaning
            `EXPORT_MAX_INPUT_LENGTH`. Not one that samples (`ServingModule` refuses it).
        length_buckets: source lengths with one traced search each (`export.serving_module`).
        checkpoint: the weights exported: "best", "last", "average:N" or "ema"
            (`inference.runs.parse_checkpoint`).
        quantize: None (float weights), or "int8": the matmul weights as int8
            (`models.int8_weights`), the same signatures and search.
        split_sentences: `serving_default`, `align` and `markup` translate an input sentence by
            sentence (`export.serving_module.ServingModule`); False: each input whole.
        signatures: the names of the signatures to export, `serving_default` among them; None:
            all (`SIGNATURES`). An export of fewer writes and loads faster; a request for another
            is refused.

    Raises:
        ExportError: before any model is loaded, signatures unknown or without `serving_default`,
            a model_dir without the files the export needs, an
            export_dir that is a file or a SavedModel version directory, or an existing
            `export_dir/<version>` (versions are never overwritten); ShortlistError for a search
            with a shortlist whose run has no lexical table, or another vocabulary's; after, a write that failed
            (disk full, a file-size limit, a directory removed meanwhile), with nothing installed.
    """
    if version is None:
        version = next_version(export_dir)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"version must be a positive int, received {version!r}")
    if quantize not in QUANTIZE_MODES:
        raise ValueError(f"quantize must be one of {QUANTIZE_MODES}, received {quantize!r}")
    try:
        signatures = check_signatures(SIGNATURES if signatures is None else signatures)
    except ValueError as error:
        raise ExportError(f"--{error}") from None
    check_export_dir(export_dir, version)
    chosen = check_model_dir(model_dir, checkpoint)
    # With --shortlist, the run's lexical table (checked against its vocabulary) becomes variables of the graph.
    lexical_table = RunDir(model_dir).load_shortlist() if search.shortlist else None
    try:
        os.makedirs(export_dir, exist_ok=True)
    except OSError as error:
        raise ExportError(f"--export_dir {export_dir} cannot be created: {error}") from error
    for name in remove_stale_temporaries(export_dir):
        print(f"removed {os.path.join(export_dir, name)}, left by an export that did not finish", file=sys.stderr)
    final_path = os.path.join(export_dir, str(version))
    model, tokenizer, run_config = load_trained(model_dir, checkpoint)
    if quantize is not None:
        try:
            model.quantize(quantize)
        except ValueError as error:  # Keras refuses int8 for a model computing in float16.
            raise ExportError(f"--quantize={quantize}: {error}") from error
    module = _serving_module(
        RunDir(model_dir),
        model,
        tokenizer,
        run_config,
        search,
        length_buckets,
        split_sentences=split_sentences,
        lexical_table=lexical_table,
        signatures=signatures,
    )
    temporary, lock = locked_temporary_directory(export_dir, f"{TEMPORARY_PREFIX}{version}-")
    try:
        write_saved_model(module, temporary)
        settings = _export_settings(module, version, chosen, quantize)
        _write_extra_assets(
            module, os.path.join(temporary, "assets.extra"), export_dir, {"export": settings, **run_config}
        )
        os.chmod(temporary, checkpoints.default_mode(directory=True))  # Not mkdtemp's 0o700.
        os.rename(temporary, final_path)  # Atomic on one file system; fails if final_path appeared.
    except (OSError, tf.errors.OpError) as error:
        shutil.rmtree(temporary, ignore_errors=True)
        raise ExportWriteError(
            f"cannot write {final_path}: {_write_failure_reason(error)}; nothing was installed "
            f"(the temporary directory is removed) and {export_dir} keeps the versions it had"
        ) from None
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    finally:
        os.close(lock)
    return final_path


def _serving_module(run, model, tokenizer, run_config, search, length_buckets, **options):
    """The `ServingModule` of a loaded run: its vocabularies, languages and the search to trace;
    `options`: its split_sentences, lexical_table and signatures."""
    return ServingModule(
        model,
        tokenizer,
        run.vocabulary_path,
        search,
        length_buckets=length_buckets,
        languages=multilingual.model_languages(run_config.get("data", {})),
        source_tokenizer=run.separate_source_tokenizer(),
        source_vocabulary_path=run.source_vocabulary_path if run.has_separate_vocabularies() else None,
        **options,
    )


def _write_extra_assets(module, extra, export_dir, export_config):
    """Writes TensorFlow Serving's warm-up requests and `export_config` (JSON) into `extra`."""
    os.makedirs(extra, exist_ok=True)
    tags = module.language_tags or [[]]  # A multilingual export's requests go into its first language.
    batches = warmup.warmup_batches(module.source_tokenizer, module.length_buckets, len(tags[0]))
    model_name = os.path.basename(os.path.normpath(export_dir))
    languages = module.languages or (None,)
    warmup.write_warmup_requests(os.path.join(extra, warmup.WARMUP_FILE), batches, model_name, languages[0])
    with open(os.path.join(extra, EXPORT_CONFIG_FILE), "w", encoding="utf-8") as handle:
        json.dump(export_config, handle, indent=2, sort_keys=True)
        handle.write("\n")
