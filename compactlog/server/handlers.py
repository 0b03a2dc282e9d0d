"""Request dispatch and the small data-plane APIs: ApiVersions, Metadata, ListOffsets, InitProducerId
(FindCoordinator and the group APIs live in ``groups/handlers.py``).

Kafka's ``KafkaApis.handle`` routes each request to ``handle<Api>Request``; here ``dispatch_table``
maps API keys to handler functions ``handle_<api>(state, request) -> response body`` and says where
each runs: on the event loop (``inline``, no I/O), in a worker thread (``thread``: storage calls
block on fsync and pread) or as a coroutine (``async``: Fetch, which long-polls). Produce lives in
``produce.py``, Fetch in ``fetch.py``, the admin APIs in ``admin.py``.

``error_response`` is Kafka's ``AbstractRequest.getErrorResponse``: the answer to a request whose
handler failed, with the error code in every place the response has one. ``advertised_apis`` is
the ApiVersions table restricted to the APIs that have a handler, so a client is never offered an
API this broker cannot answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kio.schema.errors import ErrorCode

from ..errors import CompactlogError, TopicError
from ..storage import files
from .groups.handlers import ERROR_RESPONSES as GROUP_ERROR_RESPONSES
from .groups.handlers import GROUP_HANDLERS
from .messages import (CLUSTER_OPERATIONS, NO_THROTTLE, OPERATIONS_NOT_REQUESTED, build, error_code,
                       nested, response_class)
from .state import INTERNAL_TOPICS, BrokerState
from .versions import BROKER_APIS, GROUP_APIS, SupportedApis

INLINE = "inline"
THREAD = "thread"
ASYNC = "async"

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5
READ_COMMITTED = 1

# Kafka's AclOperation codes: without an authorizer every operation of the resource is allowed
_TOPIC_OPERATIONS = sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))     # READ .. ALTER_CONFIGS


@dataclass(frozen=True)
class Api:
    key: int
    handler: Callable
    mode: str


def dispatch_table() -> dict[int, Api]:
    from .admin import HANDLERS as ADMIN_HANDLERS
    from .fetch import handle_fetch
    from .produce import handle_produce
    table = {
        0: Api(0, handle_produce, THREAD),
        1: Api(1, handle_fetch, ASYNC),
        2: Api(2, handle_list_offsets, THREAD),
        3: Api(3, handle_metadata, THREAD),
        18: Api(18, handle_api_versions, INLINE),
        22: Api(22, handle_init_producer_id, THREAD),
    }
    for key, fn in ADMIN_HANDLERS.items():
        table[key] = Api(key, fn, THREAD)
    # the group APIs and FindCoordinator (groups/handlers.py)
    for key, (fn, mode) in GROUP_HANDLERS.items():
        table[key] = Api(key, fn, mode)
    return table


def advertised_apis(table: dict[int, Api]) -> SupportedApis:
    return SupportedApis(r for r in BROKER_APIS + GROUP_APIS if r.key in table)


# -- ApiVersions (18) ---------------------------------------------------------------------------

def handle_api_versions(state: BrokerState, request):
    return state.apis.api_versions_response(request.api_version, request.body)


# -- Metadata (3) -------------------------------------------------------------------------------

def handle_metadata(state: BrokerState, request):
    """KafkaApis.handleTopicMetadataRequest on one node: it leads every partition."""
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
        return failed(error_code(e.kafka_error))
    except CompactlogError as e:
        state.logger.warning(f"Auto-creation of topic {name} failed: {e}")
        return failed(error_code(e.kafka_error))
    return _topic_metadata(state, cls, name, want_ops)


def _topic_metadata(state: BrokerState, cls, name: str, want_ops: bool, ids: dict | None = None):
    topic_cls = nested(cls, "MetadataResponseTopic")
    part_cls = nested(cls, "MetadataResponsePartition")
    me = (state.node_id,)
    partitions = []
    for p in state.partitions(name):
        log = state.log(name, p)
        partitions.append(build(part_cls, error_code=ErrorCode.none, partition_index=p,
                                leader_id=state.node_id,
                                leader_epoch=log.leader_epoch if log is not None else 0,
                                replica_nodes=me, isr_nodes=me, offline_replicas=()))
    return build(topic_cls, error_code=ErrorCode.none, name=name, topic_id=state.topic_id(name, ids),
                 is_internal=name in INTERNAL_TOPICS, partitions=tuple(partitions),
                 topic_authorized_operations=_TOPIC_OPERATIONS if want_ops else OPERATIONS_NOT_REQUESTED)


# -- ListOffsets (2) ----------------------------------------------------------------------------

def handle_list_offsets(state: BrokerState, request):
    """KafkaApis.handleListOffsetRequest / Partition.fetchOffsetForTimestamp."""
    body = request.body
    version = request.api_version
    cls = response_class(request)
    topic_cls = nested(cls, "ListOffsetsTopicResponse")
    part_cls = nested(cls, "ListOffsetsPartitionResponse")
    committed = getattr(body, "isolation_level", 0) == READ_COMMITTED
    seen = set()
    duplicates = set()
    for t in body.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            (duplicates if key in seen else seen).add(key)
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if (t.name, p.partition_index) in duplicates:
                code, ts, off, epoch = ErrorCode.invalid_request, -1, -1, -1
            else:
                code, ts, off, epoch = _list_offset(state, version, t.name, p, committed)
            parts.append(build(part_cls, partition_index=p.partition_index, error_code=code,
                               timestamp=ts, offset=off, leader_epoch=epoch, old_style_offsets=()))
        topics.append(build(topic_cls, name=t.name, partitions=tuple(parts)))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


def _list_offset(state: BrokerState, version: int, topic: str, p, committed: bool):
    """(error, timestamp, offset, leader epoch) for one partition."""
    log = state.log(topic, p.partition_index)
    if log is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1, -1
    leader_epoch = log.leader_epoch
    current = getattr(p, "current_leader_epoch", -1)
    if current != -1 and current < leader_epoch:
        return ErrorCode.fenced_leader_epoch, -1, -1, -1
    if current != -1 and current > leader_epoch:
        return ErrorCode.unknown_leader_epoch, -1, -1, -1
    target = p.timestamp
    if (target == MAX_TIMESTAMP and version < 7) or (target == EARLIEST_LOCAL_TIMESTAMP and version < 8) \
            or target == LATEST_TIERED_TIMESTAMP or target < LATEST_TIERED_TIMESTAMP and version < 9:
        return ErrorCode.unsupported_version, -1, -1, -1
    found = log.fetch_offset_for_timestamp(target, read_committed=committed)
    if found is None:
        return ErrorCode.none, -1, -1, -1
    return ErrorCode.none, found[1], found[0], leader_epoch


# -- InitProducerId (22) ------------------------------------------------------------------------

def handle_init_producer_id(state: BrokerState, request):
    """TransactionCoordinator.handleInitProducerId for idempotent producers only.

    Without a transactional id Kafka always hands out a new id with epoch 0 (the supplied id and
    epoch are ignored). Transactions are not offered (wire-protocol.md §7): a transactional id is
    refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which stops the client at once instead
    of letting it retry until its timeout.
    """
    body = request.body
    cls = response_class(request)

    def answer(code: ErrorCode, pid: int = -1, epoch: int = -1):
        return build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=pid,
                     producer_epoch=epoch)

    pid_in = getattr(body, "producer_id", -1)
    epoch_in = getattr(body, "producer_epoch", -1)
    if (pid_in == -1) != (epoch_in == -1):
        return answer(ErrorCode.invalid_request)
    if body.transactional_id is not None:
        if body.transactional_id == "":
            return answer(ErrorCode.invalid_request)
        return answer(ErrorCode.transactional_id_authorization_failed)
    pid = state.producer_ids.allocate()
    return answer(ErrorCode.none, pid, 0)


# -- error responses ----------------------------------------------------------------------------

def error_response(request, code: int, message: str | None = None):
    """Kafka's getErrorResponse: ``code`` in every error field, or None when the API has none
    (the connection is then closed)."""
    fn = _ERROR_RESPONSES.get(request.api_key) or GROUP_ERROR_RESPONSES.get(request.api_key)
    if fn is None:
        return None
    cls = response_class(request)
    return fn(request.body, cls, error_code(code), message)


def _produce_error(body, cls, code, message):
    t_cls = nested(cls, "TopicProduceResponse")
    p_cls = nested(cls, "PartitionProduceResponse")
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(
        build(t_cls, name=t.name, partition_responses=tuple(
            build(p_cls, index=p.index, error_code=code, base_offset=-1, log_append_time=None,
                  log_start_offset=-1, record_errors=(), error_message=message)
            for p in t.partition_data))
        for t in body.topic_data))


def _fetch_error(body, cls, code, message):
    # a top-level error from v7; per partition before (FetchRequest.getErrorResponse)
    t_cls = nested(cls, "FetchableTopicResponse")
    p_cls = nested(cls, "PartitionData")
    topics = () if cls.__version__ >= 7 else tuple(
        build(t_cls, topic=t.topic, partitions=tuple(
            build(p_cls, partition_index=p.partition, error_code=code, high_watermark=-1,
                  last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                  records=b"") for p in t.partitions))
        for t in body.topics)
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, session_id=0, responses=topics)


def _list_offsets_error(body, cls, code, message):
    t_cls = nested(cls, "ListOffsetsTopicResponse")
    p_cls = nested(cls, "ListOffsetsPartitionResponse")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1,
                  leader_epoch=-1, old_style_offsets=()) for p in t.partitions))
        for t in body.topics))


def _metadata_error(body, cls, code, message):
    t_cls = nested(cls, "MetadataResponseTopic")
    topics = tuple(build(t_cls, error_code=code, name=t.name, topic_id=getattr(t, "topic_id", None),
                         partitions=(), topic_authorized_operations=OPERATIONS_NOT_REQUESTED)
                   for t in (body.topics or ()))
    return build(cls, throttle_time=NO_THROTTLE, brokers=(), cluster_id=None, controller_id=-1,
                 topics=topics, cluster_authorized_operations=OPERATIONS_NOT_REQUESTED,
                 error_code=code)


def _init_producer_id_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, producer_id=-1, producer_epoch=-1)


def _api_versions_error(body, cls, code, message):
    return build(cls, error_code=code, api_keys=(), throttle_time=NO_THROTTLE)


def _create_topics_error(body, cls, code, message):
    r = nested(cls, "CreatableTopicResult")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(r, name=t.name, topic_id=None, error_code=code, error_message=message, configs=None,
              num_partitions=-1, replication_factor=-1) for t in body.topics))


def _delete_topics_error(body, cls, code, message):
    r = nested(cls, "DeletableTopicResult")
    names = list(getattr(body, "topic_names", ()) or ()) or [t.name for t in getattr(body, "topics", ())]
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(
        build(r, name=n, error_code=code, error_message=message) for n in names))


def _delete_records_error(body, cls, code, message):
    t_cls = nested(cls, "DeleteRecordsTopicResult")
    p_cls = nested(cls, "DeleteRecordsPartitionResult")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=p.partition_index, low_watermark=-1, error_code=code)
            for p in t.partitions)) for t in body.topics))


def _describe_configs_error(body, cls, code, message):
    r = nested(cls, "DescribeConfigsResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r, error_code=code, error_message=message, resource_type=res.resource_type,
              resource_name=res.resource_name, configs=()) for res in body.resources))


def _alter_configs_error(body, cls, code, message):
    r = nested(cls, "AlterConfigsResourceResponse")
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(
        build(r, error_code=code, error_message=message, resource_type=res.resource_type,
              resource_name=res.resource_name) for res in body.resources))


def _create_partitions_error(body, cls, code, message):
    r = nested(cls, "CreatePartitionsTopicResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(r, name=t.name, error_code=code, error_message=message) for t in body.topics))


def _describe_cluster_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, error_message=message,
                 endpoint_type=getattr(body, "endpoint_type", 1), cluster_id="", controller_id=-1,
                 brokers=(), cluster_authorized_operations=OPERATIONS_NOT_REQUESTED)


def _describe_log_dirs_error(body, cls, code, message):
    return build(cls, throttle_time=NO_THROTTLE, error_code=code, results=())


_ERROR_RESPONSES = {35: _describe_log_dirs_error, 0: _produce_error, 1: _fetch_error, 2: _list_offsets_error, 3: _metadata_error,
                    18: _api_versions_error, 19: _create_topics_error, 20: _delete_topics_error,
                    21: _delete_records_error, 22: _init_producer_id_error,
                    32: _describe_configs_error, 33: _alter_configs_error,
                    37: _create_partitions_error, 44: _alter_configs_error,
                    60: _describe_cluster_error}
