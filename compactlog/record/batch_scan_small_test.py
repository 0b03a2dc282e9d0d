"""scan_small (a few records' walk in Python) against scan_section (the numba kernel): the same
values for every section the kernel accepts, the same CorruptRecordError (message, position,
field) for every one it refuses; and validate_batch answers a batch the same by either route."""

from __future__ import annotations

import random

import pytest

from compactlog.errors import CompactlogError, CorruptRecordError
from compactlog.record.batch import (RECORD_BATCH_OVERHEAD, SMALL_SCAN_RECORDS, BatchSpec, Header, RecordBatch,
                                     as_u8, crc32c, encode_batch, scan_section, scan_small)
from compactlog.record.layout import ATTRIBUTES_OFFSET, CRC_OFFSET, UINT32
from compactlog.record.varint import encode_varint
from compactlog.storage.conftest import T0, config
from compactlog.storage.validator import parse_batches, validate_batch

I64 = 1 << 63


def _uvarint(u: int) -> bytes:
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _odd_record(rng: random.Random) -> bytes:
    """A record whose varints go where a producer's rarely do: long encodings, 32-bit wrap,
    negative lengths, headers with null and negative values."""
    def vint(v):
        choice = rng.random()
        if choice < 0.1:                        # above 32 bits: the kernel keeps the low 32
            return _uvarint(rng.getrandbits(rng.choice((33, 34, 35))))
        if choice < 0.15:
            return b"\xff" * rng.randint(4, 6) + b"\x01"
        return encode_varint(v)
    body = bytearray([rng.randint(0, 255)])
    body += _uvarint(rng.getrandbits(rng.choice((1, 7, 40, 63, 64, 70))))      # the timestamp delta
    body += vint(rng.randint(-2, 3))
    klen = rng.choice((-1, -5, 0, 3))
    body += vint(klen) + bytes(max(klen, 0))
    vlen = rng.choice((-1, -3, 0, 5))
    body += vint(vlen) + bytes(max(vlen, 0))
    nh = rng.choice((0, 0, 1, 2, -1))
    body += vint(nh)
    for _ in range(max(nh, 0)):
        hk = rng.choice((0, 2, -1))
        body += vint(hk) + bytes(max(hk, 0))
        hv = rng.choice((-1, -4, 0, 2))
        body += vint(hv) + bytes(max(hv, 0))
    size = len(body) + rng.choice((0, 0, 0, -1, 1))
    return encode_varint(size) + bytes(body)


def _sections(seed: int, rounds: int):
    """(buffer, start, end, count, base timestamp): encoded batches' sections, mutated ones,
    hand-made odd records and noise."""
    rng = random.Random(seed)
    for _ in range(rounds):
        n = rng.randint(1, SMALL_SCAN_RECORDS)
        kind = rng.random()
        base = rng.choice((T0, 0, -1, I64 - 5, -I64 + 3))
        if kind < 0.4:
            recs = [(i, rng.choice((T0, T0 - 10 ** 12, 0, -1)) + rng.randint(0, 5),
                     rng.choice((None, b"", b"k%d" % i)), rng.choice((None, b"", b"v" * rng.randint(0, 200))),
                     tuple(Header("h", rng.choice((None, b"x"))) for _ in range(rng.randint(0, 2))))
                    for i in range(n)]
            raw = bytearray(encode_batch(BatchSpec(), recs))
            if rng.random() < 0.6:
                for _ in range(rng.randint(1, 3)):
                    raw[rng.randrange(RECORD_BATCH_OVERHEAD, len(raw))] = rng.randint(0, 255)
            start, end = RECORD_BATCH_OVERHEAD, len(raw)
            if rng.random() < 0.2:
                end = rng.randint(start, end)
            count = n if rng.random() < 0.7 else rng.randint(1, SMALL_SCAN_RECORDS)
            yield raw, start, end, count, base
        elif kind < 0.8:
            pad = rng.randint(0, 5)
            raw = bytearray(pad) + b"".join(_odd_record(rng) for _ in range(n)) + bytes(rng.choice((0, 0, 1)))
            yield raw, pad, len(raw), n, base
        else:
            raw = bytearray(rng.getrandbits(8) for _ in range(rng.randint(0, 60)))
            yield raw, 0, len(raw), n, base


def _kernel(buf, start, end, count, base):
    try:
        cols = scan_section(as_u8(bytes(buf)), start, end, count)
    except CorruptRecordError as e:
        return ("error", e.detail, e.position, e.field)
    ts = [((base + d + I64) % (1 << 64)) - I64 for d in cols.ts_delta.tolist()]
    return ("ok", ts, cols.off_delta.tolist(), cols.key_len.tolist())


def _python(buf, start, end, count, base):
    try:
        r = scan_small(buf, start, end, count, base)
    except CorruptRecordError as e:
        return ("error", e.detail, e.position, e.field)
    return ("ok", r.timestamps, r.off_delta, r.key_len)


@pytest.mark.parametrize("seed", range(4))
def test_scan_small_answers_as_the_kernel(seed):
    outcomes = set()
    for buf, start, end, count, base in _sections(seed, 1500):
        want = _kernel(buf, start, end, count, base)
        assert _python(buf, start, end, count, base) == want, (bytes(buf).hex(), start, end, count, base)
        outcomes.add(want[0] if want[0] == "ok" else want[1])
    # the cases reached every answer the walk has
    assert {"ok", "record extends past the end of the batch", "varint too long",
            "record length does not match its fields", "invalid number of record headers",
            "invalid negative header key size", "bytes left after the last record of the batch",
            "record offset deltas not strictly increasing"} <= outcomes


def test_scan_small_numbers_wrap_as_the_kernel():
    # a timestamp delta of 2**63 - 1 after a base near the top wraps as numpy's int64 add does;
    # an offset delta of five 0xff bytes keeps its low 32 bits
    rec = b"\x00" + _uvarint((2 ** 63 - 1) << 1) + b"\xfe\xff\xff\xff\x0f" + b"\x01\x01\x00"
    buf = bytearray(encode_varint(len(rec)) + rec)
    assert _python(buf, 0, len(buf), 1, 10) == _kernel(buf, 0, len(buf), 1, 10)
    assert _python(buf, 0, len(buf), 1, 10)[1] == [10 + 2 ** 63 - 1 - 2 ** 64]


def _sealed(raw: bytearray) -> bytes:
    UINT32.pack_into(raw, CRC_OFFSET, crc32c(bytes(raw[ATTRIBUTES_OFFSET:])))
    return bytes(raw)


def _verdict(data: bytes, cfg, now: int, route: str, monkeypatch):
    with monkeypatch.context() as m:
        if route == "kernel":
            m.setattr(RecordBatch, "small_records", lambda self: None)
        try:
            validate_batch(parse_batches(bytearray(data), "t-0")[0], cfg, now, partition="t-0")
        except CompactlogError as e:
            return (type(e).__name__, str(e), getattr(e, "record_errors", None), getattr(e, "position", None))
        return "valid"


def test_validate_batch_answers_the_same_by_either_route(monkeypatch):
    """Batches a producer could send, and the same with a byte changed under a good CRC, on a
    plain and a compacted topic, timestamps in and out of range: one verdict by both routes."""
    rng = random.Random(7)
    configs = (config(), config(cleanup_policy="compact"), config(message_timestamp_before_max_ms=1000))
    verdicts = set()
    for _ in range(400):
        n = rng.randint(1, SMALL_SCAN_RECORDS)
        recs = [(i, T0 + rng.choice((0, 5, -5000, 10 ** 13)), rng.choice((None, b"k")), b"v" * rng.randint(0, 30))
                for i in range(n)]
        spec = BatchSpec(producer_id=rng.choice((-1, 3)), base_sequence=rng.choice((-1, 0)), producer_epoch=0)
        raw = bytearray(encode_batch(spec, recs))
        if rng.random() < 0.5:
            raw[rng.randrange(RECORD_BATCH_OVERHEAD, len(raw))] = rng.randint(0, 255)
        data = _sealed(raw)
        cfg = rng.choice(configs)
        small = _verdict(data, cfg, T0, "small", monkeypatch)
        assert small == _verdict(data, cfg, T0, "kernel", monkeypatch), data.hex()
        verdicts.add(small if small == "valid" else small[0])
    assert {"valid", "CorruptRecordError", "InvalidRecordError", "InvalidTimestampError"} <= verdicts
