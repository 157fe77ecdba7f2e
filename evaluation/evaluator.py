"""`evaluate(config)`: a test set -> translations (beam search) -> detokenized sacreBLEU and chrF.

The model comes from a training run's model_dir (`model.keras`, or the average of its newest
checkpoints) or from a SavedModel written by `export/`. The test set is a split of a prepared
corpus (by default the test split of the corpus the run was trained on, in its direction) or a
pair of line-aligned source/reference files.
"""

import dataclasses
import json
import os
import sys

from evaluation import scoring, test_sets
from evaluation.model_loading import ModelDirError, read_run_config
from evaluation.saved_model_translator import ExportDirError, resolve_saved_model

EXPORT_CONFIG = os.path.join("assets.extra", "export_config.json")


class EvaluationError(RuntimeError):
    """Evaluation cannot run as asked (the message names the flag, file or directory)."""


@dataclasses.dataclass(frozen=True)
class EvalConfig:
    """What to evaluate and how; one of `model_dir` / `export_dir`, and `src` or a corpus split.

    `corpus`, `cache_dir`, `deb_dir` and `direction` default (None) to the run's own config.json
    data section (or the export's copy of it). `max_input_length` None: the run's `max_length`.
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
    beam_size: int = 4
    alpha: float = 0.6
    max_extra_length: int = 50
    batch_size: int = 32
    average_last: int = 0
    max_input_length: int | None = None
    output: str | None = None
    plot_attention: tuple = ()
    plot_dir: str = "attention"
    progress: bool = True


def _run_config(config):
    """The training run's config.json (from model_dir, or the export's copy), or None."""
    if config.model_dir:
        return read_run_config(config.model_dir)
    path = os.path.join(resolve_saved_model(config.export_dir), EXPORT_CONFIG)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        exported = json.load(handle)
    return exported  # The run's config.json sections plus an "export" section.


def load_test_set(config, run_config):
    """`(sources, references or None, description)` as the config asks."""
    if config.src:
        sources, references = test_sets.read_parallel_files(config.src, config.ref)
        return sources, references, config.src
    from training.config import DataConfig
    from training.trainer import resolve_corpus  # Imported here: it pulls in the data pipeline.

    data = dict((run_config or {}).get("data", {}))
    if not data and not config.corpus:
        where = config.model_dir or config.export_dir
        raise EvaluationError(
            f"{where} has no training config to take the corpus from: pass --corpus (and --split), "
            "or --src/--ref files"
        )
    known = {field.name for field in dataclasses.fields(DataConfig)}
    data = {key: value for key, value in data.items() if key in known}
    for key in ("corpus", "cache_dir", "deb_dir", "direction"):
        if getattr(config, key) is not None:
            data[key] = getattr(config, key)
    for key in ("train_files", "dev_files", "test_files"):
        if key in data:
            data[key] = tuple(data[key])
    corpus, reverse = resolve_corpus(DataConfig(**data))
    path = test_sets.split_path(corpus, config.split)
    sources, references = test_sets.read_tsv_pairs(path, reverse=reverse)
    languages = corpus.languages[::-1] if reverse else corpus.languages
    return sources, references, f"{path} ({languages[0]}->{languages[1]})"


def evaluate(config, out=sys.stdout):
    """Translates the test set, writes `config.output`, prints and returns the scores.

    Returns:
        A dict: `sentences`, `truncated_lines` (1-based line numbers of inputs longer than the
        maximum input length, cut to it), `output`, and with references `bleu`, `chrf`, their
        signatures and texts (see `evaluation.scoring.score`), and `attention_plots`.

    Raises:
        EvaluationError, ModelDirError, ExportDirError, test_sets.TestSetError: bad input, named.
    """
    if bool(config.model_dir) == bool(config.export_dir):
        raise EvaluationError("pass exactly one of --model_dir and --export_dir")
    if config.ref and not config.src:
        raise EvaluationError("--ref needs --src")
    if config.export_dir and (config.average_last or config.plot_attention):
        raise EvaluationError("--average_last and --plot_attention need --model_dir (a SavedModel has no checkpoints or attention)")
    if config.model_dir and not os.path.isdir(config.model_dir):
        raise ModelDirError(f"--model_dir {config.model_dir!r} is not a directory")
    run_config = _run_config(config)
    sources, references, description = load_test_set(config, run_config)
    print(f"evaluating on {len(sources)} sentences of {description}", file=sys.stderr)

    result = {"sentences": len(sources), "truncated_lines": [], "output": config.output}
    if config.model_dir:
        from evaluation.model_loading import load_model
        from evaluation.translator import Translator

        model, tokenizer, run_config = load_model(config.model_dir, config.average_last)
        max_input_length = config.max_input_length or (run_config or {}).get("data", {}).get("max_length")
        translator = Translator(
            model,
            tokenizer,
            beam_size=config.beam_size,
            alpha=config.alpha,
            max_extra_length=config.max_extra_length,
            batch_size=config.batch_size,
            max_input_length=max_input_length,
        )
        hypotheses, _ = translator.translate(sources, progress=config.progress)
        result["truncated_lines"] = [index + 1 for index in translator.truncated_indices]
        if result["truncated_lines"]:
            lines = result["truncated_lines"]
            shown = ", ".join(str(n) for n in lines[:20]) + (", ..." if len(lines) > 20 else "")
            print(
                f"{len(lines)} of {len(sources)} source lines are longer than the maximum input length of "
                f"{max_input_length} tokens (the run's max_length, EOS included); each was cut to it and "
                f"translated up to {max_input_length + config.max_extra_length} output tokens: lines {shown}",
                file=out,
            )
    else:
        from evaluation.saved_model_translator import SavedModelTranslator

        translator = SavedModelTranslator(config.export_dir, config.batch_size)
        hypotheses, _ = translator.translate(sources, progress=config.progress)

    if config.output:
        directory = os.path.dirname(os.path.abspath(config.output))
        os.makedirs(directory, exist_ok=True)
        with open(config.output, "w", encoding="utf-8") as handle:
            for hypothesis in hypotheses:
                handle.write(hypothesis.replace("\n", " ") + "\n")
        print(f"wrote {len(hypotheses)} translations to {config.output}", file=sys.stderr)

    empty = sum(1 for source in sources if not source.strip())
    if empty:
        print(f"{empty} empty source line(s) translated to empty lines", file=out)
    if references is not None:
        scores = scoring.score(hypotheses, references)
        result.update(scores)
        print(f"sacreBLEU: {scores['bleu_text']}", file=out)
        print(f"signature: {scores['bleu_signature']}", file=out)
        print(f"chrF: {scores['chrf_text']}", file=out)
        print(f"signature: {scores['chrf_signature']}", file=out)

    if config.plot_attention:
        from evaluation.attention_plot import plot_attention

        paths = plot_attention(
            model,
            tokenizer,
            list(config.plot_attention),
            config.plot_dir,
            beam_size=config.beam_size,
            alpha=config.alpha,
            max_extra_length=config.max_extra_length,
        )
        result["attention_plots"] = paths
        print(f"wrote {len(paths)} attention heatmap(s) to {config.plot_dir}", file=out)
    out.flush()
    return result


__all__ = ["EvalConfig", "EvaluationError", "ExportDirError", "ModelDirError", "evaluate", "load_test_set"]
