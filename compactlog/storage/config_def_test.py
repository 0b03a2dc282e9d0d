"""ConfigDef.parse is the one parser of config values: a refusal carries compactlog's message and
Kafka's ConfigException text for the same value (what the broker answers), and values are read as
Kafka's ConfigDef.parseType reads them, and written as Kafka writes them (``java_double``:
Java's Double.toString)."""

from __future__ import annotations

import math

import pytest

from compactlog.storage.config import (BROKER_CONFIGS, TOPIC_CONFIGS, ConfigValueError, java_double,
                                       kafka_string)


def refusal(name: str, raw: str) -> ConfigValueError:
    with pytest.raises(ConfigValueError) as e:
        TOPIC_CONFIGS[name].parse(raw)
    return e.value


@pytest.mark.parametrize("name, raw, ours, kafka", [
    ("segment.bytes", "x", "invalid value 'x' for configuration segment.bytes: not a whole number",
     "Invalid value x for configuration segment.bytes: Not a number of type INT"),
    ("segment.bytes", "2147483648", "invalid value '2147483648' for configuration segment.bytes: out of int range",
     "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
    ("segment.ms", "1_000", "invalid value '1_000' for configuration segment.ms: not a whole number",
     "Invalid value 1_000 for configuration segment.ms: Not a number of type LONG"),
    ("preallocate", "yes", "invalid value 'yes' for configuration preallocate: expected true or false",
     "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
    ("segment.bytes", "13", "invalid value '13' for configuration segment.bytes: value must be at least 14",
     "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ("min.cleanable.dirty.ratio", "1.5f",
     "invalid value '1.5f' for configuration min.cleanable.dirty.ratio: value must be between 0.0 and 1.0",
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "nan",
     "invalid value 'nan' for configuration min.cleanable.dirty.ratio: value must be between 0.0 and 1.0",
     "Invalid value nan for configuration min.cleanable.dirty.ratio: Not a number of type DOUBLE"),
    ("cleanup.policy", "compact,Delete", None,
     "Invalid value Delete for configuration cleanup.policy: String must be one of: compact, delete"),
])
def test_a_refusal_is_worded_both_ways(name, raw, ours, kafka):
    e = refusal(name, raw)
    if ours is not None:
        assert str(e) == ours
    assert e.kafka_message == kafka
    assert (e.definition, e.name, e.raw) == (TOPIC_CONFIGS[name], name, raw)


def test_where_only_compactlog_refuses_kafka_has_no_message():
    e = refusal("cleanup.policy", "")
    assert "cleanup.policy must name compact, delete or both" in str(e) and e.kafka_message is None


def test_doubles_are_read_as_java_writes_them_and_as_python_does():
    ratio = TOPIC_CONFIGS["min.cleanable.dirty.ratio"]
    assert [ratio.parse(x) for x in ("0.5", "0.5f", "5e-1", ".5D", " +0.5 ")] == [0.5] * 5
    factor = BROKER_CONFIGS["log.cleaner.io.buffer.load.factor"]
    assert factor.parse("Infinity") == math.inf and math.isnan(factor.parse("nan"))


def test_values_are_written_as_kafka_writes_them():
    assert [java_double(x) for x in (0.5, 1e7, 1e-4, float("-inf"))] == ["0.5", "1.0E7", "1.0E-4", "-Infinity"]
    assert kafka_string("list", ["compact", "delete"]) == "compact,delete"
    assert kafka_string("bool", False) == "false" and kafka_string("double", 1) == "1.0"
    assert kafka_string("long", None) is None


@pytest.mark.parametrize("value, text", [(0.5, "0.5"), (1.0, "1.0"), (100.0, "100.0"), (0.001, "0.001"),
                                         (0.0001, "1.0E-4"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"),
                                         (1.7976931348623157e308, "1.7976931348623157E308"), (0.0, "0.0"),
                                         (-2.5e-5, "-2.5E-5"), (float("inf"), "Infinity")])
def test_java_double(value, text):
    assert java_double(value) == text


def test_a_block_declares_settings_under_one_prefix_with_shared_arguments():
    from compactlog.errors import ConfigError
    from compactlog.storage.config_def import CLUSTER_WIDE, READ_ONLY, at_least, block
    shared = at_least(1)
    a, b = block("x.quota.", (
        ("window.num", "int", 11, "Windows."),
        ("max.bytes.per.second", "long", 5, "Bytes a second.", {"dynamic": CLUSTER_WIDE, "importance": "high"}),
    ), check=shared, importance="low")
    assert (a.name, a.kind, a.default, a.doc, a.check, a.importance, a.dynamic) == \
        ("x.quota.window.num", "int", 11, "Windows.", shared, "low", READ_ONLY)
    assert (b.name, b.check, b.importance, b.dynamic) == ("x.quota.max.bytes.per.second", shared, "high", CLUSTER_WIDE)
    assert b.parse("7") == 7
    with pytest.raises(ConfigError):
        b.parse("0")
