"""`evaluate(config)`: a test set -> translations -> detokenized sacreBLEU and chrF, from a run's
model_dir (the weights `checkpoint` names) or an export; the test set a corpus split (by default
the run's test split) or line-aligned source/reference files.
"""

import dataclasses
import os
import sys

from common.bleu_tokenizers import bleu_tokenizer
from common.errors import UserError
from data import multilingual
from evaluation import reference_sets, scoring
from evaluation.attention_plot import plot_attention
from inference.loading import load_translator
from inference.runs import ModelDirError, RunDir, run_paths
from inference.saved_model_translator import ExportDirError, read_export_config, resolve_saved_model
from models.search_config import DEFAULT_SEARCH, SearchConfig


class EvaluationError(UserError, RuntimeError):
    """Evaluation cannot run as asked (the message names the flag, file or directory)."""


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """What to evaluate and how; one of `model_dir` / `export_dir`, and `src` or a corpus split.

    `corpus`, `cache_dir`, `deb_dir`, `direction` None: the run's config.json data section. `search`
    (its `max_input_length` None: the run's `max_length`) and `checkpoint`
    (`inference.runs.parse_checkpoint`; None: `DEFAULT_CHECKPOINT`) apply to `model_dir` only.
    `bleu_tokenize` None: the target language's (`common.bleu_tokenizers.bleu_tokenizer`).
    `plot_only`: draw the `plot_attention` heatmaps only. `target_language`: a multilingual model's,
    whose test set is the pair into it.
    """

    model_dir: str | None = None
    export_dir: str | None = None
    corpus: str | None = None
    split: str = "test"
    cache_dir: str | None = None
    deb_dir: str | None = None
    direction: str | None = None
    src: str | None = None
    ref: str | None = None
    search: SearchConfig = DEFAULT_SEARCH
    batch_size: int = 32
    checkpoint: str | None = None
    output: str | None = None
    plot_attention: tuple = ()
    plot_dir: str = "attention"
    progress: bool = True
    bleu_tokenize: str | None = None
    plot_only: bool = False
    target_language: str | None = None


def _run_config(config):
    """The training run's config.json (from model_dir, or the export's copy), or None."""
    if config.model_dir:
        return RunDir(run_paths(config.model_dir)[0]).read_config()  # An ensemble's first run.
    # The run's config.json sections plus an "export" section.
    return read_export_config(resolve_saved_model(config.export_dir))


def load_test_set(config, run_config):
    """`(sources, references or None, description, target language or None)` as the config asks;
    the language from --target_language, --direction or the run's, None when none names it.

    Raises:
        reference_sets.TestSetError: an unreadable or empty test set (names the file).
        EvaluationError: an unknown corpus or direction.
    """
    if config.src:
        sources, references = reference_sets.read_parallel_files(config.src, config.ref)
        data = (run_config or {}).get("data", {})
        direction = config.direction or data.get("direction") or data.get("languages")
        target = config.target_language or (direction.split("-")[-1] if direction else None)
        return sources, references, config.src, target
    from data import corpora  # Imported here: it pulls in the data pipeline.
    from data.sources.corpus_cache import CorpusError
    from training.config import DataConfig

    data = dict((run_config or {}).get("data", {}))
    _check_multilingual_overrides(data, config)
    if not data and not config.corpus:
        where = config.model_dir or config.export_dir
        raise EvaluationError(
            f"{where} has no training config to take the corpus from: pass --corpus (and --split), or --src/--ref files"
        )
    known = {field.name for field in dataclasses.fields(DataConfig)}
    data = {key: value for key, value in data.items() if key in known}
    for key in ("corpus", "cache_dir", "deb_dir", "direction"):
        if getattr(config, key) is not None:
            data[key] = getattr(config, key)
    for key in ("train_files", "dev_files", "test_files"):
        if key in data:
            data[key] = tuple(data[key])
    data_config = DataConfig(**data)
    if multilingual.is_multilingual(data_config.corpus, data_config.languages):
        multilingual.target_tag(data, config.target_language, config.model_dir or config.export_dir)
    try:
        if multilingual.is_multilingual(data_config.corpus, data_config.languages):
            data_config = _pair_of(data_config, config.target_language)
        corpus, reverse = corpora.resolve_corpus(data_config)
    except corpora.CorpusChoiceError as error:  # Names its flag (--direction).
        raise EvaluationError(str(error)) from error
    except CorpusError as error:
        raise EvaluationError(f"--corpus={data.get('corpus')}: {error}") from error
    except ValueError as error:
        raise EvaluationError(str(error)) from error
    path = reference_sets.split_path(corpus, config.split)
    sources, references = reference_sets.read_tsv_pairs(path, reverse=reverse)
    languages = corpus.languages[::-1] if reverse else corpus.languages
    return sources, references, f"{path} ({languages[0]}->{languages[1]})", languages[1]


def _check_multilingual_overrides(data, config):
    """Refuses (EvaluationError) a --corpus into another language or a --direction for a
    multilingual run, whose test set is the pair into --target_language."""
    if multilingual.model_languages(data) is None:
        return
    if config.direction:
        raise EvaluationError(
            f"--direction={config.direction}: a multilingual run translates each pair as it was trained; "
            "choose the pair with --target_language"
        )
    own = (
        config.corpus
        and not multilingual.is_multilingual(config.corpus)
        and multilingual.bilingual_target({"corpus": config.corpus})
    )
    if own and own != config.target_language:
        raise EvaluationError(
            f"--corpus={config.corpus} translates into {own}, --target_language={config.target_language}: the "
            "translations would be scored against references in another language"
        )


def _pair_of(data_config, target_language):
    """The data configuration of a multilingual run's pair into `target_language`."""
    from data import corpora  # Imported here: it pulls in the data pipeline.

    configs = corpora.pair_configs(data_config)
    return next(pair for name, pair in configs.items() if multilingual.target_language(name) == target_language)


def check_output(path):
    """Raises EvaluationError before any translation if `path` is a directory or cannot be written."""
    if os.path.isdir(path):
        raise EvaluationError(f"--output={path} is a directory; expected a file path to write the translations to")
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as error:
        raise EvaluationError(f"--output={path}: cannot create its directory {directory}: {error.strerror}") from error
    if not os.access(directory, os.W_OK | os.X_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
        raise EvaluationError(f"--output={path} is not writable")


def _lines(numbers):
    """ "lines 1, 5, 9" with at most 20 line numbers shown."""
    return "lines " + ", ".join(str(n) for n in numbers[:20]) + (", ..." if len(numbers) > 20 else "")


def evaluate(config, out=None):
    """Translates the test set, writes `config.output`, prints (to `out`, default the current
    `sys.stdout`) and returns the scores: a dict of `sentences`, `truncated_lines` and
    `empty_lines` (1-based), `output`, and with references
    `bleu`, `chrf`, their signatures and texts (`evaluation.scoring.score`), `attention_plots`.

    Raises:
        EvaluationError, ModelDirError, ExportDirError, reference_sets.TestSetError: bad input,
            named, before any translation where it can be known then.
    """
    out = sys.stdout if out is None else out
    if bool(config.model_dir) == bool(config.export_dir):
        raise EvaluationError("pass exactly one of --model_dir and --export_dir")
    if config.ref and not config.src:
        raise EvaluationError("--ref needs --src")
    if config.export_dir and (config.checkpoint or config.plot_attention):
        raise EvaluationError(
            "--checkpoint and --plot_attention need --model_dir (a SavedModel has no checkpoints or attention)"
        )
    for number, sentence in enumerate(config.plot_attention, start=1):
        if not sentence.strip():
            raise EvaluationError(f"--plot_attention sentence {number} ({sentence!r}) is empty: nothing to attend to")
    for path in run_paths(config.model_dir) if config.model_dir else ():
        if not os.path.isdir(path):
            raise ModelDirError(f"--model_dir {path!r} is not a directory")
    if config.plot_only:
        if not config.plot_attention:
            raise EvaluationError("plot_only needs --plot_attention sentences")
        translator = load_translator(
            config.model_dir,
            kind="run",
            search=config.search,
            checkpoint=config.checkpoint,
            target_language=config.target_language,
        )
        return {"attention_plots": _plot(config, translator, out, config.search)}
    if config.output:
        check_output(config.output)
    run_config = _run_config(config)
    sources, references, description, target_language = load_test_set(config, run_config)
    print(f"evaluating on {len(sources)} sentences of {description}", file=sys.stderr)

    result = {"sentences": len(sources), "output": config.output}
    translator = load_translator(
        config.model_dir or config.export_dir,
        kind="run" if config.model_dir else "export",
        batch_size=config.batch_size,
        search=config.search,
        checkpoint=config.checkpoint,
        target_language=config.target_language,
    )
    if config.model_dir and config.plot_attention:
        _check_plot_sentences(config, translator.source_tokenizer)
    # Each source whole, as the test set aligned it with its reference: a measurement that does not move.
    hypotheses, _ = translator.translate(sources, progress=config.progress, split_sentences=False)
    result["truncated_lines"] = [index + 1 for index in translator.truncated_indices]
    _report_truncated(config, translator, len(sources), out)
    if config.output:
        _write_translations(config.output, hypotheses)

    result["empty_lines"] = [index + 1 for index in translator.empty_indices]
    if result["empty_lines"]:
        lines = result["empty_lines"]
        print(
            f"{len(lines)} empty source line(s) translated to empty lines (no tokens: blank, or only characters "
            f"the vocabulary drops such as U+200B): {_lines(lines)}",
            file=out,
        )
    if references is not None:
        tokenize = config.bleu_tokenize or bleu_tokenizer(target_language)
        scores = scoring.score(hypotheses, references, tokenize=tokenize)
        result.update(scores)
        print(f"sacreBLEU: {scores['bleu_text']}", file=out)
        print(f"signature: {scores['bleu_signature']}", file=out)
        print(f"chrF: {scores['chrf_text']}", file=out)
        print(f"signature: {scores['chrf_signature']}", file=out)

    if config.plot_attention:
        result["attention_plots"] = _plot(config, translator, out, translator.search)
    out.flush()
    return result


def _report_truncated(config, translator, count, out):
    """Prints which of the `count` source lines the translator cut to its maximum input length."""
    lines = [index + 1 for index in translator.truncated_indices]
    if not lines:
        return
    if config.model_dir:
        limit = "--max_input_length" if config.search.max_input_length else "the run's max_length"
    else:
        limit = "the export's max_input_length"
    max_input_length = translator.max_input_length
    max_extra_length = translator.search.max_extra_length if translator.search else None
    outputs = f" and translated up to {max_input_length + max_extra_length} output tokens" if max_extra_length else ""
    print(
        f"{len(lines)} of {count} source lines are longer than the maximum input length of "
        f"{max_input_length} tokens ({limit}, EOS included); each was cut to it{outputs}: {_lines(lines)}",
        file=out,
    )


def _write_translations(path, hypotheses):
    """Writes one translation per line to `path` (--output)."""
    try:
        with open(path, "w", encoding="utf-8") as handle:
            for hypothesis in hypotheses:
                handle.write(hypothesis.replace("\n", " ") + "\n")
    except OSError as error:
        raise EvaluationError(f"--output={path}: cannot write the translations: {error.strerror}") from error
    print(f"wrote {len(hypotheses)} translations to {path}", file=sys.stderr)


def _check_plot_sentences(config, tokenizer):
    for number, sentence in enumerate(config.plot_attention, start=1):
        if not tokenizer.tokenize([sentence]).to_list()[0]:
            raise EvaluationError(
                f"--plot_attention sentence {number} ({sentence!r}) has no tokens: nothing to attend to"
            )


def _plot(config, translator, out, search):
    """Draws the `plot_attention` heatmaps, translating with `search` as the test set is; returns
    their paths."""
    _check_plot_sentences(config, translator.source_tokenizer)
    sentences = list(config.plot_attention)
    if translator.tag_ids:
        sentences = [f"{multilingual.tag(config.target_language)} {sentence}" for sentence in sentences]
    paths = plot_attention(
        translator.model,
        translator.tokenizer,
        sentences,
        config.plot_dir,
        search,
        source_tokenizer=translator.source_tokenizer,
    )
    print(f"wrote {len(paths)} attention heatmap(s) to {config.plot_dir}", file=out)
    out.flush()
    return paths


__all__ = ["EvalConfig", "EvaluationError", "ExportDirError", "ModelDirError", "evaluate", "load_test_set"]
