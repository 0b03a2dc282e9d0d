"""Produce (API key 0): Kafka's ``KafkaApis.handleProduceRequest`` and ``ReplicaManager.appendRecords``.

Every partition is checked in Kafka's order (wire-protocol.md §3.2); the first failure decides the
partition's error and nothing is appended there, while the other partitions go on. The checks on
the request (known partition, exactly one v2 batch, acks, internal topic, base offset 0) are made
here on the batch header without decoding any record; ``Log.append_as_leader`` then does the rest
(size, CRC, counts, per-record checks in numba kernels, producer epoch and sequence, duplicates)
and raises an error class that carries its Kafka code. The batch is stored as received. Records
refused one by one (a keyless record on a compacted topic, a timestamp out of range) are answered as
Kafka's RecordValidationException is (v8+: ``record_errors`` per record and Kafka's
``error_message``) and logged in one line naming the partition.

One replica is the whole ISR, so ``acks`` 1 and -1 are answered once the batch is in the log (the
high watermark is the log end); like Kafka, nothing is fsynced first unless
``flush.messages``/``log.flush.interval.messages`` asks for it.

Transactional batches (transactions.md §2.7), in Kafka's order: a request holding one without a
``transactional_id``, or whose principal may not WRITE that transactional id, is refused whole with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (``KafkaApis.handleProduceRequest``); a topic the principal
may not WRITE is answered TOPIC_AUTHORIZATION_FAILED for each of its partitions, before anything
says whether it exists (idempotent batches need no more than that); transactional batches of more
than one producer (id and epoch) refuse it whole with INVALID_PRODUCER_ID_MAPPING
(``ReplicaManager.handleProduceAppend``); then each partition's first transactional write of a
transaction is verified with the transaction coordinator (``coordinator.txn.verification.verify_partition``,
when ``transaction.partition.verification.enable``) and its answer mapped for the request's
version (``verification_error``: the postVerificationCallback of ``handleProduceAppend``) before
the checks of the append. The append itself enforces the rest (``storage.producer_append``): the
verification guard, a non-transactional batch from a producer whose transaction is open
(INVALID_TXN_STATE), epochs and sequences.
"""

from __future__ import annotations

import datetime
import logging
from typing import NamedTuple

from kio.schema.errors import ErrorCode

from ...errors import CompactlogError, InvalidRecordError, InvalidTimestampError, LogOfflineError
from ...record import jit
from ...record.compression import ZSTD
from ...record.layout import (ATTRIBUTES_OFFSET, BASE_SEQUENCE_OFFSET, COMPRESSION_MASK,
                              HEADER_SIZE_UP_TO_MAGIC, INT16, INT32, INT64, LAST_OFFSET_DELTA_OFFSET,
                              LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V2, MAX_TIMESTAMP_OFFSET,
                              MIN_LEGACY_SIZE, PREFIX, PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET,
                              RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG)
from ..authorizer import auth_helper
from ..messages import NO_THROTTLE, build, nested, response_class
from ..state import ADMIN_CLIENT_ID, INTERNAL_TOPICS, BrokerState
from ...coordinator.txn.verification import verification_enabled, verify_partition
from ..wire_errors import is_storage_failure, partition_error
from .handler import THREAD, ApiHandler

LOG_APPEND_TIME = "LogAppendTime"

append_log = logging.getLogger("kafka.server.ReplicaManager")


class _Checked(NamedTuple):
    """A partition whose request part passed KafkaApis' checks, on its way to the append."""
    index: int
    log: object
    records: bytes
    txn: tuple[int, int, int] | None      # (producer id, epoch, base sequence) of a transactional batch


class _Overruled(NamedTuple):
    """A partition named twice in one request, one batch valid and one refused: Kafka appends the
    valid one and answers the refusal (``_once_per_partition``)."""
    checked: _Checked
    answer: object

    @property
    def txn(self):
        return self.checked.txn


def _once_per_partition(checked: list) -> list:
    """The request's partitions as KafkaApis.handleProduceRequest files them, in maps keyed by the
    partition: a partition named twice (in one topic entry or in two) keeps the last batch that
    passed the checks for the append (``authorizedRequestInfo``) and the last refusal for the
    answer, which the refusal wins (the refused maps are merged over the append's status); one
    answer a partition, grouped by topic, in the order the request first names them."""
    appends: dict = {}
    refusals: dict = {}
    order: dict = {}                    # topic -> its partitions, first named first
    for name, slots in checked:
        indexes = order.setdefault(name, {})
        for slot in slots:
            key = (name, slot.index)
            indexes.setdefault(slot.index, None)
            (appends if isinstance(slot, _Checked) else refusals)[key] = slot
    out = []
    for name, indexes in order.items():
        slots = []
        for index in indexes:
            valid, refused = appends.get((name, index)), refusals.get((name, index))
            if refused is None:
                slots.append(valid)
            elif valid is None:
                slots.append(refused)
            else:
                slots.append(_Overruled(valid, refused))
        out.append((name, slots))
    return out


class _Refused(Exception):
    def __init__(self, code: ErrorCode, message: str, record_errors=()):
        self.code = code
        self.message = message
        self.record_errors = record_errors


def _next_batch(records, position: int, n: int) -> int | None:
    """The size of the complete batch at ``position`` (Kafka's ``ByteBufferLogInputStream.nextBatch``
    and ``nextBatchSize``), or None when the bytes left hold none: fewer than a size field, a size
    but no magic yet, or fewer bytes than the size says. An impossible size or magic is
    CORRUPT_MESSAGE, as the iterator throws CorruptRecordException."""
    left = n - position
    if left < LOG_OVERHEAD:
        return None
    length = INT32.unpack_from(records, position + LENGTH_OFFSET)[0]
    if length < MIN_LEGACY_SIZE:
        raise _Refused(ErrorCode.corrupt_message, f"Record size {length} is less than the minimum "
                                                  f"record overhead ({MIN_LEGACY_SIZE})")
    if left < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = records[position + MAGIC_OFFSET]           # an int8: 128-255 are negative
    if magic > MAGIC_V2:
        magic = magic - 256 if magic > 127 else magic
        raise _Refused(ErrorCode.corrupt_message, f"Invalid magic found in record: {magic}")
    size = length + LOG_OVERHEAD
    return size if left >= size else None


def check_batch(records, version: int) -> tuple[int, int]:
    """Rules 2 and 5 of §3.2 on the bytes alone: (the batch's attributes, its size).

    The batch is found as Kafka's batch iterator finds it (``_next_batch``) and judged as
    ``ProduceRequest.validateRecords`` judges it: no complete batch, a legacy (magic 0/1) entry
    or a second batch is INVALID_RECORD; bytes after the batch too few to be one are left out of
    the append (the size returned), as ``UnifiedLog.trimInvalidBytes`` trims them. Then the base
    offset and the header's size, in the order of ``UnifiedLog.analyzeAndValidateRecords``."""
    n = len(records) if records else 0
    if n >= RECORD_BATCH_OVERHEAD:
        base_offset, length, _, magic = PREFIX.unpack_from(records, 0)
        if magic == MAGIC_V2 and length + LOG_OVERHEAD == n:
            # what clients send: one whole v2 batch and nothing after it (no second walk)
            attributes = INT16.unpack_from(records, ATTRIBUTES_OFFSET)[0]
            if attributes & COMPRESSION_MASK == ZSTD and version < 7:
                raise _Refused(ErrorCode.unsupported_compression_type,
                               f"Produce requests with version {version} may not carry zstd batches (v7+)")
            if base_offset != 0:
                raise _Refused(ErrorCode.invalid_record, f"the batch's base offset is {base_offset}; a "
                                                         f"producer must send 0")
            return attributes, n
    size = _next_batch(records, 0, n)
    if size is None:
        raise _Refused(ErrorCode.invalid_record, f"Produce requests with version {version} must have at "
                                                 f"least one record batch per partition")
    base_offset, _, _, magic = PREFIX.unpack_from(records, 0)
    if magic != MAGIC_V2:
        raise _Refused(ErrorCode.invalid_record, f"Produce requests with version {version} are only "
                                                 f"allowed to contain record batches with magic "
                                                 f"version 2, found magic {magic}")
    # a batch of magic 2 is at least MIN_LEGACY_SIZE + LOG_OVERHEAD (26) bytes: its attributes are there
    attributes = INT16.unpack_from(records, ATTRIBUTES_OFFSET)[0]
    if attributes & COMPRESSION_MASK == ZSTD and version < 7:
        raise _Refused(ErrorCode.unsupported_compression_type,
                       f"Produce requests with version {version} may not carry zstd batches (v7+)")
    if size < n and _next_batch(records, size, n) is not None:
        raise _Refused(ErrorCode.invalid_record, f"Produce requests with version {version} are only "
                                                 f"allowed to contain exactly one record batch per "
                                                 f"partition")
    if base_offset != 0:
        raise _Refused(ErrorCode.invalid_record, f"the batch's base offset is {base_offset}; a producer "
                                                 f"must send 0")
    if size < RECORD_BATCH_OVERHEAD:            # DefaultRecordBatch.isValid
        raise _Refused(ErrorCode.corrupt_message, f"Record batch is corrupt (the size {size} is smaller "
                                                  f"than the minimum allowed overhead {RECORD_BATCH_OVERHEAD})")
    return attributes, size


def transactional_producer(records, attributes: int) -> tuple[int, int, int] | None:
    """(producer id, epoch, base sequence) of a checked batch that is transactional and has a
    producer id (Kafka's ``batch.hasProducerId && batch.isTransactional``), else None."""
    if not attributes & TRANSACTIONAL_FLAG:
        return None
    producer_id = INT64.unpack_from(records, PRODUCER_ID_OFFSET)[0]
    if producer_id < 0:
        return None
    return (producer_id, INT16.unpack_from(records, PRODUCER_EPOCH_OFFSET)[0],
            INT32.unpack_from(records, BASE_SEQUENCE_OFFSET)[0])


def holds_transactional_batch(body) -> bool:
    """ProduceRequest.hasTransactionalRecords: any complete v2 batch of the request has the
    transactional attribute (read from the headers; nothing is decoded)."""
    for topic in body.topic_data:
        for pd in topic.partition_data:
            records = pd.records or b""
            n = len(records)
            position = 0
            while position + RECORD_BATCH_OVERHEAD <= n:
                _, length, _, magic = PREFIX.unpack_from(records, position)
                size = length + LOG_OVERHEAD
                if length < 0 or position + size > n:
                    break
                if magic >= MAGIC_V2 and INT16.unpack_from(records, position + ATTRIBUTES_OFFSET)[0] & TRANSACTIONAL_FLAG:
                    return True
                position += size
    return False


# the coordinator answers a producer may not know how to retry: NOT_ENOUGH_REPLICAS is retried
# without a metadata refresh (ReplicaManager.handleProduceAppend)
_VERIFICATION_UNAVAILABLE = frozenset({ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
                                       ErrorCode.not_coordinator, ErrorCode.network_exception})


def verification_error(code: ErrorCode, version: int) -> tuple[ErrorCode, str]:
    """A failed verification as the Produce answer of ``version`` carries it (ReplicaManager's
    postVerificationCallback): CONCURRENT_TRANSACTIONS (for v11 and below) and the coordinator's
    unavailability become NOT_ENOUGH_REPLICAS; the rest are the coordinator's answer as
    ``coordinator.txn.verification.client_error`` mapped it."""
    if code in _VERIFICATION_UNAVAILABLE or (code == ErrorCode.concurrent_transactions and version <= 11):
        return (ErrorCode.not_enough_replicas, f"Unable to verify the partition has been added to the "
                                               f"transaction. Underlying error: {code.name.upper()}")
    if code == ErrorCode.invalid_txn_state:
        return code, "Partition was not added to the transaction"
    if code == ErrorCode.transaction_abortable:
        return code, "Partition was not added to the transaction; the transaction must be aborted"
    if code == ErrorCode.invalid_producer_epoch:
        return code, "The producer was fenced by a newer instance of its transactional id"
    return code, f"The transaction coordinator refused the partition: {code.name.upper()}"


def handle_produce(state: BrokerState, request):
    body = request.body
    version = request.api_version
    cls = response_class(request)
    if body.transactional_id is None:
        if holds_transactional_batch(body):
            return produce_error(body, cls, ErrorCode.transactional_id_authorization_failed,
                                 "A transactional batch needs the request's transactional_id")
    elif auth_helper.enabled(state) and holds_transactional_batch(body) and not auth_helper.authorize(
            state, request, auth_helper.WRITE, auth_helper.TRANSACTIONAL_ID, body.transactional_id):
        return produce_error(body, cls, ErrorCode.transactional_id_authorization_failed,
                             auth_helper.DENIED_MESSAGE[ErrorCode.transactional_id_authorization_failed])
    denied = auth_helper.denied(state, request, auth_helper.WRITE, auth_helper.TOPIC,
                                (t.name for t in body.topic_data))
    p_cls = nested(cls, "PartitionProduceResponse")
    e_cls = nested(cls, "BatchIndexAndErrorMessage") if version >= 8 else None
    # the checks on the request itself, per partition (KafkaApis), before the append path sees it
    checked = []          # per topic: [_Checked, or the answer of a partition already refused]
    producers = set()
    named = set()
    repeated = False
    topic_names = set()
    for topic in body.topic_data:
        if topic.name in topic_names:
            repeated = True             # ProduceResponse has one entry a topic
        topic_names.add(topic.name)
        slots = []
        for pd in topic.partition_data:
            key = (topic.name, pd.index)
            if key in named:
                repeated = True
            named.add(key)
            log = None
            try:
                if topic.name in denied:
                    raise _Refused(ErrorCode.topic_authorization_failed, None)
                log = state.log(topic.name, pd.index)
                if log is None:
                    raise _Refused(ErrorCode.unknown_topic_or_partition,
                                   f"This server does not host this topic-partition: {topic.name}-{pd.index}")
                attributes, size = check_batch(pd.records, version)
            except _Refused as r:
                slots.append(_failed(p_cls, e_cls, pd.index, r.code, r.message, r.record_errors, log))
                continue
            except (CompactlogError, OSError) as e:     # the log could not be opened
                slots.append(_storage_failed(state, p_cls, e_cls, topic.name, pd.index, e))
                continue
            records = pd.records
            if size < len(records):     # bytes after the batch that hold none: not appended
                records = records[:size]
            txn = transactional_producer(records, attributes)
            if txn is not None:
                producers.add(txn[:2])
            slots.append(_Checked(pd.index, log, records, txn))
        checked.append((topic.name, slots))
    if repeated:
        checked = _once_per_partition(checked)
        producers = {slot.txn[:2] for _, slots in checked for slot in slots
                     if isinstance(slot, (_Checked, _Overruled)) and slot.txn is not None}
    if len(producers) > 1:
        return produce_error(body, cls, ErrorCode.invalid_producer_id_mapping,
                             "Transactional records contained more than one producer ID")
    verify = bool(producers) and verification_enabled(state.broker)
    appended = []
    topics = []
    for name, slots in checked:
        parts = []
        for slot in slots:
            if isinstance(slot, _Checked):
                parts.append(_append(state, request, name, slot, verify=verify, appended=appended,
                                     p_cls=p_cls, e_cls=e_cls))
            elif isinstance(slot, _Overruled):
                _append(state, request, name, slot.checked, verify=verify, appended=appended, p_cls=p_cls,
                        e_cls=e_cls)
                parts.append(slot.answer)
            else:
                parts.append(slot)
        topics.append(build(nested(cls, "TopicProduceResponse"), name=name, partition_responses=tuple(parts)))
    if appended:
        state.appends.notify(appended)
    return build(cls, responses=tuple(topics), throttle_time=NO_THROTTLE)


# a Produce whose batches sum to at most this many bytes may be answered on the event loop: its
# validation and page-cache write cost ~0.1 ms, less than handing it to a worker thread and back
QUICK_PRODUCE_BYTES = 64 * 1024


def quick_produce(state: BrokerState, request):
    """``handle_produce`` on the event loop when the work is small (``PRODUCE.quick``): the
    answer, or None to run it in a worker thread. Small means every batch sums to at most
    ``QUICK_PRODUCE_BYTES``, every partition's log is already open and its append would only
    write to the page cache (``Log.append_is_quick``: no roll, no fsync due, no lock held by
    another thread), and the numba kernels are loaded (``jit.warm``: the broker's warm-up). A
    request the checks below refuse (an unknown partition, a malformed batch) goes to the thread
    too, where ``handle_produce`` answers it as always."""
    if not jit.warm():
        return None
    logs = state.datadir.logs
    total = 0
    for topic in request.body.topic_data:
        for pd in topic.partition_data:
            records = pd.records
            n = len(records) if records else 0
            total += n
            if n < RECORD_BATCH_OVERHEAD or total > QUICK_PRODUCE_BYTES:
                return None
            log = logs.get((topic.name, pd.index))
            if log is None or not log.append_is_quick(
                    n, INT64.unpack_from(records, MAX_TIMESTAMP_OFFSET)[0],
                    INT32.unpack_from(records, LAST_OFFSET_DELTA_OFFSET)[0] + 1):
                return None
    return handle_produce(state, request)


def _append(state: BrokerState, request, name: str, checked: _Checked, *, verify: bool, appended: list,
            p_cls, e_cls):
    """One partition of the request from verification to append (ReplicaManager.appendRecords and
    Partition.appendRecordsToLeader): its answer."""
    index, log, records, txn = checked
    body = request.body
    acks = body.acks
    guard = None
    stats = state.metrics.topic_stats if state.metrics is not None else None
    try:
        if txn is not None and verify:
            producer_id, epoch, sequence = txn
            guard, code = verify_partition(log, getattr(state, "transactions", None), body.transactional_id,
                                           producer_id, epoch, sequence,
                                           transaction_abortable_supported=request.api_version >= 11)
            if code != ErrorCode.none:
                raise _Refused(*verification_error(code, request.api_version))
        if acks not in (-1, 0, 1):
            raise _Refused(ErrorCode.invalid_required_acks, f"acks={acks} is not -1, 0 or 1")
        if name in INTERNAL_TOPICS and request.client_id != ADMIN_CLIENT_ID:
            raise _Refused(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {name}")
        if acks == -1 and log.config.min_insync_replicas > 1:
            raise _Refused(ErrorCode.not_enough_replicas,
                           f"the in-sync replica set (1 broker) is smaller than "
                           f"min.insync.replicas={log.config.min_insync_replicas}")
        info = log.append_as_leader(records, verification_guard=guard)
    except _Refused as r:
        if stats is not None:
            stats.append_failed(name, len(records))
        return _failed(p_cls, e_cls, index, r.code, r.message, r.record_errors, log)
    except (CompactlogError, OSError) as e:
        if stats is not None:
            stats.append_error(name, len(records), e)
        if is_storage_failure(e):
            return _storage_failed(state, p_cls, e_cls, name, index, e)
        code, message = partition_error(e, state.datadir.path)
        record_errors = getattr(e, "record_errors", ())
        if record_errors and isinstance(e, InvalidRecordError):
            message = record_validation_message(e)
            # ReplicaManager.processFailedRecord logs it at ERROR with its stack trace; one line
            # here with the partition and Kafka's message (the rule and the record indexes, never
            # the records' bytes)
            append_log.warning(f"Error processing append operation on partition {name}-{index}: "
                               f"{code.name.upper()}: {message}")
        return _failed(p_cls, e_cls, index, code, message, record_errors, log)
    if stats is not None:       # BrokerTopicMetrics, per batch (ReplicaManager.appendToLocalLog)
        stats.appended(name, info.records, len(records), info.duplicate)
    if not info.duplicate:
        appended.append((name, index))
    append_time = info.max_timestamp if log.config.message_timestamp_type == LOG_APPEND_TIME else None
    return build(p_cls, index=index, error_code=ErrorCode.none, base_offset=info.first_offset,
                 log_append_time=_datetime(append_time), log_start_offset=log.log_start_offset,
                 record_errors=(), error_message=None)


def record_validation_message(e: InvalidRecordError) -> str:
    """The partition's error_message when records were refused one by one (Kafka's
    RecordValidationException, built by LogValidator.processRecordErrors): a timestamp rule says
    only that; any other names the count and the first three record errors as Java prints them.
    Each record's own message is in record_errors."""
    if isinstance(e, InvalidTimestampError):
        return "One or more records have been rejected due to invalid timestamp"
    shown = ", ".join(f"RecordError(batchIndex={i}, message=" + ("null" if m is None else f"'{m}'") + ")"
                      for i, m in e.record_errors[:3])
    return (f"One or more records have been rejected due to {len(e.record_errors)} record errors in "
            f"total, and only showing the first three errors at most: [{shown}]")


def _storage_failed(state: BrokerState, p_cls, e_cls, topic: str, index: int, e: BaseException):
    """A partition whose files failed (a full disk, an I/O error): KAFKA_STORAGE_ERROR, logged
    with its paths, answered without them."""
    if not isinstance(e, LogOfflineError):     # logged once, when the partition went offline
        state.logger.error(f"Produce to {topic}-{index} failed: {e}")
    code, message = partition_error(e, state.datadir.path)
    return _failed(p_cls, e_cls, index, code, message, (), None)


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
                     error_response=produce_error, quick=quick_produce)
