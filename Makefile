# compactlog: the two entry points are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export SPARK_LOCAL_IP ?= 127.0.0.1
export COMPACTLOG_SPARK_LOCAL_DIR ?= $(CURDIR)/build/spark-local

.PHONY: demo test test-fast venv clean-build bench

venv: $(STAMP)

# the numba kernels are compiled once here (cached beside the sources), so that no command pays
# for it later: `python -m compactlog.warmup` runs every command's kernels on a scratch dir
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m compactlog.warmup
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m compactlog.demo --data-dir build/demo-data

# the whole suite on two workers (pytest-xdist; each test file stays on one worker, so a module's
# SparkSession and broker are started once)
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# the lane to run while working (under 90 s): no Spark, no broker subprocess, no corpus, nothing
# slow (markers set in conftest.py); CI runs `make test`, the whole suite
test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not spark and not broker and not corpus and not slow"

bench: $(STAMP)
	$(PY) benchmarks/append_read.py

clean-build:
	rm -rf build
