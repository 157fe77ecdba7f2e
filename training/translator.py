"""Translating lists of sentences with a trained model: tokenize, sort by length, batch at a few
fixed shapes, beam search (compiled once per shape), detokenize, restore the input order.
"""

import math

import keras
import numpy as np

from data.special_ids import EOS_ID, PAD_ID
from models.search_config import DEFAULT_SEARCH
from models.translation import translate_ids
from training.batching import translate_in_order

LENGTH_MULTIPLE = 8


def compile_search(function, variables=()):
    """`function(source_ids)` compiled for the current backend, reading `variables` at every call.

    TensorFlow: a `tf.function` without XLA (on CPUs a compilation per shape costs more than it
    saves); it reads the variables' current values when it runs. JAX: `jax.jit` of a stateless
    version of `function` that takes the variables' values as an argument (the way Keras's JAX
    trainer calls a model). Jitting `function` itself would capture the variables' values at trace
    time as constants, so a model trained or reloaded after the first call would keep translating
    with its old weights. Other backends: `function` as it is.

    Args:
        function: `source_ids -> outputs`, built with `keras.ops`.
        variables: the Keras variables `function` reads (e.g. `model.variables`).
    """
    backend = keras.backend.backend()
    if backend == "tensorflow":
        import tensorflow as tf

        return tf.function(function, jit_compile=False, reduce_retracing=False)
    if backend == "jax":
        import jax

        variables = list(variables)

        def stateless(values, source_ids):
            with keras.StatelessScope(state_mapping=list(zip(variables, values))):
                return function(source_ids)

        jitted = jax.jit(stateless)
        return lambda source_ids: jitted([variable.value for variable in variables], source_ids)
    return function


class Translator:
    """Translates sentences with `models.translation.translate_ids`.

    Args:
        model: a trained `Transformer`.
        tokenizer: a `data.tokenizer.Tokenizer`.
        beam_size, alpha, max_extra_length: the search's settings (default `models.search_config.DEFAULT_SEARCH`).
        batch_size: sentences per search call. Batches are padded to `batch_size` rows and to a
            multiple of 8 source tokens, so the search is compiled for a handful of shapes.
        max_input_length: source tokens (EOS included) kept per sentence; longer inputs are cut to
            it and the input position of each is recorded in `truncated_indices` (and counted in
            `truncated`). None keeps everything.

    Sentences with no tokens (empty, blank, or only characters that the vocabulary's
    normalization drops, such as U+200B ZERO WIDTH SPACE) translate to "" with score 0.0, without
    a search, as in the exported graph; `translate` records their positions in `empty_indices`. A sentence's
    translation does not depend on the other sentences of its batch: the search masks the source
    padding and limits every sentence to its own length + `max_extra_length` output tokens.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        beam_size=DEFAULT_SEARCH.beam_size,
        alpha=DEFAULT_SEARCH.alpha,
        max_extra_length=DEFAULT_SEARCH.max_extra_length,
        batch_size=32,
        max_input_length=DEFAULT_SEARCH.max_input_length,
    ):
        if beam_size < 1:
            raise ValueError(f"beam_size must be >= 1, received {beam_size}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, received {batch_size}")
        if max_input_length is not None and max_input_length < 2:
            raise ValueError(f"max_input_length must be None or >= 2 (a token and EOS), received {max_input_length}")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_input_length = max_input_length
        self.truncated_indices = []
        self.empty_indices = []

        def search(source_ids):
            return translate_ids(model, source_ids, beam_size=beam_size, alpha=alpha, max_extra_length=max_extra_length)

        self._search = compile_search(search, model.variables)

    @property
    def truncated(self):
        """How many inputs were cut to `max_input_length` so far."""
        return len(self.truncated_indices)

    def encode(self, sentences):
        """Token ids (EOS appended) of each sentence, as lists, cut to `max_input_length`."""
        if not sentences:
            return []
        ragged = self.tokenizer.tokenize(list(sentences))
        rows = [list(row) + [EOS_ID] for row in ragged.to_list()]
        if self.max_input_length:
            for index, row in enumerate(rows):
                if len(row) > self.max_input_length:
                    rows[index] = row[: self.max_input_length - 1] + [EOS_ID]
                    self.truncated_indices.append(index)
        return rows

    def translate(self, sentences, progress=False):
        """Returns `(translations, scores)` in the order of `sentences`; lines with no tokens give "".

        `truncated_indices` is reset to the positions (in `sentences`) of the inputs cut to
        `max_input_length`, `empty_indices` to those of the inputs with no tokens. With
        `progress`, a line on stderr counts the sentences done.
        """
        sentences = list(sentences)
        self.truncated_indices = []
        rows = self.encode(sentences)
        # Input without tokens (EOS alone) translates to empty output without a search; the rest
        # is sorted by length so that each batch pads little.
        self.empty_indices = [index for index, row in enumerate(rows) if len(row) == 1]
        order = sorted((i for i, row in enumerate(rows) if len(row) > 1), key=lambda i: len(rows[i]))

        def translate_batch(indices):
            length = LENGTH_MULTIPLE * math.ceil(max(len(rows[i]) for i in indices) / LENGTH_MULTIPLE)
            source = np.full((self.batch_size, length), PAD_ID, dtype="int32")
            source[:, 0] = EOS_ID  # Filler rows: a one-token sentence, discarded.
            for row, index in enumerate(indices):
                source[row, : len(rows[index])] = rows[index]
            ids, batch_scores = self._search(keras.ops.convert_to_tensor(source))
            ids = keras.ops.convert_to_numpy(ids)[: len(indices), 0]
            return self.tokenizer.detokenize(ids).numpy(), keras.ops.convert_to_numpy(batch_scores)[: len(indices), 0]

        return translate_in_order(len(sentences), order, self.batch_size, translate_batch, progress)
