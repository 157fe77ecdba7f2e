import numpy as np

from models.metrics import MaskedAccuracy
from tests.helpers import build_before_fit


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


def test_target_token_count_reports_training_and_validation_apart():
    from models.losses import LabelSmoothedCrossEntropy
    from models.metrics import TargetTokenCount
    from tests.models.small_model import small_transformer

    model = small_transformer()
    model.compile(optimizer="adam", loss=LabelSmoothedCrossEntropy(), metrics=[TargetTokenCount()])
    ids = np.random.default_rng(0).integers(4, 20, size=(8, 5)).astype("int32")
    ids[0, 3:] = 0  # Two padded targets.
    dev = ids[:2]
    history = build_before_fit(model).fit(
        (ids, ids), ids, batch_size=4, epochs=1, verbose=0, validation_data=((dev, dev), dev)
    )
    assert history.history["target_tokens"] == [38.0]
    assert history.history["val_target_tokens"] == [8.0]
