"""Random sampling of the next token (for back-translation, Edunov et al., 2018), reproducible under
a seed on every backend. docs/translating.md, "How the search works", explains the draw."""

from keras import ops

# Odd 32-bit constants that spread consecutive counters apart before hashing (the golden ratio's
# and two other well-mixing multipliers).
_STEP_MULTIPLIER = 0x9E3779B9
_TOKEN_MULTIPLIER = 0x85EBCA6B
_SEED_MULTIPLIER = 0xC2B2AE35
# A token outside the nucleus: a finite float32 far below any logit plus Gumbel noise (which lies
# within about (-3, 18) for 24-bit uniforms), so it is never drawn.
_OUTSIDE_NUCLEUS = -1e30


def _uint32(value):
    return ops.convert_to_tensor(value, "uint32")


def hash_uint32(x):
    """An avalanche hash of uint32 values (xor-shift and multiply rounds): every input bit changes
    about half of the output bits, so consecutive counters give unrelated outputs."""
    x = ops.cast(x, "uint32")
    x = ops.bitwise_xor(x, ops.right_shift(x, _uint32(16)))
    x = ops.multiply(x, _uint32(0x7FEB352D))
    x = ops.bitwise_xor(x, ops.right_shift(x, _uint32(15)))
    x = ops.multiply(x, _uint32(0x846CA68B))
    return ops.bitwise_xor(x, ops.right_shift(x, _uint32(16)))


def sentence_keys(seed, keys):
    """uint32 `[batch]` hashes of `seed` (a Python int) and the per-sentence `keys` (ints `[batch]`,
    e.g. line numbers): a sentence keeps its draws whatever batch or position it comes in."""
    seed_hash = hash_uint32(_uint32(int(seed) & 0xFFFFFFFF))
    return hash_uint32(ops.bitwise_xor(ops.multiply(ops.cast(keys, "uint32"), _uint32(_SEED_MULTIPLIER)), seed_hash))


def uniform(keys, step, tokens):
    """Floats in (0, 1), `[rows, n]`, a pure function of `keys` `[rows]` (uint32), the scalar
    `step` and `tokens` `[rows, n]` (int)."""
    step_key = hash_uint32(ops.add(keys, ops.multiply(ops.cast(step, "uint32"), _uint32(_STEP_MULTIPLIER))))
    bits = hash_uint32(
        ops.bitwise_xor(step_key[:, None], ops.multiply(ops.cast(tokens, "uint32"), _uint32(_TOKEN_MULTIPLIER)))
    )
    # The top 24 bits, centred in their interval: never exactly 0 or 1.
    high = ops.cast(ops.right_shift(bits, _uint32(8)), "float32")
    return (high + 0.5) / float(1 << 24)


def token_sampler(keys, top_k=0, temperature=1.0, top_p=1.0):
    """A `TokenSampler` of each sentence's `keys` (uint32 `[rows]`, from `sentence_keys`): one
    Gumbel-max draw per row from softmax(logits / temperature), within the `top_k` largest (0:
    all), then their nucleus of mass `top_p` (1: all; the best token always kept).

    Args:
        temperature: float > 0.
        top_p: float in (0, 1].
    """
    if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
        raise ValueError(f"top_k must be an int >= 0 (0: the whole vocabulary), received {top_k!r}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, received {temperature!r}")
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)) or not 0 < top_p <= 1:
        raise ValueError(f"top_p must be a number in (0, 1] (1: no nucleus), received {top_p!r}")
    return TokenSampler(keys, top_k, temperature, top_p)


class TokenSampler:
    """`(logits [rows, vocab], step) -> tokens int32 [rows]`, row `i`'s draw a pure function of
    `keys[i]`, the step and the logits (`token_sampler`). Its keys are per-sentence tensors as a
    search part's are (`models.search_part.SearchPart.sentence_constants`): a search that drops its
    done sentences keeps the keys of those left."""

    def __init__(self, keys, top_k, temperature, top_p):
        self.keys, self.top_k, self.temperature, self.top_p = keys, top_k, temperature, top_p

    def sentence_constants(self):
        """Each sentence's key (uint32 `[rows]`)."""
        return self.keys

    def with_sentence_constants(self, keys):
        """The sampler with `keys` (of the sentences left) in place of its own."""
        return TokenSampler(keys, self.top_k, self.temperature, self.top_p)

    def __call__(self, logits, step):
        logits = ops.cast(logits, "float32")
        values, tokens = _most_likely(logits, self.top_k, sorted_all=self.top_p < 1)
        scaled = values / self.temperature
        if self.top_p < 1:
            scaled = _nucleus(scaled, self.top_p)
        gumbel = -ops.log(-ops.log(uniform(self.keys, step, tokens)))
        choice = ops.argmax(scaled + gumbel, axis=-1)
        return ops.cast(ops.take_along_axis(tokens, ops.cast(choice[:, None], "int32"), axis=1)[:, 0], "int32")


def _most_likely(logits, top_k, sorted_all):
    """`(values, tokens)`, each `[rows, n]`: the `top_k` largest logits and their tokens, largest
    first (0: every token, sorted only if `sorted_all`, else in vocabulary order)."""
    vocabulary_size = logits.shape[-1]
    if top_k and (vocabulary_size is None or top_k < vocabulary_size):
        return ops.top_k(logits, top_k)
    if sorted_all:
        return ops.top_k(logits, vocabulary_size if vocabulary_size is not None else ops.shape(logits)[-1])
    tokens = ops.broadcast_to(ops.arange(ops.shape(logits)[-1], dtype="int32")[None, :], ops.shape(logits))
    return logits, tokens


def _nucleus(scaled, top_p):
    """`scaled` `[rows, n]` (sorted, largest first) with the tokens outside the nucleus set to
    `_OUTSIDE_NUCLEUS`."""
    probabilities = ops.softmax(scaled, axis=-1)
    mass = ops.cumsum(probabilities, axis=-1)
    mass_before = ops.concatenate([ops.zeros_like(mass[:, :1]), mass[:, :-1]], axis=-1)
    return ops.where(mass_before < top_p, scaled, _OUTSIDE_NUCLEUS)
