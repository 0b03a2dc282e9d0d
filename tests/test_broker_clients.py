"""Conformance: unmodified Kafka clients against ``compactlog serve`` (one broker for the module).

Produce with acks 0/1/all, idempotent producers, the four codecs, headers, tombstones and the
keyless refusal on a compacted topic with each client's error; consume with ``assign`` (no
consumer group) from the beginning, the end and a timestamp, with confluent-kafka, kafka-python,
aiokafka and kcat (when installed). What was produced is also checked on disk with
``compactlog consume`` (a read-only command, beside the live broker).
"""

from __future__ import annotations

import asyncio
import json
import os
import time

import pytest

from broker_support import KCAT, Broker, kcat, run_cli, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition  # noqa: E402

CODECS = ["gzip", "snappy", "lz4", "zstd"]
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    data = tmp_path_factory.mktemp("clients") / "data"
    data.mkdir()
    r = run_cli(data, "topics", "create", "--topic", "compacted", "--config", "cleanup.policy=compact")
    assert r.returncode == 0, r.stderr.decode()
    with Broker(data) as b:
        yield b
    assert "Traceback" not in b.log_text(), b.log_text()


def on_disk(broker, topic, partition=0) -> list[dict]:
    r = run_cli(broker.data_dir, "consume", "--topic", topic, "--partition", partition,
                "--from-beginning", "--output-format", "jsonl", "--isolation-level", "read_uncommitted")
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(line) for line in r.stdout.decode().splitlines()]


# -- confluent-kafka ------------------------------------------------------------------------------

def ck_produce(broker, topic, items, **conf):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, **conf})
    reports = []
    for key, value, headers in items:
        p.produce(topic, key=key, value=value, headers=headers,
                  on_delivery=lambda err, msg: reports.append((err, msg.offset() if msg else None)))
    assert p.flush(30) == 0
    return reports


def ck_consume(broker, topic, n, offset=confluent_kafka.OFFSET_BEGINNING, partition=0, timeout=20,
               **conf):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "assign-only",
                  "enable.auto.commit": False, "auto.offset.reset": "earliest", **conf})
    try:
        c.assign([TopicPartition(topic, partition, offset)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            assert m.error() is None or m.error().code() == KafkaError._PARTITION_EOF, m.error()
            if m.error() is None:
                out.append(m)
        return out
    finally:
        c.close()


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_confluent_produce_acks(broker, acks):
    topic = f"ck-acks-{acks}"
    reports = ck_produce(broker, topic, [(b"k%d" % i, b"v%d" % i, None) for i in range(200)],
                        acks=acks)
    assert all(err is None for err, _ in reports)
    if acks != "0":                     # acks=0: the client never learns its offsets
        assert sorted(off for _, off in reports) == list(range(200))
    got = ck_consume(broker, topic, 200)
    assert [(m.key(), m.value(), m.offset()) for m in got] == \
        [(b"k%d" % i, b"v%d" % i, i) for i in range(200)]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_codecs_headers_and_tombstones(broker, codec):
    topic = f"ck-{codec}"
    items = [(b"k%d" % i, b"value-%d" % i * 5, [("h", b"x%d" % i)]) for i in range(100)]
    items.append((b"k0", None, None))                 # a tombstone
    reports = ck_produce(broker, topic, items, **{"compression.type": codec,
                                                  "enable.idempotence": True})
    assert [err for err, _ in reports] == [None] * 101
    got = ck_consume(broker, topic, 101)
    assert [(m.key(), m.value()) for m in got] == [(k, v) for k, v, _ in items]
    assert got[3].headers() == [("h", b"x3")]
    stored = on_disk(broker, topic)
    assert stored[-1]["key"] == "k0" and stored[-1]["value"] is None


KEYLESS_WHY = "Compacted topic cannot accept message without key in topic partition compacted-0"


def test_confluent_keyless_record_on_compacted_topic_is_refused(broker):
    logged = os.path.getsize(broker.log_path)
    reports = ck_produce(broker, "compacted", [(None, b"no key", None)], retries=0)
    [(err, _)] = reports
    assert err is not None and err.code() == KafkaError.INVALID_RECORD and not err.retriable()
    # the broker's own words reach librdkafka (rd_kafka_message_produce_errstr), but
    # confluent-kafka builds a producer's delivery error from the code alone (Message_new0 passes
    # no errstr for a producer), so its string is librdkafka's "Broker failed to validate record"
    # whatever a broker, Kafka included, answers: the message is checked with kafka-python below
    assert on_disk(broker, "compacted") == [] or all(r["key"] is not None
                                                     for r in on_disk(broker, "compacted"))
    # one line on the broker naming the partition, without the record's bytes
    line = wait_until(lambda: [x for x in broker.log_text(logged).splitlines()
                               if "Error processing append operation on partition compacted-0" in x],
                      what="the broker's line about the refused record")
    assert len(line) == 1 and KEYLESS_WHY in line[0] and "no key" not in line[0], line


def test_confluent_assign_from_end_and_timestamp(broker):
    topic = "ck-positions"
    p = Producer({"bootstrap.servers": broker.bootstrap})
    base = int(time.time() * 1000) - 60_000
    for i in range(30):
        p.produce(topic, key=b"k%d" % i, value=b"v%d" % i, timestamp=base + 1000 * i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "assign-only",
                  "enable.auto.commit": False})
    try:
        [tp] = c.offsets_for_times([TopicPartition(topic, 0, base + 10_500)], timeout=10)
        assert tp.offset == 11
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 30)
    finally:
        c.close()
    got = ck_consume(broker, topic, 19, offset=11)
    assert [m.offset() for m in got] == list(range(11, 30))
    # from the end: only what is produced after the assignment
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "assign-only",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_END)])
        c.poll(1.0)
        ck_produce(broker, topic, [(b"late", b"late", None)])
        got = []
        deadline = time.monotonic() + 15
        while not got and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m)
        assert [(m.key(), m.offset()) for m in got] == [(b"late", 30)]
    finally:
        c.close()


# -- kafka-python ---------------------------------------------------------------------------------

def kp_consume(broker, topic, n, partition=0, **kw):
    from kafka import KafkaConsumer, TopicPartition as KTP
    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest",
                      consumer_timeout_ms=5000, **kw)
    try:
        c.assign([KTP(topic, partition)])
        c.seek_to_beginning()
        out = []
        for m in c:
            out.append(m)
            if len(out) >= n:
                break
        return out
    finally:
        c.close()


@pytest.mark.parametrize("acks,codec", [(0, None), (1, "gzip"), ("all", "snappy"), ("all", "lz4"),
                                        ("all", "zstd")])
def test_kafka_python_produce_and_consume(broker, acks, codec):
    from kafka import KafkaProducer
    topic = f"kp-{acks}-{codec}"
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks=acks, compression_type=codec,
                      linger_ms=5)
    try:
        futures = [p.send(topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("h", b"%d" % i)])
                   for i in range(100)]
        futures.append(p.send(topic, key=b"k1", value=None))
        p.flush(30)
        metas = [f.get(10) for f in futures]
    finally:
        p.close(10)
    if acks != 0:
        assert [m.offset for m in metas] == list(range(101))
    got = kp_consume(broker, topic, 101)
    assert [(m.key, m.value) for m in got[:2]] == [(b"k0", b"v0"), (b"k1", b"v1")]
    assert got[-1].value is None and got[5].headers == [("h", b"5")]
    assert len(got) == 101


def test_kafka_python_idempotent_default_and_keyless_refusal(broker):
    from kafka import KafkaProducer
    from kafka.errors import InvalidRecordError
    p = KafkaProducer(bootstrap_servers=broker.bootstrap)          # idempotent, acks=all
    try:
        assert p.send("kp-idem", key=b"a", value=b"1").get(10).offset == 0
        assert p.send("kp-idem", key=b"b", value=b"2").get(10).offset == 1
        with pytest.raises(InvalidRecordError) as refused:
            p.send("compacted", key=None, value=b"x").get(10)
        assert KEYLESS_WHY in str(refused.value)        # the record error's message, as Kafka's
    finally:
        p.close(10)
    assert [r["key"] for r in on_disk(broker, "kp-idem")] == ["a", "b"]


# -- aiokafka -------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [None, "gzip", "lz4", "zstd"])
def test_aiokafka_produce_and_consume(broker, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition as ATP
    topic = f"aio-{codec}"

    async def scenario():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec,
                             enable_idempotence=codec == "zstd")
        await p.start()
        try:
            metas = [await p.send_and_wait(topic, key=b"k%d" % i, value=b"v%d" % i,
                                           headers=[("h", b"x")]) for i in range(20)]
            await p.send_and_wait(topic, key=b"k0", value=None)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([ATP(topic, 0)])
            await c.seek_to_beginning()
            got = []
            while len(got) < 21:
                batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 10)
                for msgs in batch.values():
                    got.extend(msgs)
            end = await c.end_offsets([ATP(topic, 0)])
        finally:
            await c.stop()
        return metas, got, end

    metas, got, end = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert [m.offset for m in metas] == list(range(20))
    assert [(m.key, m.value) for m in got][:2] == [(b"k0", b"v0"), (b"k1", b"v1")]
    assert got[-1].value is None and got[0].headers == (("h", b"x"),)
    assert list(end.values()) == [21]


def test_aiokafka_keyless_refusal(broker):
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    async def scenario():
        p = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
        await p.start()
        try:
            with pytest.raises(AioKafkaError):
                await p.send_and_wait("compacted", key=None, value=b"x")
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(scenario(), 60))


# -- kcat -----------------------------------------------------------------------------------------

@needs_kcat
@pytest.mark.parametrize("codec", ["none"] + CODECS)
def test_kcat_produce_consume_and_tombstones(broker, codec):
    topic = f"kcat-{codec}"
    # values long and alike enough that every codec shrinks them (librdkafka sends a batch
    # uncompressed when compression would not make it smaller)
    lines = b"".join(b"p%d:%d%s\n" % (i % 3, i, b"-value" * 20) for i in range(30)) + b"p1:\n"
    r = kcat("-P", "-b", broker.bootstrap, "-t", topic, "-K:", "-Z", "-z", codec, stdin=lines)
    assert r.returncode == 0, r.stderr.decode()
    r = kcat("-C", "-b", broker.bootstrap, "-t", topic, "-e", "-o", "beginning", "-K:", "-Z",
             "-f", "%k:%s@%o\n")
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode().splitlines()
    suffix = "-value" * 20
    assert out[:2] == [f"p0:0{suffix}@0", f"p1:1{suffix}@1"] and out[-1] == "p1:NULL@30"
    assert len(out) == 31
    if codec != "none":
        # batches are stored as received: the codec reached the log (old librdkafka's
        # feature gate on Produce v0 in ApiVersions, KAFKA-18659)
        seg = f"{broker.data_dir}/{topic}-0/00000000000000000000.log"
        r = run_cli(broker.data_dir, "dump-log", "--files", seg)
        assert r.returncode == 0, r.stderr.decode()
        assert f"compresscodec: {codec}" in r.stdout.decode().lower(), r.stdout.decode()


@needs_kcat
def test_kcat_metadata_and_keyless_refusal(broker):
    r = kcat("-L", "-b", broker.bootstrap, "-J")
    assert r.returncode == 0
    meta = json.loads(r.stdout)
    assert meta["brokers"][0]["name"] == broker.bootstrap and meta["brokers"][0]["id"] == 0
    assert any(t["topic"] == "compacted" for t in meta["topics"])
    r = kcat("-P", "-b", broker.bootstrap, "-t", "compacted", stdin=b"no key here\n")
    assert "INVALID_RECORD" in r.stderr.decode() or "nvalid record" in r.stderr.decode() \
        or r.returncode != 0, r.stderr.decode()
