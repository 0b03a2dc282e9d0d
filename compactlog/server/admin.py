"""The broker's admin APIs: CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs and DescribeCluster.

Handlers are ``handle_<api>(state, request) -> response body`` (kio), as ``state.py`` describes.
On one node the broker is also the controller, so each handler does what Kafka splits between the
broker that receives the request and the KRaft controller it forwards it to:

* ``ControllerApis`` (createTopics, deleteTopics, createPartitions, handleIncrementalAlterConfigs,
  handleLegacyAlterConfigs): a topic or resource named twice in one request, the
  ``__cluster_metadata`` topic.
* ``ReplicationControlManager`` (createTopics, createTopic, validateNewTopicNames,
  computeConfigChanges, createPartitions, validateManualPartitionAssignment): the order of the
  checks, the error codes and their messages; ``QuorumController``'s limit of 10000 records per
  operation (POLICY_VIOLATION for a larger request).
* ``ConfigurationControlManager`` (incrementalAlterConfigResource, legacyAlterConfigResource,
  validateAlterConfig), ``ControllerConfigurationValidator`` and ``LogConfig.validate``: config
  changes, validated as a whole, then the existence of the topic; ``ConfigException`` messages
  as ``ConfigDef`` words them.
* ``ConfigAdminManager.preprocess``: the broker's own checks of AlterConfigs and
  IncrementalAlterConfigs (duplicate resources and keys, null values, broker resources).
* ``ConfigHelper.describeConfigs`` / ``createTopicConfigEntry`` / ``createBrokerConfigEntry`` and
  ``DynamicBrokerConfig.brokerConfigSynonyms``: DescribeConfigs, with synonyms in Kafka's order
  (the topic override, then the broker's static setting, then Kafka's default) and Kafka's quirk
  of dropping the synonyms that precede the primary broker name (``retention.ms`` described with
  only ``log.retention.hours`` set lists no synonym and says DEFAULT_CONFIG, as Kafka does).
* ``KafkaConfigSchema.resolveEffectiveTopicConfigs``: the configs a CreateTopics v5+ answer echoes.
* ``ReplicaManager.deleteRecordsOnLocalLog``, ``Partition.deleteRecordsOnLeader`` and
  ``UnifiedLog.maybeIncrementLogStartOffset``: DeleteRecords (storage: ``Log.delete_records_before``).
* ``AuthHelper.computeDescribeClusterResponse``: DescribeCluster (no authorizer: every cluster
  operation is allowed).

Where compactlog differs, on purpose:

* ``min.insync.replicas`` above 1 (a topic's own or the broker default) is refused with
  INVALID_CONFIG at create and alter time: one node can never meet it, and Kafka would accept the
  topic and then refuse every ``acks=all`` produce with NOT_ENOUGH_REPLICAS.
* Two topics of one CreateTopics request whose names collide in '.'/'_' are refused (the second
  one), as they would be in two requests; Kafka checks only against existing topics.
* Broker resources have no dynamic configs: AlterConfigs and IncrementalAlterConfigs refuse every
  broker setting the way Kafka refuses its non-dynamic ones, DescribeConfigs marks them all
  read-only, and the cluster-default resource (empty name) is described as empty.
* BROKER_LOGGER (log4j levels), GROUP and CLIENT_METRICS resources are not supported:
  INVALID_REQUEST for that resource.
* Topic configs are those of ``storage.config.TOPIC_CONFIGS`` (the ones compactlog implements);
  Kafka's ``leader/follower.replication.throttled.replicas``, ``remote.log.copy.disable``,
  ``remote.log.delete.on.disable`` and ``message.format.version`` are unknown names here.
  Where compactlog is stricter than Kafka (an empty ``cleanup.policy``), its own message is given.
* The documentation strings (DescribeConfigs v3+) are compactlog's, not Kafka's text.
"""

from __future__ import annotations

import importlib
import os
import re
import uuid
from dataclasses import dataclass
from decimal import Decimal

from kio.schema.errors import ErrorCode

from ..errors import CompactlogError, ConfigError, OffsetOutOfRangeError, TopicError
from ..storage import files
from ..storage.checkpoint import decode_topic_id
from ..storage.config import (BROKER_CONFIGS, TOPIC_CONFIGS, CompactionLagConflict, ConfigDef,
                              ConfigValueError, LogConfig, UnknownConfigError)
from ..storage.datadir import INTERNAL_TOPIC_CONFIGS
from ..storage.kafka_names import KAFKA_BROKER_SETTINGS
from .messages import CLUSTER_OPERATIONS, NO_THROTTLE, OPERATIONS_NOT_REQUESTED, build
from .state import INTERNAL_TOPICS, BrokerState
from .versions import response_schema

# ConfigResource.Type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8
_RESOURCE_NAMES = {1: "UNKNOWN", 2: "TOPIC", 4: "BROKER", 8: "BROKER_LOGGER", 16: "CLIENT_METRICS",
                   32: "GROUP"}

# DescribeConfigsResponse.ConfigSource
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5

# AlterConfigOp.OpType
OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {OP_SET: "SET", OP_DELETE: "DELETE", OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}

# DescribeConfigsResponse.ConfigType
CONFIG_TYPES = {"bool": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
MAX_RECORDS_PER_USER_OP = 10000      # QuorumController.MAX_RECORDS_PER_USER_OP
_TOO_LARGE = "Unable to perform excessively large batch operation."

CLUSTER_AUTHORIZED_OPERATIONS = CLUSTER_OPERATIONS
ENDPOINT_BROKER, ENDPOINT_CONTROLLER = 1, 2

_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")


class Refused(Exception):
    """A per-topic or per-resource failure: the Kafka error code and the message clients get."""

    def __init__(self, code: ErrorCode, message: str | None = None):
        super().__init__(message or code.name)
        self.code = code
        self.message = message


# -- kio plumbing ---------------------------------------------------------------------------------

def _response_types(request):
    cls = response_schema(request.api_key, request.response_version)
    return cls, importlib.import_module(cls.__module__)


def _topic_uuid(topic_id: str | None) -> uuid.UUID | None:
    return uuid.UUID(bytes=decode_topic_id(topic_id)) if topic_id else None


# -- topic names ----------------------------------------------------------------------------------

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


# -- config values as Kafka writes and checks them ------------------------------------------------

def java_double(x: float) -> str:
    """Java's Double.toString: decimal from 1e-3 to 1e7, else d.dddE±n; always a fraction digit."""
    if x != x:
        return "NaN"
    if x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if str(x).startswith("-") else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        s = repr(x)
        return s if "." in s else s + ".0"
    sign, digits, exponent = Decimal(repr(x)).normalize().as_tuple()
    text = "".join(map(str, digits))
    power = len(digits) - 1 + exponent
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{power}"


def kafka_string(kind: str, value) -> str | None:
    """ConfigDef.convertToString for compactlog's value of a config of ``kind``."""
    if value is None:
        return None
    if kind == "bool":
        return "true" if value else "false"
    if kind == "list":
        return ",".join(value)
    if kind == "double":
        return java_double(float(value))
    return str(value)


_INT_BITS = {"int": 32, "long": 64}


def _kafka_parse(d: ConfigDef, raw: str):
    """(value, None) as ConfigDef.parseType reads ``raw``, or (None, Kafka's message)."""
    trimmed = raw.strip()
    if d.kind in _INT_BITS:
        bits = _INT_BITS[d.kind]
        if _JAVA_INTEGER.fullmatch(trimmed) and -2 ** (bits - 1) <= int(trimmed) < 2 ** (bits - 1):
            return int(trimmed), None
        return None, f"Invalid value {raw} for configuration {d.name}: Not a number of type {d.kind.upper()}"
    if d.kind == "double":
        if _JAVA_DOUBLE.fullmatch(trimmed):
            text = trimmed[:-1] if trimmed[-1] in "fFdD" else trimmed     # Java's type suffix
            return float(text.replace("Infinity", "inf")), None
        return None, f"Invalid value {raw} for configuration {d.name}: Not a number of type DOUBLE"
    if d.kind == "bool":
        if trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true", None
        return None, f"Invalid value {raw} for configuration {d.name}: Expected value to be either true or false"
    if d.kind == "list":
        return ([] if not trimmed else re.split(r"\s*,\s*", trimmed)), None
    return trimmed, None


def kafka_config_error(d: ConfigDef, raw: str) -> str | None:
    """The message of Kafka's ConfigException for ``raw`` as the value of topic config ``d``, or
    None when Kafka accepts it: Kafka's parse of the text, then the config's rule (storage's
    ``Rule``, which holds the bound and Kafka's words for it)."""
    value, problem = _kafka_parse(d, raw)
    if problem:
        return problem
    verdict = d.check.kafka(value) if d.check is not None else None
    if verdict is None:
        return None
    element, why = verdict
    shown = element if element is not None else kafka_string(d.kind, value)
    return f"Invalid value {shown} for configuration {d.name}: {why}"


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
        kafka = kafka_config_error(e.definition, e.raw) if e.name in overrides else None
        raise Refused(ErrorCode.invalid_config, kafka or str(e)) from None
    except CompactionLagConflict as e:
        raise Refused(ErrorCode.invalid_config, f"conflict topic config setting min.compaction.lag.ms "
                                                f"({e.min_lag}) > max.compaction.lag.ms ({e.max_lag})") from None
    except ConfigError as e:
        raise Refused(ErrorCode.invalid_config, str(e)) from None
    isr = cfg.get("min.insync.replicas")
    if isr > 1:
        where = "the topic's" if "min.insync.replicas" in merged else "the broker's default"
        raise Refused(ErrorCode.invalid_config,
                      f"min.insync.replicas={isr} ({where}) can never be met: this broker is a single "
                      f"node, so each partition has 1 replica; set it to 1")
    return cfg


# -- DescribeConfigs entries ----------------------------------------------------------------------

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
_UNIT_SETTINGS = {"log.roll.hours": ("int", "168"), "log.roll.jitter.hours": ("int", "0"),
                  "log.retention.minutes": ("int", None), "log.retention.hours": ("int", "168")}


def _broker_default(name: str) -> str | None:
    if name in _NO_BROKER_DEFAULT:
        return None
    if name in _UNIT_SETTINGS:
        return _UNIT_SETTINGS[name][1]
    d = BROKER_CONFIGS.get(name) or _TOPIC_BY_BROKER_NAME.get(name)
    if d is None or d.default is None:
        return None
    return kafka_string(d.kind, d.default)


def _broker_kind(name: str) -> str | None:
    if name in _UNIT_SETTINGS:
        return _UNIT_SETTINGS[name][0]
    d = BROKER_CONFIGS.get(name) or _TOPIC_BY_BROKER_NAME.get(name)
    return d.kind if d is not None else None


def _broker_synonyms(name: str, props: dict[str, str]) -> list[tuple[str, str | None, int]]:
    """ConfigHelper.configSynonyms: the static settings, then Kafka's defaults, of ``name`` and the
    settings standing for it, with the ones before ``name`` itself dropped (as Kafka does)."""
    group = _SYNONYM_GROUPS.get(name, (name,))
    found = [(n, props[n], SOURCE_STATIC_BROKER) for n in group if n in props]
    found += [(n, default, SOURCE_DEFAULT) for n in group if (default := _broker_default(n)) is not None]
    while found and found[0][0] != name:
        found.pop(0)
    return found


def topic_config_entries(state: BrokerState, topic: str) -> list[ConfigEntry]:
    """Every topic config of ``topic`` with its effective value, source and synonyms
    (ConfigHelper.createTopicConfigEntry), sorted by name."""
    cfg = state.datadir.topic_config(topic)
    props = state.broker.props
    entries = []
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        value = kafka_string(d.kind, cfg.get(name))
        synonyms = [(name, value, SOURCE_TOPIC)] if name in cfg.overrides else []
        if d.broker:
            synonyms += _broker_synonyms(d.broker[0], props)
        entries.append(ConfigEntry(name, value, synonyms[0][2] if synonyms else SOURCE_DEFAULT, False,
                                   False, synonyms, CONFIG_TYPES[d.kind], TOPIC_DOCS.get(name)))
    return entries


def _is_sensitive(name: str, kind: str | None) -> bool:
    # KafkaConfig.maybeSensitive: a PASSWORD setting, or one whose type is not known; compactlog
    # knows Kafka's names but not their types, so a known name is shown unless it holds a secret
    if kind is not None:
        return False
    if name not in KAFKA_BROKER_SETTINGS and not name.startswith("listener.name."):
        return True
    return "password" in name or name.endswith("jaas.config") or "secret" in name


def broker_config_entries(state: BrokerState) -> list[ConfigEntry]:
    """The node's settings (ConfigHelper.createBrokerConfigEntry): compactlog's broker settings,
    the broker settings that default topic configs, and whatever server.properties or
    --override set; each with its source and synonyms. None is dynamic: all are read-only."""
    props = state.broker.props
    names = set(BROKER_CONFIGS) | set(_TOPIC_BY_BROKER_NAME) | set(_UNIT_SETTINGS) | set(props)
    entries = []
    for name in sorted(names):
        kind = _broker_kind(name)
        sensitive = _is_sensitive(name, kind)
        value = props[name] if name in props else _broker_default(name)
        synonyms = [(n, None if sensitive else v, s) for n, v, s in _broker_synonyms(name, props)]
        entries.append(ConfigEntry(name, None if sensitive else value,
                                   synonyms[0][2] if synonyms else SOURCE_DEFAULT, True, sensitive,
                                   synonyms, CONFIG_TYPES.get(kind, 0), _broker_doc(name)))
    return entries


# -- request handlers -----------------------------------------------------------------------------

def _broker_setting(state: BrokerState, name: str, kind: str, default):
    """A broker setting by its Kafka name, also when compactlog's BROKER_CONFIGS does not list it."""
    if name in BROKER_CONFIGS:
        return state.broker.get(name)
    raw = state.broker.props.get(name)
    return default if raw is None else ConfigDef(name, kind, default).parse(raw)


@dataclass
class _TopicPlan:
    name: str
    partitions: int
    configs: dict[str, str]
    cfg: LogConfig


def _check_manual_assignment(state: BrokerState, broker_ids, replication_factor: int | None) -> None:
    """ReplicationControlManager.validateManualPartitionAssignment for one partition."""
    if not broker_ids:
        raise Refused(ErrorCode.invalid_replica_assignment,
                      "The manual partition assignment includes an empty replica list.")
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id != state.node_id:
            raise Refused(ErrorCode.invalid_replica_assignment,
                          f"The manual partition assignment includes broker {broker_id}, but no such "
                          f"broker is registered.")
        if broker_id == previous:
            raise Refused(ErrorCode.invalid_replica_assignment,
                          f"The manual partition assignment includes the broker {previous} more than once.")
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise Refused(ErrorCode.invalid_replica_assignment,
                      f"The manual partition assignment includes a partition with {len(broker_ids)} "
                      f"replica(s), but this is not consistent with previous partitions, which have "
                      f"{replication_factor} replica(s).")


def _plan_topic(state: BrokerState, topic, taken: set[str]) -> _TopicPlan:
    """Every check ReplicationControlManager.createTopics makes, in its order; nothing changes."""
    name = topic.name
    problem = topic_name_error(name)
    if problem:
        raise Refused(ErrorCode.invalid_topic_exception, problem)
    if name in taken:
        raise Refused(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    other = colliding_topic(name, taken)
    if other is not None:
        raise Refused(ErrorCode.invalid_topic_exception, f"Topic '{name}' collides with existing topic: {other}")
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:
        raise Refused(ErrorCode.invalid_config, "Null value not supported for topic configs: " + ",".join(nulls))
    configs = {c.name: c.value for c in topic.configs}
    cfg = validate_topic_configs(state, name, configs)
    if topic.assignments:
        if topic.replication_factor != -1:
            raise Refused(ErrorCode.invalid_request, "A manual partition assignment was specified, but "
                                                     "replication factor was not set to -1.")
        if topic.num_partitions != -1:
            raise Refused(ErrorCode.invalid_request, "A manual partition assignment was specified, but "
                                                     "numPartitions was not set to -1.")
        seen: set[int] = set()
        replication_factor = None
        for assignment in topic.assignments:
            if assignment.partition_index in seen:
                raise Refused(ErrorCode.invalid_replica_assignment,
                              f"Found multiple manual partition assignments for partition "
                              f"{assignment.partition_index}")
            _check_manual_assignment(state, assignment.broker_ids, replication_factor)
            replication_factor = len(assignment.broker_ids)
            seen.add(assignment.partition_index)
        if seen != set(range(len(seen))):
            raise Refused(ErrorCode.invalid_replica_assignment,
                          "partitions should be a consecutive 0-based integer sequence")
        return _TopicPlan(name, len(seen), configs, cfg)
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise Refused(ErrorCode.invalid_replication_factor,
                      "Replication factor must be larger than 0, or -1 to use the default value.")
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise Refused(ErrorCode.invalid_partitions,
                      "Number of partitions was set to an invalid non-positive value.")
    partitions = state.broker.get("num.partitions") if topic.num_partitions == -1 else topic.num_partitions
    replication_factor = topic.replication_factor
    if replication_factor == -1:
        try:
            replication_factor = _broker_setting(state, "default.replication.factor", "int", 1)
        except ConfigError as e:
            raise Refused(ErrorCode.invalid_replication_factor, str(e)) from None
    if replication_factor != 1:
        raise Refused(ErrorCode.invalid_replication_factor,
                      f"Unable to replicate the partition {replication_factor} time(s): The target "
                      f"replication factor of {replication_factor} cannot be reached because only 1 "
                      f"broker(s) are registered.")
    return _TopicPlan(name, partitions, configs, cfg)


def _created_configs(module, state: BrokerState, plan: _TopicPlan) -> tuple:
    """KafkaConfigSchema.resolveEffectiveTopicConfigs: every topic config of the new topic, its
    source the creation request, a static broker setting or Kafka's default."""
    out = []
    props = state.broker.props
    for name in sorted(TOPIC_CONFIGS):
        d = TOPIC_CONFIGS[name]
        if name in plan.cfg.overrides:
            value, source = plan.configs.get(name, plan.cfg.overrides[name]), SOURCE_TOPIC
        else:
            static = next((n for n in d.broker if n in props), None)
            if static is not None:
                # ConfigSynonym's converter: hours and minutes become milliseconds
                value = kafka_string(d.kind, plan.cfg.get(name)) if static in _UNIT_SETTINGS else props[static]
                source = SOURCE_STATIC_BROKER
            else:
                value, source = kafka_string(d.kind, d.default), SOURCE_DEFAULT
        out.append(build(module.CreatableTopicConfigs, name=name, value=value, read_only=False,
                         config_source=source, is_sensitive=False))
    return tuple(out)


def handle_create_topics(state: BrokerState, request):
    """CreateTopics (19): ControllerApis.createTopics, then ReplicationControlManager.createTopics."""
    body = request.body
    cls, module = _response_types(request)
    result_cls = module.CreatableTopicResult
    v5 = request.response_version >= 5

    def failed(name, code, message):
        return build(result_cls, name=name, topic_id=None, error_code=code, error_message=message,
                     num_partitions=-1, replication_factor=-1, configs=())

    counts: dict[str, int] = {}
    for topic in body.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    results: dict[str, object] = {}
    plans: list[_TopicPlan] = []
    with state.metadata_lock:
        taken = set(state.datadir.topics())
        for topic in body.topics:
            name = topic.name
            if name in results:
                continue
            if counts[name] > 1:
                results[name] = failed(name, ErrorCode.invalid_request, "Duplicate topic name.")
            elif name == CLUSTER_METADATA_TOPIC:
                results[name] = failed(name, ErrorCode.invalid_request,
                                       f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
            else:
                try:
                    plan = _plan_topic(state, topic, taken)
                except Refused as r:
                    results[name] = failed(name, r.code, r.message)
                    continue
                results[name] = plan
                plans.append(plan)
                taken.add(name)
        records = sum(1 + len(p.configs) + p.partitions for p in plans)
        if records > MAX_RECORDS_PER_USER_OP:
            # QuorumController: the whole operation fails, and every topic says so
            return cls(throttle_time=NO_THROTTLE,
                       topics=tuple(failed(n, ErrorCode.policy_violation, _TOO_LARGE) for n in results))
        for plan in plans:
            topic_id = None
            if body.validate_only:
                topic_id = uuid.uuid4()
            else:
                try:
                    # checked above: this creates the topic and opens its logs
                    state.create_topic(plan.name, plan.partitions, plan.configs, replication_factor=1)
                    topic_id = _topic_uuid(state.datadir.topic_id(plan.name))
                except (CompactlogError, OSError) as e:
                    state.logger.error(f"CreateTopics: creating {plan.name} failed: {e}")
                    results[plan.name] = failed(plan.name, ErrorCode.unknown_server_error, None)
                    continue
            results[plan.name] = build(
                result_cls, name=plan.name, topic_id=topic_id, error_code=ErrorCode.none,
                error_message=None, topic_config_error_code=0, num_partitions=plan.partitions,
                replication_factor=1, configs=_created_configs(module, state, plan) if v5 else ())
    return cls(throttle_time=NO_THROTTLE, topics=tuple(results.values()))


def handle_delete_topics(state: BrokerState, request):
    """DeleteTopics (20): ControllerApis.deleteTopics. Topics named by id (v6, not advertised) are
    found by the ids kept in the data dir."""
    body = request.body
    cls, module = _response_types(request)
    result_cls = module.DeletableTopicResult
    version = request.response_version

    def result(name, code, message=None, topic_id=None):
        return build(result_cls, name=name, topic_id=topic_id, error_code=code,
                     error_message=message)

    requested = [(n, None) for n in getattr(body, "topic_names", ())]
    requested += [(t.name, t.topic_id) for t in getattr(body, "topics", ())]
    try:
        enabled = _broker_setting(state, "delete.topic.enable", "bool", True)
    except ConfigError:
        enabled = True
    if not enabled:
        code = ErrorCode.invalid_request if version < 3 else ErrorCode.topic_deletion_disabled
        message = "Topic deletion is disabled." if version < 3 else None
        return cls(throttle_time=NO_THROTTLE,
                   responses=tuple(result(n, code, message, i) for n, i in requested))

    responses = []
    deleted: list[tuple[str, int]] = []
    with state.metadata_lock:
        ids = {}
        if any(i is not None and n is None for n, i in requested):
            ids = {_topic_uuid(state.datadir.topic_id(t)): t for t in state.datadir.topics()}
        names: list[str] = []
        seen: dict[str, int] = {}
        for name, topic_id in requested:
            if name is not None and topic_id not in (None, uuid.UUID(int=0)):
                responses.append(result(name, ErrorCode.invalid_request,
                                        "You may not specify both topic name and topic id.", topic_id))
                continue
            if name is None:
                if topic_id in (None, uuid.UUID(int=0)):
                    responses.append(result(None, ErrorCode.invalid_request,
                                            "Neither topic name nor id were specified."))
                    continue
                if topic_id not in ids:
                    responses.append(result(None, ErrorCode.unknown_topic_id,
                                            "This server does not host this topic ID.", topic_id))
                    continue
                name = ids[topic_id]
            seen[name] = seen.get(name, 0) + 1
            if seen[name] == 1:
                names.append(name)
        for name in names:
            if seen[name] > 1:
                responses.append(result(name, ErrorCode.invalid_request, "Duplicate topic name."))
                continue
            if not state.datadir.has_topic(name):
                responses.append(result(name, ErrorCode.unknown_topic_or_partition,
                                        "This server does not host this topic-partition."))
                continue
            topic_id = _topic_uuid(state.datadir.topic_id(name))
            partitions = state.datadir.partitions(name)
            try:
                state.datadir.delete_topic(name)
            except (CompactlogError, OSError) as e:
                state.logger.error(f"DeleteTopics: deleting {name} failed: {e}")
                responses.append(result(name, ErrorCode.unknown_server_error, None, topic_id))
                continue
            state.appends.notify([(name, p) for p in partitions])     # long polls answer at once
            deleted += [(name, p) for p in partitions]
            responses.append(result(name, ErrorCode.none, None, topic_id))
    if deleted and state.groups is not None:
        # every group's offsets of the deleted partitions become tombstones (outside the metadata
        # lock: the coordinator takes its own lock first, then the metadata lock to open a log)
        state.groups.on_partitions_deleted(deleted)
    return cls(throttle_time=NO_THROTTLE, responses=tuple(responses))


def handle_create_partitions(state: BrokerState, request):
    """CreatePartitions (37): ControllerApis.createPartitions, ReplicationControlManager.createPartitions."""
    body = request.body
    cls, module = _response_types(request)
    result_cls = module.CreatePartitionsTopicResult

    def result(name, code, message=None):
        return result_cls(name=name, error_code=code, error_message=message)

    counts: dict[str, int] = {}
    for topic in body.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    results: dict[str, object] = {}
    growth: list[tuple[str, int]] = []
    with state.metadata_lock:
        for topic in body.topics:
            name = topic.name
            if name in results:
                continue
            if counts[name] > 1:
                results[name] = result(name, ErrorCode.invalid_request, "Duplicate topic name.")
                continue
            try:
                results[name] = _plan_partitions(state, topic)
                growth.append((name, topic.count))
            except Refused as r:
                results[name] = result(name, r.code, r.message)
        added = sum(count - max(state.datadir.partitions(name)) - 1 for name, count in growth)
        if added > MAX_RECORDS_PER_USER_OP:
            return cls(throttle_time=NO_THROTTLE,
                       results=tuple(result(n, ErrorCode.policy_violation, _TOO_LARGE) for n in results))
        for name, count in growth:
            if not body.validate_only:
                try:
                    for p in state.datadir.add_partitions(name, count):
                        state.datadir.open_log(name, p)
                except (CompactlogError, OSError) as e:
                    state.logger.error(f"CreatePartitions: adding partitions to {name} failed: {e}")
                    results[name] = result(name, ErrorCode.unknown_server_error)
                    continue
            results[name] = result(name, ErrorCode.none)
    return cls(throttle_time=NO_THROTTLE, results=tuple(results.values()))


def _plan_partitions(state: BrokerState, topic) -> None:
    name = topic.name
    if not state.datadir.has_topic(name):
        raise Refused(ErrorCode.unknown_topic_or_partition)
    current = max(state.datadir.partitions(name), default=-1) + 1
    if topic.count == current:
        raise Refused(ErrorCode.invalid_partitions, f"Topic already has {current} partition(s).")
    if topic.count < current:
        raise Refused(ErrorCode.invalid_partitions, f"The topic {name} currently has {current} "
                                                    f"partition(s); {topic.count} would not be an increase.")
    additional = topic.count - current
    if topic.assignments is not None:
        if len(topic.assignments) != additional:
            raise Refused(ErrorCode.invalid_replica_assignment,
                          f"Attempted to add {additional} additional partition(s), but only "
                          f"{len(topic.assignments)} assignment(s) were specified.")
        for assignment in topic.assignments:
            _check_manual_assignment(state, assignment.broker_ids, 1)


def handle_delete_records(state: BrokerState, request):
    """DeleteRecords (21): KafkaApis.handleDeleteRecordsRequest, ReplicaManager.deleteRecordsOnLocalLog,
    Partition.deleteRecordsOnLeader."""
    body = request.body
    cls, module = _response_types(request)
    requested: dict[tuple[str, int], int] = {}      # a partition named twice: the last one counts
    for topic in body.topics:
        for p in topic.partitions:
            requested[(topic.name, p.partition_index)] = p.offset
    by_topic: dict[str, list] = {}
    for (name, partition), offset in requested.items():
        code, low = _delete_records(state, name, partition, offset)
        by_topic.setdefault(name, []).append(
            module.DeleteRecordsPartitionResult(partition_index=partition, low_watermark=low, error_code=code))
    topics = tuple(module.DeleteRecordsTopicResult(name=name, partitions=tuple(parts))
                   for name, parts in by_topic.items())
    return cls(throttle_time=NO_THROTTLE, topics=topics)


def _delete_records(state: BrokerState, topic: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
    datadir = state.datadir
    try:
        if not datadir.has_topic(topic) or partition not in datadir.partitions(topic):
            return ErrorCode.unknown_topic_or_partition, -1
        if topic in INTERNAL_TOPICS:
            return ErrorCode.invalid_topic_exception, -1
        plog = datadir.open_log(topic, partition)
    except TopicError:
        return ErrorCode.unknown_topic_or_partition, -1
    except (CompactlogError, OSError) as e:
        state.logger.error(f"DeleteRecords: opening {topic}-{partition} failed: {e}")
        return ErrorCode.kafka_storage_error, -1
    if not plog.config.delete:
        return ErrorCode.policy_violation, -1
    target = plog.high_watermark if offset == -1 else offset
    try:
        low = datadir.delete_records(topic, partition, target)
        state.appends.notify([(topic, partition)])     # a fetch waiting below the new start answers
        return ErrorCode.none, low
    except OffsetOutOfRangeError:
        return ErrorCode.offset_out_of_range, -1
    except TopicError:          # deleted meanwhile
        return ErrorCode.unknown_topic_or_partition, -1
    except (CompactlogError, OSError) as e:
        state.logger.error(f"DeleteRecords: {topic}-{partition} up to {target} failed: {e}")
        return ErrorCode.kafka_storage_error, -1


def _resource_label(resource_type: int) -> str:
    return f"{resource_type} ({_RESOURCE_NAMES[resource_type]})" if resource_type in _RESOURCE_NAMES \
        else str(resource_type)


def _unsupported_resource(resource_type: int) -> Refused:
    return Refused(ErrorCode.invalid_request,
                   f"Unsupported resource type {_resource_label(resource_type)}: compactlog serves "
                   f"TOPIC (2) and BROKER (4) configs only")


def _parse_broker_id(name: str, what: str = "Broker id") -> int:
    if not _JAVA_INTEGER.fullmatch(name) or not -2 ** 31 <= int(name) < 2 ** 31:
        raise Refused(ErrorCode.invalid_request, f"{what} must be an integer, but it is: {name}")
    return int(name)


def handle_describe_configs(state: BrokerState, request):
    """DescribeConfigs (32): ConfigHelper.describeConfigs."""
    body = request.body
    cls, module = _response_types(request)
    include_synonyms = getattr(body, "include_synonyms", False)
    include_documentation = getattr(body, "include_documentation", False)
    results = []
    for resource in body.resources:
        try:
            entries = _describe_resource(state, resource)
            code, message = ErrorCode.none, None
        except Refused as r:
            entries, code, message = [], r.code, r.message
        keys = resource.configuration_keys
        if keys:            # null or empty: every config
            wanted = set(keys)
            entries = [e for e in entries if e.name in wanted]
        configs = tuple(build(
            module.DescribeConfigsResourceResult, name=e.name, value=e.value, read_only=e.read_only,
            config_source=e.source, is_default=e.source == SOURCE_DEFAULT, is_sensitive=e.sensitive,
            synonyms=tuple(module.DescribeConfigsSynonym(name=n, value=v, source=s) for n, v, s in e.synonyms)
            if include_synonyms else (),
            config_type=e.config_type, documentation=e.documentation if include_documentation else None)
            for e in entries)
        results.append(module.DescribeConfigsResult(error_code=code, error_message=message,
                                                    resource_type=resource.resource_type,
                                                    resource_name=resource.resource_name, configs=configs))
    return cls(throttle_time=NO_THROTTLE, results=tuple(results))


def _describe_resource(state: BrokerState, resource) -> list[ConfigEntry]:
    name = resource.resource_name
    if resource.resource_type == RESOURCE_TOPIC:
        problem = topic_name_error(name)
        if problem:
            raise Refused(ErrorCode.invalid_topic_exception, problem)
        if not state.datadir.has_topic(name):
            raise Refused(ErrorCode.unknown_topic_or_partition)
        return topic_config_entries(state, name)
    if resource.resource_type == RESOURCE_BROKER:
        if name == "":
            return []        # the cluster-wide dynamic defaults: compactlog has none
        if _parse_broker_id(name) != state.node_id:
            raise Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected {state.node_id} or "
                                                     f"empty string, but received {name}")
        return broker_config_entries(state)
    raise _unsupported_resource(resource.resource_type)


def _preprocess_alter(state: BrokerState, resources, *, incremental: bool) -> dict[int, Refused]:
    """ConfigAdminManager.preprocess: index of a resource -> its refusal, for the resources the
    broker refuses before any change is considered."""
    refused: dict[int, Refused] = {}
    first: dict[tuple[int, str], int] = {}
    for i, r in enumerate(resources):
        key = (r.resource_type, r.resource_name)
        if key in first:
            for j in (first[key], i):
                refused[j] = Refused(ErrorCode.invalid_request, "Each resource must appear at most once.")
        else:
            first[key] = i
    for i, r in enumerate(resources):
        if i in refused:
            continue
        try:
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise Refused(ErrorCode.invalid_request, "Error due to duplicate config keys")
            nulls = [c.name for c in r.configs if c.value is None
                     and not (incremental and c.config_operation == OP_DELETE)]
            if nulls:
                raise Refused(ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls))
            if incremental:
                for c in r.configs:
                    if c.config_operation not in _OP_NAMES:
                        raise Refused(ErrorCode.invalid_request, f"Unknown operations type {c.config_operation}")
            if r.resource_type == RESOURCE_BROKER:
                if r.resource_name != "" and _parse_broker_id(r.resource_name, "Node id") != state.node_id:
                    raise Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected "
                                                             f"{state.node_id}, but received {r.resource_name}")
                changed = [c.name for c in r.configs if not (incremental and c.config_operation == OP_DELETE)]
                if changed:
                    # DynamicBrokerConfig.validateConfigs; compactlog has no dynamic broker settings
                    raise Refused(ErrorCode.invalid_request, "Cannot update these configs dynamically: "
                                                             f"Set({', '.join(changed)})")
            elif r.resource_type != RESOURCE_TOPIC:
                raise _unsupported_resource(r.resource_type)
        except Refused as e:
            refused[i] = e
    return refused


def _check_topic_resource(name: str) -> None:
    """ControllerConfigurationValidator.validate for a TOPIC resource."""
    if name == "":
        raise Refused(ErrorCode.invalid_request, "Default topic resources are not allowed.")
    problem = topic_name_error(name)
    if problem:
        raise Refused(ErrorCode.invalid_topic_exception, problem)


def _alter_topic(state: BrokerState, name: str, new: dict[str, str], validate_only: bool) -> None:
    """Validate the topic's new override set, then check that it exists, then (unless only
    validating) make it the topic's (ConfigurationControlManager.validateAlterConfig)."""
    validate_topic_configs(state, name, new)
    if not state.datadir.has_topic(name):
        raise Refused(ErrorCode.unknown_topic_or_partition, f"The topic '{name}' does not exist.")
    if not validate_only:
        state.datadir.set_topic_configs(name, new)


def _incremental_overrides(current: dict[str, str], configs) -> dict[str, str]:
    """ConfigurationControlManager.incrementalAlterConfigResource: the overrides after the ops.
    APPEND and SUBTRACT start from the override, else from Kafka's own default of the config."""
    new = dict(current)
    for c in configs:
        if c.config_operation == OP_SET:
            new[c.name] = c.value
        elif c.config_operation == OP_DELETE:
            new.pop(c.name, None)
        else:
            d = TOPIC_CONFIGS.get(c.name)
            if d is None or d.kind != "list":
                raise Refused(ErrorCode.invalid_config, f"Can't {_OP_NAMES[c.config_operation]} to key "
                                                        f"{c.name} because its type is not LIST.")
            base = current.get(c.name)
            if base is None:
                base = kafka_string(d.kind, d.default)
            parts = [p for p in base.split(",") if p]
            if c.config_operation == OP_APPEND:
                for value in c.value.split(","):
                    if value not in parts:
                        parts.append(value)
            else:
                for value in c.value.split(","):
                    if value in parts:
                        parts.remove(value)
            new[c.name] = ",".join(parts)
    return new


def handle_incremental_alter_configs(state: BrokerState, request):
    """IncrementalAlterConfigs (44): ConfigAdminManager.preprocess, then
    ConfigurationControlManager.incrementalAlterConfigs."""
    return _alter_configs(state, request, incremental=True)


def handle_alter_configs(state: BrokerState, request):
    """AlterConfigs (33), the legacy API: the listed configs become the resource's complete set of
    overrides (ConfigurationControlManager.legacyAlterConfigResource)."""
    return _alter_configs(state, request, incremental=False)


def _alter_configs(state: BrokerState, request, *, incremental: bool):
    body = request.body
    cls, module = _response_types(request)
    refused = _preprocess_alter(state, body.resources, incremental=incremental)
    what = "IncrementalAlterConfigs" if incremental else "AlterConfigs"
    responses = []
    with state.metadata_lock:
        for i, r in enumerate(body.resources):
            error = refused.get(i)
            if error is None and r.resource_type == RESOURCE_TOPIC:
                try:
                    _check_topic_resource(r.resource_name)
                    if incremental:
                        new = _incremental_overrides(state.datadir.topic_overrides(r.resource_name),
                                                     r.configs)
                    else:
                        new = {c.name: c.value for c in r.configs}
                    _alter_topic(state, r.resource_name, new, body.validate_only)
                except Refused as e:
                    error = e
                except (CompactlogError, OSError) as e:
                    state.logger.error(f"{what} on {r.resource_name} failed: {e}")
                    error = Refused(ErrorCode.unknown_server_error)
            responses.append(module.AlterConfigsResourceResponse(
                error_code=error.code if error else ErrorCode.none, error_message=error.message if error else None,
                resource_type=r.resource_type, resource_name=r.resource_name))
    return cls(throttle_time=NO_THROTTLE, responses=tuple(responses))


def handle_describe_cluster(state: BrokerState, request):
    """DescribeCluster (60): KafkaApis.handleDescribeCluster, AuthHelper.computeDescribeClusterResponse.
    The node is the only broker and, as KRaft brokers answer, the controller id."""
    body = request.body
    cls, module = _response_types(request)
    version = request.response_version
    endpoint = getattr(body, "endpoint_type", ENDPOINT_BROKER)

    def failed(code_v0, code, message):
        return build(cls, throttle_time=NO_THROTTLE, error_code=code_v0 if version == 0 else code,
                     error_message=message, endpoint_type=ENDPOINT_BROKER, cluster_id="", controller_id=-1,
                     brokers=(), cluster_authorized_operations=OPERATIONS_NOT_REQUESTED)
    if endpoint not in (ENDPOINT_BROKER, ENDPOINT_CONTROLLER):
        return failed(ErrorCode.invalid_request, ErrorCode.unsupported_endpoint_type,
                      f"Unsupported endpoint type {endpoint}")
    if endpoint != ENDPOINT_BROKER:
        return failed(ErrorCode.invalid_request, ErrorCode.mismatched_endpoint_type,
                      "The request was sent to an endpoint of type BROKER, but we wanted an endpoint "
                      "of type CONTROLLER")
    broker = build(module.DescribeClusterBroker, broker_id=state.node_id, host=state.advertised.host,
                   port=state.advertised.port, rack=None, is_fenced=False)
    operations = (CLUSTER_AUTHORIZED_OPERATIONS if body.include_cluster_authorized_operations
                  else OPERATIONS_NOT_REQUESTED)
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
                 endpoint_type=ENDPOINT_BROKER, cluster_id=state.cluster_id, controller_id=state.node_id,
                 brokers=(broker,), cluster_authorized_operations=operations)


def handle_describe_log_dirs(state: BrokerState, request):
    """DescribeLogDirs (35): ReplicaManager.describeLogDirs for the broker's one log dir: every
    partition asked for (all when ``topics`` is null) with its size; offset lag 0 (no future
    replica); total and usable bytes of the file system (v4)."""
    body = request.body
    cls, module = _response_types(request)
    dd = state.datadir
    if body.topics is None:
        wanted = {t: None for t in dd.topics()}
    else:
        wanted = {t.topic: set(t.partitions) for t in body.topics}
    topics = []
    for name, parts in wanted.items():
        if not dd.has_topic(name):
            continue
        rows = []
        for p in dd.partitions(name):
            if parts is not None and p not in parts:
                continue
            log = state.log(name, p)
            if log is None:
                continue
            rows.append(build(module.DescribeLogDirsPartition, partition_index=p, partition_size=log.size(),
                              offset_lag=0, is_future_key=False))
        if rows:
            topics.append(build(module.DescribeLogDirsTopic, name=name, partitions=tuple(rows)))
    st = os.statvfs(dd.path)
    result = build(module.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=dd.path,
                   topics=tuple(topics), total_bytes=st.f_blocks * st.f_frsize,
                   usable_bytes=st.f_bavail * st.f_frsize)
    return build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, results=(result,))


HANDLERS = {
    19: handle_create_topics,
    35: handle_describe_log_dirs,
    20: handle_delete_topics,
    21: handle_delete_records,
    32: handle_describe_configs,
    33: handle_alter_configs,
    37: handle_create_partitions,
    44: handle_incremental_alter_configs,
    60: handle_describe_cluster,
}
"""API key -> handler, for the broker's dispatch table."""


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
    "compactlog.spark.master": "Spark master for large cleaning rounds.",
    "compactlog.spark.local.dir": "Spark's scratch directory.",
    "compactlog.cleaner.task.memory.bytes": "Memory a cleaning task may use for its offset map.",
    "compactlog.cleaner.map": "Where the offset map is built: in one task, distributed, or chosen by size.",
}


def _broker_doc(name: str) -> str | None:
    if name in BROKER_DOCS:
        return BROKER_DOCS[name]
    d = _TOPIC_BY_BROKER_NAME.get(name)
    if d is not None:
        return f"Default of the topic config {d.name} for topics that do not set it."
    return None
