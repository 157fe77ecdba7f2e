"""benchmarks/tf_step_profile.py's timeline arithmetic on hand-made op events (no profiler, no model)."""

import pytest


def test_matmul_free_wall_counts_only_time_no_matmul_covers(benchmark_script):
    profile, _ = benchmark_script("tf_step_profile")
    ms = 10**9  # events are in picoseconds
    events = [
        (0, 10 * ms, "transformer/dense/MatMul:_MklMatMul"),
        (5 * ms, 15 * ms, "transformer/layer_0/self_attention_residual/mul:Mul"),  # 5 ms past the matmul
        (20 * ms, 30 * ms, "gradient_tape/transformer/layer_0/feed_forward/Cast:Cast"),  # alone
        (40 * ms, 50 * ms, "compile_loss/label_smoothed_cross_entropy/Exp:Exp"),  # two at once: half each
        (40 * ms, 50 * ms, "transformer/embedding/add:AddV2"),
        (60 * ms, 70 * ms, "gradient_tape/transformer/attention/MatMul:_MklBatchMatMulV2"),
        (60 * ms, 70 * ms, "transformer/layer_0/cross_attention/Sub:Sub"),  # covered by the matmul
    ]
    total, by_type, by_scope = profile.matmul_free_wall(events, steps=2)
    assert total == pytest.approx((5 + 10 + 10) / 2)
    assert by_type == pytest.approx(dict(Mul=2.5, Cast=5.0, Exp=2.5, AddV2=2.5))
    assert by_scope == pytest.approx(
        {
            "forward _residual": 2.5,
            "backward feed_forward": 5.0,
            "forward label_smoothed_cross_entropy": 2.5,
            "forward embedding": 2.5,
        }
    )
