"""Smoke test of benchmarks/train_throughput.py: flags and synthetic batches (no timing, no model)."""

import numpy as np
import pytest

from data.special_ids import BOS_ID, EOS_ID, PAD_ID


def test_flags_and_sizes(benchmark_script):
    bench, _ = benchmark_script("train_throughput")
    args = bench.parse_args(["--preset", "tiny", "--sizes", "num_layers=1,dropout=0.0", "--anchor", "keras_hub,none",
                             "--backend", "jax"])
    assert args.anchors == ["keras_hub"] and args.source_length == args.length
    assert bench.model_sizes(args) == dict(num_layers=1, hidden_dim=128, intermediate_dim=512, num_heads=4, dropout=0.0)
    with pytest.raises(SystemExit):
        bench.parse_args(["--anchor", "tensorflow_models"])


def test_synthetic_batches_are_shifted_targets_without_padding(benchmark_script):
    bench, _ = benchmark_script("train_throughput")
    args = bench.parse_args(["--vocab", "50", "--batch", "3", "--length", "5", "--source_length", "7",
                             "--distinct_batches", "2"])
    batches = bench.synthetic_batches(args)
    assert len(batches) == 2
    source, target_in, target_out = batches[0]
    assert source.shape == (3, 7) and target_in.shape == target_out.shape == (3, 5)
    assert (target_in[:, 0] == BOS_ID).all() and (target_out[:, -1] == EOS_ID).all()
    np.testing.assert_array_equal(target_in[:, 1:], target_out[:, :-1])
    assert (source != PAD_ID).all() and (target_out != PAD_ID).all() and source.max() < 50
