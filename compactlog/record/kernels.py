"""numba kernels for the per-record work: scanning, encoding and re-encoding record sections.

Every kernel works on a uint8 numpy view of the bytes and writes into preallocated arrays, so the
Python layers above only loop over batches, never over records.
Error codes returned by ``scan_records`` (negative) are turned into CorruptRecordError by callers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

MIN_RECORD_SIZE = 7  # length, attributes, timestamp delta, offset delta, key, value, header count

ERR_TRUNCATED = -1
ERR_VARINT_TOO_LONG = -2
ERR_RECORD_SIZE = -3
ERR_HEADER_COUNT = -4
ERR_HEADER_KEY = -5
ERR_TRAILING_BYTES = -6
ERR_OFFSET_ORDER = -7

ERROR_MESSAGES = {
    ERR_TRUNCATED: "record extends past the end of the batch",
    ERR_VARINT_TOO_LONG: "varint too long",
    ERR_RECORD_SIZE: "record length does not match its fields",
    ERR_HEADER_COUNT: "invalid number of record headers",
    ERR_HEADER_KEY: "invalid negative header key size",
    ERR_TRAILING_BYTES: "bytes left after the last record of the batch",
    ERR_OFFSET_ORDER: "record offset deltas not strictly increasing",
}


@njit(cache=True, inline="always")
def _read_uvarint(buf, pos, end, max_bytes):
    """Unsigned LEB128 value and next position; next position < 0 is an error code."""
    u = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(max_bytes):
        if pos >= end:
            return np.uint64(0), ERR_TRUNCATED
        b = buf[pos]
        pos += 1
        u |= np.uint64(b & 0x7F) << shift
        if b < 0x80:
            return u, pos
        shift += np.uint64(7)
    return np.uint64(0), ERR_VARINT_TOO_LONG


@njit(cache=True, inline="always")
def _read_varint(buf, pos, end):
    """Zigzag int32 (Kafka reads at most 5 bytes and wraps to 32 bits)."""
    u, pos = _read_uvarint(buf, pos, end, 5)
    u32 = np.int64(u & np.uint64(0xFFFFFFFF))
    v = (u32 >> 1) ^ -(u32 & 1)
    return v, pos


@njit(cache=True, inline="always")
def _read_varlong(buf, pos, end):
    u, pos = _read_uvarint(buf, pos, end, 10)
    v = np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))
    return v, pos


@njit(cache=True)
def scan_records(buf, start, end, count, rec_pos, rec_end, ts_delta, off_delta,
                 tail_pos, key_pos, key_len, val_pos, val_len, hdr_count):
    """Decode the structure of ``count`` records laid out in buf[start:end].

    Fills the per-record arrays (positions are absolute in ``buf``; a null key/value has length -1)
    and returns (0, end position) or (error code, position of the faulty record).
    """
    pos = start
    prev_delta = -1
    for i in range(count):
        rec_pos[i] = pos
        size, p = _read_varint(buf, pos, end)
        if p < 0:
            return p, pos
        body = p
        if size < 0 or body + size > end:
            return ERR_TRUNCATED, pos
        body_end = body + size
        p = body + 1  # attributes: unused by Kafka
        if p > body_end:
            return ERR_RECORD_SIZE, pos
        tsd, p = _read_varlong(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos
        od, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos
        if od <= prev_delta:
            return ERR_OFFSET_ORDER, pos
        prev_delta = od
        tail_pos[i] = p
        klen, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos
        if klen >= 0:
            key_pos[i] = p
            key_len[i] = klen
            p += klen
            if p > body_end:
                return ERR_RECORD_SIZE, pos
        else:
            key_pos[i] = p
            key_len[i] = -1
        vlen, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos
        if vlen >= 0:
            val_pos[i] = p
            val_len[i] = vlen
            p += vlen
            if p > body_end:
                return ERR_RECORD_SIZE, pos
        else:
            val_pos[i] = p
            val_len[i] = -1
        nh, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos
        if nh < 0 or nh > body_end - p:
            return ERR_HEADER_COUNT, pos
        hdr_count[i] = nh
        for _ in range(nh):
            hk, p = _read_varint(buf, p, body_end)
            if p < 0:
                return ERR_RECORD_SIZE, pos
            if hk < 0:
                return ERR_HEADER_KEY, pos
            p += hk
            if p > body_end:
                return ERR_RECORD_SIZE, pos
            hv, p = _read_varint(buf, p, body_end)
            if p < 0:
                return ERR_RECORD_SIZE, pos
            if hv > 0:
                p += hv
                if p > body_end:
                    return ERR_RECORD_SIZE, pos
        if p != body_end:
            return ERR_RECORD_SIZE, pos
        ts_delta[i] = tsd
        off_delta[i] = od
        rec_end[i] = body_end
        pos = body_end
    if pos != end:
        return ERR_TRAILING_BYTES, pos
    return 0, pos


@njit(cache=True, inline="always")
def _uvarint_size(u):
    size = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True, inline="always")
def _zigzag64(v):
    return np.uint64((v << 1) ^ (v >> 63))


@njit(cache=True, inline="always")
def _zigzag32(v):
    v32 = np.int64(np.int32(v))
    return np.uint64(np.uint32((v32 << 1) ^ (v32 >> 31)))


@njit(cache=True, inline="always")
def _write_uvarint(out, pos, u):
    while u >= np.uint64(0x80):
        out[pos] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(u)
    return pos + 1


@njit(cache=True)
def encode_records(out, pos, ts_delta, off_delta, key_buf, key_off, key_null,
                   val_buf, val_off, val_null, hdr_buf, hdr_off):
    """Append records encoded from columns; returns the end position.

    Keys/values are slices [off[i], off[i+1]) of their buffers (null when the flag is set);
    ``hdr_buf[hdr_off[i]:hdr_off[i+1]]`` is the record's already-encoded header section
    (count varint and headers), empty meaning "no headers".
    """
    n = ts_delta.shape[0]
    for i in range(n):
        klen = key_off[i + 1] - key_off[i]
        vlen = val_off[i + 1] - val_off[i]
        hlen = hdr_off[i + 1] - hdr_off[i]
        zts = _zigzag64(ts_delta[i])
        zod = _zigzag32(off_delta[i])
        body = 1 + _uvarint_size(zts) + _uvarint_size(zod)
        if key_null[i]:
            body += 1
        else:
            body += _uvarint_size(_zigzag32(klen)) + klen
        if val_null[i]:
            body += 1
        else:
            body += _uvarint_size(_zigzag32(vlen)) + vlen
        body += hlen if hlen > 0 else 1
        pos = _write_uvarint(out, pos, _zigzag32(body))
        out[pos] = 0
        pos += 1
        pos = _write_uvarint(out, pos, zts)
        pos = _write_uvarint(out, pos, zod)
        if key_null[i]:
            out[pos] = 1
            pos += 1
        else:
            pos = _write_uvarint(out, pos, _zigzag32(klen))
            out[pos:pos + klen] = key_buf[key_off[i]:key_off[i + 1]]
            pos += klen
        if val_null[i]:
            out[pos] = 1
            pos += 1
        else:
            pos = _write_uvarint(out, pos, _zigzag32(vlen))
            out[pos:pos + vlen] = val_buf[val_off[i]:val_off[i + 1]]
            pos += vlen
        if hlen > 0:
            out[pos:pos + hlen] = hdr_buf[hdr_off[i]:hdr_off[i + 1]]
            pos += hlen
        else:
            out[pos] = 0
            pos += 1
    return pos


@njit(cache=True)
def reencode_records(out, pos, src, keep_idx, new_ts_delta, off_delta, tail_pos, rec_end):
    """Append records ``keep_idx`` of a scanned section with new timestamp deltas.

    Offset deltas are kept; key, value and headers are copied as one byte span; the record
    attributes byte is written as 0, as Kafka's writer does.
    """
    for j in range(keep_idx.shape[0]):
        i = keep_idx[j]
        zts = _zigzag64(new_ts_delta[j])
        zod = _zigzag32(off_delta[i])
        tail = rec_end[i] - tail_pos[i]
        body = 1 + _uvarint_size(zts) + _uvarint_size(zod) + tail
        pos = _write_uvarint(out, pos, _zigzag32(body))
        out[pos] = 0
        pos += 1
        pos = _write_uvarint(out, pos, zts)
        pos = _write_uvarint(out, pos, zod)
        out[pos:pos + tail] = src[tail_pos[i]:rec_end[i]]
        pos += tail
    return pos


# --- xxHash64, for the cleaner's key map ------------------------------------------------------

_P1 = np.uint64(11400714785074694791)
_P2 = np.uint64(14029467366897019727)
_P3 = np.uint64(1609587929392839161)
_P4 = np.uint64(9650029242287828579)
_P5 = np.uint64(2870177450012600261)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _read64(buf, p):
    v = np.uint64(0)
    for k in range(8):
        v |= np.uint64(buf[p + k]) << np.uint64(8 * k)
    return v


@njit(cache=True, inline="always")
def _read32(buf, p):
    v = np.uint64(0)
    for k in range(4):
        v |= np.uint64(buf[p + k]) << np.uint64(8 * k)
    return v


@njit(cache=True, inline="always")
def _round(acc, lane):
    acc = acc + lane * _P2
    acc = _rotl(acc, 31)
    return acc * _P1


@njit(cache=True, inline="always")
def _merge(acc, val):
    acc ^= _round(np.uint64(0), val)
    return acc * _P1 + _P4


@njit(cache=True)
def xxh64(buf, start, length, seed):
    p = start
    end = start + length
    seed = np.uint64(seed)
    if length >= 32:
        v1 = seed + _P1 + _P2
        v2 = seed + _P2
        v3 = seed
        v4 = seed - _P1
        while p + 32 <= end:
            v1 = _round(v1, _read64(buf, p))
            v2 = _round(v2, _read64(buf, p + 8))
            v3 = _round(v3, _read64(buf, p + 16))
            v4 = _round(v4, _read64(buf, p + 24))
            p += 32
        h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
        h = _merge(h, v1)
        h = _merge(h, v2)
        h = _merge(h, v3)
        h = _merge(h, v4)
    else:
        h = seed + _P5
    h += np.uint64(length)
    while p + 8 <= end:
        h ^= _round(np.uint64(0), _read64(buf, p))
        h = _rotl(h, 27) * _P1 + _P4
        p += 8
    if p + 4 <= end:
        h ^= _read32(buf, p) * _P1
        h = _rotl(h, 23) * _P2 + _P3
        p += 4
    while p < end:
        h ^= np.uint64(buf[p]) * _P5
        h = _rotl(h, 11) * _P1
        p += 1
    h ^= h >> np.uint64(33)
    h *= _P2
    h ^= h >> np.uint64(29)
    h *= _P3
    h ^= h >> np.uint64(32)
    return h


@njit(cache=True)
def hash_keys(buf, key_pos, key_len, out_h1, out_h2):
    """Two independent 64-bit hashes of every non-null key (a 128-bit key digest)."""
    for i in range(key_pos.shape[0]):
        if key_len[i] >= 0:
            out_h1[i] = xxh64(buf, key_pos[i], key_len[i], 0)
            out_h2[i] = xxh64(buf, key_pos[i], key_len[i], 0x9E3779B97F4A7C15)
