"""The one small Transformer shape, and batch shape, of the tests of models/ that need a model, not
a particular one. Under JAX each new shape (vocabulary, head size, batch, length) compiles every
operation anew: tests that share these sizes reuse what an earlier test compiled."""

import keras
import numpy as np

from common.special_ids import BOS_ID, PAD_ID
from models.transformer import Transformer

VOCAB = 48
SMALL = dict(num_layers=1, hidden_dim=16, num_heads=4, intermediate_dim=32, dropout=0.0)


def small_transformer(seed=0, vocabulary_size=VOCAB, **overrides):
    """A built `Transformer` of the shared sizes (`overrides` replace some), its weights drawn with `seed`."""
    keras.utils.set_random_seed(seed)
    model = Transformer(vocabulary_size, **dict(SMALL, **overrides))
    model.build()
    return model


def small_batch():
    """Random source ids `[3, 7]` (rows of 7, 5 and 2 tokens, then padding) and decoder inputs `[3, 6]`
    (BOS, then random ids)."""
    rng = np.random.default_rng(0)
    source = rng.integers(4, VOCAB, size=(3, 7)).astype("int32")
    source[1, 5:] = PAD_ID
    source[2, 2:] = PAD_ID
    target = rng.integers(4, VOCAB, size=(3, 6)).astype("int32")
    target[:, 0] = BOS_ID
    return source, target
