"""What the controller checks of a topic's name and configs, for CreateTopics, CreatePartitions
and the config APIs alike.

* Kafka's ``Topic.validate``: the legal names, with its messages; names that collide once '.' and
  '_' are unified (``Topic.hasCollision``: metric names cannot tell them apart).
* ``ControllerConfigurationValidator`` and ``LogConfig.validate``: a topic's configs as a whole
  (names, then values, then the compaction lags together). The values are parsed by storage's
  ``ConfigDef`` (the one parser of config values), whose refusal carries Kafka's
  ``ConfigException`` text; where compactlog is stricter than Kafka (an empty ``cleanup.policy``)
  its own message is given.
* compactlog's own rule: ``min.insync.replicas`` above 1 (a topic's own or the broker default) is
  refused with INVALID_CONFIG, since one node can never meet it; Kafka would accept the topic and
  then refuse every ``acks=all`` produce with NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

import re

from kio.schema.errors import ErrorCode

from ...errors import ConfigError
from ...storage import files
from ...storage.config import CompactionLagConflict, ConfigDef, ConfigValueError, LogConfig, UnknownConfigError
from ...storage.datadir import INTERNAL_TOPIC_CONFIGS
from ..state import BrokerState
from .handler import Refused

_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")


def topic_name_error(name: str) -> str | None:
    """Kafka's Topic.validate message for an illegal topic name, None for a legal one."""
    if name == "":
        reason = "the empty string is not allowed"
    elif name == ".":
        reason = "'.' is not allowed"
    elif name == "..":
        reason = "'..' is not allowed"
    elif len(name) > files.MAX_TOPIC_LENGTH:
        reason = f"the length of '{name}' is longer than the max allowed length {files.MAX_TOPIC_LENGTH}"
    elif not _LEGAL_TOPIC_CHARS.fullmatch(name):
        reason = f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    else:
        return None
    return f"Topic name is invalid: {reason}"


def colliding_topic(name: str, existing) -> str | None:
    """An existing topic whose name equals ``name`` once '.' and '_' are unified (Kafka refuses it:
    metric names cannot tell them apart), or None."""
    if "." not in name and "_" not in name:
        return None
    unified = name.replace(".", "_")
    for other in sorted(existing):
        if ("." in other or "_" in other) and other.replace(".", "_") == unified:
            return other
    return None


def kafka_config_error(d: ConfigDef, raw: str) -> str | None:
    """The message of Kafka's ConfigException for ``raw`` as the value of topic config ``d``, or
    None when Kafka accepts it (storage's parse, which words the refusal both ways)."""
    try:
        d.parse(raw)
    except ConfigValueError as e:
        return e.kafka_message
    return None


def validate_topic_configs(state: BrokerState, topic: str, overrides: dict[str, str]) -> LogConfig:
    """The topic's configs with ``overrides`` as its complete set of overrides, or Refused with
    INVALID_CONFIG and Kafka's message (LogConfig.validate: names, then values, then the
    compaction lags together), and compactlog's single-replica rule for min.insync.replicas."""
    # the overrides first, in the order given, so that the first bad one is the one reported
    internal = INTERNAL_TOPIC_CONFIGS.get(topic, {})
    merged = {**overrides, **{k: v for k, v in internal.items() if k not in overrides}}
    try:
        cfg = LogConfig(merged, state.broker)
    except UnknownConfigError as e:
        raise Refused(ErrorCode.invalid_config, f"Unknown topic config name: {e.name}") from None
    except ConfigValueError as e:
        kafka = e.kafka_message if e.name in overrides else None
        raise Refused(ErrorCode.invalid_config, kafka or str(e)) from None
    except CompactionLagConflict as e:
        raise Refused(ErrorCode.invalid_config, f"conflict topic config setting min.compaction.lag.ms "
                                                f"({e.min_lag}) > max.compaction.lag.ms ({e.max_lag})") from None
    except ConfigError as e:
        raise Refused(ErrorCode.invalid_config, str(e)) from None
    was_remote = state.datadir.has_topic(topic) and state.datadir.topic_config(topic).get("remote.storage.enable")
    try:
        cfg.validate_remote(was_remote_enabled=bool(was_remote))
    except ConfigError as e:
        raise Refused(ErrorCode.invalid_config, str(e)) from None
    isr = cfg.get("min.insync.replicas")
    if isr > 1:
        where = "the topic's" if "min.insync.replicas" in merged else "the broker's default"
        raise Refused(ErrorCode.invalid_config,
                      f"min.insync.replicas={isr} ({where}) can never be met: this broker is a single "
                      f"node, so each partition has 1 replica; set it to 1")
    return cfg
