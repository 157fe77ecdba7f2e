from common import special_ids


def test_special_ids_are_distinct_non_negative_ints():
    ids = (special_ids.PAD_ID, special_ids.BOS_ID, special_ids.EOS_ID, special_ids.UNK_ID)
    assert all(isinstance(i, int) and i >= 0 for i in ids)
    assert len(set(ids)) == 4
    assert sorted(special_ids.SPECIAL_PIECES) == sorted(ids)
