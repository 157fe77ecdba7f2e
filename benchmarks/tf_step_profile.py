"""Where a TensorFlow training step spends its time, per op type, and what the CPU's GEMMs can do.

Three measurements behind the CPU section of benchmarks/README.md:

- `--profile`: builds a candidate of `train_throughput.py` (ours or keras_hub) at the CPU benchmark's
  sizes, runs warm-up steps, traces `--steps` more with the TensorFlow profiler and prints the op
  time per step summed over threads, by op type, with the traced function's wall time per step;
  then the ops per step and the wall time during which no matmul runs (the part of the step the
  matmuls, the same work in both candidates, leave exposed), by op type and by layer scope.
- `--gemm`: times `tf.matmul` alone at the step's shapes, float32 and bfloat16 (GFLOP/s), twenty
  products of distinct operands per traced call (before 2026-11-23 one product per call, whose call
  overhead lowered the small shapes' rates).
- `--adam`: times one optimizer update of the CPU benchmark model's trainable variables (random
  gradients, inside a `tf.function`), Keras's Adam and `train.py`'s `FusedAdam`, alternating.

    python benchmarks/tf_step_profile.py --profile --candidate ours --mixed_precision
    python benchmarks/tf_step_profile.py --gemm
    python benchmarks/tf_step_profile.py --adam
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

BENCHMARKS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, BENCHMARKS)

import train_throughput  # noqa: E402 (after the path)

# The CPU benchmark's sizes (train_throughput.py's CPU rows); smaller ones only for smoke tests.
SIZES = "num_layers=3,hidden_dim=256,intermediate_dim=1024,num_heads=4"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--profile", action="store_true", help="profile a training step")
    parser.add_argument("--gemm", action="store_true", help="time tf.matmul at the step's shapes")
    parser.add_argument("--adam", action="store_true", help="time Keras's Adam and FusedAdam updates")
    parser.add_argument("--candidate", default="ours", choices=("ours", "keras_hub"))
    parser.add_argument("--mixed_precision", action="store_true", help="mixed_bfloat16")
    parser.add_argument("--jit_compile", action="store_true", help="XLA (default: TF graph + oneDNN)")
    parser.add_argument("--steps", type=int, default=3, help="traced steps (default 3)")
    parser.add_argument("--top", type=int, default=20, help="op types printed (default 20)")
    parser.add_argument("--ops", type=int, default=0, help="also print the N heaviest single ops, by name (default 0)")
    parser.add_argument("--sizes", default=SIZES, help=f"model sizes, as train_throughput.py --sizes (default {SIZES})")
    parser.add_argument("--vocab", type=int, default=8000, help="vocabulary size (default 8000)")
    parser.add_argument("--batch", type=int, default=64, help="sentences per batch (default 64)")
    parser.add_argument("--length", type=int, default=32, help="tokens per sentence (default 32)")
    parser.add_argument(
        "--repeats", type=int, default=None, help="timed calls per measurement (default: 15 for --gemm, 20 for --adam)"
    )
    args = parser.parse_args(argv)
    if not (args.profile or args.gemm or args.adam):
        parser.error("give at least one of --profile, --gemm, --adam")
    return args


MATMUL_OPS = (
    "_MklMatMul",
    "_MklNativeFusedMatMul",
    "_MklFusedMatMul",
    "_FusedMatMul",
    "_MklBatchMatMulV2",
    "MatMul",
    "BatchMatMulV2",
    "_MklEinsum",
    "Einsum",
)


def op_time_by_type(xspace_path, steps):
    """{op type: ms per step}, {op name:type: ms per step}, {TF function: ms per step} and the op
    events `(start_ps, end_ps, op name:type)` from an xplane."""
    from common import compat

    space = compat.read_profile(xspace_path)
    by_type, by_name, functions = collections.Counter(), collections.Counter(), collections.Counter()
    events = []
    for plane in space.planes:
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                milliseconds = event.duration_ps / 1e9 / steps
                if name.startswith("EagerLocalExecute: __inference_multi_step_on_iterator"):
                    functions["step (traced function, wall)"] += milliseconds
                elif ":" in name and "::" not in name and not name.startswith(("Iterator", "EagerLocalExecute")):
                    by_type[name.rsplit(":", 1)[1]] += milliseconds
                    by_name[name] += milliseconds
                    start = line.timestamp_ns * 1000 + event.offset_ps
                    events.append((start, start + event.duration_ps, name))
    return by_type, by_name, functions, events


SCOPES = (
    "label_smoothed_cross_entropy",
    "fused_adam",
    "adam",
    "_residual",
    "self_attention",
    "cross_attention",
    "feed_forward",
    "embedding",
)


def matmul_free_wall(events, steps):
    """Wall time (ms per step) during which no matmul runs, split evenly between the ops running then,
    by op type and by (forward or backward, layer scope): the part of the step that the matmuls, the
    same work in both candidates, do not cover."""
    boundaries = sorted([(start, 1, name) for start, _, name in events] + [(end, -1, name) for _, end, name in events])
    running = collections.Counter()
    total, by_type, by_scope = 0.0, collections.Counter(), collections.Counter()
    previous = None
    for time_ps, change, name in boundaries:
        if previous is not None and time_ps > previous and running:
            names = list(running)
            if not any(n.rsplit(":", 1)[1] in MATMUL_OPS for n in names):
                share = (time_ps - previous) / 1e9 / steps
                total += share
                for n in names:
                    by_type[n.rsplit(":", 1)[1]] += share / len(names)
                    scope = next((key for key in SCOPES if key in n), "other")
                    by_scope[("backward " if "gradient_tape" in n else "forward ") + scope] += share / len(names)
        running[name] += change
        if not running[name]:
            del running[name]
        previous = time_ps
    return total, by_type, by_scope


def cpu_benchmark_args(args):
    """`train_throughput.py`'s arguments at the sizes of `args` (by default the CPU benchmark's)."""
    return train_throughput.parse_args(
        ["--backend", "tensorflow", "--sizes", args.sizes, "--vocab", str(args.vocab)]
        + ["--batch", str(args.batch), "--length", str(args.length)]
    )


def gemm_shapes(args):
    """The step's matmul shapes `(m, k, n)`: the attention and feed-forward projections and the
    vocabulary projection, over every token of a batch."""
    sizes = train_throughput.model_sizes(cpu_benchmark_args(args))
    tokens, hidden, inner = args.batch * args.length, sizes["hidden_dim"], sizes["intermediate_dim"]
    return (
        (tokens, hidden, hidden),
        (tokens, hidden, inner),
        (tokens, inner, hidden),
        (tokens, hidden, args.vocab),
        (tokens, args.vocab, hidden),
    )


def profile(args):
    import keras
    import tensorflow as tf

    bench_args = cpu_benchmark_args(args)
    if args.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)
    sizes = train_throughput.model_sizes(bench_args)
    builder = train_throughput.build_keras_hub if args.candidate == "keras_hub" else train_throughput.build_ours
    model, loss, optimizer = builder(bench_args, sizes)
    model.compile(optimizer=optimizer, loss=loss, jit_compile=args.jit_compile)
    dataset = train_throughput.keras_dataset(bench_args, train_throughput.synthetic_batches(bench_args))
    model.fit(dataset, steps_per_epoch=3, epochs=1, verbose=0)
    with tempfile.TemporaryDirectory() as log_dir:
        tf.profiler.experimental.start(log_dir)
        model.fit(dataset, steps_per_epoch=args.steps, epochs=1, verbose=0)
        tf.profiler.experimental.stop()
        (path,) = glob.glob(os.path.join(log_dir, "**", "*.xplane.pb"), recursive=True)
        by_type, by_name, functions, events = op_time_by_type(path, args.steps)
    print(
        f"{args.candidate}, {'mixed_bfloat16' if args.mixed_precision else 'float32'}, "
        f"{'XLA' if args.jit_compile else 'TF graph'}: ms per step"
    )
    for name, milliseconds in functions.items():
        print(f"{milliseconds:9.1f}  {name}")
    for name, milliseconds in by_type.most_common(args.top):
        print(f"{milliseconds:9.1f}  {name}")
    free, free_by_type, free_by_scope = matmul_free_wall(events, args.steps)
    print(f"{len(events) / args.steps:9.0f}  ops per step")
    print(f"{free:9.1f}  ms per step with no matmul running (custom-gradient bodies count as forward), by op type:")
    for name, milliseconds in free_by_type.most_common(args.top):
        print(f"{milliseconds:9.1f}  {name}")
    print("... and by scope:")
    for name, milliseconds in free_by_scope.most_common():
        print(f"{milliseconds:9.1f}  {name}")
    if args.ops:
        print("heaviest single ops:")
        for name, milliseconds in by_name.most_common(args.ops):
            print(f"{milliseconds:9.1f}  {name}")


def gemm(shapes, matmuls_per_call=20, calls=15):
    """GFLOP/s of `tf.matmul` at the step's shapes: `matmuls_per_call` products of distinct operands in
    one traced function (so no call overhead and nothing for Grappler to merge), median of `calls`."""
    import numpy as np
    import tensorflow as tf

    for dtype in (tf.float32, tf.bfloat16):
        for m, k, n in shapes:
            lefts = [tf.cast(tf.random.normal([m, k]), dtype) for _ in range(matmuls_per_call)]
            right = tf.cast(tf.random.normal([k, n]), dtype)

            @tf.function
            def products(lefts, right):
                return tf.add_n([tf.cast(tf.matmul(left, right)[0, 0], tf.float32) for left in lefts])

            products(lefts, right).numpy()
            seconds = []
            for _ in range(calls):
                start = time.perf_counter()
                products(lefts, right).numpy()
                seconds.append((time.perf_counter() - start) / matmuls_per_call)
            median = float(np.median(seconds))
            print(
                f"{dtype.name:9} [{m},{k}]x[{k},{n}] {median * 1e3:7.2f} ms {2 * m * k * n / median / 1e9:6.0f} GFLOP/s"
            )


def adam(bench_args, rounds=6, repeats=20):
    import keras
    import numpy as np
    import tensorflow as tf

    sizes = train_throughput.model_sizes(bench_args)  # also puts the repository on the path
    from models.transformer import Transformer
    from training.optimizers import FusedAdam

    policy = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = Transformer(bench_args.vocab, **sizes)
    model.build()
    variables = model.trainable_variables
    rng = np.random.default_rng(0)
    gradients = [tf.constant(rng.normal(size=v.shape).astype("float32") * 1e-3) for v in variables]
    print(f"{len(variables)} variables, {sum(int(np.prod(v.shape)) for v in variables):,} parameters")
    updates = {}
    for name, optimizer_class in (("keras Adam", keras.optimizers.Adam), ("FusedAdam", FusedAdam)):
        optimizer = optimizer_class(1e-4, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
        optimizer.build(variables)
        updates[name] = tf.function(lambda optimizer=optimizer: optimizer.apply(gradients, variables))
        updates[name]()
    milliseconds = collections.defaultdict(list)
    for index in range(rounds):
        for name in updates if index % 2 == 0 else list(updates)[::-1]:
            start = time.perf_counter()
            for _ in range(repeats):
                updates[name]()
            variables[0].numpy()
            milliseconds[name].append((time.perf_counter() - start) / repeats * 1e3)
    for name, times in milliseconds.items():
        print(f"{name:10} ms per update: {' '.join(f'{t:.1f}' for t in times)}  median {np.median(times):.1f}")
    keras.mixed_precision.set_global_policy(policy)  # --profile after this sets its own only with --mixed_precision


def main(argv=None):
    args = parse_args(argv)
    if args.gemm:
        gemm(gemm_shapes(args), calls=args.repeats or 15)
    if args.adam:
        adam(cpu_benchmark_args(args), repeats=args.repeats or 20)
    if args.profile:
        profile(args)


if __name__ == "__main__":
    main()
