"""The lexical-constraints search part: every output contains each of its sentence's target phrases,
by dynamic beam allocation (Post & Vilar, 2018; docs/translating.md, "How the search works")."""

import copy

from keras import ops

from models.search_part import LARGE_NEGATIVE, SearchPart


class LexicalConstraints(SearchPart):
    """Phrases `constraint_ids` int `[batch, phrases, phrase_length]` (each row a phrase's tokens
    then `pad_id`; a row of `pad_id` alone is no phrase). State: each phrase's progress per
    hypothesis, int32 `[batch, beam, phrases]`. EOS is barred until every phrase is met, hypotheses
    offer each unmet phrase's next token, and the alive set is shared out by constraint tokens met
    (`allocate_beam`)."""

    chooses_alive = True

    def __init__(self, constraint_ids, beam_size, eos_id, pad_id):
        phrases = ops.cast(constraint_ids, "int32")  # [batch, phrases, phrase_length]
        self.num_phrases, self.phrase_length = phrases.shape[1], phrases.shape[2]
        # Above any bank (count of constraint tokens met), a static bound for the allocation's keys.
        self.banks = self.num_phrases * self.phrase_length + 1
        self.beam_size, self.eos_id = beam_size, eos_id
        self._set_phrases(phrases, ops.sum(ops.cast(phrases != pad_id, "int32"), axis=2))

    def _set_phrases(self, phrases, lengths):
        """The sentences' phrases and their lengths `[batch, phrases]`, and both per hypothesis."""
        self.phrases, self.lengths = phrases, lengths
        self.row_phrases = ops.repeat(phrases, self.beam_size, axis=0)  # [batch * beam, phrases, phrase_length]
        self.row_lengths = ops.repeat(lengths, self.beam_size, axis=0)  # [batch * beam, phrases]

    def sentence_constants(self):
        return self.phrases, self.lengths

    def with_sentence_constants(self, constants):
        part = copy.copy(self)
        part._set_phrases(*constants)
        return part

    def initial_state(self, zeros):
        return zeros[:, :, None] + ops.zeros((1, 1, self.num_phrases), "int32")

    def _row_progress(self, state):
        """Each hypothesis's progress `[batch * beam, phrases]` and which phrases it has met."""
        progress = ops.reshape(state, [-1, self.num_phrases])
        return progress, progress >= self.row_lengths

    def restrict(self, choice_logits, inputs, state):
        _, met = self._row_progress(state)
        unmet = ops.logical_not(ops.all(met, axis=1))  # [batch * beam]
        is_eos = (ops.arange(ops.shape(choice_logits)[-1]) == self.eos_id)[None, :]
        return ops.where(ops.logical_and(unmet[:, None], is_eos), LARGE_NEGATIVE, choice_logits)

    def offer(self, choice_logits, offered, state):
        """For each unmet phrase, its next token, once (unless offered already)."""
        progress, met = self._row_progress(state)
        next_index = ops.minimum(progress, self.phrase_length - 1)[:, :, None]
        next_tokens = ops.take_along_axis(self.row_phrases, next_index, axis=2)[:, :, 0]  # [batch * beam, phrases]
        among_offered = ops.any(next_tokens[:, :, None] == offered[:, None, :], axis=2)
        index = ops.arange(self.num_phrases)
        earlier = (index[None, :] < index[:, None])[None, :, :]  # [1, phrase, earlier phrase]
        # An earlier phrase not met offers the same token (a met phrase offers none).
        earlier = ops.logical_and(earlier, ops.logical_not(met)[:, None, :])
        repeated = ops.any(ops.logical_and(next_tokens[:, :, None] == next_tokens[:, None, :], earlier), axis=2)
        offers = ops.logical_not(ops.logical_or(met, ops.logical_or(among_offered, repeated)))
        logits = ops.where(offers, ops.take_along_axis(choice_logits, next_tokens, axis=1), LARGE_NEGATIVE)
        return next_tokens, logits

    def advance(self, parent_state, candidates, step):
        """A phrase's next token advances its progress, its first token restarts it at 1, any
        other resets it to 0; a met phrase stays met (a self-overlapping phrase can be missed)."""
        lengths = self.lengths[:, None, :]  # [batch, 1, phrases]
        phrases = ops.broadcast_to(
            self.phrases[:, None],
            (ops.shape(parent_state)[0], ops.shape(parent_state)[1]) + tuple(self.phrases.shape[1:]),
        )  # [batch, candidates, phrases, phrase_length]
        next_index = ops.minimum(parent_state, self.phrase_length - 1)[:, :, :, None]
        next_tokens = ops.take_along_axis(phrases, next_index, axis=3)[:, :, :, 0]  # [batch, candidates, phrases]
        token = candidates.token[:, :, None]
        restarted = ops.where(token == phrases[:, :, :, 0], 1, 0)
        moved = ops.where(token == next_tokens, parent_state + 1, restarted)
        return ops.where(parent_state >= lengths, parent_state, moved)

    def may_finish(self, state):
        return ops.all(state >= self.lengths[:, None, :], axis=2)

    def choose_alive(self, log_probs, growing, state, beam_size):
        banks_met = ops.sum(ops.minimum(state, self.lengths[:, None, :]), axis=2)  # [batch, candidates]
        return allocate_beam(log_probs, banks_met, growing, beam_size, self.banks)


def allocate_beam(log_probs, banks_met, eligible, beam_size, banks):
    """int32 `[batch, beam]`: the candidates (indices into `log_probs` `[batch, candidates]`) that
    stay alive: round robin over the banks `banks_met` among the `eligible`, best first from the
    highest bank down; ineligible ones last."""
    count = log_probs.shape[1]
    index = ops.arange(count, dtype="int32")
    # above[b, i, j]: candidate j ranks above candidate i within a bank (ties to the lower index).
    higher = log_probs[:, None, :] > log_probs[:, :, None]
    tied_before = ops.logical_and(
        log_probs[:, None, :] == log_probs[:, :, None], index[None, None, :] < index[None, :, None]
    )
    above = ops.logical_and(ops.logical_or(higher, tied_before), banks_met[:, None, :] == banks_met[:, :, None])
    rank = ops.sum(ops.cast(ops.logical_and(above, eligible[:, None, :]), "int32"), axis=2)  # [batch, candidates]
    key = ops.where(eligible, rank * banks + (banks - 1 - banks_met), banks * count + index[None, :])
    _, chosen = ops.top_k(-ops.cast(key, "float32"), beam_size)
    return chosen
