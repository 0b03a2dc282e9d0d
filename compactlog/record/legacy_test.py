"""Magic v0/v1 message sets (read only), as Kafka's AbstractLegacyRecordBatch reads them."""

from __future__ import annotations

import struct
import zlib

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.record import compression as C
from compactlog.record.batch import (CREATE_TIME, LOG_APPEND_TIME, BatchSpec, Record, encode_batch,
                                     iter_batches)
from compactlog.record.legacy import LegacyEntry


def message(magic: int, offset: int, key, value, *, timestamp: int = -1, attributes: int = 0) -> bytes:
    """One legacy log entry: offset, size, then crc, magic, attributes, [timestamp], key, value."""
    body = struct.pack(">bB", magic, attributes)
    if magic == 1:
        body += struct.pack(">q", timestamp)
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    body = struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF) + body
    return struct.pack(">qi", offset, len(body)) + body


def wrapper(magic: int, offset: int, inner: bytes, codec: int = C.GZIP, *, timestamp: int = -1,
            log_append_time: bool = False, compressed: bytes | None = None) -> bytes:
    value = C.compress(codec, inner) if compressed is None else compressed
    attrs = codec | (0x08 if log_append_time else 0)
    return message(magic, offset, None, value, timestamp=timestamp, attributes=attrs)


def one(raw: bytes) -> LegacyEntry:
    (e,) = iter_batches(raw)
    assert isinstance(e, LegacyEntry)
    return e


def test_v0_plain_message():
    raw = message(0, 42, b"key", b"value")
    assert len(raw) == 12 + 14 + 3 + 5
    e = one(raw)
    assert (e.magic, e.offset, e.position, e.size) == (0, 42, 0, len(raw))
    assert (e.key, e.value, e.timestamp) == (b"key", b"value", -1)
    assert e.timestamp_type == CREATE_TIME and e.compression == 0
    assert e.is_valid() and e.stored_crc() == e.computed_crc()
    e.ensure_valid()
    assert (e.base_offset, e.last_offset, e.next_offset, e.last_offset_delta) == (42, 42, 43, 0)
    assert e.records_count == 1 and e.max_timestamp == -1 and e.base_timestamp == -1
    assert e.records() == [Record(42, -1, b"key", b"value", ())]
    assert e.raw() == raw and e.header is e
    assert e.control_type() is None and not e.is_control and not e.is_transactional
    assert e.producer_id == -1 and not e.has_producer_id and e.delete_horizon_ms is None


def test_v1_plain_message_null_and_empty():
    for key, value in ((None, None), (b"", b""), (None, b"v"), (b"k", None)):
        e = one(message(1, 7, key, value, timestamp=1_500_000_000_000))
        assert e.records() == [Record(7, 1_500_000_000_000, key, value, ())]
        assert e.is_valid()


def test_v1_log_append_time_attribute():
    e = one(message(1, 0, b"k", b"v", timestamp=99, attributes=0x08))
    assert e.timestamp_type == LOG_APPEND_TIME
    # bit 3 means nothing in v0
    e = one(message(0, 0, b"k", b"v", attributes=0x08))
    assert e.timestamp_type == CREATE_TIME


def test_crc_is_crc32_ieee_over_magic_to_end():
    raw = bytearray(message(1, 0, b"k", b"v", timestamp=5))
    for pos in range(17, len(raw)):       # byte 16 is the magic: flipping it changes the format
        bad = bytearray(raw)
        bad[pos] ^= 0x10
        try:
            e = one(bytes(bad))
        except CorruptRecordError:      # a length field now points past the message
            continue
        assert not e.is_valid()
        with pytest.raises(CorruptRecordError) as err:
            e.ensure_valid()
        assert err.value.field == "crc"
    bad = bytearray(raw)
    bad[0] ^= 1       # the offset is outside the CRC
    assert one(bytes(bad)).is_valid()


def test_v1_gzip_wrapper_relative_inner_offsets():
    inner = b"".join(message(1, i, b"k%d" % i, b"v%d" % i, timestamp=1000 + i) for i in range(3))
    e = one(wrapper(1, 19, inner, timestamp=1002))
    assert e.compression == C.GZIP and e.is_valid()
    assert [r.offset for r in e.records()] == [17, 18, 19]
    assert [r.timestamp for r in e.records()] == [1000, 1001, 1002]
    assert [r.key for r in e.records()] == [b"k0", b"k1", b"k2"]
    assert (e.base_offset, e.last_offset, e.next_offset, e.last_offset_delta) == (17, 19, 20, 2)
    assert e.records_count == 3 and e.max_timestamp == 1002 and e.base_timestamp == 1000


def test_v1_wrapper_with_gaps_after_compaction():
    # inner relative offsets 0, 2, 5 kept by an old cleaner; wrapper carries the last absolute offset
    inner = b"".join(message(1, i, b"k", b"v", timestamp=1) for i in (0, 2, 5))
    e = one(wrapper(1, 105, inner, timestamp=1))
    assert [r.offset for r in e.records()] == [100, 102, 105]


def test_v1_wrapper_offset_zero_keeps_inner_offsets():
    # as Kafka: an outer offset of 0 (produce data of some librdkafka versions) means no rebasing
    inner = b"".join(message(1, i, b"k", b"v", timestamp=1) for i in range(3))
    assert [r.offset for r in one(wrapper(1, 0, inner, timestamp=1)).records()] == [0, 1, 2]


def test_v1_wrapper_offset_below_last_inner_is_invalid():
    inner = b"".join(message(1, i, b"k", b"v", timestamp=1) for i in range(3))
    e = one(wrapper(1, 1, inner, timestamp=1))
    with pytest.raises(CorruptRecordError):
        e.records()


def test_v0_wrapper_absolute_inner_offsets():
    inner = b"".join(message(0, o, b"k", b"v") for o in (10, 11, 13))
    e = one(wrapper(0, 13, inner))
    assert [r.offset for r in e.records()] == [10, 11, 13]
    assert [r.timestamp for r in e.records()] == [-1, -1, -1]
    assert e.base_offset == 10 and e.last_offset == 13


def test_v1_wrapper_log_append_time_overrides_inner_timestamps():
    inner = b"".join(message(1, i, b"k", b"v", timestamp=1000 + i) for i in range(3))
    e = one(wrapper(1, 2, inner, timestamp=5555, log_append_time=True))
    assert e.timestamp_type == LOG_APPEND_TIME
    assert [r.timestamp for r in e.records()] == [5555] * 3
    assert e.max_timestamp == 5555


def test_kafka_4298_v1_wrapper_around_v0_inner_messages():
    # old cleaners wrote v1 wrappers around v0 messages: offsets still follow the wrapper magic
    inner = b"".join(message(0, i, b"k%d" % i, b"v") for i in range(2))
    e = one(wrapper(1, 51, inner, timestamp=9))
    assert [r.offset for r in e.records()] == [50, 51]
    assert [r.timestamp for r in e.records()] == [-1, -1]
    # inner messages written with absolute offsets give the same answer
    inner = b"".join(message(0, 50 + i, b"k%d" % i, b"v") for i in range(2))
    assert [r.offset for r in one(wrapper(1, 51, inner, timestamp=9)).records()] == [50, 51]


@pytest.mark.parametrize("codec", [C.GZIP, C.SNAPPY, C.LZ4])
@pytest.mark.parametrize("magic", [0, 1])
def test_wrapper_codecs(codec, magic):
    inner = b"".join(message(magic, i, b"k%d" % i, b"x" * 50, timestamp=3) for i in range(4))
    e = one(wrapper(magic, 3, inner, codec, timestamp=3))
    assert [r.offset for r in e.records()] == [0, 1, 2, 3]
    assert [r.value for r in e.records()] == [b"x" * 50] * 4


def test_raw_snappy_wrapper():
    import cramjam
    inner = b"".join(message(1, i, b"k", b"v", timestamp=3) for i in range(2))
    raw_block = bytes(cramjam.snappy.compress_raw(inner))
    e = one(wrapper(1, 1, b"", C.SNAPPY, timestamp=3, compressed=raw_block))
    assert [r.offset for r in e.records()] == [0, 1]


def test_v0_lz4_wrapper_with_kafka_08_header_checksum():
    # Kafka 0.8-0.9 computed the lz4 frame header checksum over the magic too; Kafka reads v0 lz4
    # wrappers ignoring that byte, but v1 ones strictly.
    inner = b"".join(message(0, i, b"k", b"v") for i in range(2))
    frame = C.compress(C.LZ4, inner)
    old_hc = (C._xxh32(frame[0:6]) >> 8) & 0xFF
    assert old_hc != frame[6]
    bad = frame[:6] + bytes([old_hc]) + frame[7:]
    e = one(wrapper(0, 1, b"", C.LZ4, compressed=bad))
    assert [r.offset for r in e.records()] == [0, 1]
    inner1 = b"".join(message(1, i, b"k", b"v", timestamp=1) for i in range(2))
    frame1 = C.compress(C.LZ4, inner1)
    bad1 = frame1[:6] + bytes([(C._xxh32(frame1[0:6]) >> 8) & 0xFF]) + frame1[7:]
    with pytest.raises(CorruptRecordError):
        one(wrapper(1, 1, b"", C.LZ4, timestamp=1, compressed=bad1)).records()


@pytest.mark.parametrize("case", ["zstd", "null value", "empty", "nested", "truncated inner",
                                  "small inner", "bad inner magic", "garbage", "bad codec"])
def test_invalid_wrappers(case):
    inner = b"".join(message(1, i, b"k", b"v", timestamp=1) for i in range(2))
    if case == "zstd":
        raw = wrapper(1, 1, inner, C.ZSTD, timestamp=1)
    elif case == "null value":
        raw = message(1, 1, None, None, timestamp=1, attributes=C.GZIP)
    elif case == "empty":
        raw = wrapper(1, 1, b"", timestamp=1)
    elif case == "nested":
        raw = wrapper(1, 1, wrapper(1, 0, inner, timestamp=1), timestamp=1)
    elif case == "truncated inner":
        raw = wrapper(1, 1, inner[:-3], timestamp=1)
    elif case == "small inner":
        raw = wrapper(1, 1, struct.pack(">qi", 0, 5) + b"\x00" * 5, timestamp=1)
    elif case == "bad inner magic":
        bad = bytearray(inner)
        bad[16] = 2
        raw = wrapper(1, 1, bytes(bad), timestamp=1)
    elif case == "garbage":
        raw = wrapper(1, 1, b"", timestamp=1, compressed=b"definitely not gzip")
    else:
        raw = wrapper(1, 1, b"", timestamp=1, compressed=b"zzz")
        raw = bytearray(raw)
        raw[17] = 6       # attributes: codec 6
        raw = bytes(raw)
    e = one(raw)
    with pytest.raises(CorruptRecordError):
        e.records()


def test_truncated_messages():
    raw = message(1, 0, b"key", b"value", timestamp=1)
    # shorten the message body but keep the entry size consistent
    for cut in range(1, 9):
        body = raw[12:-cut]
        if len(body) < 14:
            break
        entry = struct.pack(">qi", 0, len(body)) + body
        with pytest.raises(CorruptRecordError):
            list(iter_batches(entry))
    # a v1 message of 14..21 bytes is shorter than its header
    body = struct.pack(">Ibb", 0, 1, 0) + b"\x00" * 10
    with pytest.raises(CorruptRecordError):
        list(iter_batches(struct.pack(">qi", 0, len(body)) + body))


def test_mixed_legacy_and_v2_log():
    log = (message(0, 0, b"a", b"0") + message(1, 1, b"b", b"1", timestamp=11)
           + wrapper(1, 3, b"".join(message(1, i, b"c", b"2", timestamp=12) for i in range(2)),
                     timestamp=12)
           + encode_batch(BatchSpec(base_offset=4), [(4, 13, b"d", b"3"), (5, 14, b"e", None)]))
    entries = list(iter_batches(log))
    assert [type(e).__name__ for e in entries] == ["LegacyEntry"] * 3 + ["RecordBatch"]
    assert [r.offset for e in entries for r in e.records()] == [0, 1, 2, 3, 4, 5]
    assert [e.magic for e in entries] == [0, 1, 1, 2]
    assert all(e.is_valid() for e in entries)
    assert [e.last_offset for e in entries] == [0, 1, 3, 5]


def test_against_kafka_python_legacy_builder():
    legacy = pytest.importorskip("kafka.record.legacy_records", reason="kafka-python not installed")
    import kafka.codec as kc
    for magic in (0, 1):
        for codec, available in ((0, True), (1, True), (2, kc.has_snappy()), (3, kc.has_lz4())):
            if not available or (magic == 0 and codec == 3 and kc.xxhash is None):
                continue
            builder = legacy.LegacyRecordBatchBuilder(magic=magic, compression_type=codec,
                                                      batch_size=1 << 20)
            items = [(i, 1_600_000_000_000 + i, b"k%d" % i if i % 2 else None,
                      b"v" * i if i != 2 else None) for i in range(5)]
            for off, ts, k, v in items:
                builder.append(off, timestamp=ts, key=k, value=v)
            raw = bytearray(builder.build())
            if codec:
                struct.pack_into(">q", raw, 0, 104 if magic else 0)   # the broker's wrapper offset
            entries = list(iter_batches(bytes(raw)))
            assert all(e.is_valid() for e in entries)
            recs = [r for e in entries for r in e.records()]
            base = 100 if (codec and magic) else 0
            assert [r.offset for r in recs] == [base + i for i in range(5)]
            assert [(r.key, r.value) for r in recs] == [(k, v) for _, _, k, v in items]
            if magic == 1:
                assert [r.timestamp for r in recs] == [ts for _, ts, _, _ in items]
            # and kafka-python reads the same
            from kafka.record.memory_records import MemoryRecords
            theirs = [r for b in MemoryRecords(bytes(raw)) for r in b]
            assert [(r.offset, r.key, r.value) for r in theirs] == \
                [(r.offset, r.key, r.value) for r in recs]
