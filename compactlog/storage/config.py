"""Topic configs (Kafka's LogConfig) and broker settings (KafkaConfig, CleanerConfig), with Kafka's
names, types, defaults and validators.

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

from typing import Any, Iterable

from ..errors import ConfigError
# the value parsing and validators (config_def.py) and the .properties format (properties.py);
# re-exported: callers import them from here
from .config_def import (INT_MAX, LONG_MAX, MIB, BetweenOr, CompactionLagConflict, ConfigDef,  # noqa: F401
                         ConfigValueError, ListOf, Rule, at_least, between, did_you_mean,
                         java_double, kafka_string, one_of)
from .kafka_names import KAFKA_BROKER_SETTINGS
from .properties import parse_assignments, parse_properties, read_properties  # noqa: F401


class UnknownConfigError(ConfigError):
    """A name that is not a topic config; ``name`` says which (the message adds the closest
    known name, when one is close)."""

    def __init__(self, name: str):
        super().__init__(f"unknown topic configuration {name}{did_you_mean(name, TOPIC_CONFIGS)}")
        self.name = name



_policy = ListOf(("compact", "delete"), "cleanup policy", "cleanup.policy must name compact, delete or both")
_gzip_level = BetweenOr(1, 9, -1)


TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("cleanup.policy", "list", ["delete"], ("log.cleanup.policy",), _policy),
    ConfigDef("min.cleanable.dirty.ratio", "double", 0.5, ("log.cleaner.min.cleanable.ratio",), between(0, 1)),
    ConfigDef("min.compaction.lag.ms", "long", 0, ("log.cleaner.min.compaction.lag.ms",), at_least(0)),
    ConfigDef("max.compaction.lag.ms", "long", LONG_MAX, ("log.cleaner.max.compaction.lag.ms",), at_least(1)),
    ConfigDef("delete.retention.ms", "long", 86400000, ("log.cleaner.delete.retention.ms",), at_least(0)),
    ConfigDef("segment.bytes", "int", 1073741824, ("log.segment.bytes",), at_least(14)),
    ConfigDef("segment.ms", "long", 604800000, ("log.roll.ms", "log.roll.hours"), at_least(1)),
    ConfigDef("segment.jitter.ms", "long", 0, ("log.roll.jitter.ms", "log.roll.jitter.hours"), at_least(0)),
    ConfigDef("segment.index.bytes", "int", 10485760, ("log.index.size.max.bytes",), at_least(4)),
    ConfigDef("index.interval.bytes", "int", 4096, ("log.index.interval.bytes",), at_least(0)),
    ConfigDef("retention.ms", "long", 604800000, ("log.retention.ms", "log.retention.minutes", "log.retention.hours"), at_least(-1)),
    ConfigDef("retention.bytes", "long", -1, ("log.retention.bytes",)),
    ConfigDef("file.delete.delay.ms", "long", 60000, ("log.segment.delete.delay.ms",), at_least(0)),
    ConfigDef("max.message.bytes", "int", 1048588, ("message.max.bytes",), at_least(0)),
    ConfigDef("message.timestamp.type", "string", "CreateTime", ("log.message.timestamp.type",), one_of("CreateTime", "LogAppendTime")),
    ConfigDef("message.timestamp.before.max.ms", "long", LONG_MAX, ("log.message.timestamp.before.max.ms",), at_least(0)),
    ConfigDef("message.timestamp.after.max.ms", "long", LONG_MAX, ("log.message.timestamp.after.max.ms",), at_least(0)),
    ConfigDef("message.timestamp.difference.max.ms", "long", LONG_MAX, ("log.message.timestamp.difference.max.ms",), at_least(0)),
    ConfigDef("compression.type", "string", "producer", ("compression.type",), one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")),
    ConfigDef("compression.gzip.level", "int", -1, ("compression.gzip.level",), _gzip_level),
    ConfigDef("compression.lz4.level", "int", 9, ("compression.lz4.level",), between(1, 17)),
    ConfigDef("compression.zstd.level", "int", 3, ("compression.zstd.level",), between(-131072, 22)),
    ConfigDef("preallocate", "bool", False, ("log.preallocate",)),
    ConfigDef("flush.messages", "long", LONG_MAX, ("log.flush.interval.messages",), at_least(1)),
    ConfigDef("flush.ms", "long", LONG_MAX, ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"), at_least(0)),
    ConfigDef("min.insync.replicas", "int", 1, ("min.insync.replicas",), at_least(1)),
    ConfigDef("unclean.leader.election.enable", "bool", False, ("unclean.leader.election.enable",)),
    ConfigDef("message.downconversion.enable", "bool", True, ("log.message.downconversion.enable",)),
    ConfigDef("local.retention.ms", "long", -2, ("log.local.retention.ms",), at_least(-2)),
    ConfigDef("local.retention.bytes", "long", -2, ("log.local.retention.bytes",), at_least(-2)),
    ConfigDef("remote.storage.enable", "bool", False, ()),
    # KIP-280 (accepted, never built in Kafka): which record of a key compaction keeps (cleaner/strategy.py)
    ConfigDef("compaction.strategy", "string", "offset", ("log.cleaner.compaction.strategy",), one_of("offset", "timestamp", "header")),
    ConfigDef("compaction.strategy.header", "string", "", ("log.cleaner.compaction.strategy.header",)),
]}

# broker settings in another unit than the topic config they default: (ms per unit, Kafka's check)
_BROKER_UNIT = {"log.roll.hours": (3600000, at_least(1)), "log.roll.jitter.hours": (3600000, at_least(0)),
                "log.retention.minutes": (60000, None), "log.retention.hours": (3600000, None)}

BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in [
    ConfigDef("log.cleaner.enable", "bool", True),
    ConfigDef("log.cleaner.threads", "int", 1, check=at_least(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", "long", 134217728, check=at_least(0)),
    ConfigDef("log.cleaner.io.buffer.size", "int", 524288, check=at_least(0)),
    ConfigDef("log.cleaner.io.buffer.load.factor", "double", 0.9),
    ConfigDef("log.cleaner.io.max.bytes.per.second", "double", 1.7976931348623157e308),
    ConfigDef("log.cleaner.backoff.ms", "long", 15000, check=at_least(0)),
    ConfigDef("message.max.bytes", "int", 1048588, check=at_least(0)),
    ConfigDef("producer.id.expiration.ms", "int", 86400000, check=at_least(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", "int", 600000, check=at_least(1)),
    ConfigDef("log.retention.check.interval.ms", "long", 300000, check=at_least(1)),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", "int", 60000, check=at_least(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", "int", 60000, check=at_least(0)),
    ConfigDef("num.partitions", "int", 1, check=at_least(1)),
    ConfigDef("auto.create.topics.enable", "bool", True),
    # the broker (`compactlog serve`); listeners are checked when it starts (server/state.py)
    ConfigDef("listeners", "string", "PLAINTEXT://127.0.0.1:9092"),
    ConfigDef("advertised.listeners", "string", ""),
    ConfigDef("node.id", "int", 0, check=at_least(0)),
    ConfigDef("default.replication.factor", "int", 1, check=at_least(1)),
    ConfigDef("socket.request.max.bytes", "int", 104857600, check=at_least(1)),
    ConfigDef("connections.max.idle.ms", "long", 600000),
    ConfigDef("num.io.threads", "int", 8, check=at_least(1)),
    # security (security.md §1.2; each may also be set per listener: listener.name.<l>.<name>)
    ConfigDef("listener.security.protocol.map", "string",
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    ConfigDef("sasl.enabled.mechanisms", "list", []),
    ConfigDef("sasl.server.max.receive.size", "int", 524288, check=at_least(1)),
    ConfigDef("connections.max.reauth.ms", "long", 0),
    ConfigDef("connection.failed.authentication.delay.ms", "int", 100, check=at_least(0)),
    ConfigDef("ssl.client.auth", "string", "none", check=one_of("required", "requested", "none")),
    ConfigDef("ssl.keystore.type", "string", "PEM"),
    ConfigDef("ssl.keystore.location", "string", ""),
    ConfigDef("ssl.truststore.type", "string", "PEM"),
    ConfigDef("ssl.truststore.location", "string", ""),
    ConfigDef("ssl.enabled.protocols", "list", ["TLSv1.2", "TLSv1.3"]),
    ConfigDef("ssl.cipher.suites", "list", []),
    ConfigDef("ssl.principal.mapping.rules", "string", "DEFAULT"),
    # the group coordinator (GroupCoordinatorConfig)
    ConfigDef("group.min.session.timeout.ms", "int", 6000),
    ConfigDef("group.max.session.timeout.ms", "int", 1800000),
    ConfigDef("group.initial.rebalance.delay.ms", "int", 3000, check=at_least(0)),
    ConfigDef("group.max.size", "int", 2147483647, check=at_least(1)),
    ConfigDef("offsets.topic.num.partitions", "int", 50, check=at_least(1)),
    ConfigDef("offsets.topic.segment.bytes", "int", 104857600, check=at_least(1)),
    ConfigDef("offsets.retention.minutes", "int", 10080, check=at_least(1)),
    ConfigDef("offsets.retention.check.interval.ms", "long", 600000, check=at_least(1)),
    ConfigDef("offset.metadata.max.bytes", "int", 4096),
    # the transaction coordinator (TransactionLogConfig, TransactionStateManagerConfig). Kafka's
    # defaults but two: __transaction_state's replication factor (Kafka 3) and min ISR (Kafka 2)
    # are 1, which is all one node can meet (else every transactional client waits for
    # COORDINATOR_NOT_AVAILABLE until it times out)
    ConfigDef("transaction.state.log.num.partitions", "int", 50, check=at_least(1)),
    ConfigDef("transaction.state.log.segment.bytes", "int", 104857600, check=at_least(1)),
    ConfigDef("transaction.state.log.replication.factor", "short", 1, check=at_least(1)),
    ConfigDef("transaction.state.log.min.isr", "int", 1, check=at_least(1)),
    ConfigDef("transaction.state.log.load.buffer.size", "int", 5242880, check=at_least(1)),
    ConfigDef("transaction.partition.verification.enable", "bool", True),
    ConfigDef("transaction.max.timeout.ms", "int", 900000, check=at_least(1)),
    ConfigDef("transactional.id.expiration.ms", "int", 604800000, check=at_least(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", 10000, check=at_least(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", "int", 3600000, check=at_least(1)),
    # authorization (StandardAuthorizer; server/authorizer/): off unless authorizer.class.name is set
    ConfigDef("authorizer.class.name", "string", ""),
    ConfigDef("super.users", "string", ""),
    ConfigDef("allow.everyone.if.no.acl.found", "bool", False),
    # KIP-939 (two-phase commit) is not offered: InitProducerId v6 is not advertised
    ConfigDef("transaction.two.phase.commit.enable", "bool", False),
    # compactlog's own settings (not Kafka's)
    ConfigDef("compactlog.spark.master", "string", "local[*]"),
    ConfigDef("compactlog.spark.local.dir", "string", ""),
    ConfigDef("compactlog.cleaner.task.memory.bytes", "long", 2147483648, check=at_least(1024)),
    ConfigDef("compactlog.cleaner.map", "string", "auto", check=one_of("auto", "task", "distributed")),
    # where the cleaner's run log goes (default: <data dir>.logs, never inside the data dir)
    ConfigDef("compactlog.cleaner.log.dir", "string", ""),
    # a cleaner thread whose loop died is started again after this long, doubled per death in a
    # row up to 5 minutes (Kafka leaves it dead until the broker restarts); a minute by default so
    # that DeadThreadCount shows the death to a Prometheus scraping every 15-60 s
    ConfigDef("compactlog.cleaner.thread.restart.backoff.ms", "long", 60000, check=at_least(0)),
    # the coordinator's transaction protocol level (Kafka's finalized feature transaction.version,
    # set with kafka-storage/kafka-features, not a broker setting): 2 as on a new Kafka 4.x
    # cluster (v1 __transaction_state values, KIP-890 epoch rules for the coordinator's own aborts);
    # 0 and 1 for tests (v0 values at 0)
    ConfigDef("compactlog.transaction.version", "int", 2, check=between(0, 2)),
    # the HTTP listener of /metrics and the health endpoints (server/metrics; empty: none)
    ConfigDef("metrics.listener", "string", "127.0.0.1:9644"),
    ConfigDef("metrics.listener.allow.non.loopback", "bool", False),
    ConfigDef("metrics.partition.level", "bool", True),
]}


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
        """Every setting compactlog knows checked alone (Kafka's ConfigDef), then together (Kafka's
        KafkaConfig.validateValues, and the floors compactlog needs to make progress)."""
        for name, raw in self.props.items():
            if name in BROKER_CONFIGS:
                BROKER_CONFIGS[name].parse(raw)
        _check_strategy({d.name: self.topic_default(d) for d in TOPIC_CONFIGS.values()}, "log.cleaner.")
        threads = self.get("log.cleaner.threads")
        if threads == 0:
            return      # no cleaner: its buffers are never allocated
        dedupe = self.get("log.cleaner.dedupe.buffer.size")
        if dedupe // threads <= MIB:
            raise ConfigError(f"invalid value {dedupe} for configuration log.cleaner.dedupe.buffer.size: "
                              f"it must be more than 1 MiB per cleaner thread (Kafka's rule; "
                              f"log.cleaner.threads={threads})")
        io_buffer = self.get("log.cleaner.io.buffer.size")
        # each thread reads and writes through buffers of io.buffer.size / threads / 2 bytes (Kafka's
        # Cleaner) that grow by doubling when a batch does not fit: from 0 they never grow and the
        # cleaner spins forever (Kafka's does too); from 1 byte up they reach any batch
        if io_buffer // threads // 2 < 1:
            raise ConfigError(f"invalid value {io_buffer} for configuration log.cleaner.io.buffer.size: "
                              f"each cleaner thread's buffers would be io.buffer.size / threads / 2 = 0 bytes, "
                              f"which never grow (the cleaner would loop forever); with log.cleaner.threads="
                              f"{threads} it must be at least {2 * threads}")
        load_factor = self.get("log.cleaner.io.buffer.load.factor")
        slots = min(dedupe // threads, INT_MAX) // 24
        if not slots * load_factor > 1:
            # Kafka's cleaner thread refuses to start: its offset map (24 bytes a key, filled up to
            # the load factor) would not hold a single key
            raise ConfigError(f"invalid value {load_factor} for configuration log.cleaner.io.buffer.load.factor: "
                              f"the offset map ({slots} slots of 24 bytes per cleaner thread) would not hold "
                              f"one key; it must be more than {1 / slots:.3g}")


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


class LogConfig:
    """The effective configs of one topic: overrides, else broker defaults, else Kafka defaults."""

    # False for a topic found only as directories (a copied Kafka dir): its real configs live in
    # the Kafka cluster's metadata, so retention and the cleaner leave it alone (DataDir sets it)
    known = True

    def __init__(self, overrides: dict[str, Any] | None = None, broker: BrokerConfig | None = None):
        # as Kafka's LogConfig.validate: every name, then every value (each parsed once), then
        # the values together; each failure a ConfigError subclass that says what was wrong
        self.broker = broker or BrokerConfig()
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
        return LogConfig(merged, self.broker)

    # -- the values the storage layer reads, by their Kafka meaning
    @property
    def compact(self) -> bool:
        return "compact" in self._values["cleanup.policy"]

    @property
    def delete(self) -> bool:
        return "delete" in self._values["cleanup.policy"]

    @property
    def segment_bytes(self) -> int:
        return self._values["segment.bytes"]

    @property
    def segment_ms(self) -> int:
        return self._values["segment.ms"]

    @property
    def max_index_size(self) -> int:
        return self._values["segment.index.bytes"]

    @property
    def index_interval_bytes(self) -> int:
        return self._values["index.interval.bytes"]

    @property
    def max_message_size(self) -> int:
        return self._values["max.message.bytes"]

    @property
    def max_compaction_lag_ms(self) -> int:
        return self._values["max.compaction.lag.ms"]

    @property
    def min_compaction_lag_ms(self) -> int:
        return self._values["min.compaction.lag.ms"]

    @property
    def delete_retention_ms(self) -> int:
        return self._values["delete.retention.ms"]

    @property
    def max_segment_ms(self) -> int:
        """segment.ms, capped by max.compaction.lag.ms on compacted topics (Kafka's roll rule)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

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
