"""The entries of a DescribeConfigs answer: Kafka's ``ConfigHelper.describeConfigs``,
``createTopicConfigEntry`` and ``createBrokerConfigEntry`` with ``DynamicBrokerConfig.brokerConfigSynonyms``.

Synonyms come in Kafka's order (the topic override, then the broker's static setting, then Kafka's
default), with Kafka's quirk of dropping the synonyms that precede the primary broker name
(``retention.ms`` described with only ``log.retention.hours`` set lists no synonym and says
DEFAULT_CONFIG, as Kafka does). A broker setting set dynamically (storage/dynamic_config.py) comes
first, as DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG; the settings Kafka can change at
run time are not read-only. GROUP resources are described as ``createGroupConfigEntry`` does: the
group's override, else the broker setting that defaults it, else Kafka's default. Topic configs are those of ``storage.config.TOPIC_CONFIGS`` (the ones compactlog
implements); Kafka's ``leader/follower.replication.throttled.replicas``, ``remote.log.copy.disable``,
``remote.log.delete.on.disable`` and ``message.format.version`` are unknown names here. The
documentation strings (DescribeConfigs v3+) are compactlog's, not Kafka's text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...storage.config import BROKER_CONFIGS, TOPIC_CONFIGS, kafka_string
from ...storage.dynamic_config import DYNAMIC_BROKER_CONFIGS, GROUP_BROKER_DEFAULTS, GROUP_CONFIGS, group_default
from ...storage.kafka_names import KAFKA_BROKER_SETTINGS
from ..security.redaction import is_secret_setting
from ..state import BrokerState

# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC = 1
SOURCE_DYNAMIC_BROKER = 2
SOURCE_DYNAMIC_DEFAULT_BROKER = 3
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5
SOURCE_GROUP = 8

# DescribeConfigsResponse.ConfigType
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7, "password": 9}


@dataclass
class ConfigEntry:
    """One DescribeConfigs entry, before it becomes the response version's kio class."""
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    synonyms: list[tuple[str, str | None, int]]
    config_type: int
    documentation: str | None


# DynamicBrokerConfig.brokerConfigSynonyms: broker settings that stand for one another
_SYNONYM_GROUPS = {name: d.broker for d in TOPIC_CONFIGS.values() if len(d.broker) > 1 for name in d.broker}
_TOPIC_BY_BROKER_NAME = {name: d for d in TOPIC_CONFIGS.values() for name in d.broker}
# broker settings whose Kafka default is null (KafkaConfig.defaultValues leaves them out) or in
# another unit than the topic config they stand for
_NO_BROKER_DEFAULT = frozenset({"log.roll.ms", "log.roll.jitter.ms", "log.retention.ms",
                                "log.retention.minutes", "log.flush.interval.ms"})
UNIT_SETTINGS = {"log.roll.hours": ("int", "168"), "log.roll.jitter.hours": ("int", "0"),
                  "log.retention.minutes": ("int", None), "log.retention.hours": ("int", "168")}


def _broker_default(name: str) -> str | None:
    if name in _NO_BROKER_DEFAULT:
        return None
    if name in UNIT_SETTINGS:
        return UNIT_SETTINGS[name][1]
    d = BROKER_CONFIGS.get(name) or _TOPIC_BY_BROKER_NAME.get(name)
    if d is None or d.default is None:
        return None
    return kafka_string(d.kind, d.default)


def _broker_kind(name: str) -> str | None:
    if name in UNIT_SETTINGS:
        return UNIT_SETTINGS[name][0]
    d = BROKER_CONFIGS.get(name) or _TOPIC_BY_BROKER_NAME.get(name)
    return d.kind if d is not None else None


def _broker_synonyms(name: str, broker) -> list[tuple[str, str | None, int]]:
    """ConfigHelper.configSynonyms: this broker's dynamic settings, the cluster-wide dynamic ones,
    the static ones, then Kafka's defaults, of ``name`` and the settings standing for it, with the
    ones before ``name`` itself dropped (as Kafka does)."""
    group = _SYNONYM_GROUPS.get(name, (name,))
    found = []
    for layer, source in ((broker.dynamic_broker, SOURCE_DYNAMIC_BROKER),
                          (broker.dynamic_default, SOURCE_DYNAMIC_DEFAULT_BROKER),
                          (broker.static_props, SOURCE_STATIC_BROKER)):
        found += [(n, layer[n], source) for n in group if n in layer]
    found += [(n, default, SOURCE_DEFAULT) for n in group if (default := _broker_default(n)) is not None]
    while found and found[0][0] != name:
        found.pop(0)
    return found


def topic_config_entries(state: BrokerState, topic: str) -> list[ConfigEntry]:
    """Every topic config of ``topic`` with its effective value, source and synonyms
    (ConfigHelper.createTopicConfigEntry), sorted by name."""
    cfg = state.datadir.topic_config(topic)
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        value = kafka_string(d.kind, cfg.get(name))
        synonyms = [(name, value, SOURCE_TOPIC)] if name in cfg.overrides else []
        if d.broker:
            synonyms += _broker_synonyms(d.broker[0], state.broker)
        entries.append(ConfigEntry(name, value, synonyms[0][2] if synonyms else SOURCE_DEFAULT, False,
                                   False, synonyms, CONFIG_TYPES[d.kind], TOPIC_DOCS.get(name)))
    return entries


def _is_sensitive(name: str, kind: str | None) -> bool:
    # KafkaConfig.maybeSensitive: a PASSWORD setting, or one whose type is not known; compactlog
    # knows Kafka's names but not their types, so a known name is shown unless it holds a secret
    if is_secret_setting(name):
        return True
    if kind is not None:
        return False
    if name not in KAFKA_BROKER_SETTINGS and not name.startswith("listener.name."):
        return True
    return "password" in name or name.endswith("jaas.config") or "secret" in name


def broker_config_entries(state: BrokerState, *, per_broker: bool = True) -> list[ConfigEntry]:
    """The node's settings (ConfigHelper.createBrokerConfigEntry): compactlog's broker settings,
    the broker settings that default topic configs, and whatever server.properties, --override or
    a dynamic change set; each with its source and synonyms, read-only unless Kafka can change it
    at run time. Not ``per_broker`` (the resource named ""): the cluster-wide dynamic defaults only."""
    broker = state.broker
    if not per_broker:
        return [ConfigEntry(name, None if _is_sensitive(name, _dynamic_kind(name)) else value,
                            SOURCE_DYNAMIC_DEFAULT_BROKER, False, _is_sensitive(name, _dynamic_kind(name)),
                            [(name, value, SOURCE_DYNAMIC_DEFAULT_BROKER)],
                            CONFIG_TYPES.get(_dynamic_kind(name), 0), _broker_doc(name))
                for name, value in sorted(broker.dynamic_default.items())]
    props = broker.props
    names = set(BROKER_CONFIGS) | set(_TOPIC_BY_BROKER_NAME) | set(UNIT_SETTINGS) | set(props)
    entries = []
    for name in sorted(names):
        kind = _broker_kind(name) or _dynamic_kind(name)
        sensitive = _is_sensitive(name, kind)
        value = props[name] if name in props else _broker_default(name)
        synonyms = [(n, None if sensitive else v, s) for n, v, s in _broker_synonyms(name, broker)]
        entries.append(ConfigEntry(name, None if sensitive else value,
                                   synonyms[0][2] if synonyms else SOURCE_DEFAULT,
                                   name not in DYNAMIC_BROKER_CONFIGS, sensitive,
                                   synonyms, CONFIG_TYPES.get(kind, 0), _broker_doc(name)))
    return entries


def _dynamic_kind(name: str) -> str | None:
    from ...storage.dynamic_config import broker_kind
    return broker_kind(name)


def group_config_entries(state: BrokerState, group: str) -> list[ConfigEntry]:
    """A group's configs (ConfigHelper.createGroupConfigEntry): the group's override (GROUP_CONFIG),
    else the broker setting that defaults it (with its own synonyms), else Kafka's default."""
    broker = state.broker
    overrides = broker.dynamic_groups.get(group, {})
    entries = []
    for name in sorted(GROUP_CONFIGS):
        d = GROUP_CONFIGS[name]
        if d.broker is not None:
            synonyms = _broker_synonyms(d.broker, broker) or [(d.broker, GROUP_BROKER_DEFAULTS[d.broker],
                                                               SOURCE_DEFAULT)]
        else:
            synonyms = [(name, d.default, SOURCE_DEFAULT)]
        value = overrides.get(name, group_default(broker, d))
        if name in overrides:
            synonyms = [(name, value, SOURCE_GROUP)] + synonyms
        entries.append(ConfigEntry(name, value, synonyms[0][2], False, False, synonyms,
                                   CONFIG_TYPES[d.kind], GROUP_DOCS.get(name)))
    return entries


GROUP_DOCS = {
    "consumer.heartbeat.interval.ms": "Heartbeat interval given to the members of a consumer group (KIP-848); "
                                      "no effect on classic groups.",
    "consumer.session.timeout.ms": "Time without a heartbeat after which a consumer group member (KIP-848) "
                                   "is removed; no effect on classic groups.",
    "share.auto.offset.reset": "Where a share group starts on a partition without a committed position.",
    "share.heartbeat.interval.ms": "Heartbeat interval given to the members of a share group.",
    "share.record.lock.duration.ms": "How long a share group member holds the records it fetched.",
    "share.session.timeout.ms": "Time without a heartbeat after which a share group member is removed.",
}


# -- documentation (DescribeConfigs v3+), in compactlog's words -----------------------------------

TOPIC_DOCS = {
    "cleanup.policy": "How old data is reclaimed: 'delete' drops whole segments by age or size, "
                      "'compact' keeps only the latest record of each key; both may be listed.",
    "min.cleanable.dirty.ratio": "Share of the log not yet compacted above which the cleaner picks the "
                                 "partition.",
    "min.compaction.lag.ms": "Records younger than this are never compacted away.",
    "max.compaction.lag.ms": "Records older than this become eligible for compaction even when the dirty "
                             "ratio is not reached.",
    "delete.retention.ms": "How long tombstones and transaction markers survive compaction, so that "
                           "consumers reading from the start can see them.",
    "segment.bytes": "Size at which the active segment is closed and a new one begun.",
    "segment.ms": "Age at which the active segment is rolled even when it is not full.",
    "segment.jitter.ms": "Largest random time subtracted from segment.ms, so that segments do not all "
                         "roll together.",
    "segment.index.bytes": "Largest size of a segment's offset and time indexes.",
    "index.interval.bytes": "Bytes appended between two entries of the offset index.",
    "retention.ms": "How long records are kept under the delete policy; -1 keeps them forever.",
    "retention.bytes": "Largest size of a partition under the delete policy before its oldest segments "
                       "go; -1 means no limit.",
    "file.delete.delay.ms": "Wait before a segment set aside for deletion is removed from disk.",
    "max.message.bytes": "Largest record batch the topic accepts, compressed size.",
    "message.timestamp.type": "CreateTime keeps the producer's timestamps; LogAppendTime has the broker "
                              "stamp each batch when it is appended.",
    "message.timestamp.before.max.ms": "How far a CreateTime timestamp may lie in the past before the "
                                       "batch is refused.",
    "message.timestamp.after.max.ms": "How far a CreateTime timestamp may lie in the future before the "
                                      "batch is refused.",
    "message.timestamp.difference.max.ms": "Deprecated bound on a timestamp's distance from the broker's "
                                           "clock; the before/after settings replace it.",
    "compression.type": "Codec of stored batches: gzip, snappy, lz4, zstd, uncompressed, or producer to "
                        "keep what the producer sent.",
    "compression.gzip.level": "Level used when the broker compresses with gzip.",
    "compression.lz4.level": "Level used when the broker compresses with lz4.",
    "compression.zstd.level": "Level used when the broker compresses with zstd.",
    "preallocate": "Whether a new segment file is created at its full size.",
    "flush.messages": "Records appended between two forced flushes to disk.",
    "flush.ms": "Time between two forced flushes to disk.",
    "min.insync.replicas": "Replicas that must have a write for acks=all to succeed; a single-node broker "
                           "can only meet 1.",
    "unclean.leader.election.enable": "Whether a replica outside the in-sync set may become leader (no "
                                      "effect on a single node).",
    "message.downconversion.enable": "Whether old fetch versions may be sent down-converted batches.",
    "local.retention.ms": "Local retention time under tiered storage; -2 means retention.ms.",
    "local.retention.bytes": "Local retention size under tiered storage; -2 means retention.bytes.",
    "remote.storage.enable": "Whether the topic uses tiered storage (compactlog has none).",
    "compaction.strategy": "Which record of a key compaction keeps (KIP-280): offset (the last one written), "
                           "timestamp (the highest record timestamp) or header (the highest long in "
                           "compaction.strategy.header); ties go to the later offset.",
    "compaction.strategy.header": "The record header holding each record's version, an 8-byte big-endian "
                                  "long, for compaction.strategy=header (its last occurrence counts).",
}

BROKER_DOCS = {
    "log.cleaner.enable": "Whether the broker runs the log cleaner, which compacts topics with the "
                          "compact policy.",
    "log.cleaner.threads": "Number of cleaner threads.",
    "log.cleaner.dedupe.buffer.size": "Memory for the cleaners' key-to-offset maps, shared by all "
                                      "threads.",
    "log.cleaner.io.buffer.size": "Memory for the cleaners' read and write buffers, shared by all threads.",
    "log.cleaner.io.buffer.load.factor": "How full a cleaner's offset map may get.",
    "log.cleaner.io.max.bytes.per.second": "Cap on the cleaners' combined read and write rate.",
    "log.cleaner.backoff.ms": "Sleep of a cleaner thread when no log needs cleaning.",
    "message.max.bytes": "Largest record batch accepted; the default of max.message.bytes.",
    "producer.id.expiration.ms": "Idle time after which a producer id's state is dropped.",
    "producer.id.expiration.check.interval.ms": "Interval between checks for expired producer ids.",
    "log.retention.check.interval.ms": "Interval between retention checks.",
    "log.flush.offset.checkpoint.interval.ms": "Interval between writes of the recovery-point checkpoint.",
    "log.flush.start.offset.checkpoint.interval.ms": "Interval between writes of the log-start-offset "
                                                     "checkpoint.",
    "num.partitions": "Partitions of a topic created without a count (auto-creation, -1).",
    "auto.create.topics.enable": "Whether a Metadata request may create an unknown topic.",
    "listeners": "Addresses the broker listens on, as PLAINTEXT://host:port.",
    "advertised.listeners": "Addresses handed to clients, when they differ from listeners.",
    "node.id": "This node's id, the broker and controller id clients see.",
    "default.replication.factor": "Replication factor of a topic created without one; only 1 is possible "
                                  "on one node.",
    "socket.request.max.bytes": "Largest request accepted; a larger one closes the connection.",
    "connections.max.idle.ms": "Idle time after which a connection is closed.",
    "num.io.threads": "Threads that handle requests.",
    "listener.security.protocol.map": "Security protocol of each listener name, as NAME:PROTOCOL pairs.",
    "sasl.enabled.mechanisms": "SASL mechanisms a SASL listener accepts: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512.",
    "sasl.server.max.receive.size": "Largest frame accepted before a client is authenticated.",
    "connections.max.reauth.ms": "Session lifetime of a SASL connection; 0 means sessions never expire.",
    "connection.failed.authentication.delay.ms": "Delay of the answer and close after a failed "
                                                 "authentication.",
    "ssl.client.auth": "Whether TLS clients must (required), may (requested) or need not (none) present "
                       "a certificate.",
    "ssl.keystore.type": "Format of the key store: PEM or PKCS12 (JKS is not readable here).",
    "ssl.keystore.location": "File holding the broker's private key and certificate chain.",
    "ssl.truststore.type": "Format of the trust store: PEM or PKCS12.",
    "ssl.truststore.location": "File of the CA certificates client certificates are checked against.",
    "ssl.enabled.protocols": "TLS versions accepted: TLSv1.2, TLSv1.3.",
    "ssl.cipher.suites": "TLS 1.2 cipher suites allowed, by their Java names; empty allows the defaults.",
    "ssl.principal.mapping.rules": "How a client certificate's subject becomes a user name (DEFAULT or "
                                   "RULE:pattern/replacement/[LU]).",
    "group.min.session.timeout.ms": "Shortest session timeout a group member may ask for.",
    "group.max.session.timeout.ms": "Longest session timeout a group member may ask for.",
    "group.initial.rebalance.delay.ms": "How long the first rebalance of an empty group waits for more "
                                        "members to join.",
    "group.max.size": "Most members a consumer group may have.",
    "offsets.topic.num.partitions": "Partitions of __consumer_offsets, created on first use.",
    "offsets.topic.segment.bytes": "Segment size of __consumer_offsets (small segments compact sooner).",
    "offsets.retention.minutes": "How long committed offsets are kept after their group empties or "
                                 "their last commit.",
    "offsets.retention.check.interval.ms": "Interval between checks for expired committed offsets.",
    "offset.metadata.max.bytes": "Longest metadata string a committed offset may carry.",
    "transaction.state.log.num.partitions": "Partitions of __transaction_state (never change it once the "
                                            "topic exists).",
    "transaction.state.log.segment.bytes": "Segment size of __transaction_state (small segments compact "
                                           "sooner).",
    "transaction.state.log.replication.factor": "Replication factor of __transaction_state; only 1 is "
                                                "possible on one node.",
    "transaction.state.log.min.isr": "min.insync.replicas of __transaction_state; only 1 can be met on one "
                                     "node.",
    "transaction.state.log.load.buffer.size": "Read size when __transaction_state is loaded at start.",
    "transaction.partition.verification.enable": "Whether a transactional write is refused for a partition "
                                                 "its transaction has not added.",
    "transaction.max.timeout.ms": "Longest transaction timeout a producer may ask for.",
    "transactional.id.expiration.ms": "Time without a transaction after which a transactional id is "
                                      "forgotten.",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "Interval between checks for transactions "
                                                                   "past their timeout, which are aborted.",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "Interval between checks for expired "
                                                                  "transactional ids.",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on; empty "
                             "(the default) allows every request.",
    "super.users": "Principals allowed everything whatever the ACLs say, separated by ';' (User:admin).",
    "allow.everyone.if.no.acl.found": "Whether a resource no ACL matches is open to everyone (else only "
                                      "super users may use it).",
    "transaction.two.phase.commit.enable": "Two-phase commit (KIP-939); not offered.",
    "compactlog.spark.master": "Spark master for large cleaning rounds.",
    "compactlog.spark.local.dir": "Spark's scratch directory.",
    "compactlog.cleaner.task.memory.bytes": "Memory a cleaning task may use for its offset map.",
    "compactlog.cleaner.log.dir": "Where the cleaner's run log goes (default: DIR.logs next to the data dir; "
                                  "never inside it, which Kafka's loader refuses).",
    "compactlog.cleaner.map": "Where the offset map is built: in one task, distributed, or chosen by size.",
    "compactlog.transaction.version": "Transaction protocol level of the coordinator (Kafka's "
                                      "transaction.version feature): 2, or 0 and 1 for tests.",
    "compactlog.cleaner.thread.restart.backoff.ms": "Wait before a cleaner thread whose loop died is started "
                                                    "again (doubled per death in a row, up to 5 minutes).",
    "metrics.listener": "host:port of the HTTP listener serving /metrics and the health endpoints "
                        "(loopback by default; empty: no listener, no metrics).",
    "metrics.listener.allow.non.loopback": "Whether metrics.listener may bind an address other than "
                                           "loopback (the endpoint has no TLS or authentication).",
    "metrics.partition.level": "Whether the per-partition metric series are served (false above a few "
                               "thousand partitions).",
}


def _broker_doc(name: str) -> str | None:
    if name in BROKER_DOCS:
        return BROKER_DOCS[name]
    d = _TOPIC_BY_BROKER_NAME.get(name)
    if d is not None:
        return f"Default of the topic config {d.name} for topics that do not set it."
    return None
