"""Every data-dir reader beside a broker that produces and compacts: exact, or loudly failing.

A broker (``compactlog serve``) with a compacted topic of tiny segments and an eager cleaner
(``segment.bytes`` 4 KiB, ``min.cleanable.dirty.ratio`` 0.01, ``log.cleaner.backoff.ms`` 200), and a
producer writing 200 keys round after round, the records it gets acknowledged kept by the test. In
a loop beside them run the readers of the data dir: the Python API (``read``, some as a slow
consumer, ``latest_state``, ``latest``), ``consume`` (in this process and as its own process),
``snapshot``, ``dump-log`` of the partition directories, ``verify``, and the Spark source once (and
again with the producer paused, the cleaner still at work, when that one failed loudly). Each
result is compared with what the producer had acknowledged before the read started, under Kafka's
compaction guarantee: every key acknowledged by then is there, with a value at least as new as the
last one acknowledged by then; every record is the one produced at its offset; offsets increase. A
reader may instead fail loudly (a non-zero exit, or an exception, saying the log changed under the
read and to retry); it may never return a short result as if it were whole. ``verify`` finds no
problem in the live directory, and completes every run: it checks a newer state of a partition the
cleaner changed under it, as the readers pin a newer one.

``COMPACTLOG_READER_RUNS`` sets the number of reader runs in the module (100 by default; the Spark
read is one of them whatever the number).
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import os
import random
import threading
import time

import pytest

from broker_support import Broker, run_cli
from compactlog.cli.main import main as cli_main

confluent_kafka = pytest.importorskip("confluent_kafka")

TOPIC = "t"
PARTITIONS = 2
KEYS = [b"k%03d" % i for i in range(200)]
RUNS = int(os.environ.get("COMPACTLOG_READER_RUNS", "100"))
CHANGED = "the log changed under the read"
# a round (every key once, a segment rolled and a cleaning due per partition) at most this often,
# not as fast as the machine goes: flat out, a loaded run's producer made 929 rounds in 70 s and
# the broker cleaned 886 times, CPU that grew with the wall while five rounds a second are as
# many swaps as any reader here meets during one read
ROUND_EVERY_S = 0.2


def share(fraction: float, least: int) -> int:
    return max(least, round(RUNS * fraction))


# reader runs per reader; the API takes what the others leave
COUNTS = {"consume-process": share(0.03, 2), "consume": share(0.10, 3), "snapshot": share(0.06, 2),
          "dump-log": share(0.06, 2), "verify": share(0.08, 3), "spark": 1}
COUNTS["api"] = max(10, RUNS - sum(COUNTS.values()))
OUTCOMES: dict[str, list[str]] = {}     # reader -> "ok" / "loud" per run, for the summary test


class Producer:
    """Writes every key round after round; remembers each acknowledged record."""

    def __init__(self, bootstrap: str):
        self.lock = threading.Lock()
        self.at_offset: dict[tuple[int, int], tuple[bytes, bytes]] = {}   # (partition, offset) -> record
        self.latest: dict[tuple[int, bytes], int] = {}                    # (partition, key) -> offset
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.hold = threading.Event()       # cleared: the producer waits
        self.hold.set()
        self.rounds = 0
        # murmur2: the Java client's partitioner, which ``latest(topic, key)`` follows
        self.producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                                                  "enable.idempotence": True, "partitioner": "murmur2_random"})
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _acked(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
            return
        with self.lock:
            p, off = msg.partition(), msg.offset()
            self.at_offset[(p, off)] = (msg.key(), msg.value())
            key = (p, msg.key())
            self.latest[key] = max(off, self.latest.get(key, -1))

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                began = time.monotonic()
                for k in KEYS:
                    self.producer.produce(TOPIC, key=k, value=b"%s-round-%06d" % (k, self.rounds),
                                          on_delivery=self._acked)
                self.producer.flush(30)
                self.rounds += 1
                time.sleep(max(0.02, began + ROUND_EVERY_S - time.monotonic()))
                while not self.hold.wait(0.1) and not self.stop.is_set():
                    pass
            self.producer.flush(30)
        except Exception as e:      # noqa: BLE001 - reported by the fixture
            self.errors.append(f"producer thread: {e!r}")

    @contextlib.contextmanager
    def paused(self):
        self.hold.clear()
        try:
            yield
        finally:
            self.hold.set()

    def acknowledged(self) -> dict[tuple[int, bytes], int]:
        with self.lock:
            return dict(self.latest)

    def produced(self, partition: int, offset: int):
        with self.lock:
            return self.at_offset.get((partition, offset))

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    data = tmp_path_factory.mktemp("beside") / "data"
    data.mkdir()
    r = run_cli(data, "topics", "create", "--topic", TOPIC, "--partitions", PARTITIONS,
                "--config", "cleanup.policy=compact", "--config", "segment.bytes=4096",
                "--config", "min.cleanable.dirty.ratio=0.01")
    assert r.returncode == 0, r.stderr.decode()
    with Broker(data, {"log.cleaner.backoff.ms": "200"}, extra_args=["--engine", "local"]) as broker:
        producer = Producer(broker.bootstrap)
        try:
            deadline = time.monotonic() + 30
            while len(producer.acknowledged()) < len(KEYS) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert len(producer.acknowledged()) == len(KEYS), producer.errors[:3]
            while broker.log_text().count("Cleaned log t-") < PARTITIONS and time.monotonic() < deadline:
                time.sleep(0.1)         # the readers start once the cleaner is at work
            assert "Cleaned log t-" in broker.log_text()
            yield str(data), producer, broker
        finally:
            producer.close()
    assert not producer.errors, producer.errors[:3]
    assert "Traceback" not in broker.log_text(), broker.log_text()[-3000:]


# -- checking a result ------------------------------------------------------------------------------

def check(reader: str, live, before: dict, records: list[tuple[int, int, bytes, bytes]] | None = None,
          state: dict | None = None) -> None:
    """``records``: (partition, offset, key, value) in the order read, or ``state``: (partition,
    key) -> (offset, value); either against what was acknowledged ``before`` the read."""
    _, producer, _ = live
    if records is not None:
        state = {}
        last = {}
        for p, off, key, value in records:
            assert off > last.get(p, -1), f"{reader}: partition {p}: offset {off} after {last.get(p)}"
            last[p] = off
            state[(p, key)] = (off, value)
    wrong = []
    for (p, key), (off, value) in state.items():
        rec = producer.produced(p, off)
        if rec is not None and rec != (key, value):
            wrong.append((p, off, key, value, rec))
    missing = sorted(k for k in before if k not in state)
    older = sorted(k for k, off in before.items() if k in state and state[k][0] < off)
    assert not wrong, f"{reader}: records not produced at their offsets: {wrong[:3]}"
    assert not missing and not older, (
        f"{reader}: {len(missing)} of {len(before)} acknowledged keys missing ({missing[:3]}), "
        f"{len(older)} older than acknowledged before the read ({older[:3]}): a short result")
    OUTCOMES.setdefault(reader, []).append("ok")


def loud(reader: str, message: str) -> None:
    """A read that failed as it must when the log kept changing: saying so and to retry."""
    assert CHANGED in message and "retry" in message, f"{reader} failed otherwise: {message[-2000:]}"
    OUTCOMES.setdefault(reader, []).append("loud")


def cli(data: str, *args: str) -> tuple[int, bytes, str]:
    """``compactlog --data-dir DATA ARGS`` in this process: (exit code, stdout bytes, stderr)."""
    out, err = io.BytesIO(), io.BytesIO()
    o, e = io.TextIOWrapper(out, encoding="utf-8"), io.TextIOWrapper(err, encoding="utf-8")
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        code = cli_main(["--data-dir", data, *args])
        o.flush()
        e.flush()
    return code, out.getvalue(), err.getvalue().decode("utf-8", "replace")


def _bytes(d: dict, name: str) -> bytes | None:
    if name + "_b64" in d:
        return base64.b64decode(d[name + "_b64"])
    return None if d.get(name) is None else d[name].encode("utf-8")


def consumed(stdout: bytes) -> list[tuple]:
    rows = [json.loads(line) for line in stdout.decode("utf-8").splitlines()]
    return [(d["partition"], d["offset"], _bytes(d, "key"), _bytes(d, "value")) for d in rows]


# -- the readers ----------------------------------------------------------------------------------

def test_python_api(live):
    import compactlog
    data, producer, _ = live
    rng = random.Random(17)
    for i in range(COUNTS["api"]):
        before = producer.acknowledged()
        kind = ("read", "latest_state", "latest")[i % 3]
        with compactlog.open(data) as log:
            if kind == "read":
                records = []
                slow = i % 2 == 0       # a slow consumer: the cleaner swaps segments during its read
                for r in log.read(TOPIC):
                    if slow and (not records or records[-1][0] != r.partition):
                        time.sleep(rng.uniform(0.1, 0.5))
                    records.append((r.partition, r.offset, r.key, r.value))
                check("api.read", live, before, records=records)
            elif kind == "latest_state":
                t = log.latest_state(TOPIC).to_pydict()
                state = {(p, k): (o, v) for k, v, p, o in zip(t["key"], t["value"], t["partition"], t["offset"])}
                check("api.latest_state", live, before, state=state)
            else:
                key = KEYS[i % len(KEYS)]
                [(p, k)] = [pk for pk in before if pk[1] == key]
                rec = log.latest(TOPIC, key)
                state = {} if rec is None else {(rec.partition, rec.key): (rec.offset, rec.value)}
                check("api.latest", live, {(p, k): before[(p, k)]}, state=state)


def test_consume_in_this_process(live):
    data, producer, _ = live
    for _ in range(COUNTS["consume"]):
        before = producer.acknowledged()
        code, out, err = cli(data, "consume", "--topic", TOPIC, "--from-beginning", "--output-format", "jsonl")
        if code == 0:
            check("consume", live, before, records=consumed(out))
        else:
            loud("consume", err)


def test_consume_as_its_own_process(live):
    data, producer, _ = live
    for _ in range(COUNTS["consume-process"]):
        before = producer.acknowledged()
        r = run_cli(data, "consume", "--topic", TOPIC, "--from-beginning", "--output-format", "jsonl", process=True)
        if r.returncode == 0:
            check("consume-process", live, before, records=consumed(r.stdout))
        else:
            loud("consume-process", r.stderr.decode())


def test_snapshot(live, tmp_path):
    data, producer, _ = live
    for i in range(COUNTS["snapshot"]):
        before = producer.acknowledged()
        out_dir = str(tmp_path / f"snap{i}")
        code, _, err = cli(data, "snapshot", "--topic", TOPIC, "--out", out_dir, "--format", "json",
                           "--engine", "local")
        if code != 0:
            loud("snapshot", err)
            continue
        state = {}
        for name in os.listdir(out_dir):
            if name.endswith(".json"):
                with open(os.path.join(out_dir, name), "rb") as f:
                    for line in f.read().decode("utf-8").splitlines():
                        d = json.loads(line)       # Spark's JSON: binary columns in base64
                        state[(d["partition"], base64.b64decode(d["key"]))] = (d["offset"],
                                                                              base64.b64decode(d["value"]))
        check("snapshot", live, before, state=state)


def test_dump_log_of_the_partition_directories(live):
    data, producer, _ = live
    for _ in range(COUNTS["dump-log"]):
        before = producer.acknowledged()
        dirs = ",".join(os.path.join(data, f"{TOPIC}-{p}") for p in range(PARTITIONS))
        code, out, err = cli(data, "dump-log", "--files", dirs, "--json", "--print-data-log")
        if code != 0:
            loud("dump-log", err)
            continue
        records, partition = [], None
        for line in out.decode("utf-8").splitlines():
            d = json.loads(line)
            if d["type"] == "file":
                partition = int(os.path.basename(os.path.dirname(d["file"])).rsplit("-", 1)[1])
            elif d["type"] == "record":
                records.append((partition, d["offset"], _bytes(d, "key"), _bytes(d, "value")))
        check("dump-log", live, before, records=records)


def test_verify_finds_no_problem_in_the_live_dir(live):
    data, _, _ = live
    for i in range(COUNTS["verify"]):
        if i == 0:
            r = run_cli(data, "verify", process=True)
            code, out, err = r.returncode, r.stdout, r.stderr.decode()
        else:
            code, out, err = cli(data, "verify")
        # it reads a newer state when one changed under it, as the readers above: never loud here
        assert code == 0 and b"ok: " in out, f"verify failed in a healthy live dir:\n{out.decode()}\n{err}"
        OUTCOMES.setdefault("verify", []).append("ok")


VERIFY_LOOP_RUNS, VERIFY_LOOP_S = 30, 40


def test_verify_in_a_loop_beside_the_cleaner_always_completes(live, monkeypatch):
    """``verify`` retries a state the cleaner changed under it, as the readers above pin again:
    run after run beside the producer and the cleaner's swaps (at least one during the loop), every
    run exits 0 having checked both partitions and every key, without a problem. The runs in this
    process check each segment slowly, as a large log on a slow disk is checked: the cleaner swaps
    segments during most of them."""
    from compactlog.storage import verify
    data, producer, broker = live
    check_segment = verify.check_segment

    def slow_check_segment(*args, **kwargs):
        time.sleep(0.01)
        return check_segment(*args, **kwargs)
    monkeypatch.setattr(verify, "check_segment", slow_check_segment)
    cleanings = broker.log_text().count("Cleaned log t-")
    deadline = time.monotonic() + VERIFY_LOOP_S
    runs = 0
    while runs < VERIFY_LOOP_RUNS and time.monotonic() < deadline:
        if runs % 10 == 0:
            r = run_cli(data, "verify", "--json", process=True)
            code, out, err = r.returncode, r.stdout, r.stderr.decode()
        else:
            code, out, err = cli(data, "verify", "--json")
        lines = [json.loads(x) for x in out.decode().splitlines()]
        assert code == 0 and len(lines) == 1, f"run {runs}: exit {code}\n{out.decode()}\n{err}"
        summary = lines[0]
        assert summary["partitions"] == PARTITIONS and summary["problems"] == 0, summary
        assert summary["records"] >= len(KEYS) and summary["segments"] >= PARTITIONS, summary
        runs += 1
    assert runs >= 10, f"only {runs} verify runs in {VERIFY_LOOP_S} s"
    assert broker.log_text().count("Cleaned log t-") > cleanings, "the cleaner swapped nothing during the loop"


def test_spark_source_once(live, spark):
    """Tasks run after planning, in other processes: a task finding a planned segment compacted
    since reads it only while the log has not gone past the planned end, else fails the query.
    Beside the producer that is a loud failure at most; with the producer paused (the cleaner
    still at work) the read completes."""
    data, producer, _ = live

    def read_all() -> None:
        before = producer.acknowledged()
        try:
            rows = (spark.read.format("kafka-log").option("subscribe", TOPIC).load(data)
                    .select("partition", "offset", "key", "value").collect())
        except Exception as e:      # noqa: BLE001 - Spark wraps the source's error in its own
            loud("spark", str(e))
            return
        records = sorted((r["partition"], r["offset"], bytes(r["key"]), bytes(r["value"])) for r in rows)
        check("spark", live, before, records=records)

    read_all()
    if OUTCOMES["spark"][-1] == "loud":
        with producer.paused():
            read_all()
        assert OUTCOMES["spark"][-1] == "ok"


def test_the_cleaner_ran_and_most_reads_completed(live):
    """The reads above ran beside a cleaner that swapped segments, and a loud failure stayed the
    exception: they are meant to be exact, failing only when the log never holds still."""
    data, producer, broker = live
    assert producer.thread.is_alive() and not producer.errors, producer.errors[:3]
    assert producer.rounds >= 20, producer.rounds
    assert "Cleaned log t-" in broker.log_text()
    runs = [o for outcomes in OUTCOMES.values() for o in outcomes]
    print(f"reader runs: {len(runs)}, loud failures: {runs.count('loud')}, producer rounds: {producer.rounds}, "
          f"cleanings: {broker.log_text().count('Cleaned log t-')}, per reader: "
          f"{ {k: (v.count('ok'), v.count('loud')) for k, v in sorted(OUTCOMES.items())} }")
    assert len(runs) >= min(RUNS, 100) - 1
    assert runs.count("loud") <= max(2, len(runs) // 10)
