"""Training-step throughput of `models/` beside its anchors, in one run.

Times whole training steps (forward, backward, optimizer update) in target tokens per second, the
way users train: `model.compile(...)` then `model.fit(...)` on a repeated synthetic dataset, with
every step's loss fetched to the host in a callback (JAX and TensorFlow dispatch asynchronously;
an unfetched step would make the clock stop early). The first `--warmup` steps (compilation
included) run in a separate `fit` call and are not timed. Candidates:

- `ours`: `models.transformer.Transformer` + `LabelSmoothedCrossEntropy` + `train.py`'s optimizer,
  `transformer_optimizer(..., optimizer_class=training.optimizers.FusedAdam)` (the paper's Adam;
  under TensorFlow through the fused `ResourceApplyAdam` kernel, elsewhere Keras's Adam);
- `keras_hub`: the keras-io translation example's parts at the same sizes:
  `keras_hub.layers.TokenAndPositionEmbedding` + `TransformerEncoder` / `TransformerDecoder` +
  `Dense` to the vocabulary, `SparseCategoricalCrossentropy(from_logits=True)`, Keras's Adam
  with the same schedule and settings (`models.learning_rate_schedule.transformer_optimizer`);
- `torch_eager`, `torch_compile`: `torch.nn.Transformer` at the same sizes (tied embedding and
  output projection, sinusoidal positions, label-smoothed cross-entropy, Adam), bf16 autocast
  with `--mixed_precision`, CUDA only.

Every candidate runs in its own subprocess, so that peak memory is its own and JAX and PyTorch do
not share the GPU's allocator. `--interleave N` is the exception, for a shared machine whose speed
moves from minute to minute: ours and keras_hub are built in one process and timed in N alternating
bursts of `--steps` steps, and the ratio reported is the median of the N adjacent-burst ratios. Peak memory: JAX `memory_stats()["peak_bytes_in_use"]`, PyTorch
`torch.cuda.max_memory_allocated()` (both over the whole process, warm-up and compilation
included); on a CPU, the process's peak resident set size.

Examples (see benchmarks/README.md for the recorded results):

    # CPU, TensorFlow backend: ours against keras-hub.
    python benchmarks/train_throughput.py --backend tensorflow \
        --sizes num_layers=3,hidden_dim=256,intermediate_dim=1024,num_heads=4 \
        --vocab 8000 --batch 64 --length 32 --steps 6 --warmup 2 --anchor keras_hub --rounds 2

    # The same, interleaved: 40 alternating bursts of 5 steps in one process.
    python benchmarks/train_throughput.py --backend tensorflow \
        --sizes num_layers=3,hidden_dim=256,intermediate_dim=1024,num_heads=4 --vocab 8000 \
        --batch 64 --length 32 --mixed_precision --no_jit_compile --steps 5 --warmup 3 --interleave 40

    # GPU, JAX backend, bf16: the base preset against keras-hub and PyTorch.
    python benchmarks/train_throughput.py --backend jax --preset base --vocab 37000 \
        --batch 768 --length 32 --mixed_precision --anchor keras_hub,torch --steps 50 --warmup 5
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT_PREFIX = "TRAIN_THROUGHPUT_RESULT "
ANCHORS = ("keras_hub", "torch", "none")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--backend",
        default=None,
        choices=("tensorflow", "jax", "torch"),
        help="Keras backend of the Keras candidates (default: $KERAS_BACKEND, else tensorflow). "
        "The script itself is backend-agnostic; models/ never imports TensorFlow.",
    )
    parser.add_argument("--preset", default="base", help="models/presets.py preset (default: base).")
    parser.add_argument(
        "--sizes",
        default="",
        help="comma-separated overrides of the preset, e.g. "
        "num_layers=3,hidden_dim=256,intermediate_dim=1024,num_heads=4,dropout=0.1",
    )
    parser.add_argument("--vocab", type=int, default=37000, help="vocabulary size (default: 37000).")
    parser.add_argument("--batch", type=int, default=768, help="sentences per step (default: 768).")
    parser.add_argument("--length", type=int, default=32, help="target length in tokens (default: 32).")
    parser.add_argument("--source_length", type=int, default=None, help="source length (default: --length).")
    parser.add_argument("--steps", type=int, default=50, help="timed steps (default: 50).")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first, compilation included.")
    parser.add_argument("--mixed_precision", action="store_true", help="mixed_bfloat16 / bf16 autocast.")
    parser.add_argument(
        "--anchor",
        default="keras_hub",
        help="comma-separated anchors from {keras_hub,torch,none} (torch = eager and "
        "torch.compile, CUDA only). Default: keras_hub.",
    )
    parser.add_argument("--no_jit_compile", action="store_true", help="Keras candidates with jit_compile=False.")
    parser.add_argument("--steps_per_execution", type=int, default=1, help="Keras steps_per_execution (default 1).")
    parser.add_argument(
        "--accumulate_steps",
        type=int,
        default=1,
        help="ours: batches per optimizer update (train.py's --accumulate_steps); a step is a batch (default 1).",
    )
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="also time `models/` imported from DIR (a copy of the package's parent), "
        "labelled ours[NAME]: an A/B of a change in the same run. Repeatable.",
    )
    parser.add_argument("--no_ours", action="store_true", help="time the anchors only.")
    parser.add_argument("--distinct_batches", type=int, default=4, help="synthetic batches cycled (default 4).")
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the candidate list this many times, alternating its order, and report "
        "the median of the per-round ratios (for noisy machines). Default 1.",
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="N",
        help="time ours and keras_hub in one process instead, in N bursts of --steps steps "
        "each, alternating between them, and report the median of the N per-burst ratios: "
        "adjacent bursts share the machine's state, which on a shared machine moves more "
        "between processes than the two candidates differ. With --rounds, one process per "
        "round. Keras candidates only (no --variant, no torch).",
    )
    parser.add_argument("--json", default=None, help="write all results to this JSON file.")
    parser.add_argument(
        "--profile_dir",
        default=None,
        help="JAX only: after timing, trace 3 more steps of each Keras candidate into "
        "DIR/<candidate> (TensorBoard profile plus a Perfetto JSON trace).",
    )
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--models_dir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.backend = args.backend or os.environ.get("KERAS_BACKEND", "tensorflow")
    args.source_length = args.source_length or args.length
    anchors = [name for name in args.anchor.split(",") if name]
    unknown = sorted(set(anchors) - set(ANCHORS))
    if unknown:
        parser.error(f"--anchor: unknown {unknown}; expected a comma-separated subset of {list(ANCHORS)}")
    args.anchors = [name for name in anchors if name != "none"]
    if args.interleave < 0:
        parser.error(f"--interleave: expected a number of bursts >= 0, received {args.interleave}")
    if args.interleave and (args.variant or args.no_ours or args.anchors != ["keras_hub"] or args.profile_dir):
        parser.error(
            "--interleave times ours against keras_hub only, without profiles: drop --variant / --no_ours / "
            f"--profile_dir and use --anchor keras_hub (received --anchor {args.anchor!r}, "
            f"{len(args.variant)} --variant, --profile_dir {args.profile_dir!r})"
        )
    return args


def model_sizes(args):
    if REPO_ROOT not in sys.path:
        sys.path.append(REPO_ROOT)
    from models.presets import model_config

    overrides = {}
    for item in filter(None, args.sizes.split(",")):
        key, _, value = item.partition("=")
        overrides[key.strip()] = float(value) if key.strip().endswith("dropout") else int(value)
    return model_config(args.preset, **overrides)


def synthetic_batches(args, seed=0):
    """`distinct_batches` triples (source, target_in, target_out) of int32 NumPy ids, no padding."""
    import numpy as np

    if REPO_ROOT not in sys.path:
        sys.path.append(REPO_ROOT)
    from common.special_ids import BOS_ID, EOS_ID, UNK_ID

    first_word_id = max(BOS_ID, EOS_ID, UNK_ID) + 1
    rng = np.random.default_rng(seed)
    batches = []
    for _ in range(args.distinct_batches):
        source = rng.integers(first_word_id, args.vocab, (args.batch, args.source_length), dtype=np.int32)
        target = rng.integers(first_word_id, args.vocab, (args.batch, args.length + 1), dtype=np.int32)
        target[:, 0] = BOS_ID
        target[:, -1] = EOS_ID
        batches.append((source, target[:, :-1].copy(), target[:, 1:].copy()))
    return batches


def peak_host_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ----------------------------------------------------------------------------------------------
# Keras candidates (ours, keras_hub), run inside a worker subprocess.


def build_ours(args, sizes):
    from models.learning_rate_schedule import transformer_optimizer
    from models.losses import LabelSmoothedCrossEntropy
    from models.transformer import Transformer

    try:  # train.py's optimizer: Adam through TensorFlow's fused kernel (Keras's Adam elsewhere).
        from training.optimizers import FusedAdam
    except ImportError:  # a --variant snapshot from before training/optimizers.py
        FusedAdam = None

    model = Transformer(vocabulary_size=args.vocab, **sizes)
    accumulation = dict(accumulate_steps=args.accumulate_steps) if args.accumulate_steps > 1 else {}
    optimizer = transformer_optimizer(sizes["hidden_dim"], optimizer_class=FusedAdam, **accumulation)
    return model, LabelSmoothedCrossEntropy(), optimizer


def build_keras_hub(args, sizes):
    import keras
    import keras_hub

    from models.learning_rate_schedule import transformer_optimizer

    def embedding(name):
        return keras_hub.layers.TokenAndPositionEmbedding(
            vocabulary_size=args.vocab,
            sequence_length=max(args.length, args.source_length),
            embedding_dim=sizes["hidden_dim"],
            mask_zero=True,
            name=name,
        )

    layer_options = dict(
        intermediate_dim=sizes["intermediate_dim"], num_heads=sizes["num_heads"], dropout=sizes.get("dropout", 0.1)
    )
    source = keras.Input(shape=(None,), dtype="int32", name="source_ids")
    target = keras.Input(shape=(None,), dtype="int32", name="target_ids")
    x = embedding("source_embedding")(source)
    for index in range(sizes["num_layers"]):
        x = keras_hub.layers.TransformerEncoder(**layer_options, name=f"encoder_{index}")(x)
    y = embedding("target_embedding")(target)
    for index in range(sizes["num_layers"]):
        y = keras_hub.layers.TransformerDecoder(**layer_options, name=f"decoder_{index}")(
            decoder_sequence=y, encoder_sequence=x
        )
    logits = keras.layers.Dense(args.vocab, name="logits")(y)
    model = keras.Model((source, target), logits, name="keras_hub_transformer")
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    return model, loss, transformer_optimizer(sizes["hidden_dim"])


def keras_dataset(args, batches):
    import keras

    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        sources, targets_in, targets_out = (tf.constant([b[i] for b in batches]) for i in range(3))
        dataset = tf.data.Dataset.from_tensor_slices(((sources, targets_in), targets_out))
        return dataset.repeat().prefetch(tf.data.AUTOTUNE)
    if keras.backend.backend() == "jax":
        import jax

        # Batches already on the device: the benchmark times the model, not a host input pipeline.
        device_batches = [jax.device_put(((s, t_in), t_out)) for s, t_in, t_out in batches]
    else:
        device_batches = [((s, t_in), t_out) for s, t_in, t_out in batches]

    def generator():
        while True:
            yield from device_batches

    return generator()


def prepare_keras_worker(args):
    """Process-wide setup of a Keras worker: `models/` on the path, precision policy, seed."""
    if args.models_dir:
        sys.path.insert(0, os.path.abspath(args.models_dir))
    if REPO_ROOT not in sys.path:
        sys.path.append(REPO_ROOT)
    import keras

    if args.mixed_precision:
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(0)


def compiled_keras_candidate(args, name):
    """The candidate's model, compiled as `train.py` compiles (ours, ours[variant], keras_hub)."""
    builder = build_keras_hub if name == "keras_hub" else build_ours
    model, loss, optimizer = builder(args, model_sizes(args))
    model.compile(
        optimizer=optimizer,
        loss=loss,
        jit_compile=not args.no_jit_compile,
        steps_per_execution=args.steps_per_execution,
    )
    if name != "keras_hub" and args.accumulate_steps > 1:
        from training.optimizers import count_update_tokens

        count_update_tokens(model)  # As train.py: each batch's token count reaches the optimizer.
    return model


class KerasStepTimer:
    """Runs `model.fit` for a number of steps and returns the seconds per step.

    Each step's loss is fetched in a callback (a device-to-host copy: the step has finished) and
    stamped; the timed figure is the mean interval between consecutive stamps, so one extra step
    runs first and whole loop iterations, host overhead included, are counted.
    """

    def __init__(self, args, model, dataset):
        import keras

        self.model, self.dataset, self.spe = model, dataset, args.steps_per_execution
        self.times, self.losses = [], []
        timer = self

        class StepClock(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                import numpy as np

                timer.losses.append(float(np.asarray(logs["loss"])))
                timer.times.append(time.perf_counter())

        self.callback = StepClock()

    def fit(self, steps):
        """Runs `steps` untimed steps (compilation on the first call); returns the wall seconds."""
        start = time.perf_counter()
        self.model.fit(self.dataset, steps_per_epoch=steps * self.spe, epochs=1, verbose=0, callbacks=[self.callback])
        return time.perf_counter() - start

    def time_steps(self, steps):
        """Seconds per step over `steps` timed steps, as (mean, median)."""
        import numpy as np

        self.times, self.losses = [], []
        self.fit(steps + 1)
        intervals = np.diff(self.times) / self.spe
        return float(np.mean(intervals)), float(np.median(intervals))


def warmed_up_timer(args, name):
    """The candidate compiled, its dataset and a `KerasStepTimer` after the untimed warm-up steps;
    returns (timer, warm-up seconds)."""
    timer = KerasStepTimer(args, compiled_keras_candidate(args, name), keras_dataset(args, synthetic_batches(args)))
    return timer, timer.fit(max(args.warmup, 1))


def run_keras_worker(args, name):
    prepare_keras_worker(args)
    import keras

    timer, warmup_s = warmed_up_timer(args, name)
    model = timer.model
    step_mean, step_median = timer.time_steps(args.steps)
    import models

    result = dict(
        name=name,
        models_dir=os.path.dirname(os.path.dirname(os.path.abspath(models.__file__))),
        backend=keras.backend.backend(),
        jit_compile=not args.no_jit_compile,
        accumulate_steps=args.accumulate_steps if name != "keras_hub" else 1,
        parameters=int(model.count_params()),
        warmup_seconds=warmup_s,
        step_seconds_mean=step_mean,
        step_seconds_median=step_median,
        final_loss=timer.losses[-1],
    )
    result.update(keras_peak_memory())
    if args.profile_dir and keras.backend.backend() == "jax":
        import jax

        with jax.profiler.trace(
            os.path.join(args.profile_dir, name.replace("[", "_").rstrip("]")), create_perfetto_trace=True
        ):
            timer.fit(3)
    return result


def run_interleaved_worker(args):
    """`--interleave N`: ours and keras_hub in one process, N bursts of `--steps` steps each.

    The bursts alternate between the two candidates (and which goes first), so both see the same
    minutes of a shared machine; each pair of adjacent bursts gives one ratio.
    """
    prepare_keras_worker(args)
    import keras

    names = ("ours", "keras_hub")
    timers, warmup = {}, {}
    for name in names:
        timers[name], warmup[name] = warmed_up_timer(args, name)
    tokens = args.batch * args.length
    bursts = []
    for index in range(args.interleave):
        burst = {}
        for name in names if index % 2 == 0 else names[::-1]:
            step_mean, _ = timers[name].time_steps(args.steps)
            burst[name] = tokens / step_mean
        burst["ratio"] = burst["ours"] / burst["keras_hub"]
        print(
            f"burst {index + 1}: ours {burst['ours']:,.0f}  keras_hub {burst['keras_hub']:,.0f}  "
            f"ratio {burst['ratio']:.2f}",
            file=sys.stderr,
            flush=True,
        )
        bursts.append(burst)
    return dict(
        name="interleaved",
        backend=keras.backend.backend(),
        jit_compile=not args.no_jit_compile,
        warmup_seconds=warmup,
        bursts=bursts,
        final_loss={name: timers[name].losses[-1] for name in names},
    )


def keras_peak_memory():
    import keras

    if keras.backend.backend() == "jax":
        import jax

        device = jax.devices()[0]
        stats = device.memory_stats() if device.platform != "cpu" else None
        if stats and "peak_bytes_in_use" in stats:
            return dict(
                device=str(device.device_kind),
                peak_memory_bytes=int(stats["peak_bytes_in_use"]),
                peak_memory_kind="device peak_bytes_in_use",
            )
    return dict(
        device=platform.processor() or platform.machine(),
        peak_memory_bytes=peak_host_rss_bytes(),
        peak_memory_kind="host peak RSS",
    )


# ----------------------------------------------------------------------------------------------
# PyTorch anchor, run inside a worker subprocess.


def run_torch_worker(args, name):
    import math

    import numpy as np
    import torch
    from torch import nn

    if REPO_ROOT not in sys.path:
        sys.path.append(REPO_ROOT)
    from common.special_ids import PAD_ID

    if not torch.cuda.is_available():
        raise SystemExit("the torch anchor needs CUDA")
    device = torch.device("cuda")
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    sizes = model_sizes(args)
    hidden = sizes["hidden_dim"]

    class TorchTransformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(args.vocab, hidden)
            nn.init.normal_(self.embedding.weight, std=hidden**-0.5)
            self.dropout = nn.Dropout(sizes.get("dropout", 0.1))
            self.transformer = nn.Transformer(
                d_model=hidden,
                nhead=sizes["num_heads"],
                num_encoder_layers=sizes["num_layers"],
                num_decoder_layers=sizes["num_layers"],
                dim_feedforward=sizes["intermediate_dim"],
                dropout=sizes.get("dropout", 0.1),
                batch_first=True,
            )
            length = max(args.length, args.source_length)
            position = torch.arange(length, dtype=torch.float32)[:, None]
            inverse = torch.pow(10000.0, -torch.arange(0, hidden, 2, dtype=torch.float32) / hidden)
            encoding = torch.stack([torch.sin(position * inverse), torch.cos(position * inverse)], -1)
            self.register_buffer("positions", encoding.reshape(length, hidden), persistent=False)
            mask = nn.Transformer.generate_square_subsequent_mask(args.length)
            self.register_buffer("causal_mask", mask, persistent=False)

        def embed(self, ids):
            return self.dropout(self.embedding(ids) * math.sqrt(hidden) + self.positions[: ids.shape[1]])

        def forward(self, source, target):
            out = self.transformer(
                self.embed(source), self.embed(target), tgt_mask=self.causal_mask, tgt_is_causal=True
            )
            return out @ self.embedding.weight.t()  # tied pre-softmax projection

    model = TorchTransformer().to(device)
    step_model = torch.compile(model) if name == "torch_compile" else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    batches = [tuple(torch.from_numpy(a).long().to(device) for a in b) for b in synthetic_batches(args)]

    def train_step(source, target_in, target_out):
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=args.mixed_precision):
            logits = step_model(source, target_in)
        loss = nn.functional.cross_entropy(
            logits.float().reshape(-1, args.vocab), target_out.reshape(-1), ignore_index=PAD_ID, label_smoothing=0.1
        )
        loss.backward()
        optimizer.step()
        return loss.item()  # host sync: the step has finished

    model.train()
    start = time.perf_counter()
    for step in range(max(args.warmup, 1)):
        train_step(*batches[step % len(batches)])
    warmup_s = time.perf_counter() - start
    times, losses = [], []
    for step in range(args.steps + 1):
        losses.append(train_step(*batches[step % len(batches)]))
        times.append(time.perf_counter())
    intervals = np.diff(times)
    return dict(
        name=name,
        backend=f"torch {torch.__version__}",
        jit_compile=name == "torch_compile",
        parameters=sum(p.numel() for p in model.parameters()),
        warmup_seconds=warmup_s,
        step_seconds_mean=float(np.mean(intervals)),
        step_seconds_median=float(np.median(intervals)),
        final_loss=losses[-1],
        device=torch.cuda.get_device_name(),
        peak_memory_bytes=int(torch.cuda.max_memory_allocated()),
        peak_memory_kind="torch max_memory_allocated",
    )


# ----------------------------------------------------------------------------------------------
# Driver.


def run_worker(args):
    name = args.worker
    if name == "interleaved":
        print(RESULT_PREFIX + json.dumps(run_interleaved_worker(args)), flush=True)
        return
    result = run_torch_worker(args, name) if name.startswith("torch") else run_keras_worker(args, name)
    result["name"] = name
    tokens = args.batch * args.length
    result["target_tokens_per_step"] = tokens
    result["target_tokens_per_second"] = tokens / result["step_seconds_mean"]
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def spawn(args, argv, name, models_dir=None):
    command = [sys.executable, os.path.abspath(__file__), *argv, "--worker", name]
    if models_dir:
        command += ["--models_dir", models_dir]
    env = dict(os.environ, KERAS_BACKEND=args.backend)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    print(f"--- {name}: running", flush=True)
    completed = subprocess.run(command, env=env, capture_output=True, text=True)
    for line in completed.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            result = json.loads(line[len(RESULT_PREFIX) :])
            if "bursts" in result:
                print(f"--- {name}: {len(result['bursts'])} bursts", flush=True)
            else:
                print(f"--- {name}: {result['target_tokens_per_second']:,.0f} target tokens/s", flush=True)
            return result
    tail = "\n".join((completed.stdout + completed.stderr).splitlines()[-25:])
    print(f"--- {name}: FAILED (exit {completed.returncode})\n{tail}", flush=True)
    return dict(name=name, error=tail)


def print_table(results):
    anchor = next((r for r in results if r["name"] == "keras_hub" and "error" not in r), None)
    ours = next((r for r in results if r["name"] == "ours" and "error" not in r), None)
    header = (
        f"{'candidate':<22} {'backend':<14} {'tokens/s':>10} {'step ms':>9} {'peak GiB':>9} "
        f"{'vs keras_hub':>12} {'vs ours':>8} {'compile+warmup s':>16}"
    )
    print(header)
    print("-" * len(header))
    for r in results:
        if "error" in r:
            print(f"{r['name']:<22} FAILED")
            continue
        speed = r["target_tokens_per_second"]
        versus_anchor = f"{speed / anchor['target_tokens_per_second']:.2f}x" if anchor else "-"
        versus_ours = f"{speed / ours['target_tokens_per_second']:.2f}x" if ours else "-"
        print(
            f"{r['name']:<22} {r['backend'][:14]:<14} {speed:>10,.0f} {1000 * r['step_seconds_mean']:>9.1f} "
            f"{r['peak_memory_bytes'] / 2**30:>9.2f} {versus_anchor:>12} {versus_ours:>8} "
            f"{r['warmup_seconds']:>16.1f}"
        )


def interleaved_summary(rounds):
    """Median tokens/s of each candidate and median ratio over every burst of every round."""
    import statistics

    bursts = [burst for result in rounds if "error" not in result for burst in result["bursts"]]
    if not bursts:
        return {}
    return dict(
        bursts=len(bursts),
        ours_median=statistics.median(b["ours"] for b in bursts),
        keras_hub_median=statistics.median(b["keras_hub"] for b in bursts),
        ratio_median=statistics.median(b["ratio"] for b in bursts),
        ratio_quartiles=statistics.quantiles([b["ratio"] for b in bursts], n=4) if len(bursts) > 1 else None,
        ratio_at_least_1_5=sum(b["ratio"] >= 1.5 for b in bursts),
    )


def print_settings(args, timing):
    print()
    print(
        f"preset={args.preset} sizes={model_sizes(args)} vocab={args.vocab} batch={args.batch} "
        f"length={args.source_length}->{args.length} mixed_precision={args.mixed_precision} "
        f"{timing} rounds={args.rounds}"
    )


def main_interleaved(args, argv):
    rounds = [spawn(args, argv, "interleaved") for _ in range(args.rounds)]
    print_settings(args, f"steps per burst={args.steps} warmup={args.warmup} bursts={args.interleave}")
    for index, result in enumerate(rounds):
        if "error" in result:
            print(f"round {index + 1}: FAILED")
            continue
        print(
            f"round {index + 1}: ours / keras_hub per burst: "
            + ", ".join(f"{b['ratio']:.2f}" for b in result["bursts"])
        )
    summary = interleaved_summary(rounds)
    if summary:
        print(
            f"ours {summary['ours_median']:,.0f} and keras_hub {summary['keras_hub_median']:,.0f} target tokens/s "
            f"(medians of {summary['bursts']} bursts); ours / keras_hub: median {summary['ratio_median']:.2f}x"
            + (
                " (quartiles " + " / ".join(f"{q:.2f}" for q in summary["ratio_quartiles"]) + ")"
                if summary["ratio_quartiles"]
                else ""
            )
            + f", {summary['ratio_at_least_1_5']} of {summary['bursts']} bursts at 1.5x or more"
        )
    return rounds, summary


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.worker:
        run_worker(args)
        return
    if args.interleave:
        rounds, summary = main_interleaved(args, argv)
        if args.json:
            write_json(args, argv, rounds, summary)
        return
    candidates = [] if args.no_ours else [("ours", None)]
    for item in args.variant:
        label, _, directory = item.partition("=")
        candidates.append((f"ours[{label}]", directory))
    if "keras_hub" in args.anchors:
        candidates.append(("keras_hub", None))
    if "torch" in args.anchors:
        candidates += [("torch_eager", None), ("torch_compile", None)]
    rounds = []
    for index in range(args.rounds):
        # Alternate the order so that a machine getting slower or faster favours nobody.
        ordered = candidates if index % 2 == 0 else candidates[::-1]
        results = [spawn(args, argv, name, directory) for name, directory in ordered]
        rounds.append(sorted(results, key=lambda r: [name for name, _ in candidates].index(r["name"])))

    print_settings(args, f"steps={args.steps} warmup={args.warmup}")
    for index, results in enumerate(rounds):
        if args.rounds > 1:
            print(f"round {index + 1}")
        print_table(results)
    summary = {}
    if args.rounds > 1:
        import statistics

        print("median over rounds of each round's ratio to `ours` / to `keras_hub`:")
        for name, _ in candidates:
            row = {}
            for reference in ("ours", "keras_hub"):
                ratios = []
                for results in rounds:
                    by_name = {r["name"]: r for r in results if "error" not in r}
                    if name in by_name and reference in by_name:
                        ratios.append(
                            by_name[name]["target_tokens_per_second"] / by_name[reference]["target_tokens_per_second"]
                        )
                if ratios:
                    row[f"vs_{reference}_median"] = statistics.median(ratios)
                    row[f"vs_{reference}_all"] = ratios
            summary[name] = row
            print(
                f"  {name:<22} "
                + "  ".join(
                    f"vs {reference}: {row[f'vs_{reference}_median']:.2f}x "
                    f"({', '.join(f'{x:.2f}' for x in row[f'vs_{reference}_all'])})"
                    for reference in ("ours", "keras_hub")
                    if f"vs_{reference}_median" in row
                )
            )
    if args.json:
        write_json(args, argv, rounds[0] if args.rounds == 1 else rounds, summary)


def write_json(args, argv, results, summary):
    with open(args.json, "w") as f:
        json.dump(
            dict(
                command=" ".join([os.path.relpath(__file__, REPO_ROOT), *argv]),
                sizes=model_sizes(args),
                vocab=args.vocab,
                batch=args.batch,
                length=args.length,
                source_length=args.source_length,
                mixed_precision=args.mixed_precision,
                host=platform.node(),
                # Runtime settings that change the candidates' speed (XLA auto-clustering).
                environment={k: os.environ[k] for k in ("TF_XLA_FLAGS", "XLA_FLAGS") if k in os.environ},
                results=results,
                ratio_summary=summary,
            ),
            f,
            indent=2,
        )


if __name__ == "__main__":
    main()
