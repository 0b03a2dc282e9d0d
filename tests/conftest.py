"""Shared fixtures: one SparkSession for the whole run, the unpacked cleaner corpus."""

from __future__ import annotations

import io
import os
import sys
from typing import NamedTuple

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("COMPACTLOG_SPARK_QUICK_START", "1")   # tests start many JVMs, run short jobs


@pytest.fixture(scope="module", autouse=True)
def _no_broker_left_running():
    """A broker a module's test started and did not stop (it failed before its ``stop()``) is
    killed when the module ends, after its fixtures' teardown. Not at each test's end: tests
    hand a restarted broker to the next (a module's ``env["broker"]`` replaced after a kill -9)."""
    started_before = set(_running_brokers())
    yield
    for broker in _running_brokers() - started_before:
        broker.kill()


def _running_brokers() -> set:
    module = sys.modules.get("broker_support")       # only where a test imported it
    return set(module.Broker.running) if module is not None else set()


@pytest.fixture(scope="session")
def spark():
    from compactlog.spark import cds
    from compactlog.spark.local_dir import default_local_dir
    from compactlog.spark.session import session
    # Spark's classes archived for every later JVM (built here, in the background, when it is missing)
    cds.build_in_background(default_local_dir())
    return session("local[2]")


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    """One unpacked corpus for the whole run: under pytest-xdist, in the run's temp dir that the
    workers' own temp dirs are in (each worker unpacked it again: ~4.6 CPU-s each)."""
    from corpus_support import unpack_corpus_once
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    return unpack_corpus_once(str(root))


class Result(NamedTuple):
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """Run ``compactlog ARGS`` in this process; (exit code, stdout, stderr)."""
    from cli_support import call_main

    def run(*args: str, stdin: str | bytes | None = None) -> Result:
        capsys.readouterr()
        data = stdin.encode("utf-8") if isinstance(stdin, str) else (stdin or b"")
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
        code = call_main([str(a) for a in args])
        out, err = capsys.readouterr()
        return Result(code, out, err)
    return run
