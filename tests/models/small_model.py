"""The one small Transformer shape of the tests of models/ that need a model, not a particular one.
Under JAX each new shape (vocabulary, head size) compiles every operation anew: tests that share
these sizes reuse what an earlier test compiled."""

import keras

from models.transformer import Transformer

VOCAB = 48
SMALL = dict(num_layers=1, hidden_dim=16, num_heads=4, intermediate_dim=32, dropout=0.0)


def small_transformer(seed=0, vocabulary_size=VOCAB, **overrides):
    """A built `Transformer` of the shared sizes (`overrides` replace some), its weights drawn with `seed`."""
    keras.utils.set_random_seed(seed)
    model = Transformer(vocabulary_size, **dict(SMALL, **overrides))
    model.build()
    return model
