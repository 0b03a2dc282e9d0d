"""Metadata (API key 3): Kafka's ``KafkaApis.handleTopicMetadataRequest`` on one node, which leads
every partition, and ``AutoTopicCreationManager`` (an unknown topic is created at once when
``auto.create.topics.enable`` and the request allow it, and listed in the same answer: kcat -P
relies on it).

With an authorizer (security.md §7.4): a topic the principal may not DESCRIBE is left out of an
all-topics answer, and a named one is answered TOPIC_AUTHORIZATION_FAILED with a zero topic id and
no partitions, before anything says whether it exists; a missing topic is auto-created only with
CREATE on the cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED); the authorized-operations
bitfields list what the principal may do.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError, TopicError
from ...storage import files
from ..authorizer import auth_helper
from ..messages import (CLUSTER_OPERATIONS, NO_THROTTLE, OPERATIONS_NOT_REQUESTED, ZERO_UUID, build, nested,
                        response_class)
from ..state import INTERNAL_TOPICS, BrokerState
from .handler import THREAD, ApiHandler
from .topic_validation import colliding_topic


def handle_metadata(state: BrokerState, request):
    body = request.body
    version = request.api_version
    cls = response_class(request)
    topic_cls = nested(cls, "MetadataResponseTopic")
    broker_cls = nested(cls, "MetadataResponseBroker")
    allow_auto = getattr(body, "allow_auto_topic_creation", True) and \
        state.broker.get("auto.create.topics.enable")
    want_ops = getattr(body, "include_topic_authorized_operations", False)

    requested = body.topics
    if version == 0 and not requested:
        requested = None            # v0: an empty list means every topic
    results = []
    ids = state.topic_ids()
    ops = (lambda name: auth_helper.authorized_operations(state, request, auth_helper.TOPIC, name)) \
        if want_ops else None
    if requested is None:
        names = state.topics()
        hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC, names,
                                    log_if_denied=False)
        for name in names:
            if name not in hidden:
                results.append(_topic_metadata(state, cls, name, ops, ids))
    else:
        by_id = None
        resolved = []           # (name, topic id asked for or None)
        unknown_ids = set()     # a set in KafkaApis too: an unknown id named twice is answered once
        for t in requested:
            name = t.name
            tid = None
            if name is None:
                tid = getattr(t, "topic_id", None)
                if by_id is None:
                    by_id = {state.topic_id(n, ids): n for n in state.topics()}
                name = by_id.get(tid)
                if name is None:
                    if tid not in unknown_ids:
                        unknown_ids.add(tid)
                        results.append(build(topic_cls, error_code=ErrorCode.unknown_topic_id, name=None,
                                             topic_id=tid, partitions=(),
                                             topic_authorized_operations=OPERATIONS_NOT_REQUESTED))
                    continue
            resolved.append((name, tid))
        # the names (or ids) asked for are a set in KafkaApis: one answer each
        resolved = list(dict.fromkeys(resolved))
        hidden = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC,
                                    {name for name, _ in resolved})
        for name, tid in resolved:
            if name in hidden:
                # nothing about the topic, not even whether it exists; an id is no secret
                results.append(build(topic_cls, error_code=ErrorCode.topic_authorization_failed,
                                     name=None if tid is not None else name,
                                     topic_id=tid if tid is not None else ZERO_UUID, is_internal=False,
                                     partitions=(), topic_authorized_operations=OPERATIONS_NOT_REQUESTED))
            else:
                results.append(_requested_topic(state, request, cls, name, allow_auto, ops, ids))

    me = state.advertised_for(request)
    brokers = (build(broker_cls, node_id=state.node_id, host=me.host, port=me.port, rack=None),)
    cluster_ops = CLUSTER_OPERATIONS if getattr(body, "include_cluster_authorized_operations", False) \
        else OPERATIONS_NOT_REQUESTED
    if cluster_ops != OPERATIONS_NOT_REQUESTED:     # asked for: what the principal may do (0 without DESCRIBE)
        cluster_ops = auth_helper.cluster_operations(state, request)
    return build(cls, throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=state.cluster_id,
                 controller_id=state.node_id, topics=tuple(results),
                 cluster_authorized_operations=cluster_ops, error_code=ErrorCode.none)


def _requested_topic(state: BrokerState, request, cls, name: str, allow_auto: bool, ops, ids: dict):
    topic_cls = nested(cls, "MetadataResponseTopic")

    def failed(code: ErrorCode):
        return build(topic_cls, error_code=code, name=name, topic_id=None,
                     is_internal=name in INTERNAL_TOPICS, partitions=(),
                     topic_authorized_operations=OPERATIONS_NOT_REQUESTED)

    if state.has_topic(name):
        return _topic_metadata(state, cls, name, ops, ids)
    try:
        files.validate_topic_name(name)
    except ValueError:
        return failed(ErrorCode.invalid_topic_exception)
    if not allow_auto or name in INTERNAL_TOPICS:
        return failed(ErrorCode.unknown_topic_or_partition)
    if not (auth_helper.authorize_cluster(state, request, auth_helper.CREATE, log_if_denied=False)
            or auth_helper.authorize(state, request, auth_helper.CREATE, auth_helper.TOPIC, name)):
        return failed(ErrorCode.topic_authorization_failed)
    try:
        # AutoTopicCreationManager: created here and listed at once (kcat -P relies on it), through
        # the checks of a topic creation: one whose name collides with a topic's once '.' and '_'
        # are unified is refused (checked and created under the lock CreateTopics holds for it)
        with state.metadata_lock:
            other = colliding_topic(name, state.datadir.topics())
            if other is None:
                state.create_topic(name)
        if other is not None:
            state.logger.warning(f"Auto-creation of topic {name} failed: Topic '{name}' collides with "
                                 f"existing topic: {other}")
            return failed(ErrorCode.invalid_topic_exception)
        state.logger.info(f"Auto-created topic {name} with {len(state.partitions(name))} "
                          f"partition(s) (auto.create.topics.enable=true)")
    except TopicError as e:
        if state.has_topic(name):           # another request created it meanwhile
            return _topic_metadata(state, cls, name, ops)
        state.logger.warning(f"Auto-creation of topic {name} failed: {e}")
        return failed(e.kafka_error)
    except CompactlogError as e:
        state.logger.warning(f"Auto-creation of topic {name} failed: {e}")
        return failed(e.kafka_error)
    return _topic_metadata(state, cls, name, ops)


def _topic_metadata(state: BrokerState, cls, name: str, ops, ids: dict | None = None):
    """A topic's entry; ``ops(name)`` its authorized-operations bitfield, None when not asked for."""
    topic_cls = nested(cls, "MetadataResponseTopic")
    part_cls = nested(cls, "MetadataResponsePartition")
    me = (state.node_id,)
    partitions = []
    # from the partition map and the logs already open: a Metadata request opens no log (after a
    # clean shutdown logs are opened on first use; one node's leader epoch stays 0 until opened)
    open_logs = state.datadir.logs
    for p in state.partitions(name):
        log = open_logs.get((name, p))
        partitions.append(build(part_cls, error_code=ErrorCode.none, partition_index=p,
                                leader_id=state.node_id,
                                leader_epoch=log.leader_epoch if log is not None else 0,
                                replica_nodes=me, isr_nodes=me, offline_replicas=()))
    return build(topic_cls, error_code=ErrorCode.none, name=name, topic_id=state.topic_id(name, ids),
                 is_internal=name in INTERNAL_TOPICS, partitions=tuple(partitions),
                 topic_authorized_operations=ops(name) if ops is not None else OPERATIONS_NOT_REQUESTED)


def metadata_error(body, cls, code, message):
    t_cls = nested(cls, "MetadataResponseTopic")
    topics = tuple(build(t_cls, error_code=code, name=t.name, topic_id=getattr(t, "topic_id", None),
                         partitions=(), topic_authorized_operations=OPERATIONS_NOT_REQUESTED)
                   for t in (body.topics or ()))
    return build(cls, throttle_time=NO_THROTTLE, brokers=(), cluster_id=None, controller_id=-1,
                 topics=topics, cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
                 error_code=code)


# a worker thread: auto-creation writes to the data dir
METADATA = ApiHandler(3, "Metadata", 0, 12, mode=THREAD, handler=handle_metadata,
                      error_response=metadata_error)
