"""RecordBatch v2: the worked examples of record-format.md §14 byte for byte, header fields,
record fields (null vs empty, headers, timestamps), batch iteration and validation."""

from __future__ import annotations

import struct

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from compactlog.errors import CorruptRecordError
from compactlog.record import compression
from compactlog.record.batch import (
    CREATE_TIME, LOG_APPEND_TIME, RECORD_BATCH_OVERHEAD, BatchHeader, BatchSpec, Header, Record,
    RecordBatch, assemble_batch, attributes_of, batch_positions, columnar_records, empty_batch,
    encode_batch, encode_columnar_batch, iter_batches, last_sequence, with_base_offset,
    with_leader_epoch)
from compactlog.record.batch import encode_marker
from compactlog.record.control import COMMIT
from compactlog.record.varint import encode_varint


def unhex(dump: str) -> bytes:
    """Bytes of a hex dump whose lines start with a 4-digit address (record-format.md style)."""
    out = []
    for line in dump.strip().splitlines():
        out.append(line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else "")
    return bytes.fromhex(" ".join(out))


def only_batch(raw: bytes) -> RecordBatch:
    batches = list(iter_batches(raw))
    assert len(batches) == 1
    return batches[0]


# --- record-format.md §14 ---------------------------------------------------------------------

TS0 = 1700000000000

EXAMPLE_84 = unhex("""
0000  00 00 00 00 00 00 00 00 00 00 00 48 00 00 00 00
0010  02 6c 2a a1 54 00 00 00 00 00 01 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 05 ff ff ff ff ff
0030  ff ff ff ff ff ff ff ff ff 00 00 00 02 16 00 00
0040  00 04 70 33 06 31 30 24 00 14 00 0a 02 04 70 35
0050  04 37 24 00
""")

COMMIT_78 = unhex("""
0000  00 00 00 00 00 00 00 02 00 00 00 42 00 00 00 00
0010  02 91 a3 67 63 00 30 00 00 00 00 00 00 01 8b cf
0020  e5 68 0a 00 00 01 8b cf e5 68 0a 00 00 00 00 00
0030  00 03 e8 00 00 ff ff ff ff 00 00 00 01 20 00 00
0040  00 08 00 00 00 01 0c 00 00 00 00 00 00 00
""")

TOMBSTONE_73 = unhex("""
0000  00 00 00 00 00 00 00 07 00 00 00 3d 00 00 00 00
0010  02 e5 62 b9 c3 00 40 00 00 00 00 00 00 01 8b d5
0020  0d 4a a0 00 00 01 8b cf e5 68 14 ff ff ff ff ff
0030  ff ff ff ff ff ff ff ff ff 00 00 00 01 16 00 97
0040  8a bf 52 00 04 70 33 01 00
""")

EMPTY_61 = unhex("""
0000  00 00 00 00 00 00 00 14 00 00 00 31 00 00 00 00
0010  02 b2 ac 98 dd 00 00 00 00 00 02 ff ff ff ff ff
0020  ff ff ff 00 00 01 8b cf e5 68 1e 00 00 00 00 00
0030  00 00 2a 00 03 00 00 00 0a 00 00 00 00
""")


def test_example_sizes_and_crcs():
    assert len(EXAMPLE_84) == 84 and crc32c.crc32c(EXAMPLE_84[21:]) == 0x6C2AA154
    assert len(COMMIT_78) == 78 and crc32c.crc32c(COMMIT_78[21:]) == 0x91A36763
    assert len(TOMBSTONE_73) == 73 and crc32c.crc32c(TOMBSTONE_73[21:]) == 0xE562B9C3
    assert len(EMPTY_61) == 61 and crc32c.crc32c(EMPTY_61[21:]) == 0xB2AC98DD
    assert crc32c.crc32c(b"123456789") == 0xE3069283


def test_example_84_encode():
    spec = BatchSpec(base_offset=0, partition_leader_epoch=0)
    raw = encode_batch(spec, [(0, TS0, b"p3", b"10$"), (1, TS0 + 5, b"p5", b"7$")])
    assert raw == EXAMPLE_84


def test_example_84_encode_columnar():
    cols = columnar_records([b"p3", b"p5"], [b"10$", b"7$"])
    raw = encode_columnar_batch(BatchSpec(partition_leader_epoch=0), cols, np.array([TS0, TS0 + 5]))
    assert raw == EXAMPLE_84
    # str keys/values are UTF-8 encoded
    cols = columnar_records(["p3", "p5"], ["10$", "7$"])
    assert encode_columnar_batch(BatchSpec(partition_leader_epoch=0), cols,
                                 np.array([TS0, TS0 + 5])) == EXAMPLE_84


def test_example_84_decode():
    b = only_batch(EXAMPLE_84)
    h = b.header
    assert h == BatchHeader(base_offset=0, length=72, partition_leader_epoch=0, magic=2,
                            crc=0x6C2AA154, attributes=0, last_offset_delta=1, base_timestamp=TS0,
                            max_timestamp=TS0 + 5, producer_id=-1, producer_epoch=-1,
                            base_sequence=-1, records_count=2)
    assert h.size == 84 and b.size == 84 and b.position == 0
    assert (h.last_offset, h.next_offset) == (1, 2)
    assert h.compression == compression.NONE and h.timestamp_type == CREATE_TIME
    assert not (h.is_transactional or h.is_control or h.has_delete_horizon or h.has_producer_id)
    assert h.delete_horizon_ms is None and h.last_sequence == -1
    assert b.is_valid() and b.stored_crc() == b.computed_crc() == 0x6C2AA154
    b.ensure_valid()
    assert b.records() == [Record(0, TS0, b"p3", b"10$", ()), Record(1, TS0 + 5, b"p5", b"7$", ())]
    assert list(b) == b.records()
    assert b.control_type() is None
    assert b.raw() == EXAMPLE_84
    cols = b.columns()
    assert len(cols) == 2
    assert cols.rec_pos.tolist() == [61, 73] and cols.rec_end.tolist() == [73, 84]
    assert cols.ts_delta.tolist() == [0, 5] and cols.off_delta.tolist() == [0, 1]
    assert cols.key_pos.tolist() == [66, 78] and cols.key_len.tolist() == [2, 2]
    assert cols.val_pos.tolist() == [69, 81] and cols.val_len.tolist() == [3, 2]
    assert cols.hdr_count.tolist() == [0, 0]
    assert b.record_timestamps().tolist() == [TS0, TS0 + 5]


def test_commit_marker_encode_decode():
    raw = encode_marker(offset=2, commit=True, producer_id=1000, producer_epoch=0,
                        coordinator_epoch=0, timestamp=TS0 + 10, partition_leader_epoch=0)
    assert raw == COMMIT_78
    b = only_batch(COMMIT_78)
    h = b.header
    assert h.attributes == 0x30 and h.is_control and h.is_transactional
    assert (h.base_offset, h.last_offset_delta, h.records_count) == (2, 0, 1)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (1000, 0, -1)
    assert h.base_timestamp == h.max_timestamp == TS0 + 10
    assert b.is_valid()
    assert b.control_type() == COMMIT
    assert b.records() == [Record(2, TS0 + 10, b"\x00\x00\x00\x01", b"\x00" * 6, ())]


def test_tombstone_with_delete_horizon_encode_decode():
    horizon = 1700000100000 + 86400000
    assert horizon == 1700086500000
    spec = BatchSpec(base_offset=7, partition_leader_epoch=0, delete_horizon_ms=horizon)
    raw = encode_batch(spec, [(7, TS0 + 20, b"p3", None)])
    assert raw == TOMBSTONE_73
    b = only_batch(TOMBSTONE_73)
    h = b.header
    assert h.attributes == 0x40 and h.has_delete_horizon and h.delete_horizon_ms == horizon
    assert h.base_timestamp == horizon and h.max_timestamp == TS0 + 20
    assert b.columns().ts_delta.tolist() == [-86499980]
    assert b.records() == [Record(7, TS0 + 20, b"p3", None, ())]
    assert b.records()[0].is_tombstone
    assert b.is_valid()


def test_empty_batch_encode_decode():
    original = BatchHeader(base_offset=20, length=999, partition_leader_epoch=0, magic=2, crc=0,
                           attributes=compression.GZIP | 0x40, last_offset_delta=2,
                           base_timestamp=123, max_timestamp=TS0 + 30, producer_id=42,
                           producer_epoch=3, base_sequence=10, records_count=3)
    # compression and the delete-horizon bit are dropped, base timestamp -1 (§10)
    assert empty_batch(original) == EMPTY_61
    spec = BatchSpec(base_offset=20, partition_leader_epoch=0, producer_id=42, producer_epoch=3,
                     base_sequence=10)
    assert assemble_batch(spec, 2, -1, TS0 + 30, 0, b"") == EMPTY_61
    b = only_batch(EMPTY_61)
    h = b.header
    assert (h.length, h.records_count, h.base_timestamp, h.max_timestamp) == (49, 0, -1, TS0 + 30)
    assert h.size == RECORD_BATCH_OVERHEAD
    assert (h.base_offset, h.last_offset, h.next_offset) == (20, 22, 23)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (42, 3, 10, 12)
    assert b.is_valid()
    assert b.records() == [] and len(b.columns()) == 0 and list(b) == []


def test_empty_batch_keeps_control_transactional_and_timestamp_type():
    original = only_batch(COMMIT_78).header
    raw = empty_batch(original)
    h = only_batch(raw).header
    assert h.attributes == 0x30 and h.records_count == 0 and h.size == 61
    assert only_batch(raw).control_type() is None
    spec = BatchSpec(timestamp_type=LOG_APPEND_TIME, compression=compression.ZSTD)
    h = only_batch(encode_batch(spec, [(0, 5, b"k", b"v")])).header
    h2 = only_batch(empty_batch(h)).header
    assert h2.attributes == 0x08 and h2.timestamp_type == LOG_APPEND_TIME


def test_count_zero_batch_ignores_section_like_kafka():
    # Kafka's DefaultRecordBatch.iterator() returns nothing when count() == 0
    raw = bytearray(assemble_batch(BatchSpec(), 0, -1, -1, 0, b"\x01\x02\x03"))
    b = only_batch(bytes(raw))
    assert b.is_valid() and b.records() == [] and len(b.columns()) == 0


# --- header fields and attributes -------------------------------------------------------------

@pytest.mark.parametrize("spec,attrs", [
    (BatchSpec(), 0x00),
    (BatchSpec(compression=compression.GZIP), 0x01),
    (BatchSpec(compression=compression.SNAPPY), 0x02),
    (BatchSpec(compression=compression.LZ4), 0x03),
    (BatchSpec(compression=compression.ZSTD), 0x04),
    (BatchSpec(timestamp_type=LOG_APPEND_TIME), 0x08),
    (BatchSpec(transactional=True, producer_id=5, producer_epoch=0, base_sequence=0), 0x10),
    (BatchSpec(transactional=True, control=True, producer_id=5, producer_epoch=0), 0x30),
    (BatchSpec(delete_horizon_ms=10), 0x40),
    (BatchSpec(compression=compression.LZ4, timestamp_type=LOG_APPEND_TIME, transactional=True,
               producer_id=1, producer_epoch=1, base_sequence=1, delete_horizon_ms=1), 0x5B),
])
def test_attributes(spec, attrs):
    assert attributes_of(spec) == attrs
    b = only_batch(encode_batch(spec, [(0, 100, b"k", b"v")]))
    h = b.header
    assert h.attributes == attrs
    assert h.compression == spec.compression
    assert h.timestamp_type == spec.timestamp_type
    assert h.is_transactional == spec.transactional
    assert h.is_control == spec.control
    assert h.has_delete_horizon == (spec.delete_horizon_ms is not None)
    assert h.delete_horizon_ms == spec.delete_horizon_ms
    assert b.is_valid()


def test_attributes_high_bits_ignored_by_readers():
    # bits 7..15 are unused: a reader takes the low byte; flags still decode
    raw = bytearray(EXAMPLE_84)
    struct.pack_into(">h", raw, 21, -0x8000 | 0x0100 | 0x80)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    b = only_batch(bytes(raw))
    h = b.header
    assert h.compression == 0 and not h.is_control and not h.has_delete_horizon
    assert h.timestamp_type == CREATE_TIME
    assert b.is_valid() and len(b.records()) == 2


@pytest.mark.parametrize("base,delta,expected", [
    (-1, 5, -1),
    (0, 0, 0),
    (10, 2, 12),
    (2 ** 31 - 1, 0, 2 ** 31 - 1),
    (2 ** 31 - 1, 1, 0),
    (2 ** 31 - 2, 3, 1),
    (2 ** 31 - 10, 9, 2 ** 31 - 1),
    (2 ** 31 - 10, 10, 0),
])
def test_last_sequence_wraps(base, delta, expected):
    assert last_sequence(base, delta) == expected
    spec = BatchSpec(producer_id=7 if base >= 0 else -1, producer_epoch=0 if base >= 0 else -1,
                     base_sequence=base)
    records = [(i, 1000 + i, b"k%d" % i, b"v") for i in range(delta + 1)]
    h = only_batch(encode_batch(spec, records)).header
    assert h.last_sequence == expected


def test_offsets_with_gaps_and_explicit_last_offset_delta():
    spec = BatchSpec(base_offset=100)
    raw = encode_batch(spec, [(100, 1, b"a", b"1"), (103, 2, b"b", b"2"), (107, 3, b"c", None)],
                       last_offset_delta=9)
    b = only_batch(raw)
    assert (b.header.last_offset_delta, b.header.last_offset, b.header.records_count) == (9, 109, 3)
    assert [r.offset for r in b.records()] == [100, 103, 107]
    assert b.columns().off_delta.tolist() == [0, 3, 7]


def test_producer_fields_and_leader_epoch_in_place():
    spec = BatchSpec(base_offset=0, partition_leader_epoch=-1, producer_id=2 ** 40, producer_epoch=77,
                     base_sequence=5)
    raw = bytearray(encode_batch(spec, [(0, 1, b"k", b"v")]))
    h = only_batch(bytes(raw)).header
    assert (h.partition_leader_epoch, h.producer_id, h.producer_epoch, h.base_sequence) == \
        (-1, 2 ** 40, 77, 5)
    crc = h.crc
    with_base_offset(raw, 0, 12345)
    with_leader_epoch(raw, 0, 9)
    b = only_batch(bytes(raw))
    assert (b.header.base_offset, b.header.partition_leader_epoch, b.header.crc) == (12345, 9, crc)
    assert b.is_valid()      # neither field is covered by the CRC
    assert b.records()[0].offset == 12345


# --- records: null vs empty, headers, timestamps ----------------------------------------------

def test_null_vs_empty_keys_and_values():
    recs = [(0, 1, None, None), (1, 2, b"", b""), (2, 3, None, b""), (3, 4, b"", None)]
    raw = encode_batch(BatchSpec(), recs)
    b = only_batch(raw)
    assert [(r.key, r.value) for r in b.records()] == [(None, None), (b"", b""), (None, b""),
                                                      (b"", None)]
    assert b.columns().key_len.tolist() == [-1, 0, -1, 0]
    assert b.columns().val_len.tolist() == [-1, 0, 0, -1]
    # null costs one byte (varint -1 = 01), empty one byte (varint 0 = 00)
    assert raw[61:61 + 7] == bytes.fromhex("0c 00 00 00 01 01 00")           # null, null
    assert raw[61 + 7:61 + 14] == bytes.fromhex("0c 00 02 02 00 00 00")      # empty, empty


def test_headers_including_null_values_and_unicode_keys():
    headers = (Header("a", b"1"), Header("", b""), Header("nul", None), Header("ключ", b"\xff" * 300))
    raw = encode_batch(BatchSpec(), [(0, 5, b"k", b"v", headers), (1, 6, b"k2", None, ())])
    b = only_batch(raw)
    recs = b.records()
    assert recs[0].headers == headers
    assert recs[1].headers == ()
    assert b.columns().hdr_count.tolist() == [4, 0]
    # tuples are accepted as headers too
    raw2 = encode_batch(BatchSpec(), [(0, 5, b"k", b"v", [("a", b"1"), ("", b""), ("nul", None),
                                                             ("ключ", b"\xff" * 300)]),
                                      (1, 6, b"k2", None)])
    assert raw2 == raw


def test_header_bytes_layout():
    raw = encode_batch(BatchSpec(), [(0, 0, None, None, [("hk", b"hv"), ("n", None)])])
    # body: attr 00, ts 00, off 00, key 01, value 01, count 04, "hk" 04 68 6b, 04 68 76, "n" 02 6e, 01
    body = bytes.fromhex("00 00 00 01 01 04 04 68 6b 04 68 76 02 6e 01")
    assert raw[61:] == bytes([len(body) * 2]) + body


def test_negative_timestamp_deltas_after_delete_horizon():
    horizon = 2_000_000_000_000
    ts = [1_000_000_000_000, 1_000_000_000_500, 999_999_999_000]
    recs = [(i, t, b"k%d" % i, None if i == 1 else b"v") for i, t in enumerate(ts)]
    b = only_batch(encode_batch(BatchSpec(delete_horizon_ms=horizon), recs))
    assert b.header.base_timestamp == horizon and b.header.max_timestamp == max(ts)
    assert b.columns().ts_delta.tolist() == [t - horizon for t in ts]
    assert all(d < 0 for d in b.columns().ts_delta.tolist())
    assert [r.timestamp for r in b.records()] == ts


def test_record_timestamps_not_sorted_and_negative():
    ts = [50, 10, -1, 2 ** 62]
    b = only_batch(encode_batch(BatchSpec(), [(i, t, b"k", b"v") for i, t in enumerate(ts)]))
    assert b.header.base_timestamp == 50 and b.header.max_timestamp == 2 ** 62
    assert [r.timestamp for r in b.records()] == ts


def test_log_append_time_records_read_max_timestamp():
    ts = [1000, 3000, 2000]
    raw = encode_batch(BatchSpec(timestamp_type=LOG_APPEND_TIME),
                       [(i, t, b"k", b"v") for i, t in enumerate(ts)])
    b = only_batch(raw)
    assert b.header.timestamp_type == LOG_APPEND_TIME and b.header.max_timestamp == 3000
    assert [r.timestamp for r in b.records()] == [3000, 3000, 3000]
    assert b.record_timestamps().tolist() == [3000, 3000, 3000]
    # the broker stamping LogAppendTime: set bit 3 and MaxTimestamp, recompute the CRC
    raw = bytearray(encode_batch(BatchSpec(), [(i, t, b"k", b"v") for i, t in enumerate(ts)]))
    struct.pack_into(">h", raw, 21, 0x08)
    struct.pack_into(">q", raw, 35, 77777)
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    b = only_batch(bytes(raw))
    assert b.is_valid() and [r.timestamp for r in b.records()] == [77777] * 3


def test_large_values_multi_byte_lengths():
    big = bytes(range(256)) * 600   # 153600 bytes: 3-byte length varints
    b = only_batch(encode_batch(BatchSpec(), [(0, 1, big[:200], big), (1, 2, None, big[:64])]))
    assert b.records() == [Record(0, 1, big[:200], big, ()), Record(1, 2, None, big[:64], ())]


def test_encode_batch_rejects_empty():
    with pytest.raises(ValueError):
        encode_batch(BatchSpec(), [])
    with pytest.raises(ValueError):
        encode_columnar_batch(BatchSpec(), columnar_records([], []), np.zeros(0, np.int64))


def test_columnar_inputs_pyarrow_and_numpy():
    pa = pytest.importorskip("pyarrow")
    keys = pa.array([b"a", None, b"ccc"], type=pa.binary())
    values = pa.array(["x", "", None], type=pa.string())
    ts = np.array([5, 6, 7])
    raw = encode_columnar_batch(BatchSpec(), columnar_records(keys, values), ts)
    assert raw == encode_batch(BatchSpec(), [(0, 5, b"a", b"x"), (1, 6, None, b""),
                                             (2, 7, b"ccc", None)])
    # sliced arrow arrays and 2-D numpy keys
    sliced = pa.array([b"zz", b"a", None, b"ccc"])[1:]
    assert encode_columnar_batch(BatchSpec(), columnar_records(sliced, values), ts) == raw
    k2 = np.frombuffer(b"abcdef", np.uint8).reshape(3, 2)
    raw2 = encode_columnar_batch(BatchSpec(), columnar_records(k2, [b"1", b"2", b"3"]), ts)
    assert [r.key for r in only_batch(raw2).records()] == [b"ab", b"cd", b"ef"]


# --- iteration over a log buffer (§12) --------------------------------------------------------

def _three_batches() -> bytes:
    return (encode_batch(BatchSpec(base_offset=0), [(0, 1, b"a", b"1")])
            + encode_batch(BatchSpec(base_offset=1, compression=compression.GZIP),
                           [(1, 2, b"b", b"2"), (2, 3, b"c", b"3")])
            + encode_batch(BatchSpec(base_offset=3), [(3, 4, b"d", None)]))


def test_iter_batches_positions_and_trailing_partial_batch():
    log = _three_batches()
    batches = list(iter_batches(log))
    assert [b.base_offset for b in batches] == [0, 1, 3]
    assert [b.position for b in batches] == [0, batches[0].size, batches[0].size + batches[1].size]
    assert sum(b.size for b in batches) == len(log)
    assert [r.offset for b in batches for r in b.records()] == [0, 1, 2, 3]
    positions, end = batch_positions(log)
    assert positions == [b.position for b in batches] and end == len(log)
    # every truncation yields the complete batches before the cut and stops silently
    for cut in range(len(log)):
        got = list(iter_batches(log[:cut]))
        assert [b.position for b in got] == [p for p, b in zip(positions, batches)
                                             if p + b.size <= cut]
    # start/end arguments
    assert [b.base_offset for b in iter_batches(log, batches[1].position)] == [1, 3]
    assert [b.base_offset for b in iter_batches(log, 0, batches[2].position)] == [0, 1]
    # a memoryview, bytearray and numpy buffer work too
    for buf in (memoryview(log), bytearray(log), np.frombuffer(log, np.uint8)):
        assert [r.value for b in iter_batches(buf) for r in b.records()] == [b"1", b"2", b"3", None]


def test_iter_batches_stops_when_17_bytes_or_fewer_remain():
    log = _three_batches()
    # a tail of up to 17 bytes is ignored even when it holds a size field
    assert len(list(iter_batches(log + b"\x00" * 17))) == 3
    with pytest.raises(CorruptRecordError):
        list(iter_batches(log + b"\x00" * 18))       # size 0 < 14


def test_iter_batches_size_too_small():
    raw = bytearray(EXAMPLE_84)
    struct.pack_into(">i", raw, 8, 13)
    with pytest.raises(CorruptRecordError) as e:
        list(iter_batches(bytes(raw)))
    assert e.value.field == "length" and e.value.position == 0
    # >= 14 but smaller than a v2 header
    struct.pack_into(">i", raw, 8, 40)
    with pytest.raises(CorruptRecordError) as e:
        list(iter_batches(bytes(raw)))
    assert e.value.field == "length"


@pytest.mark.parametrize("magic", [3, 4, 127, -1, -128])
def test_iter_batches_invalid_magic(magic):
    raw = bytearray(EXAMPLE_84)
    struct.pack_into(">b", raw, 16, magic)
    with pytest.raises(CorruptRecordError) as e:
        list(iter_batches(bytes(raw)))
    assert e.value.field == "magic"


def test_crc_covers_attributes_to_end():
    for pos in range(21, 84):
        raw = bytearray(EXAMPLE_84)
        raw[pos] ^= 0x01
        b = only_batch(bytes(raw))
        assert not b.is_valid()
        with pytest.raises(CorruptRecordError) as e:
            b.ensure_valid()
        assert e.value.field == "crc" and e.value.offset == 0
    for pos in list(range(0, 8)) + list(range(12, 16)):
        raw = bytearray(EXAMPLE_84)
        raw[pos] ^= 0x01
        assert only_batch(bytes(raw)).is_valid()


def test_corrupt_records_section():
    def patched(section: bytes, count: int) -> bytes:
        return assemble_batch(BatchSpec(), 0, 0, 0, count, section)

    good = EXAMPLE_84[61:]
    cases = {
        "trailing": (good + b"\x00", 2),
        "too few bytes": (good[:-1], 2),
        "count too high": (good, 3),
        "count too low": (good, 1),
        "negative count": (good, -1),
        "record length too long": (b"\x18" + good[1:], 2),
        "negative header count": (bytes.fromhex("0c 00 00 00 01 01 01"), 1),
        "negative header key": (bytes.fromhex("10 00 00 00 01 01 02 01 01"), 1),
        "varint too long": (bytes.fromhex("0c 00 ff ff ff ff ff ff ff ff ff ff 00 01 01 00"), 1),
    }
    for name, (section, count) in cases.items():
        b = only_batch(patched(section, count))
        assert b.is_valid(), name
        with pytest.raises(CorruptRecordError) as e:
            b.columns()
        assert e.value.offset == 0, name
        with pytest.raises(CorruptRecordError):
            b.records()


def test_corrupt_compressed_section():
    raw = encode_batch(BatchSpec(compression=compression.GZIP), [(0, 1, b"k", b"v" * 100)])
    broken = raw[:-6] + bytes([raw[-6] ^ 0xFF]) + raw[-5:]      # the gzip trailer's CRC-32
    b = only_batch(broken)
    with pytest.raises(CorruptRecordError) as e:
        b.records()
    assert e.value.offset == 0
    # unknown codec 5..7
    for codec in (5, 6, 7):
        raw = bytearray(encode_batch(BatchSpec(), [(0, 1, b"k", b"v")]))
        struct.pack_into(">h", raw, 21, codec)
        with pytest.raises(CorruptRecordError):
            only_batch(bytes(raw)).records()


def test_records_copy_only_their_batch():
    # records() must not depend on (or copy) bytes outside the batch
    log = _three_batches()
    big = bytearray(log) + bytearray(1 << 20)
    assert [r.value for b in iter_batches(bytes(big), 0, len(log)) for r in b.records()] == \
        [b"1", b"2", b"3", None]


# --- property: encode -> iter_batches -> records round-trips ----------------------------------

HEADER = st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)).map(lambda t: Header(*t))
RECORD = st.tuples(
    st.none() | st.binary(max_size=40),                          # key
    st.none() | st.binary(max_size=200),                         # value
    st.lists(HEADER, max_size=3).map(tuple),                     # headers
    st.integers(-(2 ** 40), 2 ** 45),                            # timestamp
    st.integers(1, 1000),                                        # offset gap
)


@st.composite
def batches(draw):
    base = draw(st.integers(0, 2 ** 62))
    items = draw(st.lists(RECORD, min_size=1, max_size=12))
    records = []
    off = base
    for i, (k, v, hs, ts, gap) in enumerate(items):
        if i:
            off += gap
        records.append(Record(off, ts, k, v, hs))
    codec = draw(st.sampled_from([0, 1, 2, 3, 4]))
    ts_type = draw(st.sampled_from([CREATE_TIME, LOG_APPEND_TIME]))
    horizon = draw(st.none() | st.integers(0, 2 ** 45))
    pid = draw(st.sampled_from([-1, 0, 2 ** 50]))
    spec = BatchSpec(base_offset=base, partition_leader_epoch=draw(st.integers(-1, 2 ** 31 - 1)),
                     compression=codec, timestamp_type=ts_type, delete_horizon_ms=horizon,
                     producer_id=pid, producer_epoch=-1 if pid < 0 else 3,
                     base_sequence=-1 if pid < 0 else draw(st.integers(0, 2 ** 31 - 1)),
                     transactional=pid >= 0 and draw(st.booleans()))
    return spec, records


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches())
def test_round_trip_every_codec(case):
    spec, records = case
    raw = encode_batch(spec, records)
    b = only_batch(raw)
    h = b.header
    assert b.is_valid()
    assert h.base_offset == spec.base_offset and h.records_count == len(records)
    assert h.last_offset == records[-1].offset
    assert h.compression == spec.compression and h.timestamp_type == spec.timestamp_type
    assert h.max_timestamp == max(r.timestamp for r in records)
    assert h.base_timestamp == (spec.delete_horizon_ms if spec.delete_horizon_ms is not None
                                else records[0].timestamp)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == \
        (spec.producer_id, spec.producer_epoch, spec.base_sequence)
    got = b.records()
    if spec.timestamp_type == LOG_APPEND_TIME:
        expected = [r._replace(timestamp=h.max_timestamp) for r in records]
    else:
        expected = records
    assert got == expected
    # the same records through the columnar writer give the same bytes
    cols = columnar_records([r.key for r in records], [r.value for r in records],
                            [r.headers for r in records])
    offs = np.array([r.offset - spec.base_offset for r in records], dtype=np.int64)
    assert encode_columnar_batch(spec, cols, np.array([r.timestamp for r in records]), offs) == raw


def test_overlong_varints_wrap_to_32_bits_like_java():
    # Kafka's readVarint accumulates into a Java int: a 5-byte varint's bits past 32 are lost,
    # so "84 80 80 80 10" reads as zigzag(4) = 2. Header key length and value length written so.
    body = (bytes.fromhex("00 00 00") + bytes.fromhex("01") + bytes.fromhex("01")   # attr ts off k v
            + bytes.fromhex("02")                                                   # 1 header
            + bytes.fromhex("84 80 80 80 10") + b"hk"                               # key length 2
            + bytes.fromhex("84 80 80 80 10") + b"hv")                              # value length 2
    section = encode_varint(len(body)) + body
    b = only_batch(assemble_batch(BatchSpec(), 0, 0, 0, 1, section))
    assert b.records() == [Record(0, 0, None, None, (Header("hk", b"hv"),))]
    assert b.columns().hdr_count.tolist() == [1]


def _small_sample(rng):
    """(n, base offset, timestamps, keys, values) of a few random records for the small encoders'
    differential tests: keys and values None, a str, or bytes of sizes around varint boundaries."""
    from compactlog.record.batch import SMALL_BATCH_RECORDS

    def blob():
        r = rng.random()
        if r < 0.2:
            return None
        if r < 0.3:
            return "s%d" % rng.randrange(1000)
        return rng.randbytes(rng.choice([0, 1, 5, 127, 128, 300, 20000]))
    n = rng.randint(1, SMALL_BATCH_RECORDS)
    base = rng.choice([0, 5, 2 ** 40])
    stamps = [rng.choice([-1, 0, 10 ** 12 + rng.randrange(10 ** 6), 2 ** 62]) for _ in range(n)]
    return n, base, stamps, [blob() for _ in range(n)], [blob() for _ in range(n)]


def test_a_small_batch_is_encoded_in_python_byte_for_byte_as_the_bulk_writer_does():
    """encode_small_batch (a coordinator's record, a marker: no numpy set-up) against
    encode_columnar_batch on random keys, values, timestamps, offsets and headers' fields."""
    import random

    import numpy as np

    from compactlog.record import batch as B
    rng = random.Random(28)
    for _ in range(500):
        n, base, stamps, keys, values = _small_sample(rng)
        spec = B.BatchSpec(base_offset=base, compression=rng.choice([0, 0, 1]), transactional=rng.random() < 0.5,
                           producer_id=rng.choice([-1, 7, 2 ** 50]), producer_epoch=rng.choice([-1, 3]),
                           base_sequence=rng.choice([-1, 0, 99]), partition_leader_epoch=rng.choice([-1, 0, 4]),
                           delete_horizon_ms=rng.choice([None, None, 10 ** 12]))
        offsets = sorted(rng.sample(range(base, base + 10), n))
        last = rng.choice([None, offsets[-1] - base + 3])
        small = B.encode_small_batch(spec, [o - base for o in offsets], stamps, keys, values, last)
        bulk = B.encode_columnar_batch(spec, B.columnar_records(keys, values), np.array(stamps, dtype=np.int64),
                                       np.array(offsets, dtype=np.int64) - base, last)
        assert small == bulk


def test_a_plain_small_batch_is_the_small_encoders_bytes_with_the_header_read_back_from_them():
    """encode_plain_small_batch (a coordinator's own records) against encode_small_batch of the
    same records at consecutive offsets, and its header against BatchHeader.unpack of its bytes."""
    import random

    from compactlog.record import batch as B
    rng = random.Random(280)
    for _ in range(500):
        n, base, stamps, keys, values = _small_sample(rng)
        epoch = rng.choice([-1, 0, 4, 2 ** 31 - 1])
        raw, header = B.encode_plain_small_batch(base, epoch, stamps, keys, values)
        assert raw == B.encode_small_batch(B.BatchSpec(base_offset=base, partition_leader_epoch=epoch),
                                           range(n), stamps, keys, values)
        assert header == B.BatchHeader.unpack(raw, 0)
        assert B.RecordBatch(header, raw, 0).records() == B.RecordBatch(B.BatchHeader.unpack(raw, 0), raw, 0).records()
