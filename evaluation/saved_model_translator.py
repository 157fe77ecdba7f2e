"""Translating with a SavedModel written by `export/`: its `serving_default` signature maps
`inputs` string `[batch]` to `translations` string `[batch]` and `scores` float32 `[batch]`, with
tokenization, search and detokenization inside the graph."""

import os

import tensorflow as tf

from evaluation.batching import translate_in_order

SIGNATURE = "serving_default"


class ExportDirError(RuntimeError):
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


class SavedModelTranslator:
    """Calls an exported model's `serving_default` signature in batches of `batch_size`.

    Sentences are sorted by length before batching (the graph pads a batch to its longest
    sentence) and returned in input order. Empty lines are sent as they are (the export translates
    them to "").
    """

    def __init__(self, export_dir, batch_size=32):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, received {batch_size}")
        self.path = resolve_saved_model(export_dir)
        loaded = tf.saved_model.load(self.path)
        if SIGNATURE not in loaded.signatures:
            raise ExportDirError(
                f"{self.path} has no {SIGNATURE!r} signature (found {sorted(loaded.signatures)})"
            )
        self._loaded = loaded  # Keeps the variables alive.
        self._signature = loaded.signatures[SIGNATURE]
        self.batch_size = batch_size

    def translate(self, sentences, progress=False):
        """Returns `(translations, scores)` in the order of `sentences`."""
        sentences = list(sentences)
        order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))

        def translate_batch(indices):
            outputs = self._signature(inputs=tf.constant([sentences[i] for i in indices], tf.string))
            return outputs["translations"].numpy(), outputs["scores"].numpy()

        return translate_in_order(len(sentences), order, self.batch_size, translate_batch, progress)
