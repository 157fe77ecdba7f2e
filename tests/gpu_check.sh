#!/usr/bin/env bash
# tests/models and the benchmarks' JAX paths on a GPU machine with Python 3.12 and JAX + CUDA but
# no TensorFlow and no Keras (docs/benchmarks.md, "On a GPU machine without TensorFlow"). Beforehand,
# on a machine with the network: the Keras wheels and those of pytest, pluggy, iniconfig, packaging,
# execnet and pytest-xdist for Python 3.12 in .whl/. On the GPU machine, from the repository root:
#     OUT=DIR bash tests/gpu_check.sh      (one log per step under DIR; exit 1 if any step failed)
set -u
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  > "$OUT/pip.log" 2>&1 || { echo "pip install failed"; tail -20 "$OUT/pip.log"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD KERAS_BACKEND=jax XLA_PYTHON_CLIENT_PREALLOCATE=false TF_CPP_MIN_LOG_LEVEL=2
status=0
run() {  # run NAME TIMEOUT COMMAND...: the command's output in $OUT/NAME.log, its tail and exit status here
  local name=$1 limit=$2
  shift 2
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "=== $name: exit $rc in $((SECONDS - start)) s"
  tail -n 12 "$OUT/$name.log"
  [ "$rc" = 0 ] || status=1
}

{
  nvidia-smi -L
  python3 -c "import sys, jax, keras; print(sys.version.split()[0], 'jax', jax.__version__, jax.devices(), 'keras', keras.__version__)"
  python3 -c "import tensorflow" 2>&1 | tail -n 1
} > "$OUT/environment.log" 2>&1
cat "$OUT/environment.log"
if python3 -c "import keras_hub" > "$OUT/keras_hub_import.log" 2>&1; then
  keras_hub=yes
else
  keras_hub=no
  echo "keras_hub does not import here (the keras_hub candidates are left out):"
  tail -n 3 "$OUT/keras_hub_import.log"
fi

# Part 9: tests/models under JAX on the GPU (float32 products pinned by tests/models/conftest.py).
run tests_models 420 python3 -m pytest -q -n 4 -p no:cacheprovider -rfEs --durations=10 tests/models

# Part 8: the benchmarks' JAX smoke tests (no TensorFlow, checked by tests/no_tensorflow.py) ...
smoke=(tests/benchmarks/test_train_throughput.py tests/benchmarks/test_jax_trace_summary.py)
[ "$keras_hub" = yes ] && smoke+=(tests/benchmarks/test_beam_search_speed.py)
run tests_benchmarks_jax 300 python3 -m pytest -q -p no:cacheprovider -rfEs --durations=10 "${smoke[@]}"

# ... and the scripts themselves at small sizes on the GPU, bf16, with a profile read back.
candidates=ours anchor=none
[ "$keras_hub" = yes ] && candidates=ours,keras_hub anchor=keras_hub
run beam_search_speed 180 python3 benchmarks/beam_search_speed.py --backend jax --num_layers 2 --hidden_dim 64 \
  --intermediate_dim 256 --num_heads 4 --vocab 1000 --batch 8 --output_length 12 --repeats 2 \
  --candidates "$candidates" --json "$OUT/beam_search_speed.json"
run train_throughput 240 python3 benchmarks/train_throughput.py --backend jax --preset tiny --vocab 1000 --batch 32 \
  --length 16 --steps 5 --warmup 2 --mixed_precision --accumulate_steps 2 --anchor "$anchor" \
  --profile_dir /tmp/gpu_check_profiles --json "$OUT/train_throughput.json"
run jax_trace_summary 60 python3 benchmarks/jax_trace_summary.py /tmp/gpu_check_profiles/ours --steps 3 --top 10 --group

echo "gpu_check: $([ "$status" = 0 ] && echo all passed || echo FAILURES, see the logs in $OUT)"
exit "$status"
