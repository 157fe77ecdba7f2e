"""The minimum-length search part: EOS cannot end a hypothesis shorter than its sentence's minimum
(fairseq's `--min-len`, OpenNMT's `min_length`); scores stay the model's own log-probabilities."""

import copy

from keras import ops

from models.search_part import LARGE_NEGATIVE, SearchPart
from models.shapes import dimension


class MinimumLength(SearchPart):
    """Bars EOS below `min_lengths` int `[batch]` (tokens, EOS included), capped at `max_lengths`
    int32 `[batch]` (a hypothesis at its max length may still end with EOS)."""

    def __init__(self, min_lengths, max_lengths, beam_size, eos_id):
        # Each hypothesis's minimum, `[batch * beam]`, repeated here once rather than at every step.
        self.min_lengths = ops.repeat(ops.minimum(ops.cast(min_lengths, "int32"), max_lengths), beam_size, axis=0)
        self.eos_id = eos_id
        self.beam_size = beam_size

    def sentence_constants(self):
        return ops.reshape(self.min_lengths, (-1, self.beam_size))  # [batch, beam]

    def with_sentence_constants(self, constants):
        part = copy.copy(self)
        part.min_lengths = ops.reshape(constants, (-1,))
        return part

    def restrict(self, choice_logits, inputs, state):
        barred = inputs.step + 1 < self.min_lengths  # [batch * beam]
        is_eos = (ops.arange(dimension(choice_logits, -1)) == self.eos_id)[None, :]
        # EOS is out of the choice; the normaliser of the log-probabilities stays the model's.
        return ops.where(ops.logical_and(barred[:, None], is_eos), LARGE_NEGATIVE, choice_logits)
