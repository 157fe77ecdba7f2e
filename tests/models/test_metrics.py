import numpy as np

from models.metrics import MaskedAccuracy


def test_counts_only_non_pad_tokens_across_batches():
    metric = MaskedAccuracy()
    logits = np.zeros((1, 4, 6), "float32")
    for position, token in enumerate([4, 5, 5, 2]):
        logits[0, position, token] = 1.0
    metric.update_state(np.array([[4, 5, 0, 0]], "int32"), logits)  # 2 right of 2 real tokens.
    metric.update_state(np.array([[4, 4, 5, 2]], "int32"), logits)  # 3 right of 4.
    assert abs(float(metric.result()) - 5 / 6) < 1e-7
    metric.reset_state()
    assert float(metric.result()) == 0.0
    assert MaskedAccuracy.from_config(MaskedAccuracy(pad_id=3).get_config()).pad_id == 3
