"""Conformance: the broker's life. Graceful shutdown (SIGTERM: exit 0, clean-shutdown marker,
nothing recovered at the next start), kill -9 during produce (every acknowledged record is there
after the restart, and an idempotent producer's retries across the restart are not duplicated),
and the data-dir lock (a second ``serve`` and a CLI ``produce`` are refused naming the broker;
``consume`` and ``verify`` work on the live dir)."""

from __future__ import annotations

import json
import os
import socket
import threading
import time

import pytest

from broker_support import Broker, run_cli, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def consume_all(bootstrap, topic, partitions=(0,), timeout=30) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in partitions])
        out, eof = [], set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(partitions) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF, m.error()
                eof.add(m.partition())
                continue
            out.append((m.partition(), m.offset(), m.key(), m.value()))
        return out
    finally:
        c.close()


def test_sigterm_is_a_clean_shutdown(tmp_path):
    data = tmp_path / "data"
    b = Broker(data).start()
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce("t", key=b"k", value=b"%d" % i)
    assert p.flush(30) == 0
    assert b.stop() == 0
    text = b.log_text()
    assert "shut down completed" in text and "Traceback" not in text
    assert os.path.exists(data / ".kafka_cleanshutdown")
    # the lock is free again: a CLI writer gets it
    r = run_cli(data, "topics", "create", "--topic", "after")
    assert r.returncode == 0, r.stderr.decode()
    with Broker(data) as again:
        assert [v for _, _, _, v in consume_all(again.bootstrap, "t")] == [b"%d" % i for i in range(10)]


def test_the_lock_refuses_writers_and_lets_readers_in(tmp_path):
    data = tmp_path / "data"
    with Broker(data) as b:
        p = Producer({"bootstrap.servers": b.bootstrap})
        for i in range(20):
            p.produce("live", key=b"k%d" % (i % 4), value=b"v%d" % i)
        assert p.flush(30) == 0
        second = Broker(data, port=0)
        with pytest.raises(RuntimeError) as refused:
            second.start()
        assert "compactlog serve" in str(refused.value) and str(b.pid) in str(refused.value)
        r = run_cli(data, "produce", "--topic", "live", stdin=b"x\n")
        assert r.returncode != 0
        err = r.stderr.decode()
        assert "locked" in err and "compactlog serve" in err and str(b.pid) in err, err
        r = run_cli(data, "consume", "--topic", "live", "--from-beginning", "--output-format", "jsonl")
        assert r.returncode == 0, r.stderr.decode()
        assert [json.loads(x)["value"] for x in r.stdout.decode().splitlines()] == \
            [f"v{i}" for i in range(20)]
        r = run_cli(data, "cleaner", "status", "--json")
        assert r.returncode == 0, r.stderr.decode()
        r = run_cli(data, "verify")
        assert b.alive()
        assert r.returncode == 0, r.stderr.decode() + r.stdout.decode()


def test_kill_9_during_produce_keeps_every_acknowledged_record(tmp_path):
    """An idempotent producer writes unique values while the broker is killed and restarted on
    the same port: every acknowledged value is in the log after the restart, exactly once
    (the producer's retries of batches the dead broker had appended are answered as duplicates
    from the recovered producer state)."""
    data = tmp_path / "data"
    port = free_port()
    overrides = {"num.partitions": "2"}
    b = Broker(data, overrides, port=port).start()
    acked: dict[bytes, tuple[int, int]] = {}
    failed = []
    lock = threading.Lock()
    stop = threading.Event()

    def report(err, msg):
        with lock:
            if err is None:
                acked[msg.value()] = (msg.partition(), msg.offset())
            else:
                failed.append(err)

    def produce():
        p = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True,
                      "linger.ms": 2, "message.timeout.ms": 60000, "retry.backoff.ms": 100,
                      "reconnect.backoff.max.ms": 200})
        i = 0
        while not stop.is_set() and i < 400000:       # about 20,000 records/s until stopped
            try:
                p.produce("crash", key=b"k%d" % (i % 50), value=b"value-%06d" % i, partition=i % 2,
                          on_delivery=report)
                i += 1
            except BufferError:
                p.poll(0.05)
            if i % 100 == 0:
                p.poll(0)
                time.sleep(0.005)
        assert p.flush(90) == 0

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_until(lambda: len(acked) > 2000, 60, what="2000 acknowledged records")
        b.kill()                                            # kill -9 in the middle of produce
        at_kill = len(acked)
        b = Broker(data, overrides, port=port).start()
        # the listeners open at once; the two logs are recovered before their first use
        assert "2 recovered in the background" in b.log_text()
        wait_until(lambda: len(acked) > at_kill + 2000, 60, what="produce to go on after restart")
        stop.set()
        writer.join(120)
        assert not writer.is_alive()
        assert not failed, failed[:3]
        records = consume_all(b.bootstrap, "crash", (0, 1))
        values = [v for _, _, _, v in records]
        assert len(values) == len(set(values)), "a retried batch was appended twice"
        stored = {v: (p, o) for p, o, _, v in records}
        missing = [v for v in acked if v not in stored]
        assert not missing, f"{len(missing)} acknowledged records lost, e.g. {missing[:3]}"
        assert all(stored[v] == where for v, where in acked.items())
        wait_until(lambda: "Recovered 2 log(s) after an unclean shutdown" in b.log_text(), 30,
                   what="the recovery thread to finish")
        assert b.stop() == 0
    finally:
        stop.set()
        b.kill()                                            # whatever failed, no broker is left
        writer.join(120)


@pytest.mark.parametrize("overrides, named", [
    ({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/nonexistent/broker.pem"},
     "cannot read the key store"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
    ({"authorizer.class.name": "com.example.MyAuthorizer"}, "authorizer.class.name"),
    ({"super.users": "alice"}, "super.users"),
], ids=["tls-store", "sasl-mechanism", "authorizer", "super-users"])
def test_a_start_refused_for_its_settings_leaves_nothing_behind(tmp_path, overrides, named):
    """Bad security settings are refused in one line before the data dir is created or locked:
    no directory, no meta.properties, no lock file; on an existing dir nothing changes."""
    args = [a for k, v in overrides.items() for a in ("--override", f"{k}={v}")]
    fresh = tmp_path / "fresh"
    r = run_cli(fresh, *args, "serve", timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 1 and named in err and "Traceback" not in err, err
    assert not fresh.exists()
    existing = tmp_path / "existing"
    assert run_cli(existing, "topics", "create", "--topic", "t").returncode == 0
    before = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in existing.rglob("*"))
    r = run_cli(existing, *args, "serve", timeout=60)
    assert r.returncode == 1 and named in r.stderr.decode()
    assert sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in existing.rglob("*")) == before
