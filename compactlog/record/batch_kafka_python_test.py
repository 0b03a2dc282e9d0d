"""Cross-check of ``batch.py`` against an independent implementation: kafka-python's record module.

Batches compactlog writes parse in kafka-python, batches kafka-python writes parse here, and the
two are byte-identical where both are deterministic (uncompressed, same header fields).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

pytest.importorskip("kafka", reason="kafka-python (the test extra) is not installed")

import kafka.codec as kcodec  # noqa: E402
from kafka.record.default_records import (DefaultRecordBatch,  # noqa: E402
                                          DefaultRecordBatchBuilder)
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder  # noqa: E402

from compactlog.record import compression  # noqa: E402
from compactlog.record.batch import (LOG_APPEND_TIME, BatchSpec, Header, Record,  # noqa: E402
                                     encode_batch, iter_batches)
from compactlog.record.batch import encode_marker
from compactlog.record.control import COMMIT  # noqa: E402

_AVAILABLE = {0: True, 1: kcodec.has_gzip(), 2: kcodec.has_snappy(), 3: kcodec.has_lz4(),
              4: kcodec.has_zstd()}
_MODULE = {2: "python-snappy", 3: "lz4", 4: "zstandard"}


def codec_param(codec: int):
    marks = []
    if not _AVAILABLE[codec]:
        marks.append(pytest.mark.skip(
            reason=f"kafka-python cannot use {compression.CODEC_NAMES[codec]}: the "
                   f"'{_MODULE[codec]}' module is not installed"))
    return pytest.param(codec, id=compression.CODEC_NAMES[codec], marks=marks)


ALL_CODECS = [codec_param(c) for c in range(5)]


def kp_build(records, *, codec=0, producer_id=-1, producer_epoch=-1, base_sequence=-1,
             transactional=False) -> bytes:
    """kafka-python's DefaultRecordBatchBuilder: records are (offset delta, ts, key, value, headers)."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional,
                                  producer_id=producer_id, producer_epoch=producer_epoch,
                                  base_sequence=base_sequence, batch_size=1 << 30)
    for off, ts, key, value, headers in records:
        assert b.append(off, timestamp=ts, key=key, value=value, headers=list(headers)) is not None
    return bytes(b.build())


def kp_read(raw: bytes):
    """Every batch kafka-python finds in ``raw``, with its CRC check and records."""
    out = []
    for batch in MemoryRecords(raw):
        assert isinstance(batch, DefaultRecordBatch)
        crc_ok = batch.validate_crc()
        out.append((batch, crc_ok, list(batch)))
    return out


def as_tuples(records):
    return [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in records]


# --- byte-identical where both are deterministic ----------------------------------------------

def test_worked_example_is_what_kafka_python_writes():
    ts = 1700000000000
    theirs = kp_build([(0, ts, b"p3", b"10$", []), (1, ts + 5, b"p5", b"7$", [])])
    ours = encode_batch(BatchSpec(partition_leader_epoch=0),
                        [(0, ts, b"p3", b"10$"), (1, ts + 5, b"p5", b"7$")])
    assert ours == theirs and len(ours) == 84


def test_kafka_python_header_defaults():
    # kafka-python (as a producer) writes base offset 0 and partition leader epoch 0, the broker
    # overwrites both; producer fields are what it was given (-1 when not idempotent)
    (batch, crc_ok, _), = kp_read(kp_build([(0, 5, b"k", b"v", [])]))
    assert (batch.base_offset, batch.leader_epoch, batch.producer_id, batch.producer_epoch,
            batch.base_sequence) == (0, 0, -1, -1, -1)
    assert crc_ok


def spec_like_kafka_python(pid, epoch, seq, transactional, codec=0) -> BatchSpec:
    return BatchSpec(base_offset=0, partition_leader_epoch=0, compression=codec,
                     producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     transactional=transactional)


KEYS = st.none() | st.binary(max_size=30)
VALUES = st.none() | st.binary(max_size=300)
HEADERS = st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=10)), max_size=3)


@st.composite
def record_lists(draw, min_size=1, max_size=10):
    n = draw(st.integers(min_size, max_size))
    off = 0
    out = []
    for i in range(n):
        if i:
            off += draw(st.integers(1, 5))
        ts = draw(st.integers(-(2 ** 40), 2 ** 44))
        out.append((off, ts, draw(KEYS), draw(VALUES), draw(HEADERS)))
    return out


PRODUCER = st.sampled_from([(-1, -1, -1, False), (1000, 0, 0, False), (2 ** 40, 5, 2 ** 31 - 1, True),
                            (7, 32767, 123456, True)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists(), PRODUCER)
def test_uncompressed_byte_identical(records, producer):
    pid, epoch, seq, txn = producer
    theirs = kp_build(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                      transactional=txn)
    ours = encode_batch(spec_like_kafka_python(pid, epoch, seq, txn),
                        [Record(o, t, k, v, tuple(Header(*h) for h in hs))
                         for o, t, k, v, hs in records])
    assert ours == theirs


# --- compactlog writes, kafka-python reads ----------------------------------------------------

@pytest.mark.parametrize("codec", ALL_CODECS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists(), base=st.integers(0, 2 ** 50), epoch=st.integers(-1, 2 ** 31 - 1))
def test_kafka_python_reads_ours(codec, records, base, epoch):
    spec = BatchSpec(base_offset=base, partition_leader_epoch=epoch, compression=codec)
    recs = [Record(base + o, t, k, v, tuple(Header(*h) for h in hs)) for o, t, k, v, hs in records]
    raw = encode_batch(spec, recs)
    (batch, crc_ok, theirs), = kp_read(raw)
    assert crc_ok
    assert batch.compression_type == codec
    assert (batch.base_offset, batch.leader_epoch) == (base, epoch)
    assert batch.last_offset == recs[-1].offset and batch.records_count == len(recs)
    assert batch.max_timestamp == max(r.timestamp for r in recs)
    assert as_tuples(theirs) == as_tuples(recs)


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_kafka_python_reads_our_large_multi_block_batches(codec):
    # > 64 KiB of records: several lz4 blocks, several xerial snappy blocks
    recs = [Record(i, 1000 + i, b"key-%05d" % i, (b"value %d " % i) * 40, ()) for i in range(600)]
    raw = encode_batch(BatchSpec(compression=codec), recs)
    if codec:
        assert len(raw) < 100_000 < sum(len(r.value) for r in recs)
    (batch, crc_ok, theirs), = kp_read(raw)
    assert crc_ok and as_tuples(theirs) == as_tuples(recs)


def test_kafka_python_reads_log_append_time_delete_horizon_and_markers():
    recs = [Record(10, 100, b"a", b"1"), Record(11, 300, b"b", None)]
    raw = encode_batch(BatchSpec(base_offset=10, timestamp_type=LOG_APPEND_TIME), recs)
    (batch, crc_ok, theirs), = kp_read(raw)
    assert crc_ok and batch.timestamp_type == 1
    assert [r.timestamp for r in theirs] == [300, 300]
    raw = encode_batch(BatchSpec(base_offset=10, delete_horizon_ms=10 ** 12), recs)
    (batch, crc_ok, theirs), = kp_read(raw)
    assert crc_ok and [r.timestamp for r in theirs] == [100, 300]
    raw = encode_marker(offset=5, commit=True, producer_id=9, producer_epoch=1, coordinator_epoch=2,
                        timestamp=77)
    (batch, crc_ok, theirs), = kp_read(raw)
    assert crc_ok and batch.is_control_batch and batch.is_transactional
    assert theirs[0].commit and theirs[0].type == COMMIT and theirs[0].offset == 5


def test_kafka_python_reads_a_log_of_many_batches():
    log = b"".join(encode_batch(BatchSpec(base_offset=i * 3, compression=i % 5),
                                [Record(i * 3 + j, i, b"k%d" % j, b"v" * (i + j), ()) for j in range(3)])
                   for i in range(10) if _AVAILABLE[i % 5])
    ours = [r for b in iter_batches(log) for r in b.records()]
    theirs = [r for b, ok, rs in kp_read(log) for r in rs]
    assert as_tuples(theirs) == as_tuples(ours)


# --- kafka-python writes, compactlog reads ----------------------------------------------------

@pytest.mark.parametrize("codec", ALL_CODECS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=record_lists(), producer=PRODUCER)
def test_we_read_kafka_python(codec, records, producer):
    pid, epoch, seq, txn = producer
    raw = kp_build(records, codec=codec, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                   transactional=txn)
    (b,) = iter_batches(raw)
    h = b.header
    assert b.is_valid()
    b.ensure_valid()
    # kafka-python sends uncompressed when compression does not pay
    assert h.compression in (codec, 0)
    assert (h.base_offset, h.partition_leader_epoch) == (0, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (pid, epoch, seq, txn)
    assert h.records_count == len(records) and h.last_offset_delta == records[-1][0]
    expected = [Record(o, t, k, v, tuple(Header(*x) for x in hs)) for o, t, k, v, hs in records]
    assert b.records() == expected


@pytest.mark.parametrize("codec", ALL_CODECS)
def test_we_read_kafka_python_compressed_multi_block(codec):
    records = [(i, 1000 + i, b"key-%05d" % i, (b"value %d " % i) * 40, []) for i in range(600)]
    raw = kp_build(records, codec=codec)
    (b,) = iter_batches(raw)
    assert b.header.compression == codec and b.is_valid()
    assert [(r.offset, r.key, r.value) for r in b.records()] == [(o, k, v) for o, _, k, v, _ in records]
    if codec == compression.LZ4:
        # kafka-python's lz4 frames carry a content size (FLG 0x68): Kafka's reader skips it
        assert raw[61:66] == compression.LZ4_MAGIC + b"\x68"


def test_we_read_kafka_python_memory_records_builder():
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20, offset=0)
    for i in range(5):
        builder.append(timestamp=1_000 + i, key=b"k%d" % i, value=None if i == 3 else b"v%d" % i,
                       headers=[("h", b"%d" % i)])
    builder.skip(2)
    builder.append(timestamp=2_000, key=b"last", value=b"x")
    builder.close()
    (b,) = iter_batches(bytes(builder.buffer()))
    assert [r.offset for r in b.records()] == [0, 1, 2, 3, 4, 7]
    assert b.header.last_offset_delta == 7 and b.header.records_count == 6
    assert b.records()[3].value is None and b.records()[2].headers == (Header("h", b"2"),)


# --- differential fuzz: where both decoders accept a batch they must agree ---------------------

def _attributes_bytes(b):
    """The attributes byte of every record of an uncompressed batch (kafka-python reads it as a
    varint, so a value >= 0x80 derails it: a kafka-python quirk, not a format rule)."""
    from compactlog.record.varint import decode_varint
    cols = b.columns()
    raw = cols.data
    return [int(raw[decode_varint(raw, int(p))[1]]) for p in cols.rec_pos]


_MUTATION = st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(0, 255)), min_size=1, max_size=3)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(record_lists(max_size=4), _MUTATION)
def test_differential_against_kafka_python(records, mutation):
    import struct

    import crc32c

    from compactlog.errors import CorruptRecordError
    raw = bytearray(kp_build(records))
    for pos, value in mutation:
        raw[61 + pos % (len(raw) - 61)] = value          # mutate the records section only
    struct.pack_into(">I", raw, 17, crc32c.crc32c(bytes(raw[21:])))
    (b,) = iter_batches(bytes(raw))
    try:
        ours = as_tuples(b.records())
    except CorruptRecordError as e:
        ours = e
    try:
        theirs = as_tuples(kp_read(bytes(raw))[0][2])
    except Exception as e:       # kafka-python raises assorted errors on corrupt input
        theirs = e
    # a kafka-python quirk: it reads the record attributes byte as a varint
    attr_quirk = not isinstance(ours, Exception) and any(a >= 0x80 for a in _attributes_bytes(b))
    # and a third: it reads a 5-byte varint offset delta past 32 bits, where Kafka's
    # ByteUtils.readVarint keeps the low 32 bits of the zigzag value (as compactlog does)
    if not isinstance(theirs, Exception) and any(not -2**31 <= t[0] - b.base_offset < 2**31 for t in theirs):
        attr_quirk = True
    if not isinstance(ours, Exception) and not isinstance(theirs, Exception) and not attr_quirk:
        assert ours == theirs
    elif not isinstance(ours, Exception):
        # the other kafka-python quirk: a header key that is not UTF-8 (Kafka decodes it as
        # Java's String does, replacing malformed bytes)
        assert attr_quirk or "UnicodeDecodeError" in str(theirs), (bytes(raw).hex(), theirs)
    # kafka-python accepting what compactlog refuses is expected: it reads varints of any length
    # (Kafka: at most 5/10 bytes) and does not check that offset deltas increase
