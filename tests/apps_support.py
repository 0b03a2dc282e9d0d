"""Running real stream processors (Quix Streams, Faust) against a ``compactlog serve`` subprocess:
the apps' own virtualenv, an app subprocess stopped by its pid, a rate-limited input feeder, a
read_committed reader of the apps' output and changelog topics, and the broker's cleaner log.

The apps run with ``.venv-apps/bin/python`` (``make apps-venv``, a dependency of ``make test``):
quixstreams pins confluent-kafka<2.13 while compactlog needs >=2.16, so they cannot share the
test venv. The test process itself talks to the broker with the test venv's confluent-kafka."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from collections import defaultdict

import pytest

from broker_support import Broker, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
APPS_DIR = os.path.join(ROOT, "tests", "apps")
APPS_VENV = os.path.join(ROOT, ".venv-apps")
STOP_TIMEOUT = 30

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402


def apps_python(module: str) -> str:
    """The apps venv's python, once it imports ``module``; else the test is skipped with the
    reason (only when the venv could not be built: ``make apps-venv`` records why)."""
    python = os.environ.get("COMPACTLOG_APPS_PYTHON")
    if not python:
        python = os.path.join(APPS_VENV, "bin", "python")
        if not os.path.exists(os.path.join(APPS_VENV, ".installed")):
            failed = os.path.join(APPS_VENV, ".failed")
            why = open(failed).read().strip() if os.path.exists(failed) else "run `make apps-venv`"
            pytest.skip(f"the apps virtualenv {APPS_VENV} is not built: {why}")
    r = subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=120)
    if r.returncode != 0:
        pytest.skip(f"{python} cannot import {module}: {r.stderr.decode()[-500:]}")
    return python


class App:
    """One app subprocess (``tests/apps/SCRIPT ARGS``), its output appended to ``log_path``."""

    def __init__(self, python: str, script: str, args, log_path: str):
        self.python, self.script, self.args = python, script, list(args)
        self.cmd = [python, os.path.join(APPS_DIR, script), *map(str, args)]
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    def start(self) -> "App":
        with open(self.log_path, "ab") as log:
            log.write(f"\n=== start {time.strftime('%H:%M:%S')} {' '.join(self.cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                         cwd=os.path.dirname(self.log_path))
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def sigkill(self) -> None:
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(STOP_TIMEOUT)

    def stop(self) -> None:
        """SIGTERM (the frameworks' graceful shutdown), SIGKILL after a bounded wait."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.sigkill()

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")[-n:]
        except FileNotFoundError:
            return ""


def create_topic(bootstrap: str, topic: str, partitions: int, config: dict | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


class Feeder(threading.Thread):
    """Produces ``total`` records ``key = k<i % keys>`` at about ``rate`` records/s with an
    idempotent producer (no duplicate in the input through a broker restart), every delivery
    checked (records ``first`` to ``total - 1``). ``paused`` holds it back while set."""

    def __init__(self, bootstrap: str, topic: str, total: int, keys: int, rate: float, first: int = 0):
        super().__init__(daemon=True, name=f"feeder-{topic}")
        self.bootstrap, self.topic, self.total, self.keys, self.rate = bootstrap, topic, total, keys, rate
        self.first = first          # records first..total-1
        self.errors: list = []
        self.sent = 0
        self.paused = threading.Event()
        self.stop_now = threading.Event()

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 60000})
        start = time.monotonic()
        for i in range(self.first, self.total):
            if self.stop_now.is_set():
                break
            while self.paused.is_set() and not self.stop_now.is_set():
                time.sleep(0.05)
                start = time.monotonic() - (i - self.first) / self.rate
            delay = start + (i - self.first) / self.rate - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            p.produce(self.topic, key=f"k{i % self.keys}".encode(), value=json.dumps({"i": i}).encode(),
                      on_delivery=lambda err, msg: err is not None and self.errors.append(err))
            self.sent = i + 1
            p.poll(0)
        if p.flush(60):
            self.errors.append("records still undelivered after 60 s")

    def finish(self, timeout: float = 90) -> None:
        self.join(timeout)
        assert not self.is_alive(), f"the feeder did not finish within {timeout} s"
        assert not self.errors, f"input not delivered: {self.errors[:3]}"


def expected_counts(total: int, keys: int) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for i in range(total):
        out[f"k{i % keys}"] += 1
    return dict(out)


class CommittedReader:
    """A read_committed consumer of ``partitions`` partitions of ``topic`` from the beginning; each
    ``poll_all`` call adds what became visible (up to the last stable offset) to ``records``."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed"):
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{topic}",
                                  "enable.auto.commit": False, "enable.partition.eof": True,
                                  "isolation.level": isolation, "topic.metadata.refresh.interval.ms": 1000})
        self.consumer.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                              for p in range(partitions)])
        self.partitions = partitions
        self.records: list[tuple[int, int, bytes | None, bytes | None]] = []
        self.at_end: set[int] = set()

    def poll_all(self, max_wait: float = 2.0) -> list:
        """Read until every partition is at its end and a poll brings nothing (or ``max_wait`` s).
        librdkafka reports a partition's end once per arrival there, so it is remembered."""
        deadline = time.monotonic() + max_wait
        while time.monotonic() < deadline:
            m = self.consumer.poll(0.2)
            if m is None:
                if len(self.at_end) == self.partitions:
                    break
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    self.at_end.add(m.partition())
                continue
            self.at_end.discard(m.partition())
            self.records.append((m.partition(), m.offset(), m.key(), m.value()))
        return self.records

    def close(self) -> None:
        self.consumer.close()


def counts_by_key(records) -> dict[str, list[int]]:
    """The running counts an app produced (``{"key": K, "count": N}`` values), per key, in order."""
    out: dict[str, list[int]] = defaultdict(list)
    for _p, _o, _k, value in records:
        d = json.loads(value)
        out[d["key"]].append(d["count"])
    return dict(out)


def assert_exactly_once(records, expected: dict[str, int]) -> None:
    """Every key's counts are 1, 2, ..., its number of input records: none twice, none skipped."""
    got = counts_by_key(records)
    assert sorted(got) == sorted(expected), f"keys {sorted(set(got) ^ set(expected))} differ"
    bad = {k: _describe(v, expected[k]) for k, v in got.items() if v != list(range(1, expected[k] + 1))}
    assert not bad, f"output not exactly once for {len(bad)} key(s): {dict(list(bad.items())[:5])}"


def assert_at_least_once(records, expected: dict[str, int]) -> None:
    """Every key's counts run from 1 to its number of input records with none skipped and never
    going back except to repeat counts already sent (a re-send after a restart)."""
    got = counts_by_key(records)
    assert sorted(got) == sorted(expected), f"keys {sorted(set(got) ^ set(expected))} differ"
    bad = {}
    for k, counts in got.items():
        high = 0
        for c in counts:
            if c > high + 1:
                bad[k] = f"{c} after {high}: skipped"
                break
            high = max(high, c)
        else:
            if high != expected[k]:
                bad[k] = f"ends at {high}, want {expected[k]}"
    assert not bad, f"output wrong for {len(bad)} key(s): {dict(list(bad.items())[:5])}"


def _describe(counts: list[int], want: int) -> str:
    dups = sorted({c for c in counts if counts.count(c) > 1})
    missing = sorted(set(range(1, want + 1)) - set(counts))
    return f"{len(counts)} counts, last {counts[-1:]}, want {want}; repeated {dups[:5]}, missing {missing[:5]}"


def last_counts(records) -> dict[str, int]:
    return {k: v[-1] for k, v in counts_by_key(records).items()}


_CLEANED = re.compile(r"Cleaned log (\S+)-(\d+) \(dirty section = \[(\d+), (\d+)\]\): .* (\d+) -> (\d+) messages")


def cleanings(broker: Broker, topic: str) -> list[tuple[int, int, int]]:
    """(partition, messages before, messages after) of each cleaning of ``topic`` the broker's
    cleaner logged (LogCleaner's "Cleaned log" line)."""
    return [(int(m.group(2)), int(m.group(5)), int(m.group(6)))
            for m in _CLEANED.finditer(broker.log_text()) if m.group(1) == topic]


def restart_broker_after_kill9(broker: Broker, down_for: float = 1.0) -> None:
    """kill -9 the broker, then start it again on the same port (the apps' clients reconnect to
    the address they know)."""
    port = broker.port
    broker.kill()
    time.sleep(down_for)
    broker.overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{port}"
    broker.start()
    assert broker.port == port


class AppRun:
    """One app's topics, feeder, app processes and read_committed reader of its output.

    The input (``input_partitions``, 2 unless told) and the output are made here; ``changelog`` is the store's changelog
    topic as the framework names it, made here with ``changelog_config`` when given (to give it
    small segments) or else by the framework; ``decode_changelog(key, value) -> (name, count)``
    reads one of its records."""

    def __init__(self, broker: Broker, python: str, tmp_path, *, script: str, group: str, input: str,
                 output: str, changelog: str, decode_changelog, total: int, keys: int, rate: float,
                 output_partitions: int = 1, changelog_config: dict | None = None, input_partitions: int = 2):
        self.broker, self.python, self.tmp, self.script = broker, python, tmp_path, script
        self.group, self.input, self.output, self.changelog = group, input, output, changelog
        self.decode_changelog = decode_changelog
        self.total, self.keys = total, keys
        self.input_partitions = input_partitions
        create_topic(broker.bootstrap, input, input_partitions)
        create_topic(broker.bootstrap, output, output_partitions)
        if changelog_config is not None:
            create_topic(broker.bootstrap, changelog, input_partitions, changelog_config)
        self.out = CommittedReader(broker.bootstrap, output, output_partitions)
        self.feeder = Feeder(broker.bootstrap, input, total, keys, rate)
        self.apps: list[App] = []
        # an app that exits by itself fails the waits, unless restarts are allowed (a broker restart)
        self.restarts_left = 0
        self.restarted = 0

    def expected(self) -> dict[str, int]:
        return expected_counts(self.total, self.keys)

    def start_app(self, *args, log: str = "app.log") -> App:
        app = App(self.python, self.script, [self.broker.bootstrap, *args], str(self.tmp / log)).start()
        self.apps.append(app)
        return app

    def check_app(self) -> None:
        """The app is running (or was SIGKILLed by the test); one that exited is restarted with the
        same arguments while ``restarts_left``, else the test fails with its log."""
        app = self.apps[-1]
        if app.proc.poll() in (None, -signal.SIGKILL):
            return
        if self.restarts_left <= 0:
            raise AssertionError(f"the app exited with {app.proc.returncode}:\n{app.log_tail()}")
        self.restarts_left -= 1
        self.restarted += 1
        self.apps.append(App(app.python, app.script, app.args, app.log_path).start())

    def committed_output(self, at_least: int, timeout: float, what: str) -> list:
        """The committed output once it holds ``at_least`` records."""
        def enough():
            self.check_app()
            return len(self.out.poll_all(1.0)) >= at_least
        wait_until(enough, timeout, interval=0.1, what=what)
        return list(self.out.records)

    def all_output(self, timeout: float = 90) -> list:
        """The whole committed output once every input record was counted, and a second more
        (so that a duplicate arriving late is seen)."""
        self.committed_output(self.total, timeout, f"all {self.total} counts")
        time.sleep(1.0)
        return list(self.out.poll_all(10.0))

    def changelog_state(self) -> dict[str, int]:
        """The store's committed state as its changelog holds it: the last value per key."""
        reader = CommittedReader(self.broker.bootstrap, self.changelog, self.input_partitions)
        try:
            state = {}
            for _p, _o, key, value in reader.poll_all(10.0):
                name, count = self.decode_changelog(key, value)
                state[name] = count
            return state
        finally:
            reader.close()

    def agreed_state(self, timeout: float = 10) -> tuple[dict[str, int], list]:
        """After a kill: the committed changelog state and the committed output, once they agree
        (a commit the coordinator had decided may still be writing its markers)."""
        seen = {}

        def agree():
            seen["state"] = self.changelog_state()
            seen["out"] = list(self.out.poll_all(10.0))
            return seen["state"] == last_counts(seen["out"])
        wait_until(agree, timeout, what="the changelog and the output to agree")
        return seen["state"], seen["out"]

    def close(self) -> None:
        self.feeder.stop_now.set()
        for app in self.apps:
            app.stop()
        self.out.close()


__all__ = ["App", "AppRun", "CommittedReader", "Feeder", "apps_python", "assert_at_least_once",
           "assert_exactly_once", "cleanings", "counts_by_key", "create_topic", "expected_counts",
           "last_counts", "restart_broker_after_kill9", "wait_until"]
