"""ListOffsets (API key 2): Kafka's ``KafkaApis.handleListOffsetRequest`` and
``Partition.fetchOffsetForTimestamp`` (storage: ``Log.fetch_offset_for_timestamp``). A topic the
principal may not DESCRIBE is answered TOPIC_AUTHORIZATION_FAILED for each of its partitions."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, READ_COMMITTED, build, nested, response_class
from ..state import BrokerState
from ...errors import CompactlogError
from ..wire_errors import partition_error
from .handler import THREAD, ApiHandler

# ListOffsetsRequest's special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


def handle_list_offsets(state: BrokerState, request):
    body = request.body
    version = request.api_version
    cls = response_class(request)
    topic_cls = nested(cls, "ListOffsetsTopicResponse")
    part_cls = nested(cls, "ListOffsetsPartitionResponse")
    isolation = getattr(body, "isolation_level", 0)
    if isolation not in (0, READ_COMMITTED):
        # IsolationLevel.forId throws IllegalArgumentException: getErrorResponse's UNKNOWN_SERVER_ERROR
        return list_offsets_error(body, cls, ErrorCode.unknown_server_error, None)
    committed = isolation == READ_COMMITTED
    seen = set()
    duplicates = set()
    for t in body.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            (duplicates if key in seen else seen).add(key)
    denied = auth_helper.denied(state, request, auth_helper.DESCRIBE, auth_helper.TOPIC, (t.name for t in body.topics))
    topics = []
    for t in body.topics:
        parts = []
        for p in t.partitions:
            if t.name in denied:
                code, ts, off, epoch = ErrorCode.topic_authorization_failed, -1, -1, -1
            elif (t.name, p.partition_index) in duplicates:
                code, ts, off, epoch = ErrorCode.invalid_request, -1, -1, -1
            else:
                try:
                    code, ts, off, epoch = _list_offset(state, version, t.name, p, committed)
                except (CompactlogError, OSError) as e:
                    state.logger.error(f"ListOffsets of {t.name}-{p.partition_index} failed: {e}")
                    code, ts, off, epoch = partition_error(e, state.datadir.path)[0], -1, -1, -1
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
            or (target == LATEST_TIERED_TIMESTAMP and version < 9) or target < LATEST_TIERED_TIMESTAMP:
        return ErrorCode.unsupported_version, -1, -1, -1
    tiered = log.remote_log_enabled
    if target == EARLIEST_LOCAL_TIMESTAMP:
        # UnifiedLog.fetchOffsetByTimestamp: the local log start and its epoch (equal to the log
        # start on a log that is not tiered)
        offset = log.local_log_start_offset
        return ErrorCode.none, -1, offset, _epoch_of(log, offset)
    if target == LATEST_TIERED_TIMESTAMP:
        # KIP-1005: the highest offset in the remote tier and its epoch; -1 when nothing is
        # tiered (or the topic is not)
        hro = log.highest_remote_offset if tiered else -1
        return ErrorCode.none, -1, hro, _epoch_of(log, hro) if hro >= 0 else -1
    if target >= 0 and tiered and state.remote is not None:
        # RemoteLogManager.findOffsetByTimestamp first: the remote segments below the local log start
        found = state.remote.find_offset_by_timestamp(log, target)
        if found is not None:
            return ErrorCode.none, found[1], found[0], _epoch_of(log, found[0])
    found = log.fetch_offset_for_timestamp(target, read_committed=committed)
    if found is None:
        return ErrorCode.none, -1, -1, -1
    return ErrorCode.none, found[1], found[0], leader_epoch


def _epoch_of(log, offset: int) -> int:
    """The leader epoch of ``offset`` (LeaderEpochFileCache.epochForOffset), the log's own when
    the cache has no entry at or below it."""
    epoch = None
    for e, start in log.leader_epochs.entries:
        if start <= offset:
            epoch = e
    return log.leader_epoch if epoch is None else epoch


def list_offsets_error(body, cls, code, message):
    t_cls = nested(cls, "ListOffsetsTopicResponse")
    p_cls = nested(cls, "ListOffsetsPartitionResponse")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=p.partition_index, error_code=code, timestamp=-1, offset=-1,
                  leader_epoch=-1, old_style_offsets=()) for p in t.partitions))
        for t in body.topics))


LIST_OFFSETS = ApiHandler(2, "ListOffsets", 1, 9, mode=THREAD, handler=handle_list_offsets,
                          error_response=list_offsets_error)
