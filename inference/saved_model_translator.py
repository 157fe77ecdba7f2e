"""Translating with a SavedModel written by `export/`: its `serving_default` signature maps
`inputs` string `[batch]` to `translations` string `[batch]` and `scores` float32 `[batch]`, with
tokenization, search and detokenization inside the graph."""

import os
import sys

import tensorflow as tf

from common.errors import UserError
from common.json_files import read_json
from data.tokenizer import Tokenizer
from inference.batching import translate_in_order
from inference.protocol import AlignmentError, PairScore, PrefixError, TextTranslator
from models.search_config import SearchConfig, SearchConfigError

SIGNATURE = "serving_default"
# What `export.exporter` writes beside the graph.
EXPORT_CONFIG = os.path.join("assets.extra", "export_config.json")
VOCABULARY = os.path.join("assets", "spm.model")
# The export settings that fix the search and the input policy inside the graph.
SEARCH_SETTINGS = ("beam_size", "alpha", "max_extra_length", "min_length_ratio", "max_input_length")


class ExportDirError(UserError, RuntimeError):
    """An export_dir without a loadable SavedModel (the message names the path)."""


def resolve_saved_model(export_dir):
    """The SavedModel directory: `export_dir` itself if it holds `saved_model.pb`, else its
    highest integer version subdirectory (the layout TensorFlow Serving watches)."""
    if not os.path.isdir(export_dir):
        raise ExportDirError(f"--export_dir {export_dir!r} is not a directory")
    if os.path.exists(os.path.join(export_dir, "saved_model.pb")):
        return export_dir
    versions = sorted(int(name) for name in os.listdir(export_dir) if name.isdigit())
    for version in reversed(versions):
        candidate = os.path.join(export_dir, str(version))
        if os.path.exists(os.path.join(candidate, "saved_model.pb")):
            return candidate
    raise ExportDirError(
        f"{export_dir} holds no SavedModel: no saved_model.pb in it nor in an integer version "
        "subdirectory (write one with `python -m export`)"
    )


def read_export_config(saved_model_path):
    """`assets.extra/export_config.json` of a SavedModel directory (the training run's config.json
    sections plus an "export" section of the export settings), or None if it has none."""
    return read_json(os.path.join(saved_model_path, EXPORT_CONFIG), ExportDirError)


def describe_search_settings(export_dir):
    """The search settings built into the export, e.g. "beam_size=4, alpha=0.6, ... (from
    <path>/assets.extra/export_config.json)", for messages; says so when the export lacks them."""
    path = resolve_saved_model(export_dir)
    settings = (read_export_config(path) or {}).get("export", {})
    known = [f"{name}={settings[name]}" for name in SEARCH_SETTINGS if name in settings]
    if not known:
        return f"{path} records no export settings (no {EXPORT_CONFIG})"
    return f"{', '.join(known)} (from {os.path.join(path, EXPORT_CONFIG)})"


class SavedModelTranslator(TextTranslator):
    """Calls an exported model's `serving_default` signature in batches of `batch_size`.

    Sentences are sorted by length before batching (the graph pads a batch to its longest
    sentence) and returned in input order. Empty lines are sent as they are (the export translates
    a sentence with no tokens to "").

    When the export holds its vocabulary (`assets/spm.model`) and its settings
    (`assets.extra/export_config.json`), as `export/` writes them, `translate` also records which
    inputs had no tokens (`empty_indices`) and which were longer than the export's
    `max_input_length` and so were cut by the graph (`truncated_indices`), as `Translator` does,
    and `search` is the `SearchConfig` built into the graph (None when the export records none).
    """

    def __init__(self, export_dir, batch_size=32):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, received {batch_size}")
        self.path = resolve_saved_model(export_dir)
        try:
            loaded = tf.saved_model.load(self.path)
        except (ValueError, OSError, tf.errors.OpError) as error:
            raise ExportDirError(
                f"{self.path} could not be loaded as a SavedModel (is its saved_model.pb empty or corrupt?): "
                f"{type(error).__name__}: {error}; export it again with `python -m export`"
            ) from error
        if SIGNATURE not in loaded.signatures:
            raise ExportDirError(f"{self.path} has no {SIGNATURE!r} signature (found {sorted(loaded.signatures)})")
        self._loaded = loaded  # Keeps the variables alive.
        self._signature = loaded.signatures[SIGNATURE]
        self.batch_size = batch_size
        self.settings = (read_export_config(self.path) or {}).get("export", {})
        self.max_input_length = self.settings.get("max_input_length")
        self.search = _recorded_search(self.settings, self.path)
        vocabulary = os.path.join(self.path, VOCABULARY)
        self.tokenizer = Tokenizer.from_file(vocabulary) if os.path.exists(vocabulary) else None
        self.truncated_indices = []
        self.empty_indices = []

    def _signature_named(self, name):
        if name not in self._loaded.signatures:
            raise ExportDirError(
                f"{self.path} has no {name!r} signature (found {sorted(self._loaded.signatures)}): it was "
                "written before n-best lists and scoring were exported; export it again with `python -m export`"
            )
        return self._loaded.signatures[name]

    def _check_settings(self, **given):
        """Raises ValueError for a search setting other than the one built into the export."""
        for name, value in given.items():
            if value is not None and name in self.settings and value != self.settings[name]:
                raise ValueError(
                    f"{name}={value} differs from the export's built-in {name}={self.settings[name]} "
                    f"({describe_search_settings(self.path)}); export again to change it"
                )

    def translate(
        self,
        sentences,
        progress=False,
        *,
        n_best=None,
        beam_size=None,
        alpha=None,
        max_extra_length=None,
        min_length_ratio=None,
        sampling=None,
        keys=None,
        prefixes=None,
        alignments=False,
    ):
        """Returns `(translations, scores)` in the order of `sentences`, as `Translator.translate`
        does (with `n_best`: lists of the K best, from the `n_best` signature).

        The search settings are the export's: `beam_size`, `alpha`, `max_extra_length` and
        `min_length_ratio` may be
        given only with the values it was exported with, and sampling and target prefixes are
        refused (they need the run directory; `PrefixError` for a prefix), and so are word
        alignments (`AlignmentError`: the graph returns no attention). Resets
        `truncated_indices` and `empty_indices` (left empty without the export's vocabulary).
        """
        del keys  # Searches do not draw; keys only matter to sampling.
        if sampling is not None:
            raise ValueError("sampling needs a run directory (--model_dir): an export has its search built in")
        if prefixes is not None and any(prefixes):
            raise PrefixError("target prefixes need a run directory (--model_dir): an export's graph forces none")
        if alignments:
            raise AlignmentError(
                "word alignments need a run directory (--model_dir): an export's graph returns no attention"
            )
        self._check_settings(
            beam_size=beam_size, alpha=alpha, max_extra_length=max_extra_length, min_length_ratio=min_length_ratio
        )
        beam = self.settings.get("beam_size")
        if n_best is not None and (n_best < 1 or (beam is not None and n_best > beam)):
            raise ValueError(f"n_best must be in [1, beam_size={beam}] (the export's beam), received {n_best}")
        sentences = list(sentences)
        self.truncated_indices, self.empty_indices = [], []
        if self.tokenizer is not None and sentences:
            lengths = [len(row) for row in self.tokenizer.tokenize(sentences).to_list()]
            self.empty_indices = [index for index, length in enumerate(lengths) if length == 0]
            if self.max_input_length:
                # The graph keeps max_input_length - 1 tokens and appends EOS.
                self.truncated_indices = [
                    index for index, length in enumerate(lengths) if length + 1 > self.max_input_length
                ]
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
        signature = self._signature if n_best is None else self._signature_named("n_best")

        def translate_batch(indices):
            outputs = signature(inputs=tf.constant([sentences[i] for i in indices], tf.string))
            texts, scores = outputs["translations"].numpy(), outputs["scores"].numpy()
            return (texts, scores) if n_best is None else (texts[:, :n_best], scores[:, :n_best])

        return translate_in_order(len(sentences), order, self.batch_size, translate_batch, progress, n_best)

    def score(self, sources, targets, progress=False):
        """Forced decoding through the export's `score` signature: a `PairScore` per pair."""
        sources, targets = list(sources), list(targets)
        if len(sources) != len(targets):
            raise ValueError(f"score needs one target per source: {len(sources)} sources, {len(targets)} targets")
        signature = self._signature_named("score")
        self.truncated_indices = []
        if self.tokenizer is not None and self.max_input_length and sources:
            lengths = [len(row) for row in self.tokenizer.tokenize(sources).to_list()]
            self.truncated_indices = [i for i, length in enumerate(lengths) if length + 1 > self.max_input_length]
        results = []
        for start in range(0, len(sources), self.batch_size):
            outputs = signature(
                inputs=tf.constant(sources[start : start + self.batch_size], tf.string),
                targets=tf.constant(targets[start : start + self.batch_size], tf.string),
            )
            results += [
                PairScore(float(log_prob), int(length))
                for log_prob, length in zip(outputs["log_probs"].numpy(), outputs["lengths"].numpy())
            ]
            if progress:
                print(f"\rscored {len(results)}/{len(sources)} pairs", end="", file=sys.stderr, flush=True)
        if progress and sources:
            print(file=sys.stderr)
        return results


def _recorded_search(settings, path):
    """The `SearchConfig` of an export's settings, or None when it records no search."""
    recorded = {name: settings[name] for name in SEARCH_SETTINGS if name in settings}
    if not recorded:
        return None
    try:
        return SearchConfig(**recorded)
    except SearchConfigError as error:
        raise ExportDirError(f"{os.path.join(path, EXPORT_CONFIG)}: {error}") from error
