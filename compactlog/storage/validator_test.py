"""validator: Kafka's LogValidator rules on one batch, pure (bytes, a LogConfig and a time in)."""

from __future__ import annotations

import numpy as np
import pytest

from compactlog.errors import (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
                               RecordListTooLargeError, RecordTooLargeError)
from compactlog.record import compression as codecs
from compactlog.record.batch import LOG_APPEND_TIME, BatchSpec, encode_batch, encode_marker, iter_batches
from compactlog.storage.conftest import T0, batch, config, vector
from compactlog.storage.validator import (assign_offsets, batch_size_limit, check_batch_sizes, check_keys,
                                          check_timestamps, conform_batch, keyless_records, must_have_keys,
                                          parse_batches, validate_batch, validated_batch)

P = "topic-0"


def one(data: bytes):
    return parse_batches(bytearray(data), P)[0]


def refused(data: bytes, cfg=None, now: int = T0):
    with pytest.raises(InvalidRecordError) as e:
        validate_batch(one(data), cfg or config(), now, partition=P)
    return e.value


# --- the request's batches ---------------------------------------------------------------------

def test_parse_batches_takes_whole_v2_batches_only():
    two = batch(0, 1) + batch(0, 2)
    assert [b.records_count for b in parse_batches(bytearray(two), P)] == [1, 2]
    with pytest.raises(InvalidRecordError, match="no complete record batch in 0 bytes"):
        parse_batches(bytearray(), P)
    with pytest.raises(CorruptRecordError, match="3 trailing bytes") as e:
        parse_batches(bytearray(two + b"abc"), P)
    assert e.value.position == len(two)
    with pytest.raises(InvalidRecordError, match="produce with magic 1 is not supported"):
        parse_batches(bytearray(vector("dpkp+kafka-python/record_batch_data_v1.bin")), P)


# --- the rules, in Kafka's order ---------------------------------------------------------------

def test_a_valid_batch_passes_and_is_returned_as_is():
    b = one(batch(0, 3))
    assert validated_batch(b, config(), T0, partition=P) is b


def test_size_against_max_message_bytes_then_crc():
    big = batch(0, 1, value_size=300)
    e = refused(big, config(max_message_bytes=200))
    assert type(e) is RecordTooLargeError and e.kafka_error == 10
    assert str(e) == f"{P}: batch at position 0: size {len(big)} exceeds max.message.bytes (200)"
    bad = bytearray(batch(0, 2))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC") as c:
        validate_batch(one(bytes(bad)), config(), T0, partition=P)
    assert c.value.position == 0


def test_producer_fields_and_counts():
    # sarama's control batch holds no record: Kafka's LogValidator refuses its count first
    assert "invalid reported record count 0" in str(refused(vector("IBM+sarama/control_batch.bin")))
    marker = encode_marker(offset=0, commit=True, producer_id=5, producer_epoch=0, coordinator_epoch=0,
                           timestamp=T0)
    assert "clients may not write control batches" in str(refused(marker))
    assert "transactional batch without a producer id" in str(refused(batch(0, 1, transactional=True)))
    assert "producer id 5 with sequence -1" in str(refused(batch(0, 1, producer_id=5, producer_epoch=0)))
    recs = [(0, T0, b"a", b"1"), (1, T0, b"b", b"2")]
    assert "2 records but last offset delta 4" in str(refused(encode_batch(BatchSpec(), recs, last_offset_delta=4)))
    gap = [(0, T0, b"a", b"1"), (2, T0, b"b", b"2")]
    assert "record offset deltas must be 0..1" in str(refused(encode_batch(BatchSpec(), gap, last_offset_delta=1)))


def test_keyless_records_on_a_compacted_topic_each_get_a_record_error():
    data = encode_batch(BatchSpec(), [(0, T0, b"a", b"1"), (1, T0, None, b"2"), (2, T0, None, None)])
    e = refused(data, config(cleanup_policy="compact"))
    assert str(e) == (f"{P}: batch at position 0: compacted topic cannot accept a record without a key "
                      f"(record 1 of the batch, 2 keyless in all)")
    why = f"Compacted topic cannot accept message without key in topic partition {P}"       # Kafka's text
    assert e.record_errors == [(1, why), (2, why)] and e.kafka_error == 87
    validate_batch(one(data), config(), T0, partition=P)         # a delete topic takes them


def test_the_key_rule_alone_for_front_ends():
    assert must_have_keys(config(cleanup_policy="compact")) and not must_have_keys(config())
    assert keyless_records(np.array([3, -1, 0, -1])).tolist() == [1, 3]       # an empty key is a key
    assert keyless_records(null_mask=[False, True, False]).tolist() == [1]
    check_keys(config(), np.array([-1]), partition=P, where="w")              # not compacted: fine
    with pytest.raises(InvalidRecordError, match=r"^w: compacted topic .* \(record 0 of the batch\)$"):
        check_keys(config(cleanup_policy="compact"), np.array([-1, 2]), partition=P, where="w")


def test_record_rules_over_arrays_for_the_producer():
    cfg = config(message_timestamp_after_max_ms=500)
    check_timestamps(cfg, np.array([T0, T0 + 500, -1]), T0, where="w")
    with pytest.raises(InvalidTimestampError, match=r"^w: record 1 timestamp") as e:
        check_timestamps(cfg, np.array([T0, T0 + 501, T0 + 900]), T0, where="w")
    assert [i for i, _ in e.value.record_errors] == [1, 2]
    check_timestamps(config(message_timestamp_type="LogAppendTime", message_timestamp_after_max_ms=0),
                     np.array([T0 + 10**9]), T0, where="w")                   # the broker's time is used
    assert batch_size_limit(config(max_message_bytes=500)) == (500, "max.message.bytes")
    assert batch_size_limit(config(max_message_bytes=5000, segment_bytes=4000)) == (4000, "segment.bytes")
    check_batch_sizes(config(max_message_bytes=500), np.array([500, 12]), where="w")
    with pytest.raises(RecordTooLargeError) as e:
        check_batch_sizes(config(max_message_bytes=500), np.array([12, 501]), where="w")
    assert not isinstance(e.value, RecordListTooLargeError) and e.value.record_errors[0][0] == 1
    with pytest.raises(RecordListTooLargeError, match="above segment.bytes"):
        check_batch_sizes(config(max_message_bytes=5000, segment_bytes=4000), np.array([4001]), where="w")


def test_timestamps_within_the_allowed_skew():
    cfg = config(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500)
    validate_batch(one(batch(0, 2, ts=[T0 - 1000, T0 + 500])), cfg, T0, partition=P)
    validate_batch(one(batch(0, 1, ts=-1)), cfg, T0, partition=P)             # no timestamp: not checked
    e = refused(batch(0, 3, ts=[T0, T0 - 1001, T0 + 501]), cfg)
    assert type(e) is InvalidTimestampError and e.kafka_error == 32
    assert f"record 1 timestamp {T0 - 1001} is out of range" in str(e)
    window = f"The timestamp should be within [{T0 - 1000}, {T0 + 500}]"     # Kafka's RecordError text
    assert e.record_errors == [(1, f"Timestamp {T0 - 1001} of message with offset 1 is out of range. {window}"),
                               (2, f"Timestamp {T0 + 501} of message with offset 2 is out of range. {window}")]
    e = refused(batch(0, 2, timestamp_type=LOG_APPEND_TIME))
    assert "only the broker may" in str(e)
    assert e.record_errors == [(0, "Invalid timestamp type LogAppendTime set by the producer."),
                               (1, "Invalid timestamp type LogAppendTime set by the producer.")]


def test_size_against_segment_bytes_is_checked_last():
    data = batch(0, 1, value_size=300)
    e = refused(data, config(segment_bytes=200))
    assert type(e) is RecordListTooLargeError and e.kafka_error == 18
    assert str(e).endswith(f"size {len(data)} exceeds segment.bytes (200)")
    # a keyless record on a compacted topic is reported before the size
    assert type(refused(batch(0, 1, key=None, value_size=300),
                        config(segment_bytes=200, cleanup_policy="compact"))) is InvalidRecordError


# --- conforming to the topic and assigning offsets --------------------------------------------

def test_conform_re_encodes_for_the_topic_compression():
    b = one(batch(0, 3))
    out = conform_batch(b, config(compression_type="gzip"), T0)
    assert out is not b and out.compression == codecs.CODEC_BY_NAME["gzip"] and out.is_valid()
    assert [(r.key, r.value, r.timestamp) for r in out.records()] == \
        [(r.key, r.value, r.timestamp) for r in b.records()]
    assert conform_batch(b, config(compression_type="producer"), T0) is b


def test_conform_stamps_log_append_time():
    b = one(batch(0, 2, ts=5))
    out = conform_batch(b, config(message_timestamp_type="LogAppendTime"), T0 + 7)
    assert out.is_valid() and out.timestamp_type == LOG_APPEND_TIME and out.max_timestamp == T0 + 7
    assert [r.timestamp for r in out.records()] == [T0 + 7, T0 + 7]
    assert b.max_timestamp == 6                                       # the producer's bytes untouched


def test_assign_offsets_writes_base_offset_and_leader_epoch_outside_the_crc():
    buf = bytearray(batch(0, 3))
    b = parse_batches(buf, P)[0]
    out = assign_offsets(b, 42, 7)
    assert (out.base_offset, out.last_offset, out.partition_leader_epoch) == (42, 44, 7)
    assert out.is_valid() and next(iter_batches(bytes(buf))).base_offset == 42


def test_a_clients_offset_range_and_count_as_kafka_checks_them_first():
    """LogValidator.validateBatch refuses a client's batch by its offset range and its count first,
    before the control and producer rules. A batch of no record with last offset delta -1 (count 0
    = delta + 1) passed the one count rule there was, and was appended: a batch ending below its
    own base offset, the next batch given the same base offset."""
    from compactlog.record.batch import assemble_batch
    empty = assemble_batch(BatchSpec(), -1, T0, T0, 0, b"")
    assert str(refused(empty)) == f"{P}: batch at position 0: invalid offset range [0, -1] (last offset delta -1)"
    no_count = assemble_batch(BatchSpec(), 0, T0, T0, 0, b"")
    assert str(refused(no_count)) == f"{P}: batch at position 0: invalid reported record count 0"
    # a coordinator's data is spared them, as Kafka spares AppendOrigin.COORDINATOR
    validate_batch(one(empty), config(), T0, partition=P, client=False)
