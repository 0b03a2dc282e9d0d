# compactlog: the two entry points are `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

export SPARK_LOCAL_IP ?= 127.0.0.1
export COMPACTLOG_SPARK_LOCAL_DIR ?= $(CURDIR)/build/spark-local

# the stream processors the transaction tests run (Quix Streams, Faust) live in a virtualenv of
# their own: quixstreams pins confluent-kafka<2.13, compactlog needs >=2.16
APPS_VENV := .venv-apps
APPS_STAMP := $(APPS_VENV)/.installed
APPS_REQUIREMENTS := tests/apps/requirements.txt

.PHONY: demo test test-fast venv apps-venv clean-build bench

venv: $(STAMP)

# the numba kernels are compiled once here (cached beside the sources), so that no command pays
# for it later: `python -m compactlog.warmup` runs every command's kernels on a scratch dir; then
# the signatures it compiled are built ahead of time into an extension module (numba.pycc, gcc),
# so that a one-shot command does not import numba at all (~0.6 CPU-s of a clean): when that
# build fails, commands load numba's cache as before (the '-'). The sources are byte-compiled last:
# with PYTHONDONTWRITEBYTECODE set (CI machines, this one) a command compiled the ~80 modules a
# clean imports on every start (~0.4 CPU-s of a one-shot clean, py-spy)
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	$(PY) -m compactlog.warmup
	-$(PY) -m compactlog.aot
	$(PY) -m compileall -q compactlog > /dev/null
	touch $(STAMP)

# built once (the stamp); when it cannot be built, `make test` goes on and the app tests skip, saying
# why (the reason is kept in $(APPS_VENV)/.failed)
apps-venv: $(APPS_STAMP)

$(APPS_STAMP): $(APPS_REQUIREMENTS)
	@rm -f $(APPS_VENV)/.failed
	@if $(PYTHON) -m venv $(APPS_VENV) \
	    && $(APPS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
	       -r $(APPS_REQUIREMENTS) > $(APPS_VENV)/.pip.log 2>&1; then \
	    touch $(APPS_STAMP); \
	else \
	    mkdir -p $(APPS_VENV); \
	    { echo "python -m venv $(APPS_VENV), then pip install -r $(APPS_REQUIREMENTS), failed:"; tail -5 $(APPS_VENV)/.pip.log 2>/dev/null; echo; } > $(APPS_VENV)/.failed; \
	    echo "note: $(APPS_VENV) could not be built; the Quix Streams and Faust tests will be skipped" >&2; \
	fi

demo: $(STAMP)
	$(PY) -m compactlog.demo --data-dir build/demo-data

# the whole suite on six workers (pytest-xdist; each test file stays on one worker, so a module's
# SparkSession and broker are started once): most tests wait on subprocesses, and fewer workers
# leave the two cores idle meanwhile (two: 9:37 against 7:56 for four; four: 8:23 against 7:32 for
# six, the same tree and hour on a fresh clone, 660 and 674 CPU-s). The files with Spark tests go
# to two of the workers (conftest.py, tests/lane_scheduling.py): each worker that runs one starts a
# SparkSession of its own (~10-13 CPU-s of JVM)
TEST_WORKERS ?= 6
# the sources byte-compiled first: with PYTHONDONTWRITEBYTECODE set (as on CI machines) every
# command a test starts would compile the package's sources again (~0.07 s of CPU each). Then one
# collection with bytecode allowed writes pytest's assertion-rewritten test modules to their
# caches, which pytest reads even with PYTHONDONTWRITEBYTECODE set: without it each of the workers
# rewrote all ~350 test modules itself (a collection 19 CPU-s cold, 5 with the cache, at load ~9;
# a failed collection is left for the run itself to report)
#
# A tree's first run (no Spark local dir yet: CI's clean clone, always) neither builds nor maps
# Spark's class-data-sharing archive (compactlog/spark/cds.py): it costs ~46 CPU-s to write and
# saves ~2.5 CPU-s for each JVM started once it is there, ~3 min into the run (the clean-clone run of
# 58f3e82: 7 of its 10 driver JVMs, 3 worker sessions and 4 commands, ~18 CPU-s; with the Spark files
# on two workers both sessions start at once, before it). The next run in the same tree builds it
# in the background and the runs after it map it.
test: $(STAMP) $(APPS_STAMP)
	$(PY) -m compileall -q compactlog tests > /dev/null
	-PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q --collect-only -p no:cacheprovider > /dev/null 2>&1
	$(if $(wildcard $(COMPACTLOG_SPARK_LOCAL_DIR)),,COMPACTLOG_SPARK_CDS=0) $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

# the lane to run while working (under 60 s on a quiet machine): no Spark, no broker subprocess, no
# corpus, nothing slow (markers set in conftest.py); CI runs `make test`, the whole suite. Python
# writes its bytecode here and pytest its rewritten test modules: with PYTHONDONTWRITEBYTECODE set
# (as on CI machines) every run compiled the sources and rewrote ~300 test files again: collection
# took 21 s of CPU, 7 s with the caches. Two workers: on a quiet 2-core machine 44 s of wall against
# 65 s for one process (56 CPU-s of tests, some of them waiting on threads and timers)
test-fast: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 -m "not spark and not broker and not corpus and not slow"

bench: $(STAMP)
	$(PY) benchmarks/append_read.py

clean-build:
	rm -rf build
