"""Fuzzing the decoder (``batch.py``'s ``iter_batches``, legacy entries through ``legacy.py``): any
bytes give valid results or CorruptRecordError, never another exception, a crash or a hang
(arbitrary bytes, forged headers, mutated valid batches). Apart from ``batch_test.py`` because
its rounds take seconds (the slow lane runs them all)."""

from __future__ import annotations

import os
import struct

import crc32c
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from compactlog.errors import CorruptRecordError
from compactlog.record import compression
from compactlog.record.batch import (LOG_APPEND_TIME, BatchSpec, Header, Record, RecordBatch,
                                     encode_batch, iter_batches)
from compactlog.record.batch import encode_marker
from compactlog.record.legacy import LegacyEntry
from compactlog.record.varint import encode_varint

# COMPACTLOG_FUZZ_EXAMPLES=20000 for a long run
FUZZ = settings(max_examples=int(os.environ.get("COMPACTLOG_FUZZ_EXAMPLES", "300")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VECTORS = os.path.join(REPO, "tests", "data", "kafka-vectors")


def _fixture(rel: str) -> bytes:
    with open(os.path.join(VECTORS, rel), "rb") as f:
        return f.read()


def _check_batch(b) -> None:
    """Every decoding entry point of one batch: a result or CorruptRecordError."""
    for call in (b.is_valid, b.stored_crc, b.computed_crc, b.raw):
        call()
    try:
        b.ensure_valid()
        assert b.is_valid()
    except CorruptRecordError as e:
        assert not b.is_valid()
        assert e.field in ("crc", "length")
    if isinstance(b, RecordBatch):
        h = b.header
        assert h.magic == 2 and b.size == h.length + 12 >= 61
        for prop in ("last_offset", "next_offset", "compression", "timestamp_type",
                     "is_transactional", "is_control", "delete_horizon_ms", "last_sequence"):
            getattr(h, prop)
        try:
            cols = b.columns()
        except CorruptRecordError:
            cols = None
        try:
            recs = b.records()
        except CorruptRecordError:
            assert cols is None
            recs = None
        if cols is not None:
            assert recs is not None
            assert len(cols) == len(recs) == max(h.records_count, 0)
            assert [r.offset for r in recs] == (h.base_offset + cols.off_delta).tolist()
            assert [r.timestamp for r in recs] == b.record_timestamps().tolist()
            if h.timestamp_type == LOG_APPEND_TIME:
                assert all(r.timestamp == h.max_timestamp for r in recs)
            for r in recs:
                assert r.key is None or isinstance(r.key, bytes)
                assert r.value is None or isinstance(r.value, bytes)
                for hd in r.headers:
                    assert isinstance(hd, Header) and isinstance(hd.key, str)
        try:
            b.control_type()
        except CorruptRecordError:
            pass
    else:
        assert isinstance(b, LegacyEntry)
        try:
            recs = b.records()
            assert len(recs) == b.records_count >= 1
            b.base_offset, b.last_offset, b.max_timestamp, b.base_timestamp, b.last_offset_delta
        except CorruptRecordError:
            pass


def exercise(buf) -> list:
    """Decode ``buf`` as a log; returns the batches found before any iteration error."""
    found = []
    try:
        for b in iter_batches(buf):
            found.append(b)
            _check_batch(b)
    except CorruptRecordError:
        pass
    return found


# --- seeds: valid batches of every kind ---------------------------------------------------------

def _seeds() -> list[bytes]:
    recs = [Record(5, 1000, b"key", b"value", (Header("h", b"v"), Header("n", None))),
            Record(6, 900, None, b"", ()), Record(9, 1100, b"", None, ())]
    seeds = [encode_batch(BatchSpec(base_offset=5, compression=c), recs) for c in range(5)]
    seeds.append(encode_batch(BatchSpec(base_offset=5, timestamp_type=LOG_APPEND_TIME,
                                        delete_horizon_ms=5000, producer_id=3, producer_epoch=1,
                                        base_sequence=2 ** 31 - 2), recs))
    seeds.append(encode_marker(offset=3, commit=True, producer_id=1, producer_epoch=0,
                               coordinator_epoch=0, timestamp=10))
    seeds.append(_fixture("IBM+sarama/uncompressed_record.bin"))
    seeds.append(_fixture("IBM+sarama/snappy_compressed_record.bin"))
    seeds.append(_fixture("IBM+sarama/lz4_compressed_record.bin"))
    seeds.append(_fixture("IBM+sarama/control_batch.bin"))
    seeds.append(_fixture("dpkp+kafka-python/record_batch_data_v2.bin"))
    seeds.append(_fixture("dpkp+kafka-python/record_batch_data_v1.bin"))
    seeds.append(_fixture("dpkp+kafka-python/control_batch_data_v2.bin"))
    # legacy: a v1 gzip wrapper around two v1 messages, and a v0 message
    seeds.append(_legacy_wrapper())
    seeds.append(_legacy_message(0, 7, b"k", b"v"))
    return seeds


def _legacy_message(magic, offset, key, value, timestamp=1, attributes=0) -> bytes:
    import zlib
    body = struct.pack(">bB", magic, attributes) + (struct.pack(">q", timestamp) if magic else b"")
    for f in (key, value):
        body += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    body = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(body)) + body


def _legacy_wrapper(codec=compression.GZIP) -> bytes:
    inner = _legacy_message(1, 0, b"a", b"1") + _legacy_message(1, 1, b"b", None)
    return _legacy_message(1, 11, None, compression.compress(codec, inner), attributes=codec)


SEEDS = _seeds()


def test_seeds_are_valid():
    for seed in SEEDS:
        found = exercise(seed)
        assert found and sum(b.size for b in found) == len(seed)


# --- arbitrary bytes ----------------------------------------------------------------------------

@FUZZ
@given(st.binary(max_size=400))
def test_arbitrary_bytes(data):
    exercise(data)


@FUZZ
@given(st.binary(max_size=300), st.integers(0, 7), st.integers(-3, 40), st.integers(0, 2 ** 16 - 1),
       st.booleans())
def test_forged_v2_header_over_random_section(section, codec, count, attr_high, fix_crc):
    """A well-formed 61-byte header (any codec bits, any count) over arbitrary records bytes."""
    attrs = (attr_high & ~0x07 | codec) & 0xFFFF
    attrs = attrs - 0x10000 if attrs >= 0x8000 else attrs
    after = struct.pack(">hiqqqhii", attrs, max(count - 1, 0), 100, 200, -1, -1, -1, count) + section
    crc = crc32c.crc32c(after) if fix_crc else 0
    raw = struct.pack(">qiib", 0, 9 + len(after), 0, 2) + struct.pack(">I", crc) + after
    found = exercise(raw)
    assert len(found) == 1


# records sections built from plausible fields (varints of any size and sign)
VARINT = st.one_of(st.integers(-2, 20), st.integers(-(2 ** 31), 2 ** 31 - 1))
FIELD = st.one_of(
    VARINT.map(encode_varint),
    st.integers(-(2 ** 63), 2 ** 63 - 1).map(encode_varint),
    st.binary(max_size=8),
    st.just(b"\xff" * 11),
)


@FUZZ
@given(st.lists(st.lists(FIELD, max_size=10), max_size=5), st.integers(-1, 6),
       st.sampled_from([0, 1, 2, 3, 4]))
def test_structured_garbage_records(records, count, codec):
    section = b""
    for fields in records:
        body = b"".join(fields)
        section += encode_varint(len(body)) + body
    if codec:
        section = compression.compress(codec, section)
    after = struct.pack(">hiqqqhii", codec, 0, 0, 0, -1, -1, -1, count) + section
    raw = struct.pack(">qiib", 0, 9 + len(after), 0, 2) + struct.pack(">I", crc32c.crc32c(after)) + after
    (b,) = exercise(raw)
    assert b.is_valid()


# --- mutations of valid batches -----------------------------------------------------------------

MUTATION = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10 ** 6), st.integers(0, 7)),
    st.tuples(st.just("set"), st.integers(0, 10 ** 6), st.integers(0, 255)),
    st.tuples(st.just("truncate"), st.integers(0, 10 ** 6), st.just(0)),
    st.tuples(st.just("insert"), st.integers(0, 10 ** 6), st.integers(0, 255)),
    st.tuples(st.just("delete"), st.integers(0, 10 ** 6), st.just(0)),
    st.tuples(st.just("length"), st.integers(-(2 ** 31), 2 ** 31 - 1), st.just(0)),
    st.tuples(st.just("length+"), st.integers(-20, 20), st.just(0)),
    st.tuples(st.just("count"), st.integers(-(2 ** 31), 2 ** 31 - 1), st.just(0)),
    st.tuples(st.just("count+"), st.integers(-3, 3), st.just(0)),
)


def mutate(raw: bytes, ops, fix_crc: bool) -> bytes:
    buf = bytearray(raw)
    for op, a, b in ops:
        if not buf:
            break
        i = a % len(buf)
        if op == "flip":
            buf[i] ^= 1 << b
        elif op == "set":
            buf[i] = b
        elif op == "truncate":
            del buf[i:]
        elif op == "insert":
            buf.insert(i, b)
        elif op == "delete":
            del buf[i]
        elif len(buf) >= 61 and op == "length":
            struct.pack_into(">i", buf, 8, a)
        elif len(buf) >= 61 and op == "length+":
            (n,) = struct.unpack_from(">i", buf, 8)
            struct.pack_into(">i", buf, 8, max(min(n + a, 2 ** 31 - 1), -(2 ** 31)))
        elif len(buf) >= 61 and op == "count" and buf[16] == 2:
            struct.pack_into(">i", buf, 57, a)
        elif len(buf) >= 61 and op == "count+" and buf[16] == 2:
            (n,) = struct.unpack_from(">i", buf, 57)
            struct.pack_into(">i", buf, 57, max(min(n + a, 2 ** 31 - 1), -(2 ** 31)))
    if fix_crc and len(buf) >= 61 and buf[16] == 2:
        struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return bytes(buf)


@FUZZ
@given(st.sampled_from(range(len(SEEDS))), st.lists(MUTATION, min_size=1, max_size=4), st.booleans())
def test_mutated_valid_batches(seed, ops, fix_crc):
    exercise(mutate(SEEDS[seed], ops, fix_crc))


@FUZZ
@given(st.sampled_from(range(len(SEEDS))), st.lists(MUTATION, min_size=1, max_size=3),
       st.sampled_from([1, 2, 3, 4]))
def test_mutated_compressed_sections(seed, ops, codec):
    """Valid header and CRC over a mutated compressed records section."""
    assume(SEEDS[seed][16] == 2)
    b = next(iter_batches(SEEDS[seed]))
    raw = b.raw()
    try:
        plain = compression.decompress(b.header.compression, raw[61:])
    except CorruptRecordError:
        plain = raw[61:]
    section = mutate(compression.compress(codec, plain), ops, False)
    attrs = (b.header.attributes & ~0x07) | codec
    after = struct.pack(">h", attrs) + raw[23:61] + section
    forged = raw[:8] + struct.pack(">i", 9 + len(after)) + raw[12:17] \
        + struct.pack(">I", crc32c.crc32c(after)) + after
    exercise(forged)


@FUZZ
@given(st.lists(st.sampled_from(range(len(SEEDS))), min_size=1, max_size=5),
       st.lists(MUTATION, max_size=3), st.integers(0, 2000))
def test_concatenated_logs_with_mutations(seeds, ops, cut):
    log = b"".join(SEEDS[s] for s in seeds)
    found = exercise(mutate(log, ops, False)[:cut] if ops else log[:cut])
    if not ops:
        # an unmodified log cut anywhere yields exactly the batches that fit
        sizes = [b.size for s in seeds for b in iter_batches(SEEDS[s])]
        fit, total = 0, 0
        for n in sizes:
            if total + n <= cut:
                fit += 1
                total += n
            else:
                break
        assert len(found) == fit


@FUZZ
@given(st.binary(max_size=200), st.sampled_from([0, 1]), st.sampled_from([1, 2, 3, 4, 5, 7]),
       st.booleans(), st.integers(-5, 2 ** 40))
def test_legacy_wrappers_over_garbage(inner, magic, codec, compress_it, wrapper_offset):
    value = compression.compress(codec, inner) if (compress_it and codec <= 4) else inner
    exercise(_legacy_message(magic, wrapper_offset, None, value, attributes=codec | 0x08))


@FUZZ
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 5]), st.integers(-3, 30), st.binary(max_size=40),
                          st.integers(-2, 50)), min_size=1, max_size=5),
       st.sampled_from([1, 2, 3]), st.integers(0, 40))
def test_legacy_wrappers_over_forged_inner_messages(msgs, codec, wrapper_offset):
    """Inner 'messages' with any magic, offset, size field and body."""
    inner = b""
    for magic, offset, body, size_delta in msgs:
        body = bytes([0, 0, 0, 0, magic & 0xFF]) + body
        inner += struct.pack(">qi", offset, max(len(body) + size_delta - 20, -1)) + body
    exercise(_legacy_message(1, wrapper_offset, None, compression.compress(codec, inner),
                             attributes=codec))
