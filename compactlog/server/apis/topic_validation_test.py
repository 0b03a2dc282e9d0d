"""Kafka's ConfigException text beside compactlog's checks (``apis/topic_validation.py``): every
topic config's check is a Rule, Kafka's message and compactlog's refusal agree at each bound, and
each rule is worded as Kafka words it."""

from __future__ import annotations

import pytest

from compactlog.server.apis.topic_validation import kafka_config_error
from compactlog.storage.config import TOPIC_CONFIGS


def test_every_topic_config_check_carries_kafkas_rule():
    from compactlog.storage.config import Rule
    assert all(d.check is None or isinstance(d.check, Rule) for d in TOPIC_CONFIGS.values())


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_kafka_messages_agree_with_compactlogs_checks(name):
    """Where Kafka's rule gives a message, compactlog refuses the value too, and the other way round
    at each bound (one rule object gives both, so they can only drift in their wording)."""
    from compactlog.errors import ConfigError
    d = TOPIC_CONFIGS[name]
    rule = d.check
    probes = ["abc", "", "1.5", "true"]
    for attr in ("lo", "hi", "other"):
        bound = getattr(rule, attr, None)
        if bound is not None:
            probes += [str(bound - 1), str(bound), str(bound + 1)]
    options = getattr(rule, "options", ())
    probes += list(options) + [options[0].upper()] if options else []
    for raw in probes:
        try:
            d.parse(raw)
            ours = None
        except ConfigError:
            ours = "refused"
        kafka = kafka_config_error(d, raw)
        if kafka is not None:
            assert ours == "refused", (name, raw, kafka)
        elif ours is not None:
            # compactlog stricter than Kafka: only where the module docstring says so
            assert (name, raw) in {("cleanup.policy", "")}, (name, raw)


@pytest.mark.parametrize("name, raw, message", [
    ("segment.bytes", "13", "Invalid value 13 for configuration segment.bytes: Value must be at least 14"),
    ("min.cleanable.dirty.ratio", "1.5",
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"),
    ("min.cleanable.dirty.ratio", "-1e-5",
     "Invalid value -1.0E-5 for configuration min.cleanable.dirty.ratio: Value must be at least 0"),
    ("compression.zstd.level", "23",
     "Invalid value 23 for configuration compression.zstd.level: Value must be no more than 22"),
    ("compression.gzip.level", "0",
     "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"),
    ("compression.type", "GZIP", "Invalid value GZIP for configuration compression.type: String must be one "
                                 "of: uncompressed, zstd, lz4, snappy, gzip, producer"),
    ("cleanup.policy", "compact,Delete",
     "Invalid value Delete for configuration cleanup.policy: String must be one of: compact, delete"),
    ("segment.ms", "x", "Invalid value x for configuration segment.ms: Not a number of type LONG"),
    ("preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to be either "
                           "true or false"),
    ("retention.bytes", "-5", None),
])
def test_kafka_config_error_words_each_rule_as_kafka(name, raw, message):
    assert kafka_config_error(TOPIC_CONFIGS[name], raw) == message
