# `make test` and `make demo` create .venv on first use and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-fast lint demo clean-venv

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

# Test processes (pytest-xdist); the corpus, the shared training run and the export are built once
# for all of them (tests/conftest.py's once_per_session).
TEST_WORKERS ?= 2

# JAX compiles each eager operation for each shape it meets; this cache lets the test processes
# share those compilations (and later runs reuse them). The tests compile far more than they run:
# XLA's CPU backend at its lowest optimization level, with its LLVM IR emitters for fusions rather
# than the newer MLIR ones, compiles faster, with the same results (tests/helpers.py's TEST_XLA_FLAGS).
JAX_TEST_CACHE := JAX_COMPILATION_CACHE_DIR=$(CURDIR)/.pytest_cache/jax JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0 \
	JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES=-1 \
	XLA_FLAGS="--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"

# The whole suite under TensorFlow, then tests/models again under JAX.
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup tests
	KERAS_BACKEND=jax $(JAX_TEST_CACHE) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup tests/models

# ruff's lint rules and formatting (settings in pyproject.toml); CI runs it before the tests.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# The fast tier, for constant use while developing: no network, the sample corpus, no tests marked
# slow or full (tests/conftest.py's --fast).
test-fast: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --fast tests

# The main job on the built-in corpus, on a CPU: corpus, vocabulary, the tiny model, BLEU on the
# test split, a SavedModel, and a few sentences translated by it. Outputs under $(DEMO_DIR).
DEMO_DIR ?= runs/demo
DEMO_STEPS ?= 2400
DEMO_TRAIN_FLAGS := --recipe=small_data --train_steps=$(DEMO_STEPS) --checkpoint_every=200 --keep_checkpoints=5 \
	--eval_every=1200 --eval_sentences=100
# The mean of the last five checkpoints. The search is the recipe's, chosen on the dev split and
# recorded in the run's config.json, which evaluate.py and the export read (the paper's alpha 0.6
# leaves this small model's beam outputs short; benchmarks/README.md, "The demo's recipe").
DEMO_CHECKPOINT := --checkpoint=average:5

demo: $(STAMP)
	@echo "== 1/5 building the deb-en-de corpus from Debian packages"
	$(PY) -m data.prepare --corpus=deb-en-de --cache_dir=cache/corpora
	@echo "== 2/5 training the tiny Transformer ($(DEMO_STEPS) steps; rerun to resume if interrupted)"
	$(PY) train.py --model_dir=$(DEMO_DIR) $(DEMO_TRAIN_FLAGS)
	@echo "== 3/5 sacreBLEU and chrF on the test split, beam 4"
	$(PY) evaluate.py --model_dir=$(DEMO_DIR) $(DEMO_CHECKPOINT) --split=test --output=$(DEMO_DIR)/test.hyp
	@echo "== 4/5 exporting the SavedModel for TensorFlow Serving"
	rm -rf $(DEMO_DIR)/export
	$(PY) -m export --model_dir=$(DEMO_DIR) $(DEMO_CHECKPOINT) --export_dir=$(DEMO_DIR)/export --length_buckets=16,32
	@echo "== 5/5 translating with the exported SavedModel"
	printf '%s\n' "Open the file." "Click OK to close the dialog." "The weather is nice today." \
		"Select the cells that you want to delete." > $(DEMO_DIR)/sentences.en
	$(PY) translate.py --export_dir=$(DEMO_DIR)/export --input=$(DEMO_DIR)/sentences.en --output=$(DEMO_DIR)/sentences.de
	paste -d '\n' $(DEMO_DIR)/sentences.en $(DEMO_DIR)/sentences.de | sed 'n;s/^/    -> /'
	@echo "== done: model, checkpoints, TensorBoard logs in $(DEMO_DIR); SavedModel in $(DEMO_DIR)/export"

clean-venv:
	rm -rf $(VENV)
