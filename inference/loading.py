"""`load_translator`: the Python API for translating, one call that opens a training run, an
ensemble of runs or an export (usage in docs/translating.md, "From Python"). Both translators it
returns are an `inference.protocol.TextTranslator`.
"""

import os

import sentencepiece

from data import multilingual
from inference.runs import (
    CONFIG_FILE,
    DEFAULT_CHECKPOINT,
    MODEL_FILE,
    SOURCE_VOCABULARY_FILE,
    VOCABULARY_FILE,
    ModelDirError,
    RunDir,
    run_paths,
)
from inference.translator import Translator
from models.ensemble import Ensemble
from models.search_config import DEFAULT_SEARCH


def is_run_dir(path):
    """Whether `path` looks like a training run (config.json or model.keras), not an export."""
    return os.path.exists(os.path.join(path, CONFIG_FILE)) or os.path.exists(os.path.join(path, MODEL_FILE))


def vocabulary_difference(first, other):
    """What differs between two SentencePiece models (serialized protos), or None if they are the
    same vocabulary: the sizes, else the first id whose piece differs."""
    if first == other:
        return None
    processors = [sentencepiece.SentencePieceProcessor(model_proto=proto) for proto in (first, other)]
    sizes = [processor.get_piece_size() for processor in processors]
    if sizes[0] != sizes[1]:
        return f"{sizes[0]} pieces against {sizes[1]}"
    for index in range(sizes[0]):
        pieces = [processor.id_to_piece(index) for processor in processors]
        if pieces[0] != pieces[1]:
            return f"id {index} is {pieces[0]!r} against {pieces[1]!r}"
    return None  # The same pieces in the same order: a model written again, the same vocabulary.


def _load_ensemble(paths, checkpoint, quiet):
    """`(Ensemble, tokenizer, first run's config)` of the runs at `paths` with `checkpoint`'s
    weights; ModelDirError for a run that does not load or a vocabulary that differs (named)."""
    first = RunDir(paths[0])
    for path in paths[1:]:  # Before any model is loaded.
        run = RunDir(path)
        if run.has_separate_vocabularies() != first.has_separate_vocabularies():
            kinds = ["separate" if one.has_separate_vocabularies() else "shared" for one in (first, run)]
            raise ModelDirError(
                f"an ensemble needs one vocabulary: {paths[0]} has {kinds[0]} source and target vocabularies, "
                f"{path} {kinds[1]} ones"
            )
        sides = [(VOCABULARY_FILE, RunDir.load_tokenizer)]
        if run.has_separate_vocabularies():
            sides.append((SOURCE_VOCABULARY_FILE, RunDir.load_source_tokenizer))
        for name, load in sides:
            difference = vocabulary_difference(load(first).model_proto, load(run).model_proto)
            if difference:
                raise ModelDirError(
                    f"an ensemble needs one vocabulary: {paths[0]} and {path} have different SentencePiece models "
                    f"({name}: {difference})"
                )
    loaded = [RunDir(path).load_model(checkpoint, quiet=quiet) for path in paths]
    return Ensemble([model for model, _, _ in loaded]), loaded[0][1], loaded[0][2]


def _target_tag(paths, target_language):
    """The tag the runs at `paths` (one for an ensemble) put before each sentence for `target_language`.

    Raises:
        multilingual.TargetLanguageError: a language a run was not trained for, or none for a
            multilingual run.
        ModelDirError: runs of an ensemble that would take different tags.
    """
    tags = [
        multilingual.target_tag((RunDir(path).read_config() or {}).get("data", {}), target_language, path)
        for path in paths
    ]
    for path, tag in zip(paths[1:], tags[1:]):
        if tag != tags[0]:
            raise ModelDirError(
                f"an ensemble reads one input: {paths[0]} takes {tags[0] or 'no tag'} before each sentence, {path} "
                f"{tag or 'no tag'}"
            )
    return tags[0]


def load_translator(
    path,
    *,
    kind=None,
    batch_size=32,
    search=None,
    checkpoint=None,
    quiet=False,
    target_language=None,
):
    """A translator for a run directory (train.py) or a SavedModel (`python -m export`).

    Args:
        path: a run directory, an export (a version directory or its base), or several runs (a
            list, or joined by commas): an ensemble sharing one vocabulary.
        kind: "run" or "export" (errors then name what it lacks); None: decided by the contents.
        search: a run's default `SearchConfig` (an export has its own, and cannot sample). None:
            the run's recorded search, else `DEFAULT_SEARCH`; its `max_input_length` None is the
            run's `max_length`.
        checkpoint: a run's weights (`inference.runs.parse_checkpoint`); None: `DEFAULT_CHECKPOINT`.
        quiet: load a run without printing what was loaded.
        target_language: a multilingual model's target language; needed for one, refused for a
            bilingual model unless its own.

    Raises:
        ModelDirError, inference.saved_model_translator.ExportDirError: a path that holds neither
            a loadable run nor a loadable export (named).
        inference.lexical_table.ShortlistError: a search with a shortlist, for a run without its
            lexical table, or with one built for another vocabulary or corpus.
        data.multilingual.TargetLanguageError: a target language the model was not trained for,
            or none for a multilingual model.
    """
    if kind not in (None, "run", "export"):
        raise ValueError(f'kind must be None, "run" or "export", received {kind!r}')
    paths = run_paths(path) if kind != "export" else [path]
    for one in paths:
        if not os.path.isdir(one):
            what = {"run": "--model_dir", "export": "--export_dir"}.get(kind, "a run directory or an export")
            raise ModelDirError(f"{one!r} is not a directory ({what})")
    if len(paths) > 1:
        for one in paths:
            if not is_run_dir(one):
                raise ModelDirError(f"{one} is not a training run: an ensemble is of run directories")
        kind = "run"
    if kind == "run" or (kind is None and is_run_dir(path)):
        run = RunDir(paths[0])
        tag = _target_tag(paths, target_language)
        if search is None:
            search = DEFAULT_SEARCH.override(**run.recorded_search())
        if len(paths) > 1:
            model, tokenizer, run_config = _load_ensemble(paths, checkpoint or DEFAULT_CHECKPOINT, quiet)
        else:
            model, tokenizer, run_config = run.load_model(checkpoint or DEFAULT_CHECKPOINT, quiet=quiet)
        if search.max_input_length is None:
            search = search.override(max_input_length=(run_config or {}).get("data", {}).get("max_length"))
        translator = Translator(
            model,
            tokenizer,
            search,
            batch_size=batch_size,
            target_tag=tag,
            source_tokenizer=run.separate_source_tokenizer(),
            shortlist=run.load_shortlist,  # An ensemble's vocabulary is its first run's.
        )
        if search.shortlist:  # A missing or foreign table is refused before any translation.
            translator.shortlist_table(search.shortlist)
        return translator
    # TensorFlow, for an export only: a run loads under JAX on a machine without TensorFlow.
    from inference.saved_model_translator import SavedModelTranslator

    if checkpoint is not None or (search is not None and search.sampling is not None):
        raise ModelDirError(
            f"{path} is an export: choosing a checkpoint and sampling need a run directory (a SavedModel has its "
            "weights and search built in)"
        )
    return SavedModelTranslator(path, batch_size, target_language=target_language)
