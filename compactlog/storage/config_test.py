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
    # java.util.Properties keeps a value's trailing blanks (Kafka's ConfigDef trims when it parses)
    assert props == {"log.dirs": "/tmp/x", "num.partitions": "3", "flag": "", "a": "b c "}
    assert parse_assignments(["a=1", "b = x=y"], "--config") == {"a": "1", "b": "x=y"}
    with pytest.raises(ConfigError, match="--config"):
        parse_assignments(["novalue"], "--config")


# -- Kafka's parsing and validation rules ---------------------------------------------------------

@pytest.mark.parametrize("name,value,hint", [
    ("cleanup.policy", "COMPACT", "did you mean compact?"),
    ("cleanup.policy", "compact,Delete", "did you mean delete?"),
    ("compression.type", "GZIP", "did you mean gzip?"),
    ("message.timestamp.type", "createtime", "did you mean CreateTime?"),
])
def test_enumerated_values_are_case_sensitive_as_in_kafka(name, value, hint):
    with pytest.raises(ConfigError) as err:
        LogConfig({name: value})
    assert name in str(err.value) and hint in str(err.value) and "case-sensitive" in str(err.value)


def test_list_values_are_trimmed_but_keep_empty_elements():
    assert LogConfig({"cleanup.policy": " compact , delete "}).get("cleanup.policy") == ["compact", "delete"]
    with pytest.raises(ConfigError, match="empty element"):
        LogConfig({"cleanup.policy": "compact,"})
    # booleans ignore case, as Kafka's ConfigDef does
    assert LogConfig({"preallocate": "TRUE"}).get("preallocate") is True


@pytest.mark.parametrize("value", ["1_000", "١٠٠٠", "12.0", "0x10", ""])
def test_numbers_are_ascii_digits_only(value):
    with pytest.raises(ConfigError, match="segment.bytes"):
        LogConfig({"segment.bytes": value})
    assert LogConfig({"segment.bytes": " +2048 "}).segment_bytes == 2048


def test_min_compaction_lag_above_max_is_refused():
    with pytest.raises(ConfigError, match=r"min.compaction.lag.ms \(10\) is greater than max.compaction.lag.ms \(5\)"):
        LogConfig({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})


def test_errors_say_what_was_wrong_names_before_values():
    from compactlog.storage.config import (TOPIC_CONFIGS, CompactionLagConflict, ConfigValueError,
                                           UnknownConfigError)
    # as Kafka's LogConfig.validate: an unknown name is reported before a bad value given earlier
    with pytest.raises(UnknownConfigError) as e:
        LogConfig({"segment.bytes": "x", "segment.byte": "1"})
    assert e.value.name == "segment.byte"
    with pytest.raises(ConfigValueError) as e:
        LogConfig({"segment.ms": "1", "segment.bytes": "13", "flush.ms": "-1"})
    assert (e.value.definition, e.value.name, e.value.raw) == (TOPIC_CONFIGS["segment.bytes"],
                                                              "segment.bytes", "13")
    with pytest.raises(ConfigValueError) as e:
        LogConfig({}, BrokerConfig({"log.segment.bytes": "13"}))
    assert (e.value.definition.name, e.value.name) == ("segment.bytes", "log.segment.bytes")
    with pytest.raises(CompactionLagConflict) as e:
        LogConfig({"min.compaction.lag.ms": "5"}, BrokerConfig({"log.cleaner.max.compaction.lag.ms": "4"}))
    assert (e.value.min_lag, e.value.max_lag) == (5, 4)


@pytest.mark.parametrize("props,name", [
    ({"log.cleanup.policy": "Compact"}, "log.cleanup.policy"),
    ({"log.roll.hours": "0"}, "log.roll.hours"),
    ({"log.roll.jitter.hours": "-1"}, "log.roll.jitter.hours"),
    ({"log.retention.hours": "0"}, "log.retention.hours"),
    ({"log.retention.ms": "0"}, "log.retention.ms"),
    ({"log.roll.ms": "0"}, "log.roll.ms"),
    ({"log.segment.bytes": "abc"}, "log.segment.bytes"),
])
def test_broker_synonyms_are_validated_under_their_own_name(props, name):
    with pytest.raises(ConfigError) as err:
        BrokerConfig(props).validate()
    assert f"configuration {name}:" in str(err.value)


def test_broker_retention_follows_kafka():
    # any negative broker retention is unlimited (Kafka's KafkaConfig), whatever its unit
    for props in ({"log.retention.hours": "-5"}, {"log.retention.minutes": "-1"}, {"log.retention.ms": "-7"}):
        b = BrokerConfig(props)
        b.validate()
        assert LogConfig({}, b).get("retention.ms") == -1
    assert LogConfig({}, BrokerConfig({"log.retention.hours": "2"})).get("retention.ms") == 2 * 3600000
    # a topic may still ask for retention.ms=0
    assert LogConfig({"retention.ms": "0"}).get("retention.ms") == 0


@pytest.mark.parametrize("props,expected", [
    ({"log.cleaner.io.buffer.size": "0"}, "it must be at least 2$"),
    ({"log.cleaner.io.buffer.size": "1"}, "would be io.buffer.size / threads / 2 = 0 bytes"),
    ({"log.cleaner.io.buffer.size": "17", "log.cleaner.threads": "9"}, "it must be at least 18$"),
    ({"log.cleaner.dedupe.buffer.size": "1048576"}, "more than 1 MiB per cleaner thread"),
    ({"log.cleaner.dedupe.buffer.size": "8388608", "log.cleaner.threads": "8"}, "more than 1 MiB"),
    ({"log.cleaner.threads": "1000000"}, "log.cleaner.dedupe.buffer.size"),
    ({"log.cleaner.io.buffer.load.factor": "0"}, "would not hold one key"),
    ({"log.cleaner.io.buffer.load.factor": "nan"}, "would not hold one key"),
    ({"log.cleaner.threads": "-1"}, "at least 0"),
    ({"log.cleaner.io.buffer.size": "-1"}, "at least 0"),
])
def test_cleaner_buffers_that_would_hang_or_break_are_refused(props, expected):
    with pytest.raises(ConfigError, match=expected):
        BrokerConfig(props).validate()


def test_cleaner_buffer_floors_are_not_checked_without_cleaner_threads():
    BrokerConfig({"log.cleaner.threads": "0", "log.cleaner.io.buffer.size": "0"}).validate()
    # buffers of 1 byte grow by doubling to any batch, as in Kafka: accepted
    BrokerConfig({"log.cleaner.io.buffer.size": "2"}).validate()
    BrokerConfig({"log.cleaner.io.buffer.size": "18", "log.cleaner.threads": "9",
                  "log.cleaner.dedupe.buffer.size": str(10 * 2**20)}).validate()
    BrokerConfig().validate()


def test_setting_warnings():
    from compactlog.storage.config import setting_warnings
    names = ["log.cleaner.io.bufer.size", "compactlog.spark.mastr", "broker.id", "cleanup.policy",
             "log.segment.bytes", "compactlog.spark.master", "log.cleaner.threads", "listener.name.x.ssl.y"]
    lines = setting_warnings(names, "--override", explicit=True)
    text = "\n".join(lines)
    assert len(lines) == 3
    assert "--override: unknown settings ignored: compactlog.spark.mastr (did you mean compactlog.spark.master?), " \
           "log.cleaner.io.bufer.size (did you mean log.cleaner.io.buffer.size?)" in text
    assert "cleanup.policy is a topic config" in text and "log.cleanup.policy" in text
    assert "Kafka broker settings that compactlog does not use, ignored: broker.id, listener.name.x.ssl.y" in text
    for known in ("log.segment.bytes", "compactlog.spark.master", "log.cleaner.threads"):
        assert known not in text.replace("compactlog.spark.master?", "")
    # a Kafka broker's own server.properties is full of settings compactlog does not use: silent
    kafka_file = ["broker.id", "listeners", "log.dirs", "zookeeper.connect", "num.network.threads",
                  "process.roles", "node.id", "controller.quorum.voters", "offsets.topic.replication.factor",
                  "log.retention.hours", "log.segment.bytes", "group.initial.rebalance.delay.ms"]
    assert setting_warnings(kafka_file, "server.properties", explicit=False) == []
    assert setting_warnings(["log.retention.hour"], "server.properties", explicit=False) == [
        "server.properties: unknown setting ignored: log.retention.hour (did you mean log.retention.hours?)"]


def test_read_properties_reads_latin1_as_java_does(tmp_path):
    from compactlog.storage.config import read_properties
    p = tmp_path / "server.properties"
    assert read_properties(str(p)) == {}
    p.write_bytes("# réglages\nname=café\n".encode("utf-8"))
    assert read_properties(str(p)) == {"name": "café"}
    p.write_bytes("# réglages\nname=café\n".encode("latin-1"))
    assert read_properties(str(p)) == {"name": "café"}


def test_server_properties_is_read_as_java_reads_it(tmp_path):
    """Whitespace and colon separators, continuation lines and escapes are Java's Properties
    format (they were silently ignored)."""
    from compactlog.storage.config import read_properties
    path = tmp_path / "server.properties"
    path.write_bytes(b"# comment\n! another\nnum.partitions 3\nlog.cleaner.threads:2\n"
                     b"log.cleanup.policy = compact,\\\n    delete\nkey\\ with\\ space=x\n"
                     b"unicode=\\u00e9\nempty\n")
    assert read_properties(str(path)) == {"num.partitions": "3", "log.cleaner.threads": "2",
                                          "log.cleanup.policy": "compact,delete", "key with space": "x",
                                          "unicode": "\u00e9", "empty": ""}


def test_did_you_mean_names_the_closest_known_names():
    from compactlog.storage.config import UnknownConfigError, did_you_mean
    assert did_you_mean("segmnt.bytes", ["segment.bytes", "segment.ms"]) == " (did you mean segment.bytes?)"
    assert did_you_mean("zzz", ["segment.bytes"]) == ""
    assert did_you_mean("topik", {"topic": "Topic"}, n=2, cutoff=0.6, spell={"topic": "Topic"}.get) == \
        " (did you mean Topic?)"
    assert str(UnknownConfigError("cleanup.polcy")) == "unknown topic configuration cleanup.polcy (did you mean cleanup.policy?)"
    assert UnknownConfigError("cleanup.polcy").name == "cleanup.polcy"
