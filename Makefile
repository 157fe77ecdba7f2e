# `make test` and `make demo` create .venv on first use and install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-fast demo clean-venv

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	touch $(STAMP)

# The whole suite under TensorFlow, then tests/models again under JAX.
test: $(STAMP)
	$(PY) -m pytest -q tests
	KERAS_BACKEND=jax $(PY) -m pytest -q tests/models

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not slow" tests

demo: $(STAMP)
	@echo "make demo: not yet available (training lands with train.py)"; exit 1

clean-venv:
	rm -rf $(VENV)
