"""Dynamic broker and group configs, kept in the data dir: Kafka's DynamicBrokerConfig and
GroupConfig for one node.

Kafka keeps them as ConfigRecords in its KRaft metadata log: BROKER resource ``""`` (the cluster-wide
defaults), BROKER resource ``"<node id>"`` (this broker) and GROUP resources. compactlog keeps them
in ``compactlog.dynamic-configs.json`` at the data dir's root (a file, which Kafka's log loader
ignores), written atomically by the broker's config APIs and read by every command that opens
the data dir, so an offline ``clean`` uses the same topic defaults as the broker.

Precedence, as Kafka's: this broker's dynamic value, the cluster-wide dynamic default, the static
setting (``server.properties``, ``--override``), the default. A name set dynamically hides its
synonyms of lower precedence (``log.roll.hours`` set dynamically wins over a static
``log.roll.ms``: DynamicBrokerConfig.overrideProps).

Which names may change (DynamicBrokerConfig.AllDynamicConfigs, without the TLS/SASL and
listener settings: compactlog serves PLAINTEXT only): the broker names of topic configs
(DynamicLogConfig; applied at once to every topic without an override), the log cleaner's
(LogCleaner.RECONFIGURABLE_CONFIGS), the thread pools', the producer state's, the connection
limits', ``metric.reporters`` and ``config.providers``. Those compactlog reads as it goes (topic
defaults, ``log.cleaner.backoff.ms`` and the cleaner's buffers, ``producer.id.expiration.ms``,
``transaction.partition.verification.enable``) apply at once; the thread counts at the next
start; the rest are accepted and kept, as a Kafka setting compactlog does not use is in
``server.properties``.

Group configs (Kafka 4.0's GroupConfig) hold the session and heartbeat of consumer (KIP-848) and
share groups. compactlog runs classic groups only, for which Kafka stores and describes them
but does not apply them; so does compactlog.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from ..errors import ConfigError, StorageError
from .config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigDef, ConfigValueError, at_least, one_of
from .fsutil import atomic_write

DYNAMIC_CONFIGS_FILE = "compactlog.dynamic-configs.json"

# DynamicLogConfig.ReconfigurableConfigs: the broker name of each topic config (its first synonym)
DYNAMIC_LOG_CONFIGS = frozenset(d.broker[0] for d in TOPIC_CONFIGS.values() if d.broker)
# LogCleaner.RECONFIGURABLE_CONFIGS
LOG_CLEANER_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms"})
# DynamicThreadPool.RECONFIGURABLE_CONFIGS and the network threads (DynamicListenerConfig)
THREAD_POOL_CONFIGS = frozenset({"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                                 "background.threads", "num.network.threads"})
# DynamicProducerStateManagerConfig
PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
# SocketServer.ReconfigurableConfigs and DynamicListenerConfig's connection limits
CONNECTION_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "max.connections.per.ip",
                                "max.connections.per.ip.overrides"})
DYNAMIC_BROKER_CONFIGS = (DYNAMIC_LOG_CONFIGS | LOG_CLEANER_CONFIGS | THREAD_POOL_CONFIGS | PRODUCER_STATE_CONFIGS
                          | CONNECTION_CONFIGS | {"metric.reporters", "config.providers"})
# what compactlog reads each time it needs it (the rest takes effect at the next start)
APPLIED_AT_ONCE = DYNAMIC_LOG_CONFIGS | PRODUCER_STATE_CONFIGS | (LOG_CLEANER_CONFIGS - {"log.cleaner.threads"})

# types of the dynamic names that BROKER_CONFIGS and the topic configs do not define
_EXTRA_KINDS = {
    "log.cleaner.io.buffer.size": "int", "log.cleaner.io.buffer.load.factor": "double",
    "log.cleaner.io.max.bytes.per.second": "double", "log.cleaner.backoff.ms": "long",
    "num.replica.fetchers": "int", "num.recovery.threads.per.data.dir": "int", "background.threads": "int",
    "num.network.threads": "int", "producer.id.expiration.ms": "int", "max.connections": "int",
    "max.connection.creation.rate": "int", "max.connections.per.ip": "int",
    "max.connections.per.ip.overrides": "string", "metric.reporters": "list", "config.providers": "list",
}

# DynamicBrokerConfig.brokerConfigSynonyms
_BROKER_SYNONYMS = [("log.roll.ms", "log.roll.hours"), ("log.roll.jitter.ms", "log.roll.jitter.hours"),
                    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
                    ("log.retention.ms", "log.retention.minutes", "log.retention.hours")]
_SYNONYMS_OF = {name: group for group in _BROKER_SYNONYMS for name in group}


def broker_config_synonyms(name: str) -> tuple[str, ...]:
    """Kafka's DynamicBrokerConfig.brokerConfigSynonyms: the names that stand for ``name``, in
    their order of precedence (``name`` alone for most)."""
    return _SYNONYMS_OF.get(name, (name,))


def broker_kind(name: str) -> str | None:
    d = BROKER_CONFIGS.get(name)
    if d is not None:
        return d.kind
    for topic in TOPIC_CONFIGS.values():
        if name in topic.broker:
            return "int" if name.endswith((".hours", ".minutes")) else topic.kind
    return _EXTRA_KINDS.get(name)


def overlay(props: dict[str, str], over: dict[str, str]) -> dict[str, str]:
    """DynamicBrokerConfig.overrideProps: ``over``'s names win, and hide their synonyms."""
    out = dict(props)
    for name, value in over.items():
        for synonym in broker_config_synonyms(name):
            out.pop(synonym, None)
        out[name] = value
    return out


# -- group configs (Kafka 4.0's GroupConfig) -------------------------------------------------------

@dataclass(frozen=True)
class GroupConfigDef:
    name: str
    kind: str
    default: str
    broker: str | None = None        # the broker setting that defaults it (GROUP_PREFIX + name)
    floor: str | None = None         # the broker settings bounding it (GroupConfig.validate)
    ceiling: str | None = None


GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in [
    GroupConfigDef("consumer.heartbeat.interval.ms", "int", "5000", "group.consumer.heartbeat.interval.ms",
                   "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms"),
    GroupConfigDef("consumer.session.timeout.ms", "int", "45000", "group.consumer.session.timeout.ms",
                   "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms"),
    GroupConfigDef("share.auto.offset.reset", "string", "latest"),
    GroupConfigDef("share.heartbeat.interval.ms", "int", "5000", "group.share.heartbeat.interval.ms",
                   "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"),
    GroupConfigDef("share.record.lock.duration.ms", "int", "30000", "group.share.record.lock.duration.ms",
                   "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
    GroupConfigDef("share.session.timeout.ms", "int", "45000", "group.share.session.timeout.ms",
                   "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms"),
]}
# Kafka's defaults of the broker settings the group configs read (GroupCoordinatorConfig,
# ShareGroupConfig); compactlog does not define them otherwise
GROUP_BROKER_DEFAULTS = {
    "group.consumer.heartbeat.interval.ms": "5000", "group.consumer.min.heartbeat.interval.ms": "5000",
    "group.consumer.max.heartbeat.interval.ms": "15000", "group.consumer.session.timeout.ms": "45000",
    "group.consumer.min.session.timeout.ms": "45000", "group.consumer.max.session.timeout.ms": "60000",
    "group.share.heartbeat.interval.ms": "5000", "group.share.min.heartbeat.interval.ms": "5000",
    "group.share.max.heartbeat.interval.ms": "15000", "group.share.record.lock.duration.ms": "30000",
    "group.share.min.record.lock.duration.ms": "15000", "group.share.max.record.lock.duration.ms": "60000",
    "group.share.session.timeout.ms": "45000", "group.share.min.session.timeout.ms": "45000",
    "group.share.max.session.timeout.ms": "60000",
}


def _int_setting(broker: BrokerConfig, name: str) -> int:
    raw = broker.props.get(name, GROUP_BROKER_DEFAULTS[name])
    return ConfigDef(name, "int", None).parse(raw)


def group_default(broker: BrokerConfig, d: GroupConfigDef) -> str:
    """The value a group without an override has: the broker setting, else Kafka's default."""
    if d.broker is None:
        return d.default
    return broker.props.get(d.broker, GROUP_BROKER_DEFAULTS[d.broker])


def validate_group_configs(configs: dict[str, str], broker: BrokerConfig) -> None:
    """Kafka's GroupConfig.validate: known names, types, and each timeout within the broker's
    bounds; a ConfigError naming the first problem."""
    for name, raw in configs.items():
        d = GROUP_CONFIGS.get(name)
        if d is None:
            raise ConfigError(f"Unknown group config name: {name}")
        if d.kind == "string":
            try:
                ConfigDef(name, "string", None, check=one_of("latest", "earliest")).parse(raw)
            except ConfigValueError as e:
                raise ConfigError(e.kafka_message or str(e)) from None
            continue
        value = ConfigDef(name, "int", None, check=at_least(1)).parse(raw)
        lo, hi = _int_setting(broker, d.floor), _int_setting(broker, d.ceiling)
        if value < lo:
            raise ConfigError(f"{name} must be greater than or equal to {d.floor}")
        if value > hi:
            raise ConfigError(f"{name} must be less than or equal to {d.ceiling}")


# -- the file ---------------------------------------------------------------------------------------

@dataclass
class DynamicConfigs:
    """The data dir's dynamic configs: cluster-wide broker defaults, this broker's, and groups'."""
    cluster_default: dict[str, str] = field(default_factory=dict)
    broker: dict[str, str] = field(default_factory=dict)
    groups: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def read(cls, data_dir: str) -> "DynamicConfigs":
        path = os.path.join(data_dir, DYNAMIC_CONFIGS_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except FileNotFoundError:
            return cls()
        except (ValueError, UnicodeDecodeError) as e:
            raise StorageError(f"{path}: not a dynamic config file ({e})") from None
        if not isinstance(doc, dict):
            raise StorageError(f"{path}: expected an object")

        def strings(value, what: str) -> dict[str, str]:
            if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                      for k, v in value.items()):
                raise StorageError(f"{path}: {what}: expected an object of strings")
            return dict(value)

        groups = doc.get("groups", {})
        if not isinstance(groups, dict):
            raise StorageError(f"{path}: groups: expected an object")
        return cls(strings(doc.get("cluster_default", {}), "cluster_default"),
                   strings(doc.get("broker", {}), "broker"),
                   {g: strings(c, f"group {g!r}") for g, c in groups.items()})

    def write(self, data_dir: str) -> None:
        doc = {"version": 1, "cluster_default": dict(sorted(self.cluster_default.items())),
               "broker": dict(sorted(self.broker.items())),
               "groups": {g: dict(sorted(c.items())) for g, c in sorted(self.groups.items()) if c}}
        atomic_write(os.path.join(data_dir, DYNAMIC_CONFIGS_FILE),
                     (json.dumps(doc, indent=2) + "\n").encode("utf-8"))

    def broker_config(self, static: dict[str, str]) -> BrokerConfig:
        """The effective broker config: ``static`` under the cluster default under this broker's."""
        cfg = BrokerConfig(overlay(overlay(static, self.cluster_default), self.broker))
        cfg.static_props = dict(static)
        cfg.dynamic_default = dict(self.cluster_default)
        cfg.dynamic_broker = dict(self.broker)
        cfg.dynamic_groups = {g: dict(c) for g, c in self.groups.items()}
        return cfg


def non_dynamic(names) -> list[str]:
    """The names Kafka would refuse to change at run time ("Cannot update these configs dynamically")."""
    return [n for n in names if n not in DYNAMIC_BROKER_CONFIGS]


def load_dynamic_layers(static: dict[str, str], data_dir: str) -> tuple[BrokerConfig, list[str]]:
    """The effective BrokerConfig of ``data_dir``, and the dynamic entries dropped because their
    values are invalid (Kafka logs and ignores them: DynamicBrokerConfig.removeInvalidConfigs)."""
    dyn = DynamicConfigs.read(data_dir)
    dropped = []
    for layer in (dyn.cluster_default, dyn.broker):
        for name in list(layer):
            trial = DynamicConfigs(*(({name: layer[name]}, {}) if layer is dyn.cluster_default
                                     else ({}, {name: layer[name]})))
            try:
                trial.broker_config(static).validate()
            except ConfigError:
                dropped.append(name)
                del layer[name]
    cfg = dyn.broker_config(static)
    try:
        cfg.validate()
    except ConfigError:
        # each dynamic value is valid alone but not together: the static settings alone
        dropped += sorted(set(dyn.cluster_default) | set(dyn.broker))
        cfg = DynamicConfigs(groups=dyn.groups).broker_config(static)
    return cfg, dropped
