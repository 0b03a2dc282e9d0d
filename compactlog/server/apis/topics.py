"""The topic APIs: CreateTopics (19), DeleteTopics (20) and CreatePartitions (37).

On one node the broker is also the controller, so each handler does what Kafka splits between the
broker that receives the request and the KRaft controller it forwards it to:

* ``ControllerApis`` (createTopics, deleteTopics, createPartitions): a topic named twice in one
  request, the ``__cluster_metadata`` topic.
* ``ReplicationControlManager`` (createTopics, createTopic, validateNewTopicNames,
  createPartitions, validateManualPartitionAssignment): the order of the checks, the error codes
  and their messages; ``QuorumController``'s limit of 10000 records per operation
  (POLICY_VIOLATION for a larger request). Names and configs are checked as
  ``topic_validation.py`` says.
* ``KafkaConfigSchema.resolveEffectiveTopicConfigs``: the configs a CreateTopics v5+ answer echoes.

Authorization (security.md §7.4; ``ControllerApis``): CreateTopics needs CREATE on the cluster or
on the topic ("Authorization failed."), and returns a new topic's configs only with DESCRIBE_CONFIGS
on it; DeleteTopics needs DELETE on the cluster or on the topic, and DESCRIBE on it before saying
whether it exists; CreatePartitions needs ALTER on the topic.

Where compactlog differs, on purpose: two topics of one CreateTopics request whose names collide
in '.'/'_' are refused (the second one), as they would be in two requests; Kafka checks only
against existing topics.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError, ConfigError
from ...storage.checkpoint import decode_topic_id
from ...storage.config import BROKER_CONFIGS, TOPIC_CONFIGS, ConfigDef, LogConfig, kafka_string
from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, nested, response_types
from ..state import BrokerState
from ..wire_errors import admin_error
from ...storage.config_entries import SOURCE_DEFAULT, SOURCE_STATIC_BROKER, SOURCE_TOPIC, UNIT_SETTINGS
from .handler import THREAD, ApiHandler, Refused
from .topic_validation import colliding_topic, topic_name_error, validate_topic_configs

CLUSTER_METADATA_TOPIC = "__cluster_metadata"
MAX_RECORDS_PER_USER_OP = 10000      # QuorumController.MAX_RECORDS_PER_USER_OP
TOO_LARGE = "Unable to perform excessively large batch operation."
TOPIC_DENIED = auth_helper.DENIED_MESSAGE[ErrorCode.topic_authorization_failed]


def _topic_uuid(topic_id: str | None) -> uuid.UUID | None:
    return uuid.UUID(bytes=decode_topic_id(topic_id)) if topic_id else None


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
                value = kafka_string(d.kind, plan.cfg.get(name)) if static in UNIT_SETTINGS else props[static]
                source = SOURCE_STATIC_BROKER
            else:
                value, source = kafka_string(d.kind, d.default), SOURCE_DEFAULT
        out.append(build(module.CreatableTopicConfigs, name=name, value=value, read_only=False,
                         config_source=source, is_sensitive=False))
    return tuple(out)


def handle_create_topics(state: BrokerState, request):
    """CreateTopics (19): ControllerApis.createTopics, then ReplicationControlManager.createTopics."""
    body = request.body
    cls, module = response_types(request)
    result_cls = module.CreatableTopicResult
    v5 = request.response_version >= 5

    def failed(name, code, message):
        return build(result_cls, name=name, topic_id=None, error_code=code, error_message=message,
                     num_partitions=-1, replication_factor=-1, configs=())

    counts: dict[str, int] = {}
    for topic in body.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    creatable = {n for n, c in counts.items() if c == 1 and n != CLUSTER_METADATA_TOPIC}
    not_creatable = frozenset() if auth_helper.authorize_cluster(
        state, request, auth_helper.CREATE, log_if_denied=False) else auth_helper.denied(
        state, request, auth_helper.CREATE, auth_helper.TOPIC, creatable)
    configs_hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE_CONFIGS, auth_helper.TOPIC, creatable,
                                        log_if_denied=False)
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
            elif name in not_creatable:
                results[name] = failed(name, ErrorCode.topic_authorization_failed, "Authorization failed.")
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
                       topics=tuple(failed(n, ErrorCode.policy_violation, TOO_LARGE) for n in results))
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
                    results[plan.name] = failed(plan.name, *admin_error(e, state.datadir.path))
                    continue
            if plan.name in configs_hidden:
                # ReplicationControlManager: no configs for a principal without DESCRIBE_CONFIGS
                results[plan.name] = build(
                    result_cls, name=plan.name, topic_id=topic_id, error_code=ErrorCode.none, error_message=None,
                    topic_config_error_code=ErrorCode.topic_authorization_failed, num_partitions=-1,
                    replication_factor=-1, configs=())
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
    cls, module = response_types(request)
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
        via_id: dict[str, uuid.UUID] = {}        # names the request gave as topic ids
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
                via_id[name] = topic_id
            seen[name] = seen.get(name, 0) + 1
            if seen[name] == 1:
                names.append(name)
        asked = [n for n in names if seen[n] == 1]
        if auth_helper.authorize_cluster(state, request, auth_helper.DELETE, log_if_denied=False):
            hidden = not_deletable = frozenset()
        else:
            hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC, asked)
            not_deletable = auth_helper.denied(state, request, auth_helper.DELETE, auth_helper.TOPIC, asked)
        for name in names:
            if seen[name] > 1:
                responses.append(result(name, ErrorCode.invalid_request, "Duplicate topic name."))
                continue
            if name in via_id:
                if name in not_deletable:
                    # a topic id is no secret, its name is (without DESCRIBE)
                    responses.append(result(None if name in hidden else name, ErrorCode.topic_authorization_failed,
                                            TOPIC_DENIED, via_id[name]))
                    continue
            elif name in hidden:
                responses.append(result(name, ErrorCode.topic_authorization_failed, TOPIC_DENIED))
                continue
            if not state.datadir.has_topic(name):
                responses.append(result(name, ErrorCode.unknown_topic_or_partition,
                                        "This server does not host this topic-partition."))
                continue
            if name in not_deletable:
                responses.append(result(name, ErrorCode.topic_authorization_failed, TOPIC_DENIED))
                continue
            topic_id = _topic_uuid(state.datadir.topic_id(name))
            partitions = state.datadir.partitions(name)
            try:
                state.datadir.delete_topic(name)
            except (CompactlogError, OSError) as e:
                if state.datadir.has_topic(name):
                    state.logger.error(f"DeleteTopics: deleting {name} failed: {e}")
                    responses.append(result(name, *admin_error(e, state.datadir.path), topic_id))
                    continue
                # the deletion's record is in place and only its cleanup failed (the next start
                # finishes it): the topic is deleted, as Kafka's controller answers once its
                # RemoveTopicRecord is committed, whatever the log dirs' removal does later
                state.logger.error(f"DeleteTopics: {name} deleted, its cleanup failed: {e}")
            state.appends.notify([(name, p) for p in partitions])     # long polls answer at once
            deleted += [(name, p) for p in partitions]
            responses.append(result(name, ErrorCode.none, None, topic_id))
    if deleted:
        state.topics_changed(sorted({t for t, _ in deleted}))
    if deleted and state.groups is not None:
        # every group's offsets of the deleted partitions become tombstones (outside the metadata
        # lock: the coordinator takes its own lock first, then the metadata lock to open a log)
        state.groups.on_partitions_deleted(deleted)
    return cls(throttle_time=NO_THROTTLE, responses=tuple(responses))


def handle_create_partitions(state: BrokerState, request):
    """CreatePartitions (37): ControllerApis.createPartitions, ReplicationControlManager.createPartitions."""
    body = request.body
    cls, module = response_types(request)
    result_cls = module.CreatePartitionsTopicResult

    def result(name, code, message=None):
        return result_cls(name=name, error_code=code, error_message=message)

    counts: dict[str, int] = {}
    for topic in body.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    not_alterable = auth_helper.denied(state, request, auth_helper.ALTER, auth_helper.TOPIC,
                                       [n for n, c in counts.items() if c == 1])
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
            if name in not_alterable:
                results[name] = result(name, ErrorCode.topic_authorization_failed,
                                       "The topic authorization is failed.")
                continue
            try:
                results[name] = _plan_partitions(state, topic)
                growth.append((name, topic.count))
            except Refused as r:
                results[name] = result(name, r.code, r.message)
        added = sum(count - max(state.datadir.partitions(name)) - 1 for name, count in growth)
        if added > MAX_RECORDS_PER_USER_OP:
            return cls(throttle_time=NO_THROTTLE,
                       results=tuple(result(n, ErrorCode.policy_violation, TOO_LARGE) for n in results))
        for name, count in growth:
            if not body.validate_only:
                try:
                    for p in state.datadir.add_partitions(name, count):
                        state.datadir.open_log(name, p)
                except (CompactlogError, OSError) as e:
                    state.logger.error(f"CreatePartitions: adding partitions to {name} failed: {e}")
                    results[name] = result(name, *admin_error(e, state.datadir.path))
                    continue
            results[name] = result(name, ErrorCode.none)
    grown = [name for name, _ in growth if not body.validate_only and results[name].error_code == ErrorCode.none]
    if grown:
        state.topics_changed(grown)
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


# -- error responses and declarations -------------------------------------------------------------

def create_topics_error(body, cls, code, message):
    r = nested(cls, "CreatableTopicResult")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(r, name=t.name, topic_id=None, error_code=code, error_message=message, configs=None,
              num_partitions=-1, replication_factor=-1) for t in body.topics))


def delete_topics_error(body, cls, code, message):
    r = nested(cls, "DeletableTopicResult")
    names = list(getattr(body, "topic_names", ()) or ()) or [t.name for t in getattr(body, "topics", ())]
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(
        build(r, name=n, error_code=code, error_message=message) for n in names))


def create_partitions_error(body, cls, code, message):
    r = nested(cls, "CreatePartitionsTopicResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r, name=t.name, error_code=code, error_message=message) for t in body.topics))


CREATE_TOPICS = ApiHandler(19, "CreateTopics", 2, 7, mode=THREAD, handler=handle_create_topics,
                           error_response=create_topics_error)
DELETE_TOPICS = ApiHandler(20, "DeleteTopics", 1, 5, mode=THREAD, handler=handle_delete_topics,
                           error_response=delete_topics_error)
CREATE_PARTITIONS = ApiHandler(37, "CreatePartitions", 0, 3, mode=THREAD, handler=handle_create_partitions,
                               error_response=create_partitions_error)
