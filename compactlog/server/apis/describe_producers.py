"""DescribeProducers (API key 61, KIP-664): Kafka's ``KafkaApis.handleDescribeProducersRequest``,
``ReplicaManager.activeProducerState`` and ``Partition.activeProducerState``.

Per requested partition the producers with state in it (``Log.active_producers``: id, epoch, last
sequence and timestamp, coordinator epoch, first offset of the open transaction or -1), which is
what ``kafka-transactions.sh find-hanging`` reads and where an admin abort takes its coordinator
epoch from. An illegal topic name answers Kafka's INVALID_TOPIC_EXCEPTION with its message for
each of its partitions, an unknown topic UNKNOWN_TOPIC_OR_PARTITION with Kafka's default message,
an unknown partition of a known topic UNKNOWN_TOPIC_OR_PARTITION without one (there is no other
replica it could be on). Nothing is created: internal topics are described like any other. A
valid name the principal may not READ is answered TOPIC_AUTHORIZATION_FAILED, before anything says
whether the topic exists.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, nested, response_class
from ..state import BrokerState
from .handler import THREAD, ApiHandler
from .topic_validation import topic_name_error

UNKNOWN_TOPIC_MESSAGE = "This server does not host this topic-partition."


def handle_describe_producers(state: BrokerState, request):
    body = request.body
    cls = response_class(request)
    t_cls, p_cls, s_cls = (nested(cls, n) for n in ("TopicResponse", "PartitionResponse", "ProducerState"))
    denied = auth_helper.denied(state, request, auth_helper.READ, auth_helper.TOPIC,
                                (t.name for t in body.topics if topic_name_error(t.name) is None))
    topics = []
    for t in body.topics:
        invalid = topic_name_error(t.name)
        if invalid is not None:
            error = (ErrorCode.invalid_topic_exception, invalid)
        elif t.name in denied:
            error = (ErrorCode.topic_authorization_failed, auth_helper.DENIED_MESSAGE[ErrorCode.topic_authorization_failed])
        elif not state.has_topic(t.name):
            error = (ErrorCode.unknown_topic_or_partition, UNKNOWN_TOPIC_MESSAGE)
        else:
            error = None
        parts = []
        for index in t.partition_indexes:
            if error is not None:
                parts.append(build(p_cls, partition_index=index, error_code=error[0], error_message=error[1],
                                   active_producers=()))
                continue
            log = state.log(t.name, index)
            if log is None:
                parts.append(build(p_cls, partition_index=index, error_code=ErrorCode.unknown_topic_or_partition,
                                   error_message=None, active_producers=()))
                continue
            producers = tuple(build(s_cls, producer_id=p.producer_id, producer_epoch=p.producer_epoch,
                                    last_sequence=p.last_sequence, last_timestamp=p.last_timestamp,
                                    coordinator_epoch=p.coordinator_epoch,
                                    current_txn_start_offset=p.current_txn_start_offset)
                              for p in sorted(log.active_producers()))
            parts.append(build(p_cls, partition_index=index, error_code=ErrorCode.none, error_message=None,
                               active_producers=producers))
        topics.append(build(t_cls, name=t.name, partitions=tuple(parts)))
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(topics))


def describe_producers_error(body, cls, code, message):
    t_cls, p_cls = nested(cls, "TopicResponse"), nested(cls, "PartitionResponse")
    return build(cls, throttle_time=NO_THROTTLE, topics=tuple(
        build(t_cls, name=t.name, partitions=tuple(
            build(p_cls, partition_index=i, error_code=code, error_message=message, active_producers=())
            for i in t.partition_indexes)) for t in body.topics))


# reads producer state under the partition's lock, which an append may hold: a worker thread
DESCRIBE_PRODUCERS = ApiHandler(61, "DescribeProducers", 0, 0, mode=THREAD, handler=handle_describe_producers,
                                error_response=describe_producers_error)
