"""Topic configs (Kafka's LogConfig) and the log settings of the broker (ServerLogConfigs,
ProducerStateManagerConfig), with Kafka's names, types, defaults, validators and documentation;
``BrokerConfig``, a broker's settings read through every owner's definitions (config_registry.py:
the cleaner, server, security, coordinator and Spark settings are defined by their packages).

A topic config's default comes from its broker property (``server.properties`` or ``--override``)
when set there, else from Kafka's default. ``segment.bytes`` accepts values down to 14, as Kafka
3.x did, so that tests and demos can roll tiny segments.

Values are parsed as Kafka's ConfigDef parses them: numbers are ASCII digits with an optional
sign, booleans ignore case, and enumerated values (``cleanup.policy``, ``compression.type``,
``message.timestamp.type``) are case-sensitive, as Kafka's ValidString/ValidList are. Where Kafka
accepts a value that makes its own cleaner spin forever (I/O buffers of 0 bytes), compactlog refuses
it. A double may also be written as Python reads one (``nan``, ``inf``), which Java does not.

This is the one parser of config values: the CLI, the data dir and the broker all go through
``ConfigDef.parse`` (config_def.py). A refusal (``ConfigValueError``) carries compactlog's message and, in
``kafka_message``, the text of Kafka's ``ConfigException`` for the same value (what the broker's
INVALID_CONFIG answers say), or None where only compactlog refuses it.

Names that are not settings (a misspelt ``--override``, a key in ``server.properties``) are not
errors, as they are not in Kafka, whose broker logs them as unknown: ``setting_warnings`` gives
the lines to print.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable

from ..errors import ConfigError
# the value parsing and validators (config_def.py) and the .properties format (properties.py);
# re-exported: callers import them from here
from .config_def import (CLUSTER_WIDE, INT_MAX, LONG_MAX, MIB, BetweenOr, CompactionLagConflict,  # noqa: F401
                         ConfigDef, ConfigValueError, ListOf, Rule, at_least, between, did_you_mean,
                         java_double, kafka_string, one_of)
from .config_registry import BROKER_CONFIGS, check_all, register
from .kafka_names import KAFKA_BROKER_SETTINGS
from .properties import parse_assignments, parse_properties, read_properties  # noqa: F401


class RemoteConfigError(ConfigError):
    """Remote-storage configs Kafka's LogConfig refuses together (the message is Kafka's)."""


class UnknownConfigError(ConfigError):
    """A name that is not a topic config; ``name`` says which (the message adds the closest
    known name, when one is close)."""

    def __init__(self, name: str):
        super().__init__(f"unknown topic configuration {name}{did_you_mean(name, TOPIC_CONFIGS)}")
        self.name = name



_policy = ListOf(("compact", "delete"), "cleanup policy", "cleanup.policy must name compact, delete or both")
_gzip_level = BetweenOr(1, 9, -1)


TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("cleanup.policy", "list", ["delete"], ("log.cleanup.policy",), _policy,
              doc="How old data is reclaimed: 'delete' drops whole segments by age or size, 'compact' keeps "
                  "only the latest record of each key; both may be listed."),
    ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, ("log.cleaner.min.cleanable.ratio",), between(0, 1),
              doc="Share of the log not yet compacted above which the cleaner picks the partition."),
    ConfigDef("min.compaction.lag.ms", "long", 0, ("log.cleaner.min.compaction.lag.ms",), at_least(0),
              doc="Records younger than this are never compacted away."),
    ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, ("log.cleaner.max.compaction.lag.ms",), at_least(1),
              doc="Records older than this become eligible for compaction even when the dirty ratio is not "
                  "reached."),
    ConfigDef("delete.retention.ms", "long", 86400000, ("log.cleaner.delete.retention.ms",), at_least(0),
              doc="How long tombstones and transaction markers survive compaction, so that consumers reading "
                  "from the start can see them."),
    ConfigDef("segment.bytes", "int", 1073741824, ("log.segment.bytes",), at_least(14),
              doc="Size at which the active segment is closed and a new one begun."),
    ConfigDef("segment.ms", "long", 604800000, ("log.roll.ms", "log.roll.hours"), at_least(1),
              doc="Age at which the active segment is rolled even when it is not full."),
    ConfigDef("segment.jitter.ms", "long", 0, ("log.roll.jitter.ms", "log.roll.jitter.hours"), at_least(0),
              doc="Largest random time subtracted from segment.ms, so that segments do not all roll together."),
    ConfigDef("segment.index.bytes", "int", 10485760, ("log.index.size.max.bytes",), at_least(4),
              doc="Largest size of a segment's offset and time indexes."),
    ConfigDef("index.interval.bytes", "int", 4096, ("log.index.interval.bytes",), at_least(0),
              doc="Bytes appended between two entries of the offset index."),
    ConfigDef("retention.ms", "long", 604800000, ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), at_least(-1),
              doc="How long records are kept under the delete policy; -1 keeps them forever."),
    ConfigDef("retention.bytes", "long", -1, ("log.retention.bytes",),
              doc="Largest size of a partition under the delete policy before its oldest segments go; -1 means "
                  "no limit."),
    ConfigDef("file.delete.delay.ms", "long", 60000, ("log.segment.delete.delay.ms",), at_least(0),
              doc="Wait before a segment set aside for deletion is removed from disk."),
    ConfigDef("max.message.bytes", "int", 1048588, ("message.max.bytes",), at_least(0),
              doc="Largest record batch the topic accepts, compressed size."),
    ConfigDef("message.timestamp.type", "string", "CreateTime", ("log.message.timestamp.type",), one_of("CreateTime", "LogAppendTime"),
              doc="CreateTime keeps the producer's timestamps; LogAppendTime has the broker stamp each batch "
                  "when it is appended."),
    ConfigDef("message.timestamp.before.max.ms", "long", LONG_MAX, ("log.message.timestamp.before.max.ms",), at_least(0),
              doc="How far a CreateTime timestamp may lie in the past before the batch is refused."),
    ConfigDef("message.timestamp.after.max.ms", "long", LONG_MAX, ("log.message.timestamp.after.max.ms",), at_least(0),
              doc="How far a CreateTime timestamp may lie in the future before the batch is refused."),
    ConfigDef("message.timestamp.difference.max.ms", "long", LONG_MAX, ("log.message.timestamp.difference.max.ms",), at_least(0),
              doc="Deprecated bound on a timestamp's distance from the broker's clock; the before/after "
                  "settings replace it."),
    ConfigDef("compression.type", "string", "producer", ("compression.type",), one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
              doc="Codec of stored batches: gzip, snappy, lz4, zstd, uncompressed, or producer to keep what the "
                  "producer sent."),
    ConfigDef("compression.gzip.level", "int", -1, ("compression.gzip.level",), _gzip_level,
              doc="Level used when the broker compresses with gzip."),
    ConfigDef("compression.lz4.level", "int", 9, ("compression.lz4.level",), between(1, 17),
              doc="Level used when the broker compresses with lz4."),
    ConfigDef("compression.zstd.level", "int", 3, ("compression.zstd.level",), between(-131072, 22),
              doc="Level used when the broker compresses with zstd."),
    ConfigDef("preallocate", "bool", False, ("log.preallocate",),
              doc="Whether a new segment file is created at its full size."),
    ConfigDef("flush.messages", "long", LONG_MAX, ("log.flush.interval.messages",), at_least(1),
              doc="Records appended between two forced flushes to disk."),
    ConfigDef("flush.ms", "long", LONG_MAX, ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), at_least(0),
              doc="Time between two forced flushes to disk."),
    ConfigDef("min.insync.replicas", "int", 1, ("min.insync.replicas",), at_least(1),
              doc="Replicas that must have a write for acks=all to succeed; a single-node broker can only meet "
                  "1."),
    ConfigDef("unclean.leader.election.enable", "bool", False, ("unclean.leader.election.enable",),
              doc="Whether a replica outside the in-sync set may become leader (no effect on a single node)."),
    ConfigDef("message.downconversion.enable", "bool", True, ("log.message.downconversion.enable",),
              doc="Whether old fetch versions may be sent down-converted batches."),
    ConfigDef("local.retention.ms", "long", -2, ("log.local.retention.ms",), at_least(-2),
              doc="Local retention time under tiered storage; -2 means retention.ms."),
    ConfigDef("local.retention.bytes", "long", -2, ("log.local.retention.bytes",), at_least(-2),
              doc="Local retention size under tiered storage; -2 means retention.bytes."),
    ConfigDef("remote.storage.enable", "bool", False, (),
              doc="Whether the topic's rolled segments are copied to the remote tier (needs the broker's "
                  "remote.log.storage.system.enable=true); compactlog accepts it with cleanup.policy=compact "
                  "too, which Kafka refuses since KAFKA-19273."),
    ConfigDef("remote.log.copy.disable", "bool", False, (),
              doc="Stop copying segments of a tiered topic (its remote data stays readable); local retention then "
                  "follows retention.ms/bytes (KIP-950)."),
    ConfigDef("remote.log.delete.on.disable", "bool", False, (),
              doc="Must be true to turn remote.storage.enable off: the remote data is then deleted (KIP-950)."),
    # KIP-280 (accepted, never built in Kafka): which record of a key compaction keeps (cleaner/strategy.py)
    ConfigDef("compaction.strategy", "string", "offset", ("log.cleaner.compaction.strategy",), one_of("offset", "timestamp", "header"),
              doc="Which record of a key compaction keeps (KIP-280): offset (the last one written), timestamp "
                  "(the highest record timestamp) or header (the highest long in compaction.strategy.header); "
                  "ties go to the later offset."),
    ConfigDef("compaction.strategy.header", "string", "", ("log.cleaner.compaction.strategy.header",),
              doc="The record header holding each record's version, an 8-byte big-endian long, for "
                  "compaction.strategy=header (its last occurrence counts)."),
]}

# broker settings in another unit than the topic config they default: (ms per unit, Kafka's check)
_BROKER_UNIT = {"log.roll.hours": (3600000, at_least(1)), "log.roll.jitter.hours": (3600000, at_least(0)),
                "log.retention.minutes": (60000, None), "log.retention.hours": (3600000, None)}

# the broker settings of the log manager and the producer state (Kafka's ServerLogConfigs,
# ProducerStateManagerConfig); ``register`` below adds them to every owner's in config_registry
LOG_SETTINGS = (
    ConfigDef("message.max.bytes", "int", 1048588, check=at_least(0), dynamic=CLUSTER_WIDE, importance="high",
              doc="Largest record batch accepted; the default of max.message.bytes."),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, check=at_least(1), dynamic=CLUSTER_WIDE, importance="low",
              doc="Idle time after which a producer id's state is dropped."),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, check=at_least(1), importance="low",
              doc="Interval between checks for expired producer ids."),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, check=at_least(1), importance="medium",
              doc="Interval between retention checks."),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, check=at_least(0), importance="high",
              doc="Interval between writes of the recovery-point checkpoint."),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, check=at_least(0), importance="high",
              doc="Interval between writes of the log-start-offset checkpoint."),
)


def _check_topic_defaults(broker: "BrokerConfig") -> None:
    # every topic config's broker default parses (a bad log.segment.bytes fails at start)
    for d in TOPIC_CONFIGS.values():
        broker.topic_default(d)


register("storage", __name__, LOG_SETTINGS, _check_topic_defaults)
# the remote tier's broker settings (remote.log.storage.system.enable, rsm.config.*): a topic's
# remote configs are checked against them, so they are registered with the topic configs
from .remote import config as _remote_config  # noqa: E402,F401

_TOPIC_BY_BROKER_NAME = {prop: d for d in TOPIC_CONFIGS.values() for prop in d.broker}


class BrokerConfig:
    """Broker-level settings: Kafka names from server.properties and --override."""

    def __init__(self, props: dict[str, str] | None = None):
        self.props: dict[str, str] = dict(props or {})
        # where the effective ``props`` came from (storage.dynamic_config): the static settings
        # (server.properties, --override), the cluster-wide and this broker's dynamic ones, and the
        # groups' dynamic configs
        self.static_props: dict[str, str] = dict(self.props)
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self.dynamic_groups: dict[str, dict[str, str]] = {}
        self.dropped_dynamic: list[str] = []

    def get(self, name: str):
        d = BROKER_CONFIGS.get(name)
        if d is None:
            if name in self.props:
                return self.props[name]
            raise ConfigError(f"unknown broker configuration {name}")
        if name in self.props:
            return d.parse(self.props[name])
        return d.default

    def validate(self) -> None:
        """Every setting compactlog knows checked alone (Kafka's ConfigDef), then together, each
        owner's part (Kafka's KafkaConfig.validateValues, and the floors compactlog needs to make
        progress: the cleaner's buffers, cleaner/config.py)."""
        for name, raw in self.props.items():
            if name in BROKER_CONFIGS:
                BROKER_CONFIGS[name].parse(raw)
        check_all(self)
        _check_strategy({d.name: self.topic_default(d) for d in TOPIC_CONFIGS.values()}, "log.cleaner.")

    def topic_default(self, d: ConfigDef):
        """The broker's default for topic config ``d``: its first broker synonym that is set."""
        for prop in d.broker:
            if prop in self.props:
                raw = self.props[prop]
                if prop in _BROKER_UNIT:
                    unit, check = _BROKER_UNIT[prop]
                    value = ConfigDef(prop, "int", None, check=check).parse(raw) * unit
                elif d.name == "retention.ms":
                    value = ConfigDef(prop, "long", None).parse(raw)     # no range: see below
                else:
                    return d.parse(raw, prop)
                if d.name == "retention.ms":
                    value = _broker_retention_ms(prop, raw, value)
                return value
        return d.default

    def __getitem__(self, name: str):
        return self.get(name)


def _check_strategy(values: dict, prefix: str) -> None:
    """KIP-280's header strategy names its header (``prefix``: the broker's names)."""
    if values["compaction.strategy"] == "header" and not values["compaction.strategy.header"]:
        raise ConfigError(f"{prefix}compaction.strategy=header needs the name of the header that holds each "
                          f"record's version in {prefix}compaction.strategy.header")


def _broker_retention_ms(prop: str, raw, value: int) -> int:
    # Kafka's KafkaConfig: any negative retention means unlimited (-1), and 0 is refused at the
    # broker level (a topic may still set retention.ms=0)
    if value < 0:
        return -1
    if value == 0:
        raise ConfigError(f"invalid value {raw!r} for configuration {prop}: the broker's log retention "
                          f"must be unlimited (-1) or at least 1 ms")
    return value


def setting_warnings(names: Iterable[str], origin: str, *, explicit: bool) -> list[str]:
    """Lines to print for names that are not compactlog broker settings (each one ignored).

    ``explicit`` names were asked for on the command line (``--override``): a Kafka broker setting
    compactlog does not use is then worth a word too; in ``server.properties`` it is expected (a
    broker's file is full of them) and stays silent, as an unknown name does not.
    """
    unknown, unused, topic_names = [], [], []
    for name in sorted(set(names)):
        if name in BROKER_CONFIGS or name in _TOPIC_BY_BROKER_NAME:
            continue
        if name in TOPIC_CONFIGS:
            topic_names.append(name)
        elif _listener_setting(name) in BROKER_CONFIGS or _listener_setting(name) in KAFKA_BROKER_SETTINGS \
                and _listener_setting(name).startswith(("ssl.", "sasl.", "connections.max.reauth")):
            continue        # listener.name.<l>.[<mechanism>.]<setting>: a listener's own value
        elif name in KAFKA_BROKER_SETTINGS or name.startswith("listener.name."):
            unused.append(name)
        else:
            unknown.append(name)
    lines = []
    for name in topic_names:
        d = TOPIC_CONFIGS[name]
        broker = f"the broker default is {d.broker[0]}; " if d.broker else ""
        lines.append(f"{origin}: {name} is a topic config, not a broker setting: ignored ({broker}"
                     f"a topic's own value is set with --config {name}=...)")
    if unknown:
        shown = ", ".join(name + _suggestion(name) for name in unknown)
        lines.append(f"{origin}: unknown setting{'s' if len(unknown) > 1 else ''} ignored: {shown}")
    if unused and explicit:
        lines.append(f"{origin}: Kafka broker setting{'s' if len(unused) > 1 else ''} that compactlog does "
                     f"not use, ignored: {', '.join(unused)}")
    return lines


def _listener_setting(name: str) -> str:
    """The setting a ``listener.name.<listener>.[<mechanism>.]<setting>`` name overrides ("" for
    other names)."""
    if not name.startswith("listener.name."):
        return ""
    parts = name.split(".")[3:]
    if len(parts) > 1 and parts[0] in ("plain", "scram-sha-256", "scram-sha-512", "gssapi", "oauthbearer"):
        parts = parts[1:]
    return ".".join(parts)


def broker_setting_names() -> list[str]:
    """Every name a broker setting may have: compactlog's, the topic defaults', Kafka's others."""
    return list(BROKER_CONFIGS) + list(_TOPIC_BY_BROKER_NAME) + sorted(KAFKA_BROKER_SETTINGS)


def _suggestion(name: str) -> str:
    known = list(BROKER_CONFIGS) + list(_TOPIC_BY_BROKER_NAME) + list(TOPIC_CONFIGS) + sorted(KAFKA_BROKER_SETTINGS)
    return did_you_mean(name, known, cutoff=0.8)


def _value(name: str) -> functools.cached_property:
    """A topic config as an attribute once read (``cached_property``): a LogConfig never changes
    (an altered topic gets a new one), and every append reads a few of them, each a call through
    ``get`` or a property before (issue 28: ~30 calls a single-record transaction)."""
    def read(self):
        return self._values[name]
    read.__doc__ = f"The topic's {name}."
    return functools.cached_property(read)


class LogConfig:
    """The effective configs of one topic: overrides, else broker defaults, else Kafka defaults."""

    def __init__(self, overrides: dict[str, Any] | None = None, broker: BrokerConfig | None = None, *,
                 known: bool = True):
        # as Kafka's LogConfig.validate: every name, then every value (each parsed once), then
        # the values together; each failure a ConfigError subclass that says what was wrong
        self.broker = broker or BrokerConfig()
        # False for a topic found only as directories (a copied Kafka dir): its real configs live
        # in the Kafka cluster's metadata, so retention and the cleaner leave it alone
        self.known = known
        self.overrides: dict[str, str] = {}
        for name, raw in (overrides or {}).items():
            if name not in TOPIC_CONFIGS:
                raise UnknownConfigError(name)
            self.overrides[name] = raw if isinstance(raw, str) else _format(raw)
        parsed = {name: TOPIC_CONFIGS[name].parse(raw) for name, raw in self.overrides.items()}
        self._values = {name: parsed[name] if name in parsed else self.broker.topic_default(d)
                        for name, d in TOPIC_CONFIGS.items()}
        lo, hi = self._values["min.compaction.lag.ms"], self._values["max.compaction.lag.ms"]
        if lo > hi:
            raise CompactionLagConflict(lo, hi)
        _check_strategy(self._values, "")

    def get(self, name: str):
        try:
            return self._values[name]
        except KeyError:
            raise ConfigError(f"unknown topic configuration {name}") from None

    __getitem__ = get

    def is_default(self, name: str) -> bool:
        return name not in self.overrides

    def with_overrides(self, changes: dict[str, Any], removals: list[str] = ()) -> "LogConfig":
        merged = dict(self.overrides)
        for name in removals:
            if name not in TOPIC_CONFIGS:
                raise UnknownConfigError(name)
            merged.pop(name, None)
        merged.update(changes)
        return LogConfig(merged, self.broker, known=self.known)

    # -- the values the storage layer reads, by their Kafka meaning
    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    segment_bytes = _value("segment.bytes")

    segment_ms = _value("segment.ms")

    max_index_size = _value("segment.index.bytes")

    index_interval_bytes = _value("index.interval.bytes")

    max_message_size = _value("max.message.bytes")
    flush_messages = _value("flush.messages")
    message_timestamp_type = _value("message.timestamp.type")
    compression_type = _value("compression.type")
    min_insync_replicas = _value("min.insync.replicas")

    @property
    def max_compaction_lag_ms(self) -> int:
        return self._values["max.compaction.lag.ms"]

    @property
    def min_compaction_lag_ms(self) -> int:
        return self._values["min.compaction.lag.ms"]

    @property
    def delete_retention_ms(self) -> int:
        return self._values["delete.retention.ms"]

    @functools.cached_property
    def max_segment_ms(self) -> int:
        """segment.ms, capped by max.compaction.lag.ms on compacted topics (Kafka's roll rule).
        Computed once: a LogConfig never changes (an altered topic gets a new one), and every
        append asks it."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    # -- tiered storage (Kafka's LogConfig.remoteLogConfig, UnifiedLog.remoteLogEnabled)
    @property
    def remote_log_enabled(self) -> bool:
        """The topic's remote.storage.enable under the broker's remote.log.storage.system.enable
        (UnifiedLog.remoteLogEnabled): a tiered topic of a broker with tiered storage off is
        served as a local one."""
        return bool(self._values["remote.storage.enable"]) and bool(self.broker.get("remote.log.storage.system.enable"))

    @property
    def remote_copy_enabled(self) -> bool:
        """UnifiedLog.remoteLogEnabledAndRemoteCopyEnabled: segments are copied, and local
        retention follows local.retention.* (else retention.*, KIP-950)."""
        return self.remote_log_enabled and not self._values["remote.log.copy.disable"]

    @property
    def local_retention_ms(self) -> int:
        """local.retention.ms, -2 meaning retention.ms (LogConfig.localRetentionMs)."""
        v = self._values["local.retention.ms"]
        return self._values["retention.ms"] if v == -2 else v

    @property
    def local_retention_bytes(self) -> int:
        v = self._values["local.retention.bytes"]
        return self._values["retention.bytes"] if v == -2 else v

    def validate_remote(self, was_remote_enabled: bool = False) -> None:
        """Kafka's LogConfig.validateTopicLogConfigValues for the remote configs: tiered storage
        needs the broker's switch, local retention may not exceed retention, with copying off
        the two must agree, and turning remote storage off needs remote.log.delete.on.disable.
        One difference, on purpose: Kafka refuses remote storage unless cleanup.policy is exactly
        delete (validateRemoteStorageRequiresDeleteCleanupPolicy, KAFKA-19273); compactlog
        accepts compact and compact,delete, and keeps the remote tier of a compacted topic."""
        v = self._values
        if not v["remote.storage.enable"]:
            if was_remote_enabled and not v["remote.log.delete.on.disable"]:
                raise RemoteConfigError(
                    "It is invalid to disable remote storage without deleting remote data. If you want to keep "
                    "the remote data and turn to read only, please set `remote.storage.enable=true,"
                    "remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote "
                    "data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
            return
        if not self.broker.get("remote.log.storage.system.enable"):
            raise RemoteConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be "
                                    "configured with remote log storage.")
        for kind in ("bytes", "ms"):
            total, local = v[f"retention.{kind}"], v[f"local.retention.{kind}"]
            if total > -1 and local != -2:
                if local == -1:
                    raise RemoteConfigError(f"Invalid value -1 for configuration local.retention.{kind}: Value must "
                                            f"not be -1 as retention.{kind} value is set as {total}.")
                if local > total:
                    raise RemoteConfigError(f"Invalid value {local} for configuration local.retention.{kind}: Value "
                                            f"must not be more than retention.{kind} property value: {total}")
        if v["remote.log.copy.disable"]:
            for kind in ("bytes", "ms"):
                local = v[f"local.retention.{kind}"]
                if local != -2 and local != v[f"retention.{kind}"]:
                    raise RemoteConfigError(
                        f"When `remote.log.copy.disable` is set to true, the `local.retention.{kind}` and "
                        f"`retention.{kind}` must be set to the identical value because there will be no more logs "
                        f"copied to the remote storage.")

    @property
    def init_file_size(self) -> int:
        return self.segment_bytes if self._values["preallocate"] else 0

    def to_dict(self) -> dict[str, Any]:
        return dict(self._values)


def _format(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(v)
    return str(v)
