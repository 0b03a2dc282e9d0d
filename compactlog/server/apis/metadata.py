"""Metadata (API key 3): Kafka's ``KafkaApis.handleTopicMetadataRequest`` on one node, which leads
every partition, and ``AutoTopicCreationManager`` (an unknown topic is created at once when
``auto.create.topics.enable`` and the request allow it, and listed in the same answer: kcat -P
relies on it)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError, TopicError
from ...storage import files
from ..messages import CLUSTER_OPERATIONS, NO_THROTTLE, OPERATIONS_NOT_REQUESTED, build, nested, response_class
from ..state import INTERNAL_TOPICS, BrokerState
from .handler import THREAD, ApiHandler

# Kafka's AclOperation codes: without an authorizer every operation of the resource is allowed
_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))     # READ .. ALTER_CONFIGS


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
    if requested is None:
        for name in state.topics():
            results.append(_topic_metadata(state, cls, name, want_ops, ids))
    else:
        by_id = None
        for t in requested:
            name = t.name
            if name is None:
                tid = getattr(t, "topic_id", None)
                if by_id is None:
                    by_id = {state.topic_id(n, ids): n for n in state.topics()}
                name = by_id.get(tid)
                if name is None:
                    results.append(build(topic_cls, error_code=ErrorCode.unknown_topic_id, name=None,
                                         topic_id=tid, partitions=(),
                                         topic_authorized_operations=OPERATIONS_NOT_REQUESTED))
                    continue
            results.append(_requested_topic(state, cls, name, allow_auto, want_ops, ids))

    brokers = (build(broker_cls, node_id=state.node_id, host=state.advertised.host,
                     port=state.advertised.port, rack=None),)
    cluster_ops = CLUSTER_OPERATIONS if getattr(body, "include_cluster_authorized_operations", False) \
        else OPERATIONS_NOT_REQUESTED
    return build(cls, throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=state.cluster_id,
                 controller_id=state.node_id, topics=tuple(results),
                 cluster_authorized_operations=cluster_ops, error_code=ErrorCode.none)


def _requested_topic(state: BrokerState, cls, name: str, allow_auto: bool, want_ops: bool,
                     ids: dict):
    topic_cls = nested(cls, "MetadataResponseTopic")

    def failed(code: ErrorCode):
        return build(topic_cls, error_code=code, name=name, topic_id=None,
                     is_internal=name in INTERNAL_TOPICS, partitions=(),
                     topic_authorized_operations=OPERATIONS_NOT_REQUESTED)

    if state.has_topic(name):
        return _topic_metadata(state, cls, name, want_ops, ids)
    try:
        files.validate_topic_name(name)
    except ValueError:
        return failed(ErrorCode.invalid_topic_exception)
    if not allow_auto or name in INTERNAL_TOPICS:
        return failed(ErrorCode.unknown_topic_or_partition)
    try:
        # AutoTopicCreationManager: created here and listed at once (kcat -P relies on it)
        state.create_topic(name)
        state.logger.info(f"Auto-created topic {name} with {len(state.partitions(name))} "
                          f"partition(s) (auto.create.topics.enable=true)")
    except TopicError as e:
        if state.has_topic(name):           # another request created it meanwhile
            return _topic_metadata(state, cls, name, want_ops)
        state.logger.warning(f"Auto-creation of topic {name} failed: {e}")
        return failed(e.kafka_error)
    except CompactlogError as e:
        state.logger.warning(f"Auto-creation of topic {name} failed: {e}")
        return failed(e.kafka_error)
    return _topic_metadata(state, cls, name, want_ops)


def _topic_metadata(state: BrokerState, cls, name: str, want_ops: bool, ids: dict | None = None):
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
                 topic_authorized_operations=_TOPIC_OPERATIONS if want_ops else OPERATIONS_NOT_REQUESTED)


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
