"""Helpers for the transaction tools' tests: a hanging transaction made as Kafka's pitfall makes one
(a transactional batch in a partition its coordinator never heard of, possible only with
``transaction.partition.verification.enable=false``), the last stable offset and read_committed
reads through real clients, and the tool's tables read back."""

from __future__ import annotations

import subprocess
import time
import uuid

from cli_support import run_in_process


def uid(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def run(*args) -> subprocess.CompletedProcess:
    # in this process (the broker runs in its own): a fresh interpreter per command cost ~0.6 CPU-s
    return run_in_process(args, text=True)


def rows(text: str) -> list[list[str]]:
    """A kafka-transactions.sh table (cells padded, each followed by a tab) as stripped cells."""
    out = []
    for line in text.splitlines():
        assert line.endswith("\t"), repr(line)
        out.append([c.strip() for c in line[:-1].split("\t")])
    return out


def init_producer(bootstrap: str, transactional_id: str, **extra):
    """A confluent-kafka transactional producer, initialized (its id now Empty at the coordinator)."""
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5, **extra})
    p.init_transactions(30)
    return p


def produce_hanging(bootstrap: str, transactional_id: str, topic: str, partition: int, *,
                    age_ms: int, sequence: int = 0) -> int:
    """One transactional record for ``transactional_id``'s current producer id and epoch, written
    to ``topic``-``partition`` without AddPartitionsToTxn (kafka-python's own ProduceRequest and
    record builder), stamped ``age_ms`` in the past; its offset. The broker must run with
    verification disabled, else it refuses the batch."""
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        d = admin.describe_transactions([transactional_id])[transactional_id]
        builder = MemoryRecordsBuilder(2, 0, 1 << 20, transactional=True, producer_id=d.producer_id,
                                       producer_epoch=d.producer_epoch, base_sequence=sequence)
        builder.append(int(time.time() * 1000) - age_ms, b"lost", b"never ends", [])
        builder.close()
        topic_data = ProduceRequest.TopicProduceData
        request = ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=30000,
                                 topic_data=[topic_data(name=topic, partition_data=[
                                     topic_data.PartitionProduceData(index=partition, records=builder.buffer())])],
                                 min_version=3, max_version=9)

        async def send():
            return await admin._manager.send(request, node_id=0)
        response = admin._manager.run(send)
    finally:
        admin.close()
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == 0, answer
    return answer.base_offset


def produce_plain(bootstrap: str, topic: str, partition: int, n: int) -> None:
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(n):
        p.produce(topic, key=b"k%d" % i, value=b"plain-%d" % i, partition=partition)
    assert p.flush(30) == 0


def stable_and_end_offsets(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    """(last stable offset, high watermark): ListOffsets LATEST read_committed / read_uncommitted."""
    from kafka import KafkaConsumer, TopicPartition
    tp = TopicPartition(topic, partition)
    out = []
    for isolation in ("read_committed", "read_uncommitted"):
        c = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, request_timeout_ms=30000)
        try:
            out.append(c.end_offsets([tp])[tp])
        finally:
            c.close()
    return out[0], out[1]


def read_committed(bootstrap: str, topic: str, partition: int) -> list[bytes]:
    """Every value a read_committed consumer gets from the start up to the last stable offset."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": uid("reader"), "enable.auto.commit": False,
                  "isolation.level": "read_committed", "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                return out
            out.append(m.value())
        raise AssertionError("no end of partition within 30 s")
    finally:
        c.close()
