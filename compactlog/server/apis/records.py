"""DeleteRecords (API key 21): Kafka's ``KafkaApis.handleDeleteRecordsRequest``,
``ReplicaManager.deleteRecordsOnLocalLog``, ``Partition.deleteRecordsOnLeader`` and
``UnifiedLog.maybeIncrementLogStartOffset`` (storage: ``Log.delete_records_before``, through
``DataDir.delete_records``). A topic the principal may not DELETE is answered
TOPIC_AUTHORIZATION_FAILED for each of its partitions, before anything says whether it exists."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError, OffsetOutOfRangeError, TopicError
from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, nested, response_types
from ..state import INTERNAL_TOPICS, BrokerState
from .handler import THREAD, ApiHandler


def handle_delete_records(state: BrokerState, request):
    """DeleteRecords (21): KafkaApis.handleDeleteRecordsRequest, ReplicaManager.deleteRecordsOnLocalLog,
    Partition.deleteRecordsOnLeader."""
    body = request.body
    cls, module = response_types(request)
    requested: dict[tuple[str, int], int] = {}      # a partition named twice: the last one counts
    for topic in body.topics:
        for p in topic.partitions:
            requested[(topic.name, p.partition_index)] = p.offset
    denied = auth_helper.denied(state, request, auth_helper.DELETE, auth_helper.TOPIC, (t.name for t in body.topics))
    by_topic: dict[str, list] = {}
    for (name, partition), offset in requested.items():
        if name in denied:
            code, low = ErrorCode.topic_authorization_failed, -1
        else:
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


def delete_records_error(body, cls, code, message):
    t_cls = nested(cls, "DeleteRecordsTopicResult")
    p_cls = nested(cls, "DeleteRecordsPartitionResult")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=p.partition_index, low_watermark=-1, error_code=code)
            for p in t.partitions)) for t in body.topics))


DELETE_RECORDS = ApiHandler(21, "DeleteRecords", 0, 2, mode=THREAD, handler=handle_delete_records,
                            error_response=delete_records_error)
