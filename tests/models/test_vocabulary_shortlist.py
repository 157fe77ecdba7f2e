"""The vocabulary shortlist (`models.vocabulary_shortlist`) through `translate_ids` with a small random
Transformer: a shortlist of the whole vocabulary is the plain search, a shortlist is the plain
search over a model whose other tokens are barred, and forced pieces join the shortlist."""

import keras
import numpy as np
import pytest
from keras import ops

from common.special_ids import EOS_ID, PAD_ID
from models import translation
from models.search_config import Sampling, SearchConfig
from models.search_part import LARGE_NEGATIVE
from models.translation import translate_ids
from models.vocabulary_shortlist import SPECIAL_IDS, LexicalTable, batch_shortlist
from tests.helpers import EosBiasModel
from tests.models.small_model import VOCAB, small_transformer

VOCABULARY = VOCAB
SOURCE = np.array([[5, 9, 17, 30, EOS_ID, PAD_ID], [7, 7, 12, EOS_ID, PAD_ID, PAD_ID]], "int32")


@pytest.fixture(scope="module")
def model():
    # One layer of each stack: a shortlist restricts the output projection whatever the depth.
    return small_transformer(seed=7)


def _table(rows, frequent=()):
    """A `LexicalTable` whose source piece `s` has the candidates `rows.get(s, [])`."""
    width = max([len(row) for row in rows.values()] + [1])
    candidates = np.full((VOCABULARY, width), PAD_ID, "int32")
    for source, row in rows.items():
        candidates[source, : len(row)] = row
    return LexicalTable(candidates, np.asarray(frequent, "int32"))


WHOLE = _table({}, frequent=range(VOCABULARY))
SMALL = _table({5: [20, 21, 22], 9: [23, 24], 17: [25], 30: [26, 27], 7: [28, 29], 12: [31]}, frequent=[10, 11])


class _Barred(EosBiasModel):
    """`model` with the logits of every token outside `allowed` at `LARGE_NEGATIVE`: the shortlist's
    search done as a mask over the whole vocabulary."""

    def __init__(self, model, allowed):
        super().__init__(model, 0.0)
        bias = np.full((VOCABULARY,), LARGE_NEGATIVE, "float32")
        bias[list(allowed)] = 0.0
        self.bias = ops.convert_to_tensor(bias)


def _search(model, search, table=None, **inputs):
    result = translate_ids(model, ops.convert_to_tensor(SOURCE), search, lexical_table=table, **inputs)
    return ops.convert_to_numpy(result.ids), ops.convert_to_numpy(result.scores)


SEARCHES = {
    "beam": (SearchConfig(beam_size=4, max_extra_length=3), 2),
    "greedy": (SearchConfig(beam_size=1, max_extra_length=3), 1),
    "sampling": (SearchConfig(max_extra_length=3, sampling=Sampling(top_k=5, seed=3)), 1),
}


# The shortlist's code is the same in every search (the columns' projection, ids mapped to columns
# and back); the search over them differs by its size only. JAX runs the beam and sampling searches,
# the TensorFlow run greedy search too.
KINDS = ["beam", "sampling"] if keras.backend.backend() == "jax" else list(SEARCHES)


@pytest.mark.parametrize("name", KINDS)
def test_a_shortlist_of_the_whole_vocabulary_is_the_plain_search(model, name):
    search, n_best = SEARCHES[name]
    plain_ids, plain_scores = _search(model, search, num_return=n_best)
    ids, scores = _search(model, search.override(shortlist=1), WHOLE, num_return=n_best)
    np.testing.assert_array_equal(ids, plain_ids)
    assert np.abs(scores - plain_scores).max() < 1e-5


@pytest.mark.parametrize("name", [kind for kind in KINDS if kind != "sampling"])
def test_a_shortlist_is_the_plain_search_with_the_other_tokens_barred(model, name):
    search, n_best = SEARCHES[name]
    columns = batch_shortlist(SMALL, ops.convert_to_tensor(SOURCE), 2, VOCABULARY).columns
    allowed = ops.convert_to_numpy(columns).tolist()
    assert allowed == sorted({*SPECIAL_IDS, 10, 11, 20, 21, 23, 24, 25, 26, 27, 28, 29, 31})
    barred_ids, barred_scores = _search(_Barred(model, allowed), search, num_return=n_best)
    ids, scores = _search(model, search.override(shortlist=2), SMALL, num_return=n_best)
    np.testing.assert_array_equal(ids, barred_ids)
    assert np.abs(scores - barred_scores).max() < 1e-5
    assert set(ids.ravel()) <= set(allowed)


def test_prefix_and_constraint_pieces_outside_the_shortlist_join_it(model):
    prefix = np.array([[40, 41], [PAD_ID, PAD_ID]], "int32")
    phrases = np.array([[[42, 43]], [[44, PAD_ID]]], "int32")
    search = SearchConfig(beam_size=2, max_extra_length=3, shortlist=1)
    ids, _ = _search(model, search, SMALL, prefix_ids=ops.convert_to_tensor(prefix))
    assert ids[0, 0, :2].tolist() == [40, 41]
    ids, scores = _search(model, search, SMALL, constraint_ids=ops.convert_to_tensor(phrases))
    first, second = ids[0, 0].tolist(), ids[1, 0].tolist()
    assert any(first[i : i + 2] == [42, 43] for i in range(len(first) - 1)) and 44 in second
    assert (scores > LARGE_NEGATIVE / 2).all()


@pytest.mark.skipif(
    keras.backend.backend() == "jax", reason="JAX searches with the fixed-shape shortlist only: nothing to compare"
)
def test_the_fixed_shape_shortlist_of_jax_searches_as_the_compact_one(model, monkeypatch):
    search, n_best = SEARCHES["beam"]
    search = search.override(shortlist=2)
    ids, scores = _search(model, search, SMALL, num_return=n_best)
    monkeypatch.setattr(translation, "needs_static_shapes", lambda: True)
    static_ids, static_scores = _search(model, search, SMALL, num_return=n_best)
    np.testing.assert_array_equal(static_ids, ids)
    assert np.abs(static_scores - scores).max() < 1e-5


def test_a_shortlist_search_needs_its_table(model):
    with pytest.raises(ValueError, match="search.shortlist=2 needs the lexical table"):
        _search(model, SearchConfig(shortlist=2))


def test_an_int8_models_shortlist_of_the_whole_vocabulary_is_its_plain_search():
    int8_model = small_transformer(seed=7)
    int8_model.quantize("int8")
    search, n_best = SEARCHES["beam"]
    plain_ids, plain_scores = _search(int8_model, search, num_return=n_best)
    ids, scores = _search(int8_model, search.override(shortlist=1), WHOLE, num_return=n_best)
    np.testing.assert_array_equal(ids, plain_ids)
    assert np.abs(scores - plain_scores).max() < 1e-4
