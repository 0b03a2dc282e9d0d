"""What a producer may append, batch by batch: Kafka's LogValidator (with the record checks of
UnifiedLog.analyzeAndValidateRecords).

Pure: bytes, the topic's ``LogConfig`` and the time in; the batch to append out, or one of the
error classes of ``compactlog.errors`` (each carrying Kafka's error code and, for rules broken by
single records, Kafka's per-record ``RecordError`` list). No file, no log, no producer state: the
checks that need the partition's history (epochs, sequences, duplicates) are the log's.

A batch is validated whole (all-or-nothing) before anything of it is written:

1. ``parse_batches``: the request's bytes as v2 batches ending on a batch boundary;
2. ``validate_batch``: size against max.message.bytes, CRC, no control batch from a client, producer
   id and sequence sanity, record count against the last offset delta, offset deltas 0..n-1, keys on
   a compacted topic (``check_keys``), CreateTime timestamps within the allowed skew, no
   LogAppendTime set by a producer, and last, size against segment.bytes;
3. ``conform_batch``: re-encoded for the topic's compression.type, stamped with the broker's time on
   a LogAppendTime topic;
4. ``assign_offsets``: the leader's base offset and partition leader epoch written into the header
   (neither is covered by the CRC).

``validated_batch`` is steps 2 and 3, the one call a writer makes per batch;
``validate_follower_batches`` checks batches that arrive with their offsets. ``keyless_records``
and ``must_have_keys`` are the compacted-topic key rule alone, over an array of key lengths or a
null-key mask; with ``check_keys``, ``check_timestamps`` and ``check_batch_sizes`` they are what
the producer (``compactlog.producer``) checks records by before it batches them.
"""

from __future__ import annotations

import numpy as np

from ..errors import (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
                      RecordListTooLargeError, RecordTooLargeError)
from ..record import compression as codecs
from ..record.batch import (CREATE_TIME, LOG_APPEND_TIME, BatchHeader, BatchSpec, RecordBatch, crc32c,
                            encode_batch, iter_batches)
from ..record.layout import (ATTRIBUTES_OFFSET, CRC_OFFSET, INT16, INT64, MAGIC_V2, MAX_TIMESTAMP_OFFSET,
                             PREFIX, TIMESTAMP_TYPE_MASK, UINT32)
from .config import LogConfig


# -- the compacted-topic key rule ---------------------------------------------------------------

def must_have_keys(config: LogConfig) -> bool:
    """A compacted topic refuses records without a key (a key is what compaction keeps by)."""
    return config.compact


def keyless_records(key_lengths=None, *, null_mask=None) -> np.ndarray:
    """Indexes of the records without a key: from key lengths (-1 is Kafka's null key) or from a
    mask that is true where the key is null (an Arrow column's nulls)."""
    if null_mask is not None:
        return np.flatnonzero(np.asarray(null_mask, dtype=bool))
    return np.flatnonzero(np.asarray(key_lengths) < 0)


def check_keys(config: LogConfig, key_lengths, *, partition: str, where: str) -> None:
    """Kafka's LogValidator.validateKey: on a compacted topic, one RecordError per keyless record."""
    if not must_have_keys(config):
        return
    keyless = keyless_records(key_lengths)
    if not keyless.size:
        return
    # Kafka's text since its LogValidator moved to Java (3.5): no full stop after the partition
    why = f"Compacted topic cannot accept message without key in topic partition {partition}"
    error = InvalidRecordError(
        f"{where}: compacted topic cannot accept a record without a key "
        f"(record {int(keyless[0])} of the batch"
        + (f", {keyless.size} keyless in all)" if keyless.size > 1 else ")"),
        record_errors=[(int(i), why) for i in keyless])
    error.keyless_records = int(keyless.size)      # the broker's NoKeyCompactedTopicRecords meter
    raise error


# -- a request's batches ------------------------------------------------------------------------

def parse_batches(buf, partition: str) -> list[RecordBatch]:
    """The v2 batches of a producer's request, which must end on a batch boundary."""
    out = []
    end = 0
    for b in iter_batches(buf):
        if b.magic != MAGIC_V2:
            raise InvalidRecordError(f"{partition}: produce with magic {b.magic} is not supported; "
                                     f"only RecordBatch v2 is accepted")
        out.append(b)
        end = b.position + b.size
    if not out:
        raise InvalidRecordError(f"{partition}: no complete record batch in {len(buf)} bytes")
    if end != len(buf):
        raise CorruptRecordError(f"{len(buf) - end} trailing bytes after the last complete batch",
                                 position=end)
    return out


def validate_batch(b: RecordBatch, config: LogConfig, now: int, *, partition: str, client: bool = True) -> None:
    """Every rule a client's batch must meet, in Kafka's order; raises the first one broken.
    ``client`` False: a coordinator's batch (transactional offset commits), which Kafka spares the
    rules on a client's counts (``AppendOrigin.CLIENT`` only). (A client's base offset other than
    0 is refused by the Produce handler, ``apis/produce.check_batch``, before anything here.)"""
    h = b.header
    where = f"{partition}: batch at position {b.position}"
    if h.size > config.max_message_size:
        raise RecordTooLargeError(f"{where}: size {h.size} exceeds max.message.bytes "
                                  f"({config.max_message_size})")
    try:
        b.ensure_valid()
    except CorruptRecordError as e:
        raise e.located(position=b.position) from None
    if client:      # LogValidator.validateBatch's first rules: a count of 0 (last offset delta -1) passed the one below
        if h.last_offset_delta + 1 <= 0:
            raise InvalidRecordError(f"{where}: invalid offset range [{h.base_offset}, "
                                     f"{h.base_offset + h.last_offset_delta}] (last offset delta {h.last_offset_delta})")
        if h.records_count <= 0:
            raise InvalidRecordError(f"{where}: invalid reported record count {h.records_count}")
    if h.is_control:
        raise InvalidRecordError(f"{where}: clients may not write control batches")
    if h.is_transactional and h.producer_id < 0:
        raise InvalidRecordError(f"{where}: transactional batch without a producer id")
    if h.producer_id >= 0 and h.base_sequence < 0:
        raise InvalidRecordError(f"{where}: producer id {h.producer_id} with sequence {h.base_sequence}")
    if h.records_count != h.last_offset_delta + 1:
        raise InvalidRecordError(f"{where}: {h.records_count} records but last offset delta "
                                 f"{h.last_offset_delta}")
    small = b.small_records()
    if small is not None:           # a producer's few records: the same checks on Python lists
        n = len(small.off_delta)
        if small.off_delta != _DELTAS_LIST[:n]:
            raise InvalidRecordError(f"{where}: record offset deltas must be 0..{n - 1}")
        if config.compact and min(small.key_len) < 0:
            check_keys(config, small.key_len, partition=partition, where=where)
        _check_timestamps(b, config, now, where, small.timestamps)
    else:
        cols = b.columns()
        if len(cols) and not _deltas_are_0_to_n(cols.off_delta):
            raise InvalidRecordError(f"{where}: record offset deltas must be 0..{len(cols) - 1}")
        check_keys(config, cols.key_len, partition=partition, where=where)
        _check_timestamps(b, config, now, where)
    # Kafka checks the size against segment.bytes last, on the validated batch
    # (UnifiedLog.append: RecordBatchTooLargeException)
    if h.size > config.segment_bytes:
        raise RecordListTooLargeError(f"{where}: size {h.size} exceeds segment.bytes "
                                      f"({config.segment_bytes})")


_DELTAS = np.arange(4096, dtype=np.int64)
_DELTAS_BYTES = _DELTAS.tobytes()
_DELTAS_LIST = list(range(64))


def _deltas_are_0_to_n(deltas: np.ndarray) -> bool:
    """The offset deltas are 0, 1, ..., n-1: one bytes comparison against a prefix of a stored
    sequence (a produce's batch is small; numpy's compare and ``any`` cost more than the check
    for one record), numpy's for the rest."""
    n = deltas.shape[0]
    if n <= _DELTAS.shape[0] and deltas.dtype == _DELTAS.dtype:
        return deltas.tobytes() == _DELTAS_BYTES[:8 * n]
    return not (deltas != np.arange(n)).any()


def _check_timestamps(b: RecordBatch, config: LogConfig, now: int, where: str, timestamps=None) -> None:
    """LogValidator.validateTimestamp: CreateTime within the allowed skew of ``now``; LogAppendTime
    is the broker's to set. ``timestamps``: the records' (``small_records``), else read here."""
    h = b.header
    if h.timestamp_type == CREATE_TIME:
        check_timestamps(config, b.record_timestamps() if timestamps is None else timestamps, now, where=where)
    elif h.timestamp_type == LOG_APPEND_TIME:
        raise InvalidTimestampError(
            f"{where}: the producer set the timestamp type to LogAppendTime; only the broker may",
            record_errors=[(i, "Invalid timestamp type LogAppendTime set by the producer.")
                           for i in range(h.records_count)])


def check_timestamps(config: LogConfig, timestamps, now: int, *, where: str) -> None:
    """LogValidator.validateTimestamp for CreateTime records: on a CreateTime topic, every
    timestamp within message.timestamp.before/after.max.ms of ``now``; one RecordError per record
    out of range."""
    if config.message_timestamp_type != "CreateTime":
        return
    before = config.get("message.timestamp.before.max.ms")
    after = config.get("message.timestamp.after.max.ms")
    # all in range is the common case: a few records (a list from ``small_records``, or an array
    # of at most 8) by Python's min and max, which cost less than numpy's; more by two reductions
    if timestamps.__class__ is list:
        small = timestamps
    else:
        ts = np.asarray(timestamps, dtype=np.int64)
        small = ts.tolist() if ts.size <= 8 else None
        if small is None and now - before <= ts.min() and ts.max() - now <= after:
            return
    if small and now - before <= min(small) and max(small) - now <= after:
        return
    ts = np.asarray(timestamps, dtype=np.int64)
    # as Kafka's LogValidator: records without a timestamp (-1) are not range-checked
    bad = np.flatnonzero((ts != -1) & ((now - ts > before) | (ts - now > after)))
    if bad.size:
        i = int(bad[0])
        raise InvalidTimestampError(
            f"{where}: record {i} timestamp {int(ts[i])} is out of range "
            f"(message.timestamp.before.max.ms={before}, after.max.ms={after}, now={now})",
            # Kafka's RecordError text; a producer's batch starts at offset 0, so the record's
            # offset is its index
            record_errors=[(int(j), f"Timestamp {int(ts[j])} of message with offset {int(j)} is out of range. "
                                    f"The timestamp should be within [{now - before}, {now + after}]")
                           for j in bad])


# -- batch sizes --------------------------------------------------------------------------------

def batch_size_limit(config: LogConfig) -> tuple[int, str]:
    """The largest batch the topic takes and the setting that says so: max.message.bytes, or
    segment.bytes when that is smaller (a batch never spans two segments)."""
    if config.segment_bytes < config.max_message_size:
        return config.segment_bytes, "segment.bytes"
    return config.max_message_size, "max.message.bytes"


def check_batch_sizes(config: LogConfig, sizes, *, where: str) -> None:
    """The size rules of ``validate_batch`` over many batches at once (a producer's check of each
    record as a batch of its own): RecordTooLargeError above max.message.bytes, else
    RecordListTooLargeError above segment.bytes, one RecordError per batch too large."""
    sizes = np.asarray(sizes, dtype=np.int64)
    limit, name = batch_size_limit(config)
    bad = np.flatnonzero(sizes > limit)
    if not bad.size:
        return
    i = int(bad[0])
    error = RecordTooLargeError if name == "max.message.bytes" else RecordListTooLargeError
    raise error(f"{where}: record {i}: a batch of it alone is {int(sizes[i])} bytes, above {name} ({limit})",
                record_errors=[(int(j), f"A batch of record {int(j)} alone is {int(sizes[j])} bytes, "
                                        f"above {name} ({limit}).") for j in bad])


def conform_batch(b: RecordBatch, config: LogConfig, now: int) -> RecordBatch:
    """The batch as the topic stores it: re-encoded for compression.type, or stamped with ``now``
    as its LogAppendTime (LogValidator's conversion paths); ``b`` itself when nothing changes."""
    h = b.header
    target = config.compression_type
    codec = h.compression if target == "producer" else codecs.CODEC_BY_NAME[target]
    append_time = config.message_timestamp_type == "LogAppendTime"
    if codec == h.compression and not append_time:
        return b
    if codec != h.compression:
        spec = BatchSpec(base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                         compression=codec, timestamp_type=LOG_APPEND_TIME if append_time else CREATE_TIME,
                         transactional=h.is_transactional, producer_id=h.producer_id,
                         producer_epoch=h.producer_epoch, base_sequence=h.base_sequence)
        raw = bytearray(encode_batch(spec, [(r.offset, r.timestamp, r.key, r.value, r.headers)
                                            for r in b.records()],
                                     last_offset_delta=h.last_offset_delta))
    else:
        raw = bytearray(b.raw())
    if append_time:
        (attributes,) = INT16.unpack_from(raw, ATTRIBUTES_OFFSET)
        INT16.pack_into(raw, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
        INT64.pack_into(raw, MAX_TIMESTAMP_OFFSET, now)
        UINT32.pack_into(raw, CRC_OFFSET, crc32c(bytes(raw[ATTRIBUTES_OFFSET:])))
    return RecordBatch(BatchHeader.unpack(raw, 0), raw, 0)


def validated_batch(b: RecordBatch, config: LogConfig, now: int, *, partition: str,
                    client: bool = True) -> RecordBatch:
    """A client's batch checked against every rule, then conformed to the topic: what the leader
    appends (before its offsets are assigned)."""
    validate_batch(b, config, now, partition=partition, client=client)
    return conform_batch(b, config, now)


def own_batch(b: RecordBatch, config: LogConfig, now: int, *, partition: str) -> RecordBatch:
    """A batch the broker encoded itself (``Log.append_records`` for a coordinator): its CRC,
    keys, offsets deltas and timestamps are right by construction, so only the size rules that a
    big record can break are checked (max.message.bytes, then segment.bytes, in Kafka's order),
    then it is conformed to the topic as a client's would be."""
    h = b.header
    if h.size > config.max_message_size:
        raise RecordTooLargeError(f"{partition}: batch at position {b.position}: size {h.size} exceeds "
                                  f"max.message.bytes ({config.max_message_size})")
    if h.size > config.segment_bytes:
        raise RecordListTooLargeError(f"{partition}: batch at position {b.position}: size {h.size} exceeds "
                                      f"segment.bytes ({config.segment_bytes})")
    return conform_batch(b, config, now)


def validate_follower_batches(buf, log_end_offset: int, config: LogConfig, *, partition: str) -> list:
    """Batches that already carry their offsets (replication, tools): each v2 batch's CRC, offsets
    increasing from the log end, each batch within segment.bytes. Legacy entries pass as they are."""
    batches = list(iter_batches(buf))
    if not batches:
        raise InvalidRecordError(f"{partition}: no complete record batch in {len(buf)} bytes")
    prev = log_end_offset - 1
    for b in batches:
        if b.magic == MAGIC_V2:
            try:
                b.ensure_valid()
            except CorruptRecordError as e:
                raise e.located(position=b.position) from None
        if b.base_offset <= prev or b.base_offset < log_end_offset:
            raise InvalidRecordError(
                f"{partition}: batch at position {b.position} has base offset {b.base_offset}, "
                f"not above the log end {log_end_offset - 1 if prev < log_end_offset else prev}"
                f" (offsets must increase)")
        if b.size > config.segment_bytes:
            raise RecordTooLargeError(f"{partition}: batch of {b.size} bytes exceeds segment.bytes")
        prev = b.last_offset
    return batches


def assign_offsets(b: RecordBatch, base_offset: int, leader_epoch: int) -> RecordBatch:
    """Write the leader's base offset and partition leader epoch into the batch's header, in its
    (writable) buffer; the CRC does not cover them."""
    h = b.header
    PREFIX.pack_into(b.buffer, b.position, base_offset, h.length, leader_epoch, MAGIC_V2)
    return RecordBatch(BatchHeader.unpack(b.buffer, b.position), b.buffer, b.position)
