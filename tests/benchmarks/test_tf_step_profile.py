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


@pytest.mark.slow  # A benchmark's smoke run: the full tier runs it.
def test_profile_gemm_and_adam_run_at_tiny_sizes(benchmark_script, capsys):
    profile, _ = benchmark_script("tf_step_profile")
    tiny = ["--sizes", "num_layers=1,hidden_dim=32,intermediate_dim=64,num_heads=2", "--vocab", "48"]
    profile.main(
        ["--profile", "--gemm", "--adam", "--steps", "2", "--repeats", "2", "--batch", "4", "--length", "8", *tiny]
    )
    out = capsys.readouterr().out
    assert "ours, float32, TF graph: ms per step" in out
    assert "ops per step" in out and "ms per step with no matmul running" in out
    # The step's five matmul shapes over its 32 tokens (hidden 32, inner 64, vocabulary 48), both dtypes.
    for dtype in ("float32", "bfloat16"):
        for shape in ("[32,32]x[32,32]", "[32,32]x[32,64]", "[32,64]x[64,32]", "[32,32]x[32,48]", "[32,48]x[48,32]"):
            assert f"{dtype:9} {shape}" in out, (dtype, shape)
    assert "keras Adam ms per update:" in out and "FusedAdam  ms per update:" in out
