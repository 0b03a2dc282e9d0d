"""KIP-280 through the broker with a real client (confluent-kafka): topics created with
``compaction.strategy`` timestamp and header, versions produced out of order, the broker's own
cleaner keeping the highest version of each key; a strategy the broker refuses with
INVALID_CONFIG through CreateTopics, AlterConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

import random
import struct
import time

import pytest

from broker_support import Broker, wait_until

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,  # noqa: E402
                                   NewTopic)

KEYS, VERSIONS = 6, 8
LONG = struct.Struct(">q")
COMMON = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01"}


def _read_all(bootstrap: str, topic: str) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{topic}", "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        out, deadline = [], time.monotonic() + 30
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(m.error())
            out.append((m.key(), m.value()))
        raise AssertionError("no end of partition within 30 s")
    finally:
        c.close()


def _invalid_config(future) -> str:
    with pytest.raises(KafkaException) as e:
        future.result(30)
    err = e.value.args[0]
    assert err.code() == KafkaError.INVALID_CONFIG, err
    return err.str()


def test_the_brokers_cleaner_keeps_the_highest_version(tmp_path):
    with Broker(tmp_path / "data", {"log.cleaner.backoff.ms": "100"}, extra_args=["--engine", "local"]) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        topics = {"by-ts": {"compaction.strategy": "timestamp"},
                  "by-header": {"compaction.strategy": "header", "compaction.strategy.header": "version"}}
        for f in admin.create_topics([NewTopic(t, 1, 1, config={**COMMON, **c}) for t, c in topics.items()]).values():
            f.result(30)
        described = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, "by-header")])
        entries = list(described.values())[0].result(30)
        assert entries["compaction.strategy"].value == "header"
        assert entries["compaction.strategy.header"].value == "version"

        # small batches: several segments, each batch well under segment.bytes
        p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 0, "batch.num.messages": 4})
        failed = []

        def report(err, msg):
            if err is not None:
                failed.append(err)
        rng = random.Random(280)
        now = int(time.time() * 1000)
        order = [(k, v) for k in range(KEYS) for v in range(VERSIONS)]
        rng.shuffle(order)        # the highest version is rarely the last written
        for k, v in order:
            value = b"key%d-version%d" % (k, v)
            p.produce("by-ts", key=b"key%d" % k, value=value, timestamp=now - 1000 * (VERSIONS - v),
                      on_delivery=report)
            p.produce("by-header", key=b"key%d" % k, value=value, on_delivery=report,
                      headers=[("version", LONG.pack(v - 100)), ("other", b"x"), ("version", LONG.pack(v))])
        for topic in topics:      # filler that rolls the versions out of the active segment
            for i in range(120):
                p.produce(topic, key=b"filler%d" % i, value=b"f" * 40, on_delivery=report)
        assert p.flush(30) == 0 and not failed, failed[:3]
        assert any(k != last for (k, _), last in zip(order, [x for x, _ in order[1:]]))
        winners = {b"key%d" % k: b"key%d-version%d" % (k, VERSIONS - 1) for k in range(KEYS)}
        last_written = {}
        for k, v in order:
            last_written[b"key%d" % k] = b"key%d-version%d" % (k, v)
        assert last_written != winners          # the offset strategy would keep other records

        for topic in topics:
            def cleaned(topic=topic):
                versions = [(k, v) for k, v in _read_all(b.bootstrap, topic) if k.startswith(b"key")]
                return versions if len(versions) == KEYS else None
            got = wait_until(cleaned, 60, 0.5, f"the broker's cleaner to compact {topic}")
            assert dict(got) == winners, topic
        assert "Traceback" not in b.log_text(), b.log_text()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_a_bad_strategy_is_refused_with_invalid_config(tmp_path):
    with Broker(tmp_path / "data") as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        fs = admin.create_topics([NewTopic("no-name", 1, 1, config={"compaction.strategy": "header"}),
                                  NewTopic("bogus", 1, 1, config={"compaction.strategy": "newest"})])
        assert "compaction.strategy.header" in _invalid_config(fs["no-name"])
        assert "offset, timestamp, header" in _invalid_config(fs["bogus"])
        admin.create_topics([NewTopic("t", 1, 1, config=COMMON)])["t"].result(30)
        resource = ConfigResource(ConfigResource.Type.TOPIC, "t")
        op = ConfigEntry("compaction.strategy", "header", incremental_operation=AlterConfigOpType.SET)
        text = _invalid_config(admin.incremental_alter_configs([ConfigResource(
            ConfigResource.Type.TOPIC, "t", incremental_configs=[op])])[resource])
        assert "compaction.strategy.header" in text
        legacy = ConfigResource(ConfigResource.Type.TOPIC, "t", set_config={"compaction.strategy": "version"})
        assert "offset, timestamp, header" in _invalid_config(admin.alter_configs([legacy])[resource])
        ok = ConfigResource(ConfigResource.Type.TOPIC, "t", incremental_configs=[
            ConfigEntry("compaction.strategy", "header", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("compaction.strategy.header", "seq", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([ok])[resource].result(30)
        entries = admin.describe_configs([resource])[resource].result(30)
        assert (entries["compaction.strategy"].value, entries["compaction.strategy.header"].value) == ("header", "seq")
