"""Conformance: the broker's own log cleaner compacts while clients produce and fetch.

A compacted topic with tiny segments and an eager cleaner (small ``segment.bytes`` and
``min.cleanable.dirty.ratio``, short ``log.cleaner.backoff.ms``): a producer writes many values
for a few keys while a second client reads the partition from the beginning over and over. Every
read returns records that were produced at exactly those offsets (never a failed fetch, never
bytes from neither the log before a swap nor after it), and once the cleaner has run a consumer
from the beginning sees the latest value of every key, with offset gaps where older values were
removed. ``cleaner status`` and ``explain`` work against the live broker's dir.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from broker_support import Broker, run_cli, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

KEYS = 10
ROUNDS = 60


class Reader:
    """One consumer reading the partition from the beginning to its end, again and again."""

    def __init__(self, bootstrap):
        self.c = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader",
                           "enable.auto.commit": False, "enable.partition.eof": True,
                           "fetch.wait.max.ms": 50})

    def read_all(self, topic) -> list[tuple[int, bytes, bytes]]:
        self.c.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = self.c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(f"fetch failed: {m.error()}")
            out.append((m.offset(), m.key(), m.value()))
        raise AssertionError("no end of partition within 30 s")

    def close(self):
        self.c.close()


def test_broker_cleaner_compacts_under_live_clients(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    r = run_cli(data, "topics", "create", "--topic", "prices", "--config", "cleanup.policy=compact",
                "--config", "segment.bytes=2048", "--config", "min.cleanable.dirty.ratio=0.01",
                "--config", "delete.retention.ms=0")
    assert r.returncode == 0, r.stderr.decode()
    with Broker(data, {"log.cleaner.backoff.ms": "100", "compactlog.spark.master": "local[1]"},
                extra_args=["--engine", "local"]) as b:
        produced: dict[int, tuple[bytes, bytes]] = {}
        errors = []
        reads = []
        done = threading.Event()

        def reader():
            r = Reader(b.bootstrap)
            try:
                while not done.is_set():
                    try:
                        reads.append(r.read_all("prices"))
                    except AssertionError as e:
                        errors.append(str(e))
            finally:
                r.close()

        t = threading.Thread(target=reader)
        t.start()
        try:
            p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "enable.idempotence": True})
            for rnd in range(ROUNDS):
                for k in range(KEYS):
                    key, value = b"key-%d" % k, b"round-%03d-" % rnd + b"x" * 60

                    def report(err, msg, key=key, value=value):
                        assert err is None, err
                        produced[msg.offset()] = (key, value)
                    p.produce("prices", key=key, value=value, on_delivery=report)
                p.flush(30)
                time.sleep(0.05)
            assert p.flush(30) == 0
            latest = {}
            for off in sorted(produced):
                latest[produced[off][0]] = produced[off][1]

            final_reader = Reader(b.bootstrap)

            def compacted():
                got = final_reader.read_all("prices")
                return got if len(got) < len(produced) // 3 else None
            try:
                final = wait_until(compacted, 60, 0.5, "the broker's cleaner to compact 'prices'")
            finally:
                final_reader.close()
        finally:
            done.set()
            t.join(60)
        assert not errors, errors[:3]
        assert len(reads) >= 3, len(reads)           # full reads while the cleaner swapped
        # every read: strictly increasing offsets, each record the one produced at its offset
        for got in reads + [final]:
            offsets = [o for o, _, _ in got]
            assert offsets == sorted(set(offsets))
            for o, k, v in got:
                assert produced[o] == (k, v), f"offset {o}: {k!r}={v!r} was never produced there"
        seen = {}
        for _, k, v in final:
            seen[k] = v
        assert seen == latest
        offsets = [o for o, _, _ in final]
        assert offsets[-1] + 1 > len(offsets)         # gaps (from offset 0) where values were removed
        assert "Cleaned log prices-0" in b.log_text()
        r = run_cli(data, "cleaner", "status", "--json")
        assert r.returncode == 0, r.stderr.decode()
        status = [json.loads(x) for x in r.stdout.decode().splitlines()]
        assert any(s.get("topic") == "prices" for s in status)
        r = run_cli(data, "explain", "--topic", "prices", "--partition", "0")
        assert r.returncode == 0, r.stderr.decode()
    assert "Traceback" not in b.log_text(), b.log_text()
