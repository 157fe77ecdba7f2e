"""The repetition-guard search part (fairseq's and Hugging Face's `no_repeat_ngram_size`): no
hypothesis contains the same n-gram of output tokens twice, a guard against the loops an
under-trained model falls into ("the the the")."""

from keras import ops

from models.search_part import LARGE_NEGATIVE, SearchPart


class NoRepeatNgram(SearchPart):
    """Bars every token that would complete an n-gram of `size` (int >= 1) output tokens already in
    the hypothesis (BOS not counted). A forced prefix token overrides the bar."""

    def __init__(self, size):
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"`no_repeat_ngram_size` must be an int >= 1 (or 0 for none). Received: {size!r}")
        self.size = size

    def sentence_constants(self):
        return ()  # It reads the hypotheses alone.

    def restrict(self, choice_logits, inputs, state):
        step, n = inputs.step, self.size
        seq = ops.reshape(inputs.alive_seq, [-1, inputs.alive_seq.shape[2]])  # [batch * beam, L + 1]
        starts = seq.shape[1] - n + 1  # an n-gram at every position j: tokens j .. j + n - 1
        if starts < 1:  # Longer than any output: nothing can repeat.
            return choice_logits
        start = ops.arange(starts, dtype="int32")
        # The n-gram at j is complete (its last token produced at step j + n - 2) and not over BOS.
        valid = ops.logical_and(start >= 1, start + n - 1 <= step)[None, :]  # [1, starts]
        # [batch * beam, starts], a row per hypothesis also when no token is compared (size 1).
        matched = ops.logical_and(ops.logical_and(valid, step >= n - 1), ops.ones_like(seq[:, :starts], "bool"))
        # The last n - 1 tokens, positions step - n + 2 .. step, against each n-gram's first n - 1.
        for k in range(n - 1):
            last = ops.take(seq, ops.maximum(step - n + 2 + k, 0), axis=1)  # [batch * beam]
            matched = ops.logical_and(matched, seq[:, k : k + starts] == last[:, None])
        following = seq[:, n - 1 : n - 1 + starts]  # [batch * beam, starts]: each n-gram's last token
        rows = ops.zeros_like(following) + ops.arange(ops.shape(seq)[0], dtype="int32")[:, None]
        indices = ops.reshape(ops.stack([rows, following], axis=2), [-1, 2])
        counts = ops.scatter(indices, ops.reshape(ops.cast(matched, "int32"), [-1]), ops.shape(choice_logits))
        return ops.where(counts > 0, LARGE_NEGATIVE, choice_logits)
