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

Which names may change (DynamicBrokerConfig.validateConfigs): every name but Kafka's own non-dynamic
broker settings (``DynamicConfig.Broker.nonDynamicProps``: KafkaConfig's names outside
AllDynamicConfigs) and compactlog's own settings, which are read at start only; a name that is
neither Kafka's nor compactlog's is a custom setting, kept and described as Kafka keeps it. The
key and trust store settings (SslConfigs.RECONFIGURABLE_CONFIGS) only with a listener prefix
(``listener.name.<l>.ssl.keystore.location``); the listener settings
(DynamicListenerConfig.ReconfigurableConfigs but the connection limits and network threads) only
on a broker's own resource, not as a cluster-wide default. Each refusal has Kafka's message
(``dynamic_name_refusal``).

When each takes effect (``effect``), said in the broker's log line for each change: what
compactlog reads as it goes (topic defaults, ``log.cleaner.backoff.ms`` and its buffer sizes,
``producer.id.expiration.ms``, ``transaction.partition.verification.enable``) at once, everywhere
(no component keeps a copy of the broker's settings: a change replaces ``DataDir.broker``); a TLS
listener's key and trust stores for its next connections (its context is rebuilt,
server/security/listeners.py); what compactlog reads when it starts (``num.io.threads``,
``log.cleaner.threads``, a listener's SASL mechanisms, JAAS and TLS settings) at the next start;
the Kafka settings of things compactlog does not have (Kerberos and SASL login refresh, connection
limits, remote storage, quotas, metric reporters, the cleaner's I/O cap) and custom names are kept
and described only. The config API checks the whole configuration as the next start would before
it keeps a change (server/apis/configs.py).

Group configs (Kafka 4.0's GroupConfig) hold the session and heartbeat of consumer (KIP-848) and
share groups. compactlog runs classic groups only, for which Kafka stores and describes them
but does not apply them; so does compactlog.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field

from ..errors import ConfigError, StorageError
from .config import BROKER_CONFIGS, TOPIC_CONFIGS, BrokerConfig, ConfigDef, ConfigValueError, at_least, one_of
from .config_def import READ_ONLY
from .fsutil import atomic_write
from .kafka_names import KAFKA_CONFIG_NAMES

DYNAMIC_CONFIGS_FILE = "compactlog.dynamic-configs.json"

# DynamicLogConfig.ReconfigurableConfigs: the broker name of each topic config (its first synonym)
DYNAMIC_LOG_CONFIGS = frozenset(d.broker[0] for d in TOPIC_CONFIGS.values() if d.broker)
# LogCleaner.ReconfigurableConfigs
LOG_CLEANER_CONFIGS = frozenset({
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms"})
# DynamicThreadPool.ReconfigurableConfigs
THREAD_POOL_CONFIGS = frozenset({"num.io.threads", "num.replica.fetchers", "num.recovery.threads.per.data.dir",
                                 "background.threads"})
# DynamicProducerStateManagerConfig
PRODUCER_STATE_CONFIGS = frozenset({"producer.id.expiration.ms", "transaction.partition.verification.enable"})
# SocketServer.ReconfigurableConfigs
SOCKET_SERVER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "max.connections.per.ip",
                                   "max.connections.per.ip.overrides"})
# DynamicRemoteLogConfig.ReconfigurableConfigs
REMOTE_LOG_CONFIGS = frozenset({"remote.log.index.file.cache.total.size.bytes", "remote.fetch.max.wait.ms",
                                "remote.log.manager.copy.max.bytes.per.second",
                                "remote.log.manager.fetch.max.bytes.per.second",
                                "remote.list.offsets.request.timeout.ms"})
# SslConfigs.RECONFIGURABLE_CONFIGS (DynamicBrokerConfig.DynamicSecurityConfigs): a listener's key and
# trust stores, changeable only with a listener prefix
SSL_STORE_CONFIGS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"})
# DynamicListenerConfig.ReconfigurableConfigs: what a listener is built from
LISTENER_CONFIGS = SSL_STORE_CONFIGS | frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map",
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.endpoint.identification.algorithm",
    "ssl.secure.random.implementation", "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.kerberos.ticket.renew.window.factor",
    "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter", "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "max.connections", "max.connection.creation.rate", "num.network.threads"})
# QuotaConfig.brokerQuotaConfigs: dynamic-only broker settings (DynamicConfig.Broker)
BROKER_QUOTA_CONFIGS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                                  "replica.alter.log.dirs.io.max.bytes.per.second"})
# DynamicBrokerConfig.AllDynamicConfigs, with the quotas DynamicConfig.Broker adds
DYNAMIC_BROKER_CONFIGS = (SSL_STORE_CONFIGS | LOG_CLEANER_CONFIGS | DYNAMIC_LOG_CONFIGS | THREAD_POOL_CONFIGS
                          | {"metric.reporters"} | LISTENER_CONFIGS | SOCKET_SERVER_CONFIGS | PRODUCER_STATE_CONFIGS
                          | REMOTE_LOG_CONFIGS | BROKER_QUOTA_CONFIGS)
# DynamicBrokerConfig.ClusterLevelListenerConfigs and PerBrokerConfigs: the listener settings a
# cluster-wide default may hold, and the ones only a broker's own resource may
CLUSTER_LEVEL_LISTENER_CONFIGS = frozenset({"max.connections", "max.connection.creation.rate", "num.network.threads"})
PER_BROKER_CONFIGS = LISTENER_CONFIGS - CLUSTER_LEVEL_LISTENER_CONFIGS
# DynamicConfig.Broker.nonDynamicProps: Kafka's own names that are not dynamic; with compactlog's
# settings whose owner declares them read-only (``non_dynamic``), every other name is a custom
# setting, kept as given
KAFKA_NON_DYNAMIC_CONFIGS = KAFKA_CONFIG_NAMES - DYNAMIC_BROKER_CONFIGS


def is_non_dynamic(name: str) -> bool:
    """Whether ``name`` may not be set dynamically: a compactlog setting its owner declares
    read-only (config_registry), or one of Kafka's that DynamicBrokerConfig does not list."""
    d = BROKER_CONFIGS.get(name)
    if d is not None:
        return d.dynamic == READ_ONLY
    return name in KAFKA_NON_DYNAMIC_CONFIGS


def is_dynamic(name: str) -> bool:
    """Whether the broker setting ``name`` may change at run time (DescribeConfigs' read_only is
    the contrary): its owner's update mode for a compactlog setting, Kafka's list for the others."""
    d = BROKER_CONFIGS.get(name)
    if d is not None:
        return d.dynamic != READ_ONLY
    return name in DYNAMIC_BROKER_CONFIGS
# listener settings compactlog cannot change while the broker runs: the listeners themselves
# (Kafka's KRaft broker refuses to change its registered listeners too)
NOT_AT_RUN_TIME = frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map"})
# what compactlog reads each time it needs it (the key and trust stores of a live TLS listener
# apply to its next connections too: server/security/listeners.py)
APPLIED_AT_ONCE = DYNAMIC_LOG_CONFIGS | PRODUCER_STATE_CONFIGS | frozenset({
    "log.cleaner.backoff.ms", "log.cleaner.io.buffer.size", "log.cleaner.dedupe.buffer.size"})
# what compactlog reads when it starts: a change takes effect at the next start (a listener's
# settings, listener-prefixed or not, as its security is built then)
READ_AT_START = SSL_STORE_CONFIGS | frozenset({
    "num.io.threads", "log.cleaner.threads", "sasl.enabled.mechanisms", "sasl.jaas.config", "ssl.client.auth",
    "ssl.enabled.protocols", "ssl.cipher.suites", "principal.builder.class", "ssl.engine.factory.class",
    "ssl.allow.dn.changes", "ssl.allow.san.changes"})
_MECHANISM = re.compile(r"(?:plain|scram-sha-256|scram-sha-512|gssapi|oauthbearer)\.")

_LISTENER_PREFIXED = re.compile(r"listener\.name\.[^.]*\.(.*)")


def listener_base_name(name: str) -> str | None:
    """The setting a ``listener.name.<listener>.<setting>`` name stands for (with its mechanism
    prefix, as Kafka's ListenerConfigRegex leaves it), None for an unprefixed name."""
    m = _LISTENER_PREFIXED.fullmatch(name)
    return m.group(1) if m else None


def effect(name: str, live_tls_listeners=()) -> str:
    """When a dynamic change of ``name`` takes effect: "now", "next start", or "never" (a name
    compactlog keeps but does not use: a custom one, or a Kafka setting of something compactlog
    does not have, such as Kerberos logins, remote storage, quotas or a cleaner I/O cap).
    ``live_tls_listeners``: the lower-case names of the TLS listeners serving now."""
    if name in APPLIED_AT_ONCE:
        return "now"
    base = listener_base_name(name)
    if base is not None:
        listener = name[len("listener.name."):-len(base) - 1]
        setting = _MECHANISM.sub("", base, count=1) if _MECHANISM.match(base) else base
        if setting in SSL_STORE_CONFIGS and listener in live_tls_listeners:
            return "now"
        return "next start" if setting in READ_AT_START else "never"
    return "next start" if name in READ_AT_START else "never"


def dynamic_name_refusal(names, *, per_broker: bool) -> str | None:
    """Kafka's DynamicBrokerConfig.validateConfigs on the names a BROKER resource would hold: the
    message of the first rule they break, or None. ``per_broker``: this node's resource (else the
    cluster-wide default, the empty name)."""
    names = set(names)
    fixed = sorted(n for n in names if is_non_dynamic(n))
    if fixed:
        return f"Cannot update these configs dynamically: Set({', '.join(fixed)})"
    bare = sorted(names & SSL_STORE_CONFIGS)
    if bare:
        return ("These security configs can be dynamically updated only per-listener using the listener "
                f"prefix: Set({', '.join(bare)})")
    if not per_broker:
        broker_only = sorted(n for n in names if n in PER_BROKER_CONFIGS
                             or (listener_base_name(n) or "") not in ("", *CLUSTER_LEVEL_LISTENER_CONFIGS))
        if broker_only:
            return ("Cannot update these configs at default cluster level, broker id must be specified: "
                    f"Set({', '.join(broker_only)})")
    return None


# types of the dynamic names that BROKER_CONFIGS and the topic configs do not define
_EXTRA_KINDS = {
    "log.cleaner.io.buffer.size": "int", "log.cleaner.io.buffer.load.factor": "double",
    "log.cleaner.io.max.bytes.per.second": "double", "log.cleaner.backoff.ms": "long",
    "num.replica.fetchers": "int", "num.recovery.threads.per.data.dir": "int", "background.threads": "int",
    "num.network.threads": "int", "producer.id.expiration.ms": "int", "max.connections": "int",
    "max.connection.creation.rate": "int", "max.connections.per.ip": "int",
    "max.connections.per.ip.overrides": "string", "metric.reporters": "list",
    "sasl.kerberos.min.time.before.relogin": "long", "sasl.kerberos.ticket.renew.window.factor": "double",
    "sasl.kerberos.ticket.renew.jitter": "double", "sasl.kerberos.principal.to.local.rules": "list",
    "sasl.login.refresh.window.factor": "double", "sasl.login.refresh.window.jitter": "double",
    "sasl.login.refresh.min.period.seconds": "short", "sasl.login.refresh.buffer.seconds": "short",
    "ssl.keystore.certificate.chain": "password", "ssl.keystore.key": "password",
    "ssl.truststore.certificates": "password", "ssl.keystore.password": "password",
    "ssl.key.password": "password", "ssl.truststore.password": "password", "sasl.jaas.config": "password",
    "leader.replication.throttled.rate": "long", "follower.replication.throttled.rate": "long",
    "replica.alter.log.dirs.io.max.bytes.per.second": "long",
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
    doc: str = ""                    # DescribeConfigs' documentation (compactlog's words)


GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in [
    GroupConfigDef("consumer.heartbeat.interval.ms", "int", "5000", "group.consumer.heartbeat.interval.ms",
                   "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
                   "Heartbeat interval given to the members of a consumer group (KIP-848); no effect on "
                   "classic groups."),
    GroupConfigDef("consumer.session.timeout.ms", "int", "45000", "group.consumer.session.timeout.ms",
                   "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
                   "Time without a heartbeat after which a consumer group member (KIP-848) is removed; no "
                   "effect on classic groups."),
    GroupConfigDef("share.auto.offset.reset", "string", "latest",
                   doc="Where a share group starts on a partition without a committed position."),
    GroupConfigDef("share.heartbeat.interval.ms", "int", "5000", "group.share.heartbeat.interval.ms",
                   "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
                   "Heartbeat interval given to the members of a share group."),
    GroupConfigDef("share.record.lock.duration.ms", "int", "30000", "group.share.record.lock.duration.ms",
                   "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
                   "How long a share group member holds the records it fetched."),
    GroupConfigDef("share.session.timeout.ms", "int", "45000", "group.share.session.timeout.ms",
                   "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
                   "Time without a heartbeat after which a share group member is removed."),
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
    """Kafka's GroupConfig.validate: known names, types, each timeout within the broker's bounds,
    then each kind's session longer than its heartbeat interval (a setting the group does not have
    counted at GroupConfig's default, as Kafka parses the group's settings); a ConfigError naming
    the first problem."""
    ints = {}
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
        ints[name] = value
    # a session no longer than the heartbeat interval fences every member at each session's end
    for kind in ("consumer", "share"):
        session, hb = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if ints.get(session, int(GROUP_CONFIGS[session].default)) <= ints.get(hb, int(GROUP_CONFIGS[hb].default)):
            raise ConfigError(f"{session} must be greater than {hb}")


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
        # owner-only: a listener's store passwords and JAAS settings may be in it (Kafka's KRaft
        # metadata log holds them as given too)
        atomic_write(os.path.join(data_dir, DYNAMIC_CONFIGS_FILE),
                     (json.dumps(doc, indent=2) + "\n").encode("utf-8"), mode=0o600)

    def broker_config(self, static: dict[str, str]) -> BrokerConfig:
        """The effective broker config: ``static`` under the cluster default under this broker's."""
        cfg = BrokerConfig(overlay(overlay(static, self.cluster_default), self.broker))
        cfg.static_props = dict(static)
        cfg.dynamic_default = dict(self.cluster_default)
        cfg.dynamic_broker = dict(self.broker)
        cfg.dynamic_groups = {g: dict(c) for g, c in self.groups.items()}
        return cfg


def load_dynamic_layers(static: dict[str, str], data_dir: str) -> tuple[BrokerConfig, list[str]]:
    """The effective BrokerConfig of ``data_dir``, and the dynamic entries dropped because their
    values are invalid (Kafka logs and ignores them: DynamicBrokerConfig.removeInvalidConfigs)."""
    dyn = DynamicConfigs.read(data_dir)
    dropped = []
    # DynamicBrokerConfig.fromPersistentProps: names that may not be set dynamically (there)
    for layer, per_broker in ((dyn.cluster_default, False), (dyn.broker, True)):
        for name in list(layer):
            if dynamic_name_refusal([name], per_broker=per_broker):
                dropped.append(name)
                del layer[name]
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
