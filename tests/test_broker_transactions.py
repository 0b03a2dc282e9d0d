"""Conformance: read_committed against a log holding aborted transactions (a Kafka-written corpus
input, copied in as a data dir). Every client's read_committed consumer sees exactly what
``compactlog consume --isolation-level read_committed`` prints (aborted records hidden through the
Fetch ``aborted_transactions`` list, nothing past the last stable offset), and read_uncommitted
consumers see every data record; control batches are never delivered."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import time

import pytest

from broker_support import KCAT, Broker, kcat, run_cli

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, TopicPartition  # noqa: E402

CASE = "rnd-041-transactions"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("txn") / "data"
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "corpus-sample", CASE,
                       "input", "topic-0")
    shutil.copytree(src, data / "topic-0")
    with Broker(data) as b:
        yield b


def cli_records(broker, isolation) -> list[tuple[int, str | None, str | None]]:
    r = run_cli(broker.data_dir, "consume", "--topic", "topic", "--from-beginning",
                "--output-format", "jsonl", "--isolation-level", isolation)
    assert r.returncode == 0, r.stderr.decode()
    out = []
    for line in r.stdout.decode().splitlines():
        d = json.loads(line)
        out.append((d["offset"], d.get("key"), d.get("value")))
    return out


def _text(b):
    return None if b is None else b.decode("utf-8")


def confluent_records(broker, isolation) -> list:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "txn-check",
                  "enable.auto.commit": False, "enable.partition.eof": True,
                  "isolation.level": isolation})
    try:
        c.assign([TopicPartition("topic", 0, confluent_kafka.OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return out
            out.append((m.offset(), _text(m.key()), _text(m.value())))
        raise AssertionError("no end of partition")
    finally:
        c.close()


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_confluent_matches_the_cli(broker, isolation):
    expected = cli_records(broker, isolation)
    assert expected
    assert confluent_records(broker, isolation) == expected


def test_read_committed_hides_aborted_records(broker):
    committed = cli_records(broker, "read_committed")
    uncommitted = cli_records(broker, "read_uncommitted")
    assert len(committed) < len(uncommitted)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_kafka_python_matches_the_cli(broker, isolation):
    from kafka import KafkaConsumer, TopicPartition as KTP
    expected = cli_records(broker, isolation)
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level=isolation,
                      auto_offset_reset="earliest", consumer_timeout_ms=3000)
    try:
        c.assign([KTP("topic", 0)])
        c.seek_to_beginning()
        got = [(m.offset, _text(m.key), _text(m.value)) for m in c]
    finally:
        c.close()
    assert got == expected


def test_aiokafka_read_committed_matches_the_cli(broker):
    from aiokafka import AIOKafkaConsumer, TopicPartition as ATP
    expected = cli_records(broker, "read_committed")

    async def scenario():
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed",
                             auto_offset_reset="earliest")
        await c.start()
        try:
            tp = ATP("topic", 0)
            c.assign([tp])
            await c.seek_to_beginning()
            got = []
            deadline = time.monotonic() + 20
            while len(got) < len(expected) and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=500)
                for msgs in batch.values():
                    got.extend((m.offset, _text(m.key), _text(m.value)) for m in msgs)
            return got
        finally:
            await c.stop()

    assert asyncio.run(asyncio.wait_for(scenario(), 60)) == expected


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
def test_kcat_reads_committed_by_default(broker):
    expected = cli_records(broker, "read_committed")
    r = kcat("-C", "-b", broker.bootstrap, "-t", "topic", "-e", "-o", "beginning", "-f", "%o\n")
    assert r.returncode == 0, r.stderr.decode()
    assert [int(x) for x in r.stdout.decode().split()] == [o for o, _, _ in expected]
