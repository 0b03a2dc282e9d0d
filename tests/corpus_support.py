"""The Kafka cleaner corpus (tests/data/kafka-cleaner-corpus.tar.xz): unpacking, running, comparing.

Each case is a Kafka-written partition directory and Kafka's real cleaner output per round;
``tools/kcompare.py`` inside the archive is the corpus' own independent decoder and comparer.
"""

from __future__ import annotations

import fcntl
import functools
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time

ARCHIVE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "kafka-cleaner-corpus.tar.xz")
CASE_LIST = os.path.join(os.path.dirname(ARCHIVE), "kafka-cleaner-corpus.cases")   # the archive's case names


def unpack_corpus(dest: str) -> str:
    with tarfile.open(ARCHIVE) as tar:
        tar.extractall(dest, filter="data")
    return os.path.join(dest, "corpus")


def unpack_corpus_once(root: str) -> str:
    """The corpus unpacked below ``root`` by the first process that asks (a lock: pytest-xdist's
    workers share one copy; unpacking costs ~4.6 CPU-s and ~100 MB a worker); its path. Read
    only: every test copies a case's input before it writes."""
    dest = os.path.join(root, "kafka-cleaner-corpus")
    with open(os.path.join(root, "kafka-cleaner-corpus.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.isdir(dest):
            partial = f"{dest}.{os.getpid()}"
            shutil.rmtree(partial, ignore_errors=True)
            unpack_corpus(partial)
            os.rename(partial, dest)          # whole, or not there for the next to try
    return os.path.join(dest, "corpus")


def case_names() -> list[str]:
    return list(_case_names())


@functools.lru_cache(maxsize=None)
def _case_names() -> tuple[str, ...]:
    # from the list beside the archive (test_corpus checks it names the unpacked cases): listing
    # the .tar.xz decompresses all of it, ~1 CPU-s in every process that collects test_corpus or
    # test_read_only (each xdist worker, the fast lane's too)
    with open(CASE_LIST) as f:
        return tuple(sorted(line.strip() for line in f if line.strip()))


@functools.lru_cache(maxsize=None)
def kcompare(corpus: str):
    """The corpus' own comparer (tools/kcompare.py: constants and pure functions), loaded once per
    corpus and process: every round of every case compares with it (~800 rounds in test_corpus'
    three passes, ~5 ms each to load it again)."""
    spec = importlib.util.spec_from_file_location("kcompare", os.path.join(corpus, "tools", "kcompare.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def load_case(corpus: str, name: str) -> dict:
    with open(os.path.join(corpus, "cases", name, "case.json")) as f:
        return json.load(f)


def broker_overrides(case: dict) -> dict:
    return {k: v for k, v in case["broker_configs"].items() if not k.startswith("oracle.")}


def prepare(corpus: str, name: str, data_dir: str) -> dict:
    """Copy the case's input into an empty data dir (FORMAT.md §2 step 1)."""
    shutil.copytree(os.path.join(corpus, "cases", name, "input"), data_dir)
    return load_case(corpus, name)


def compare_round(corpus: str, name: str, case: dict, data_dir: str, k: int) -> list[str]:
    kc = kcompare(corpus)
    strict = not case["compressed"]
    expected = os.path.join(corpus, "cases", name, "expected", f"round-{k}.jsonl")
    diffs = kc.compare_path(data_dir, expected, strict)
    if strict and not diffs:
        diffs = kc.files_diff(data_dir, os.path.join(corpus, "cases", name, "expected", f"round-{k}"))
    return diffs


def expected_clean_line(corpus: str, name: str, k: int) -> dict:
    with open(os.path.join(corpus, "cases", name, "expected", f"round-{k}.jsonl")) as f:
        return json.loads(f.readline())


def run_case_api(corpus: str, name: str, data_dir: str, executor,
                 extra_broker: dict | None = None) -> list[tuple[int, list[str], list]]:
    """Every round through the cleaner's public entry point; (round, diffs, outcomes) per round."""
    from compactlog.cleaner.cleaner import Cleaner
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    case = prepare(corpus, name, data_dir)
    with DataDir(data_dir, writable=True) as dd:
        dd.alter_topic(case["topic"], case["topic_configs"])
    results = []
    for k, now in enumerate(case["rounds"], start=1):
        broker = BrokerConfig({**broker_overrides(case), **(extra_broker or {})})
        with DataDir(data_dir, broker=broker, clock=lambda now=now: now, writable=True) as dd:
            outcomes = Cleaner(dd, executor).run(now)
        results.append((k, compare_round(corpus, name, case, data_dir, k), outcomes))
    return results


def run_case_cli(corpus: str, name: str, data_dir: str, extra_env: dict | None = None,
                 clean_args: tuple = (), process: bool = False) -> list[tuple[int, list[str], str]]:
    """The corpus contract through the command line (the hidden cases are run this way): each
    command in this process (a fresh interpreter costs ~0.6 CPU-s), or with ``process`` through
    the installed ``compactlog`` in a process of its own, as the hidden cases run."""
    case = prepare(corpus, name, data_dir)
    exe = os.path.join(os.path.dirname(sys.executable), "compactlog")
    env = dict(os.environ, **(extra_env or {}))

    def command(args: list[str]) -> subprocess.CompletedProcess:
        if process:
            return subprocess.run([exe, *args], capture_output=True, text=True, env=env)
        from cli_support import run_in_process
        return run_in_process(args, text=True, env=env)
    alter = ["--data-dir", data_dir, "topics", "alter", "--topic", case["topic"]]
    for k, v in case["topic_configs"].items():
        alter += ["--config", f"{k}={v}"]
    r = command(alter)
    assert r.returncode == 0, r.stderr
    results = []
    for k, now in enumerate(case["rounds"], start=1):
        cmd = ["--data-dir", data_dir]
        for key, v in broker_overrides(case).items():
            cmd += ["--override", f"{key}={v}"]
        cmd += ["clean", "--now-ms", str(now), *clean_args]
        p = command(cmd)
        if p.returncode != 0:
            results.append((k, [f"exit {p.returncode}: {p.stderr.strip()}"], p.stdout))
            break
        results.append((k, compare_round(corpus, name, case, data_dir, k), p.stdout))
    return results


class LockstepExecutor:
    """One executor shared by several cases cleaned at once, each in its own thread and data dir:
    a round's plans wait until every case still running has submitted its round (or finished),
    then all of them go to the inner executor in one call (one Spark job for every case instead
    of one per case and round). Results go back to each case in its plans' order."""

    def __init__(self, inner, parties: int, timeout_s: float = 600.0):
        self.inner = inner
        self.name = getattr(inner, "name", "executor")
        self._cond = threading.Condition()
        self._live = parties
        self._pending: list[tuple[list, dict]] = []
        self._timeout_s = timeout_s

    def __getattr__(self, name):           # choice, last_choice, ... of the inner executor
        return getattr(self.inner, name)

    def run(self, plans: list) -> list:
        slot: dict = {}
        deadline = time.monotonic() + self._timeout_s
        with self._cond:
            self._pending.append((plans, slot))
            self._maybe_run()
            while "results" not in slot:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no lockstep round within {self._timeout_s} s")
                self._cond.wait(left)
        if isinstance(slot["results"], BaseException):
            raise slot["results"]
        return slot["results"]

    def done(self) -> None:
        with self._cond:
            self._live -= 1
            self._maybe_run()

    def _maybe_run(self) -> None:
        if not self._pending or len(self._pending) < self._live:
            return
        batch, self._pending = self._pending, []
        try:
            out = self.inner.run([p for plans, _ in batch for p in plans])
        except BaseException as e:          # every waiting case sees the failure
            for _, slot in batch:
                slot["results"] = e
        else:
            k = 0
            for plans, slot in batch:
                slot["results"] = out[k:k + len(plans)]
                k += len(plans)
        self._cond.notify_all()


def run_cases_api_lockstep(corpus: str, names: list[str], base_dir: str, executor,
                           extra_broker: dict | None = None, timeout_s: float = 900.0) -> dict:
    """``run_case_api`` for every case at once through one ``LockstepExecutor``; per case its
    rounds, or the exception it raised."""
    lockstep = LockstepExecutor(executor, len(names))
    results: dict = {}

    def one(name: str) -> None:
        try:
            results[name] = run_case_api(corpus, name, os.path.join(base_dir, name), lockstep, extra_broker)
        except BaseException as e:
            results[name] = e
        finally:
            lockstep.done()

    threads = [threading.Thread(target=one, args=(n,), name=f"case-{n}", daemon=True) for n in names]
    for t in threads:
        t.start()
    deadline = time.monotonic() + timeout_s
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    for n in names:
        results.setdefault(n, TimeoutError(f"{n}: not done within {timeout_s} s"))
    return results
