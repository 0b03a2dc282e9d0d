"""LogConfig / BrokerConfig: Kafka's names, defaults, ranges and derived values."""

from __future__ import annotations

import pytest

from compactlog.errors import ConfigError
from compactlog.storage.config import BrokerConfig, LogConfig, parse_assignments, parse_properties


def test_kafka_defaults():
    c = LogConfig()
    assert c.get("cleanup.policy") == ["delete"] and c.delete and not c.compact
    assert c.segment_bytes == 1073741824
    assert c.segment_ms == 604800000
    assert c.get("segment.jitter.ms") == 0
    assert c.max_index_size == 10485760
    assert c.index_interval_bytes == 4096
    assert c.get("retention.ms") == 604800000 and c.get("retention.bytes") == -1
    assert c.max_message_size == 1048588
    assert c.get("message.timestamp.type") == "CreateTime"
    assert c.get("preallocate") is False and c.init_file_size == 0
    assert c.max_compaction_lag_ms == 9223372036854775807
    assert c.get("flush.messages") == 9223372036854775807
    assert c.get("file.delete.delay.ms") == 60000


def test_overrides_and_derived_values():
    c = LogConfig({"cleanup.policy": "compact,delete", "segment.ms": "1000",
                   "max.compaction.lag.ms": "400", "preallocate": "true", "segment.bytes": 4096})
    assert c.compact and c.delete
    assert c.max_segment_ms == 400                  # capped on compacted topics
    assert c.init_file_size == 4096
    assert LogConfig({"segment.ms": "1000", "max.compaction.lag.ms": "400"}).max_segment_ms == 1000
    assert LogConfig({"cleanup.policy": "compact", "segment.ms": "300",
                      "max.compaction.lag.ms": "400"}).max_segment_ms == 300
    assert c.overrides["segment.bytes"] == "4096"
    assert not c.is_default("segment.ms") and c.is_default("retention.ms")


def test_broker_properties_set_topic_defaults():
    broker = BrokerConfig({"log.segment.bytes": "2048", "log.roll.hours": "2",
                           "log.retention.minutes": "3", "log.cleanup.policy": "compact",
                           "message.max.bytes": "999"})
    c = LogConfig({}, broker)
    assert c.segment_bytes == 2048
    assert c.segment_ms == 2 * 3600000
    assert c.get("retention.ms") == 3 * 60000
    assert c.compact
    assert c.max_message_size == 999
    # a topic override wins over the broker default
    assert LogConfig({"segment.bytes": "777"}, broker).segment_bytes == 777
    # the first matching broker property wins (log.retention.ms before .minutes)
    both = BrokerConfig({"log.retention.ms": "5", "log.retention.minutes": "3"})
    assert LogConfig({}, both).get("retention.ms") == 5


@pytest.mark.parametrize("name,value", [
    ("segment.bytes", "13"), ("segment.bytes", "2147483648"), ("segment.ms", "0"),
    ("cleanup.policy", "compress"), ("cleanup.policy", ""), ("min.cleanable.dirty.ratio", "1.5"),
    ("message.timestamp.type", "WallClock"), ("preallocate", "yes"), ("retention.ms", "-2"),
    ("index.interval.bytes", "-1"), ("max.compaction.lag.ms", "0"), ("no.such.config", "1"),
    ("segment.index.bytes", "3"), ("compression.type", "brotli"),
])
def test_invalid_values_are_refused(name, value):
    with pytest.raises(ConfigError, match=name.split(".")[0]):
        LogConfig({name: value})


def test_smallest_accepted_values():
    c = LogConfig({"segment.bytes": "14", "segment.ms": "1", "retention.ms": "-1",
                   "index.interval.bytes": "0", "segment.index.bytes": "4"})
    assert (c.segment_bytes, c.segment_ms, c.get("retention.ms")) == (14, 1, -1)


def test_with_overrides():
    c = LogConfig({"segment.bytes": "4096", "segment.ms": "10"})
    d = c.with_overrides({"retention.bytes": "100"}, ["segment.ms"])
    assert d.segment_bytes == 4096 and d.get("retention.bytes") == 100
    assert d.segment_ms == 604800000
    with pytest.raises(ConfigError):
        c.with_overrides({}, ["nope"])


def test_broker_config():
    b = BrokerConfig({"producer.id.expiration.ms": "5000"})
    assert b.get("producer.id.expiration.ms") == 5000
    assert BrokerConfig().get("producer.id.expiration.ms") == 86400000
    with pytest.raises(ConfigError):
        BrokerConfig().get("not.a.setting")
    with pytest.raises(ConfigError):
        BrokerConfig({"log.segment.bytes": "1"}).validate()


def test_properties_parsing():
    props = parse_properties("# comment\n! other\nlog.dirs=/tmp/x\nnum.partitions: 3\n\nflag\n a = b c \n")
    assert props == {"log.dirs": "/tmp/x", "num.partitions": "3", "flag": "", "a": "b c"}
    assert parse_assignments(["a=1", "b = x=y"], "--config") == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="--config"):
        parse_assignments(["novalue"], "--config")
