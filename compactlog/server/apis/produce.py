"""Produce (API key 0): Kafka's ``KafkaApis.handleProduceRequest`` and ``ReplicaManager.appendRecords``.

Every partition is checked in Kafka's order (wire-protocol.md §3.2); the first failure decides the
partition's error and nothing is appended there, while the other partitions go on. The checks on
the request (known partition, exactly one v2 batch, acks, internal topic, base offset 0) are made
here on the batch header without decoding any record; ``Log.append_as_leader`` then does the rest
(size, CRC, counts, per-record checks in numba kernels, producer epoch and sequence, duplicates)
and raises an error class that carries its Kafka code. The batch is stored as received.

One replica is the whole ISR, so ``acks`` 1 and -1 are answered once the batch is in the log (the
high watermark is the log end); like Kafka, nothing is fsynced first unless
``flush.messages``/``log.flush.interval.messages`` asks for it.
"""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError
from ...record.compression import ZSTD
from ...record.layout import (ATTRIBUTES_OFFSET, COMPRESSION_MASK, INT16, INT64, LOG_OVERHEAD, MAGIC_V2, PREFIX,
                              PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD,
                              TRANSACTIONAL_FLAG)
from ..messages import NO_THROTTLE, build, nested, response_class
from ..state import ADMIN_CLIENT_ID, INTERNAL_TOPICS, BrokerState
from .handler import THREAD, ApiHandler

LOG_APPEND_TIME = "LogAppendTime"


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str, record_errors=()):
        self.code = code
        self.message = message
        self.record_errors = record_errors


def check_batch(records, version: int) -> int:
    """Rules 2 and 5 of §3.2 on the bytes alone (Kafka's ProduceRequest.validateRecords); the
    batch's attributes."""
    if not records:
        raise _Refused(ErrorCode.invalid_record, "Produce requests must have at least one record batch "
                                                 "per partition")
    n = len(records)
    if n < RECORD_BATCH_OVERHEAD:
        raise _Refused(ErrorCode.corrupt_message, f"{n} bytes of records are shorter than a record "
                                                  f"batch header ({RECORD_BATCH_OVERHEAD} bytes)")
    base_offset, length, _, magic = PREFIX.unpack_from(records, 0)
    if magic != MAGIC_V2:
        raise _Refused(ErrorCode.invalid_record, f"Produce requests with version {version} are only "
                                                 f"allowed to contain record batches with magic "
                                                 f"version 2, found magic {magic}")
    size = length + LOG_OVERHEAD
    if size < n:
        raise _Refused(ErrorCode.invalid_record, f"Produce requests with version {version} are only "
                                                 f"allowed to contain exactly one record batch "
                                                 f"({n} bytes hold more than the first batch's {size})")
    if size > n:
        raise _Refused(ErrorCode.corrupt_message, f"the record batch declares {size} bytes but "
                                                  f"{n} were sent")
    attributes = INT16.unpack_from(records, ATTRIBUTES_OFFSET)[0]
    if attributes & COMPRESSION_MASK == ZSTD and version < 7:
        raise _Refused(ErrorCode.unsupported_compression_type,
                       f"Produce requests with version {version} may not carry zstd batches (v7+)")
    if base_offset != 0:
        raise _Refused(ErrorCode.invalid_record, f"the batch's base offset is {base_offset}; a producer "
                                                 f"must send 0")
    return attributes


def handle_produce(state: BrokerState, request):
    body = request.body
    version = request.api_version
    acks = body.acks
    cls = response_class(request)
    t_cls = nested(cls, "TopicProduceResponse")
    p_cls = nested(cls, "PartitionProduceResponse")
    e_cls = nested(cls, "BatchIndexAndErrorMessage") if version >= 8 else None
    acks_ok = acks in (-1, 0, 1)
    internal_ok = request.client_id == ADMIN_CLIENT_ID
    appended = []
    topics = []
    for topic in body.topic_data:
        name = topic.name
        parts = []
        for pd in topic.partition_data:
            index = pd.index
            log = None
            try:
                log = state.log(name, index)
                if log is None:
                    raise _Refused(ErrorCode.unknown_topic_or_partition,
                                   f"This server does not host this topic-partition: {name}-{index}")
                attributes = check_batch(pd.records, version)
                if not acks_ok:
                    raise _Refused(ErrorCode.invalid_required_acks, f"acks={acks} is not -1, 0 or 1")
                if name in INTERNAL_TOPICS and not internal_ok:
                    raise _Refused(ErrorCode.invalid_topic_exception,
                                   f"Cannot append to internal topic {name}")
                if attributes & TRANSACTIONAL_FLAG:
                    _interim_verify(state, body.transactional_id, pd.records, name, index)
                if acks == -1 and log.config.get("min.insync.replicas") > 1:
                    raise _Refused(ErrorCode.not_enough_replicas,
                                   f"the in-sync replica set (1 broker) is smaller than "
                                   f"min.insync.replicas={log.config.get('min.insync.replicas')}")
                info = log.append_as_leader(pd.records)
            except _Refused as r:
                parts.append(_failed(p_cls, e_cls, index, r.code, r.message, r.record_errors, log))
                continue
            except CompactlogError as e:
                record_errors = getattr(e, "record_errors", ())
                parts.append(_failed(p_cls, e_cls, index, e.kafka_error, str(e), record_errors, log))
                continue
            if not info.duplicate:
                appended.append((name, index))
            append_time = info.max_timestamp if log.config.get("message.timestamp.type") == \
                LOG_APPEND_TIME else None
            parts.append(build(p_cls, index=index, error_code=ErrorCode.none,
                               base_offset=info.first_offset,
                               log_append_time=_datetime(append_time),
                               log_start_offset=log.log_start_offset, record_errors=(),
                               error_message=None))
        topics.append(build(t_cls, name=name, partition_responses=tuple(parts)))
    if appended:
        state.appends.notify(appended)
    return build(cls, responses=tuple(topics), throttle_time=NO_THROTTLE)


# -- INTERIM (helper T-A, branch txn): let a transactional batch through when the coordinator's
# verification answers NONE, so the coordinator can be tested end to end before T-B's §2.7
# (verification, version mapping, producer-state rules) replaces this block at the merge.
def _interim_verify(state, transactional_id, records, topic: str, partition: int) -> None:
    svc = getattr(state, "transactions", None)
    pid = INT64.unpack_from(records, PRODUCER_ID_OFFSET)[0]
    epoch = INT16.unpack_from(records, PRODUCER_EPOCH_OFFSET)[0]
    code = ErrorCode.coordinator_not_available if svc is None or transactional_id is None else \
        svc.verify_partition(transactional_id, pid, epoch, topic, partition)
    if code != ErrorCode.none:
        raise _Refused(ErrorCode.invalid_txn_state, f"transactional batch refused by the coordinator ({code.name})")
# -- end of INTERIM


def _failed(p_cls, e_cls, index, code, message, record_errors, log):
    errs = ()
    if e_cls is not None and record_errors:
        errs = tuple(build(e_cls, batch_index=i, batch_index_error_message=m) for i, m in record_errors)
    return build(p_cls, index=index, error_code=code, base_offset=-1, log_append_time=None,
                 log_start_offset=-1, record_errors=errs, error_message=message)


def _datetime(ms):
    if ms is None or ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


def produce_error(body, cls, code, message):
    """ProduceRequest.getErrorResponse: every partition of the request refused with ``code``."""
    t_cls = nested(cls, "TopicProduceResponse")
    p_cls = nested(cls, "PartitionProduceResponse")
    return build(cls, throttle_time=NO_THROTTLE, responses=tuple(
        build(t_cls, name=t.name, partition_responses=tuple(
            build(p_cls, index=p.index, error_code=code, base_offset=-1, log_append_time=None,
                  log_start_offset=-1, record_errors=(), error_message=message)
            for p in t.partition_data))
        for t in body.topic_data))


# advertised from v0 for old librdkafka's feature map, accepted from v3 (KAFKA-18659)
PRODUCE = ApiHandler(0, "Produce", 0, 12, min_accepted=3, mode=THREAD, handler=handle_produce,
                     error_response=produce_error)
