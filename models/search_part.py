"""A search part: one piece of search behaviour (a minimum length, a forced prefix, constraints...)
that the search loop (models/search_loop.py) calls at fixed points; each hook defaults to nothing.
"""

from typing import Any, NamedTuple

# Scores are float32 whatever the model's compute dtype, so "log 0" is a float32 constant: finite,
# far below any real log-probability, and small enough that adding two of them stays finite. The
# loop never holds -inf (a token with -inf logits makes a dead candidate), so no NaN can arise.
SCORE_DTYPE = "float32"
LARGE_NEGATIVE = -1e30
# Anything at or below this is a dead hypothesis (one that started from `LARGE_NEGATIVE`).
DEAD_THRESHOLD = 0.5 * LARGE_NEGATIVE


class StepInputs(NamedTuple):
    """What a step's hooks read. Rows are hypotheses, row `b * beam + k` beam `k` of sentence `b`."""

    step: Any  # int32 scalar: the 0-based position being produced (tokens produced so far)
    logits: Any  # float32 [batch * beam, vocab]: the model's, before any part's restriction
    alive_seq: Any  # int32 [batch, beam, L + 1]: position 0 the initial id, t + 1 the token of step t


class Candidates(NamedTuple):
    """One step's candidate extensions of every sentence, each `[batch, candidates]`."""

    log_probs: Any  # float32: the hypothesis's log-probability with the token
    token: Any  # int32: the token added
    beam: Any  # int32: the alive hypothesis extended (its index in the sentence's beam)
    token_log_probs: Any  # float32: the token's own log-probability


class SearchPart:
    """The hooks of a search part. Its state is a nested structure of `[batch, beam, ...]` tensors
    that the loop carries and reorders with the hypotheses.

    Attributes:
        chooses_alive: the part chooses the alive set (`choose_alive`), so every offer is a
            candidate; at most one part of a search chooses.
        keeps_finished_state: the loop returns the part's state with the finished hypotheses.
    """

    chooses_alive = False
    keeps_finished_state = False

    def sentence_constants(self):
        """The part's per-sentence tensors (a nested structure, each `[batch, ...]`; `()` if none),
        for a search that drops its done sentences (`LoopSettings.compact_state`): it keeps those
        of the sentences left and hands them back (`with_sentence_constants`). None, the default:
        the part cannot hand them over, and the search keeps every sentence."""
        return None

    def with_sentence_constants(self, constants):
        """The part with `constants` (`sentence_constants`' structure, of the sentences left) in
        place of its own."""
        return self

    def initial_state(self, zeros):
        """The state of the hypotheses at step 0; `zeros` is int32 `[batch, beam]`."""
        return ()

    def restrict(self, choice_logits, inputs, state):
        """`choice_logits` `[batch * beam, vocab]` with the tokens the part bars at this step set
        to `LARGE_NEGATIVE`; `inputs` is the step's `StepInputs`. Parts restrict in order."""
        return choice_logits

    def overrule(self, tokens, inputs, state):
        """Sampling only: the drawn `tokens` int32 `[batch]` with those the part imposes whatever
        the draw (beam and greedy search impose through `restrict`)."""
        return tokens

    def offer(self, choice_logits, offered, state):
        """Tokens each hypothesis offers beyond `offered` int32 `[batch * beam, n]`: None, or
        `(tokens int32, logits float32)`, each `[batch * beam, extra]`."""
        return None

    def advance(self, parent_state, candidates, step):
        """Each candidate's state, `[batch, candidates, ...]`: its parent's (`parent_state`, already
        gathered to the candidates) after adding its token (`candidates`, a `Candidates`)."""
        return parent_state

    def may_finish(self, state):
        """None, or bool `[batch, candidates]` from the candidates' state: whether an ended
        candidate may join the finished set (one that may not is dropped)."""
        return None

    def choose_alive(self, log_probs, growing, state, beam_size):
        """int32 `[batch, beam]`: the candidates (indices into `log_probs` `[batch, candidates]`)
        that stay alive, `growing` ones (bool, same shape) first."""
        raise NotImplementedError
