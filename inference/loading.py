"""The Python API for translating: one call that opens a training run or an export.

    from inference.loading import load_translator
    from models.search_config import Sampling, SearchConfig

    translator = load_translator("runs/demo")                    # or "runs/demo/export"
    texts, scores = translator.translate(["Open the file."])
    lists, list_scores = translator.translate(["Open the file."], n_best=4)  # at most the beam's size
    started, _ = translator.translate(["Open the file."], prefixes=["Öffnen Sie"])
    texts, scores, alignments = translator.translate(["Open the file."], alignments=True)
    ensemble = load_translator(["runs/a", "runs/b"])             # or "runs/a,runs/b": an ensemble
    greedy = load_translator("runs/demo", search=SearchConfig(beam_size=1))
    wider, _ = translator.translate(["Open the file."], search=translator.search.override(beam_size=8))
    sampled = load_translator("runs/demo", search=SearchConfig(sampling=Sampling(top_p=0.9, seed=1)))
    french = load_translator("runs/multi", target_language="fr")  # a multilingual model (or its export)
    pair_scores = translator.score(["Open the file."], ["Öffnen Sie die Datei."])

Both kinds of translator (`inference.translator.Translator` for a run directory,
`inference.saved_model_translator.SavedModelTranslator` for an export) are an
`inference.protocol.TextTranslator`: the same `translate` and `score`; an export has its search
built in and cannot sample. Everything that shapes a search is one `SearchConfig`, the
translator's default or given to one `translate` call.

Several runs (a list, or their directories joined by commas) translate as an ensemble
(`models.ensemble.Ensemble`: at each step the mean of their log-probabilities, in one search); they
must share the vocabulary. The first run's recorded search and `max_length` are the ensemble's
defaults.
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
    """`(Ensemble, tokenizer, first run's config)` of the runs at `paths`, each with `checkpoint`'s weights.

    Raises:
        ModelDirError: a run that cannot be loaded, or runs with different vocabularies (named).
    """
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
    """The tag the runs at `paths` put before each sentence to translate into `target_language`
    (`multilingual.target_tag`): one for all the runs of an ensemble.

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
    """A translator for a run directory written by train.py or a SavedModel written by `python -m export`.

    Args:
        path: the run directory, or the export (a version directory or its base directory); or
            several run directories (a list, or joined by commas): an ensemble of those runs.
        kind: "run" or "export" to say which `path` is (errors then name what it lacks); None
            decides by its contents (a run has config.json or model.keras).
        batch_size: sentences per search call.
        search: a run's default `SearchConfig` (an export has its own, and cannot sample), e.g.
            built from the tools' flags (`cli.search_flags.search_from_flags`). None: the
            run's recorded search (config.json "search", a recipe's search chosen on the dev
            split), else the paper's (`DEFAULT_SEARCH`). Its `max_input_length` None is the run's
            `max_length`; its `sampling` draws translations instead of searching.
        checkpoint: a run's weights: "best", "last", "average:N" or "ema" (`inference.runs.parse_checkpoint`);
            None: `inference.runs.DEFAULT_CHECKPOINT`. An export has its weights built in.
        quiet: load a run without printing what was loaded.
        target_language: the language a multilingual model translates into (one it was trained
            for, `data.multilingual`); needed for one, refused for a bilingual model unless its own.

    Raises:
        ModelDirError, inference.saved_model_translator.ExportDirError: a path that holds neither
            a loadable run nor a loadable export (the message names it).
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
        return Translator(
            model,
            tokenizer,
            search,
            batch_size=batch_size,
            target_tag=tag,
            source_tokenizer=run.separate_source_tokenizer(),
        )
    # TensorFlow, for an export only: a run loads under JAX on a machine without TensorFlow.
    from inference.saved_model_translator import SavedModelTranslator

    if checkpoint is not None or (search is not None and search.sampling is not None):
        raise ModelDirError(
            f"{path} is an export: choosing a checkpoint and sampling need a run directory (a SavedModel has its "
            "weights and search built in)"
        )
    return SavedModelTranslator(path, batch_size, target_language=target_language)
