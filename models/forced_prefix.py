"""The forced-prefix search part (fairseq's `prefix_tokens`): a sentence's output starts with its
prefix, scored by the model, and the search goes on from there."""

import copy

from keras import ops

from models.search_part import LARGE_NEGATIVE, SearchPart


class ForcedPrefix(SearchPart):
    """Forces `prefix_ids` int `[batch, prefix_length]` (rows padded with `pad_id`; all padding: no
    prefix), cut at `max_decode_length`. It comes after the parts that bar tokens, overriding them."""

    def __init__(self, prefix_ids, max_decode_length, beam_size, pad_id):
        prefix_ids = ops.cast(prefix_ids, "int32")
        prefix_length = prefix_ids.shape[1]
        if prefix_length >= max_decode_length:
            self.forced_columns = prefix_ids[:, :max_decode_length]  # [batch, L]: the token forced at each step
        else:
            padding = ops.full((ops.shape(prefix_ids)[0], max_decode_length - prefix_length), pad_id, dtype="int32")
            self.forced_columns = ops.concatenate([prefix_ids, padding], axis=1)
        self.beam_size = beam_size
        self.pad_id = pad_id

    def sentence_constants(self):
        return self.forced_columns

    def with_sentence_constants(self, constants):
        part = copy.copy(self)
        part.forced_columns = constants
        return part

    def _forced(self, step):
        """int32 `[batch * beam]`: the token each hypothesis must take at `step`, `pad_id` if free."""
        return ops.repeat(ops.take(self.forced_columns, step, axis=1), self.beam_size, axis=0)

    def restrict(self, choice_logits, inputs, state):
        forced = self._forced(inputs.step)
        is_forced = ops.arange(ops.shape(choice_logits)[-1], dtype="int32")[None, :] == forced[:, None]
        only_forced = ops.where(is_forced, inputs.logits, LARGE_NEGATIVE)
        return ops.where((forced != self.pad_id)[:, None], only_forced, choice_logits)

    def overrule(self, tokens, inputs, state):
        # The draw is replaced, not only steered by the restricted logits: an extreme temperature
        # could otherwise lose the forced token to the noise.
        forced = self._forced(inputs.step)
        return ops.where(forced != self.pad_id, forced, tokens)
