"""numba kernels that read record sections and segments: the one scanner of records and batches.

``scan_records`` decodes one batch's records; ``scan_log_uncompressed`` walks a whole segment's
batches and records into preallocated columns (the walk the columnar reader and the cleaner's
whole-segment path share); ``batch_frame``, ``seek_batch``, ``last_batch_end`` and
``scan_capacity`` read batch headers only; ``scan_headers`` finds the records' headers. Error codes
(negative) are turned into CorruptRecordError by callers (``ERROR_MESSAGES``).
"""

from __future__ import annotations

import numpy as np

from ..jit import njit, span
# module-level ints are compile-time constants to numba: the header's byte offsets come from here
from ..layout import (ATTRIBUTES_OFFSET, BASE_SEQUENCE_OFFSET, BASE_TIMESTAMP_OFFSET, COMPRESSION_MASK,
                      CONTROL_FLAG, CRC_OFFSET, HEADER_SIZE_UP_TO_MAGIC, LAST_OFFSET_DELTA_OFFSET,
                      LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_OFFSET, MAGIC_V0, MAGIC_V1, MAGIC_V2,
                      MAX_TIMESTAMP_OFFSET, MIN_LEGACY_SIZE, PARTITION_LEADER_EPOCH_OFFSET,
                      PRODUCER_EPOCH_OFFSET, PRODUCER_ID_OFFSET, RECORD_BATCH_OVERHEAD, RECORDS_COUNT_OFFSET,
                      RECORDS_OFFSET, TIMESTAMP_TYPE_MASK)


MIN_RECORD_SIZE = 7  # length, attributes, timestamp delta, offset delta, key, value, header count
INT64_MIN = -2**63
INT64_MAX = 2**63 - 1

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
def _scan_records(buf, start, end, count, bias, base_offset, base_ts, log_append_time, max_ts, lo, hi,
                  rec_end, ts_out, off_out, tail_pos, key_pos, key_len, val_pos, val_len, hdr_count):
    """Decode the structure of ``count`` records laid out in buf[start:end] (Kafka's
    DefaultRecord.readFrom, the checks of its readers).

    Fills the per-record arrays (a record starts where the previous one ends, the first at
    ``start``): positions + ``bias`` (a null key/value has length -1), offsets
    ``base_offset`` + delta, timestamps ``max_ts`` under log append time, else ``base_ts`` + delta.
    Returns (0, end position, records whose offset lies outside [lo, hi)) or (error code,
    position in buf of the faulty record, 0).
    """
    pos = start
    prev_delta = -1
    outside = 0
    for i in range(count):
        size, p = _read_varint(buf, pos, end)
        if p < 0:
            return p, pos, 0
        body = p
        if size < 0 or body + size > end:
            return ERR_TRUNCATED, pos, 0
        body_end = body + size
        p = body + 1  # attributes: unused by Kafka
        if p > body_end:
            return ERR_RECORD_SIZE, pos, 0
        tsd, p = _read_varlong(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos, 0
        od, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos, 0
        if od <= prev_delta:
            return ERR_OFFSET_ORDER, pos, 0
        prev_delta = od
        tail_pos[i] = p + bias
        klen, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos, 0
        key_pos[i] = p + bias
        if klen >= 0:
            key_len[i] = klen
            p += klen
            if p > body_end:
                return ERR_RECORD_SIZE, pos, 0
        else:
            key_len[i] = -1
        vlen, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos, 0
        val_pos[i] = p + bias
        if vlen >= 0:
            val_len[i] = vlen
            p += vlen
            if p > body_end:
                return ERR_RECORD_SIZE, pos, 0
        else:
            val_len[i] = -1
        nh, p = _read_varint(buf, p, body_end)
        if p < 0:
            return ERR_RECORD_SIZE, pos, 0
        if nh < 0 or nh > body_end - p:
            return ERR_HEADER_COUNT, pos, 0
        hdr_count[i] = nh
        for _ in range(nh):
            hk, p = _read_varint(buf, p, body_end)
            if p < 0:
                return ERR_RECORD_SIZE, pos, 0
            if hk < 0:
                return ERR_HEADER_KEY, pos, 0
            p += hk
            if p > body_end:
                return ERR_RECORD_SIZE, pos, 0
            hv, p = _read_varint(buf, p, body_end)
            if p < 0:
                return ERR_RECORD_SIZE, pos, 0
            if hv > 0:
                p += hv
                if p > body_end:
                    return ERR_RECORD_SIZE, pos, 0
        if p != body_end:
            return ERR_RECORD_SIZE, pos, 0
        off = base_offset + od
        if off < lo or off >= hi:
            outside += 1
        ts_out[i] = max_ts if log_append_time else base_ts + tsd
        off_out[i] = off
        rec_end[i] = body_end + bias
        pos = body_end
    if pos != end:
        return ERR_TRAILING_BYTES, pos, 0
    return 0, pos, outside


@njit(cache=True, work=span)
def scan_records(buf, start, end, count, rec_pos, rec_end, ts_delta, off_delta,
                 tail_pos, key_pos, key_len, val_pos, val_len, hdr_count):
    """Decode the structure of ``count`` records laid out in buf[start:end], one batch's section.

    Fills the per-record arrays (positions are absolute in ``buf``, timestamps and offsets are the
    records' deltas; a null key/value has length -1) and returns (0, end position) or (error
    code, position of the faulty record).
    """
    err, pos, _ = _scan_records(buf, start, end, count, 0, 0, 0, False, 0, INT64_MIN, INT64_MAX,
                                rec_end, ts_delta, off_delta, tail_pos, key_pos, key_len, val_pos,
                                val_len, hdr_count)
    if err == 0 and count > 0:
        rec_pos[0] = start
        rec_pos[1:count] = rec_end[:count - 1]
    return err, pos


# --- whole-segment scanning: the one walk over a segment's batches and records ----------------
#
# ``scan_log_uncompressed`` walks the batches of a segment buffer in one call, as Kafka's batch
# iterator does (record-format.md §12), decoding the records of every uncompressed v2 batch with
# ``_scan_records`` (so a batch is validated exactly as RecordBatch.columns() validates it) and
# writing per-record and per-batch columns into preallocated arrays. It is the only walk over the
# records of a segment: the columnar reader (storage/reader.py) gathers Arrow buffers from its
# columns and the cleaner's whole-segment path (cleaner/fast_path.py) decides and re-encodes
# records from them, so the two accept and reject the same bytes. It stops, returning a status,
# where the caller must take over: a compressed batch (decompressed in Python, then decoded by
# ``scan_section_records``), a legacy (magic 0/1) entry, a batch carrying an attribute the caller
# asked to stop at, full output arrays, or the end.
#
# Per-batch metadata: int64 matrix ``bmeta[batch, BM_*]``. Per-record columns: int64 matrix
# ``r64[R64_*, record]`` and int32 matrix ``r32[R32_*, record]`` (BM_*, R64_*, R32_* number
# columns and rows, they are not byte offsets; ``scan_capacity`` sizes them for a whole
# segment). Positions (key, value, record spans) index the batch's source buffer: source 0 is
# the segment buffer, source 1 the caller's scratch buffer of decompressed sections (positions
# there are biased by where the section was placed).
#
# The walks that read headers only (``seek_batch``, ``last_batch_end``, storage/index_check.py)
# frame each batch with ``batch_frame``, the same length and magic rules as the scanner.

SCAN_END = 0          # end of the buffer or an incomplete trailing batch (or past end_offset)
SCAN_FULL = 1         # output arrays (records, batches or byte budget) full: flush and resume at pos
SCAN_COMPRESSED = 2   # compressed v2 batch at pos, already entered as batch nb-1: decompress it
SCAN_LEGACY = 3       # magic 0/1 entry at pos: handled by the caller
SCAN_STOPPED = 4      # v2 batch at pos with an attribute in ``stop_attributes``: not entered

ERR_BATCH_SIZE = -8
ERR_MAGIC = -9
ERR_RECORDS_COUNT = -10
ERR_CODEC = -11

ERROR_MESSAGES[ERR_BATCH_SIZE] = "record batch size is smaller than its header"
ERROR_MESSAGES[ERR_MAGIC] = "invalid magic byte"
ERROR_MESSAGES[ERR_RECORDS_COUNT] = "invalid records count"
ERROR_MESSAGES[ERR_CODEC] = "unknown compression codec"

MAX_CODEC = 4         # zstd: the highest codec id Kafka knows

BM_POS = 0
BM_SIZE = 1
BM_BASE_OFFSET = 2
BM_LAST_OFFSET_DELTA = 3
BM_ATTRIBUTES = 4
BM_BASE_TIMESTAMP = 5
BM_MAX_TIMESTAMP = 6
BM_PRODUCER_ID = 7
BM_PRODUCER_EPOCH = 8
BM_BASE_SEQUENCE = 9
BM_RECORDS_COUNT = 10
BM_LEADER_EPOCH = 11
BM_CRC = 12
BM_SOURCE = 13      # 0: the segment buffer, 1: the scratch buffer, 2: a legacy entry (no CRC-32C)
BM_FIRST_RECORD = 14
BM_MAGIC = 15
BM_FIELDS = 16

R64_OFFSET = 0
R64_TIMESTAMP = 1
# positions in the source buffer (biased for the scratch buffer)
R64_KEY_POS = 2
R64_VAL_POS = 3
R64_RECORD_END = 4    # the record starts where the previous one ends (the first: the section's start)
R64_TAIL_POS = 5      # where its key length starts: key, value and headers run to R64_RECORD_END
R64_ROWS = 6

R32_KEY_LEN = 0
R32_VAL_LEN = 1
R32_HDR_COUNT = 2
R32_BATCH = 3
R32_ROWS = 4


@njit(cache=True, inline="always")
def _be_u(buf, p, n):
    v = np.uint64(0)
    for k in range(n):
        v = (v << np.uint64(8)) | np.uint64(buf[p + k])
    return v


@njit(cache=True, inline="always")
def _be_i64(buf, p):
    return np.int64(_be_u(buf, p, 8))


@njit(cache=True, inline="always")
def _be_i32(buf, p):
    v = np.int64(_be_u(buf, p, 4))
    return v - 4294967296 if v >= 2147483648 else v


@njit(cache=True, inline="always")
def _be_i16(buf, p):
    v = np.int64(_be_u(buf, p, 2))
    return v - 65536 if v >= 32768 else v


FRAME_OK = 0
FRAME_INCOMPLETE = 1      # the batch runs past the end: a walk ends before it
FRAME_BAD_LENGTH = -1     # a length below the smallest legacy entry's (MIN_LEGACY_SIZE)
FRAME_SHORT_V2 = -2       # a v2 batch shorter than its header


@njit(cache=True, inline="always")
def batch_frame(buf, pos, end):
    """(FRAME_*, size, magic) of the batch at ``pos`` of buf[:end], judged by its length and magic
    alone as Kafka's batch iterator frames a log; the caller has checked that the bytes up to the
    magic lie before ``end``. A magic other than 0, 1 or 2 is left to the caller."""
    length = _be_i32(buf, pos + LENGTH_OFFSET)
    if length < MIN_LEGACY_SIZE:
        return FRAME_BAD_LENGTH, np.int64(0), np.int64(0)
    size = length + LOG_OVERHEAD
    if pos + size > end:
        return FRAME_INCOMPLETE, size, np.int64(0)
    magic = np.int64(buf[pos + MAGIC_OFFSET])
    if magic == MAGIC_V2 and size < RECORD_BATCH_OVERHEAD:
        return FRAME_SHORT_V2, size, magic
    return FRAME_OK, size, magic


@njit(cache=True)
def scan_section_records(buf, start, end, count, bmeta, b, r64, r32, nr, bias,
                         start_offset, end_offset):
    """Decode the ``count`` records of batch ``b`` (header in ``bmeta[b]``) laid out in buf[start:end].

    Records go to columns from index ``nr`` (positions + ``bias``), offsets and timestamps made
    absolute; only offsets in [start_offset, end_offset) are kept. Returns (0, new nr) or
    (error code, position in buf).
    """
    if count < 0 or count * MIN_RECORD_SIZE > end - start:
        return ERR_RECORDS_COUNT, start
    stop = nr + count
    append_time = (bmeta[b, BM_ATTRIBUTES] & TIMESTAMP_TYPE_MASK) != 0
    err, where, outside = _scan_records(
        buf, start, end, count, bias, bmeta[b, BM_BASE_OFFSET], bmeta[b, BM_BASE_TIMESTAMP], append_time,
        bmeta[b, BM_MAX_TIMESTAMP], start_offset, end_offset,
        r64[R64_RECORD_END, nr:stop], r64[R64_TIMESTAMP, nr:stop],
        r64[R64_OFFSET, nr:stop], r64[R64_TAIL_POS, nr:stop], r64[R64_KEY_POS, nr:stop],
        r32[R32_KEY_LEN, nr:stop], r64[R64_VAL_POS, nr:stop], r32[R32_VAL_LEN, nr:stop],
        r32[R32_HDR_COUNT, nr:stop])
    if err < 0:
        return err, where
    r32[R32_BATCH, nr:stop] = b
    if outside == 0:
        return 0, stop
    j = nr                  # a batch across a bound of the range: keep the records inside it
    for i in range(nr, stop):
        off = r64[R64_OFFSET, i]
        if off < start_offset or off >= end_offset:
            continue
        if j != i:
            for row in range(R64_ROWS):
                r64[row, j] = r64[row, i]
            for row in range(R32_ROWS):
                r32[row, j] = r32[row, i]
        j += 1
    return 0, j


@njit(cache=True)
def scan_log_uncompressed(buf, pos, end, start_offset, end_offset, include_control,
                          bmeta, nb, r64, r32, nr, byte_budget, stop_attributes):
    """Walk the batches of buf[pos:end] (one segment), decoding uncompressed v2 batches.

    Batches whose last offset is below ``start_offset`` are skipped unread; the walk ends at the
    first batch whose base offset is >= ``end_offset``, and stops at a v2 batch whose attributes
    share a bit with ``stop_attributes`` (0: never). Every other batch is entered in ``bmeta``
    (control batches too, so their CRC can be checked, but their records only when
    ``include_control``). ``byte_budget``: batch bytes this call may enter once ``nb`` > 0.
    Returns (status, pos, nb, nr, where, used): status SCAN_* >= 0 with the position to resume
    at, or an error code < 0 with the batch position in ``pos`` and the faulty byte position in
    ``where``; ``used`` = bytes of the batches entered by this call.
    """
    cap_b = bmeta.shape[0]
    cap_r = r64.shape[1]
    used = 0
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        frame, size, magic = batch_frame(buf, pos, end)
        if frame == FRAME_INCOMPLETE:
            return SCAN_END, pos, nb, nr, pos, used
        if frame == FRAME_BAD_LENGTH:
            return ERR_BATCH_SIZE, pos, nb, nr, pos + LENGTH_OFFSET, used
        if magic != MAGIC_V2:
            if magic == MAGIC_V0 or magic == MAGIC_V1:
                return SCAN_LEGACY, pos, nb, nr, pos, used
            return ERR_MAGIC, pos, nb, nr, pos + MAGIC_OFFSET, used
        if frame == FRAME_SHORT_V2:
            return ERR_BATCH_SIZE, pos, nb, nr, pos + LENGTH_OFFSET, used
        base = _be_i64(buf, pos)
        lod = _be_i32(buf, pos + LAST_OFFSET_DELTA_OFFSET)
        if base + lod < start_offset:
            pos += size
            continue
        if base >= end_offset:
            return SCAN_END, pos, nb, nr, pos, used
        attrs = _be_i16(buf, pos + ATTRIBUTES_OFFSET)
        if attrs & stop_attributes:
            return SCAN_STOPPED, pos, nb, nr, pos, used
        count = _be_i32(buf, pos + RECORDS_COUNT_OFFSET)
        control = (attrs & CONTROL_FLAG) != 0
        codec = attrs & COMPRESSION_MASK
        decode = count != 0 and (include_control or not control)
        if decode and (count < 0 or (codec == 0 and count * MIN_RECORD_SIZE > size - RECORDS_OFFSET)):
            return ERR_RECORDS_COUNT, pos, nb, nr, pos + RECORDS_COUNT_OFFSET, used
        if decode and codec > MAX_CODEC:
            return ERR_CODEC, pos, nb, nr, pos + ATTRIBUTES_OFFSET, used
        need = count if decode else 0
        if nb >= cap_b or nr + need > cap_r or (nb > 0 and used + size > byte_budget):
            return SCAN_FULL, pos, nb, nr, pos, used
        bm = bmeta[nb]
        bm[BM_POS] = pos
        bm[BM_SIZE] = size
        bm[BM_BASE_OFFSET] = base
        bm[BM_LAST_OFFSET_DELTA] = lod
        bm[BM_ATTRIBUTES] = attrs
        bm[BM_BASE_TIMESTAMP] = _be_i64(buf, pos + BASE_TIMESTAMP_OFFSET)
        bm[BM_MAX_TIMESTAMP] = _be_i64(buf, pos + MAX_TIMESTAMP_OFFSET)
        bm[BM_PRODUCER_ID] = _be_i64(buf, pos + PRODUCER_ID_OFFSET)
        bm[BM_PRODUCER_EPOCH] = _be_i16(buf, pos + PRODUCER_EPOCH_OFFSET)
        bm[BM_BASE_SEQUENCE] = _be_i32(buf, pos + BASE_SEQUENCE_OFFSET)
        bm[BM_RECORDS_COUNT] = count
        bm[BM_LEADER_EPOCH] = _be_i32(buf, pos + PARTITION_LEADER_EPOCH_OFFSET)
        bm[BM_CRC] = np.int64(_be_u(buf, pos + CRC_OFFSET, 4))
        bm[BM_SOURCE] = 0 if (codec == 0 or not decode) else 1
        bm[BM_FIRST_RECORD] = nr
        bm[BM_MAGIC] = MAGIC_V2
        nb += 1
        used += size
        if decode:
            if codec != 0:
                return SCAN_COMPRESSED, pos, nb, nr, pos, used
            err, nr2 = scan_section_records(buf, pos + RECORDS_OFFSET, pos + size, count, bmeta, nb - 1,
                                            r64, r32, nr, 0, start_offset, end_offset)
            if err < 0:
                return err, pos, nb, nr, nr2, used
            nr = nr2
        pos += size
    return SCAN_END, pos, nb, nr, pos, used


@njit(cache=True, work=span)
def scan_capacity(buf, pos, end):
    """(batches, records) that ``scan_log_uncompressed`` may enter from buf[pos:end] at most, from
    the batch headers alone (a count is capped by what its batch could hold), to size its arrays."""
    nb = 0
    nr = 0
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        frame, size, magic = batch_frame(buf, pos, end)
        if frame != FRAME_OK:
            break
        nb += 1
        if magic == MAGIC_V2:
            count = _be_i32(buf, pos + RECORDS_COUNT_OFFSET)
            nr += max(0, min(count, (size - RECORDS_OFFSET) // MIN_RECORD_SIZE))
        pos += size
    return nb, nr


@njit(cache=True, work=span)
def seek_batch(buf, pos, end, target):
    """Position of the first complete batch in buf[pos:end] whose last offset is >= target.

    Legacy entries count with their offset field (the last offset of a wrapper). Returns ``end``
    when there is none, or -1 - position at an impossible batch size (the caller's iterator
    reports it).
    """
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        frame, size, magic = batch_frame(buf, pos, end)
        if frame == FRAME_INCOMPLETE:
            return end
        if frame != FRAME_OK:
            return -1 - pos
        last = _be_i64(buf, pos)
        if magic == MAGIC_V2:
            last += _be_i32(buf, pos + LAST_OFFSET_DELTA_OFFSET)
        if last >= target:
            return pos
        pos += size
    return end


@njit(cache=True, work=span)
def last_batch_end(buf, pos, end):
    """(next offset after the last complete batch or -1, end position of the walk) of buf[pos:end]."""
    nxt = -1
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        frame, size, magic = batch_frame(buf, pos, end)
        if frame != FRAME_OK:
            break
        nxt = _be_i64(buf, pos) + 1
        if magic == MAGIC_V2:
            nxt += _be_i32(buf, pos + LAST_OFFSET_DELTA_OFFSET)
        pos += size
    return nxt, pos


@njit(cache=True)
def scan_headers(src0, src1, source, val_pos, val_len, hdr_count, hk_pos, hk_len, hv_pos,
                 hv_len, h_source):
    """Positions of every record header (records already validated by ``scan_records``).

    The header section of record i starts after its value; headers are written in record order
    into the flat ``h*`` arrays (sized ``hdr_count.sum()``).
    """
    h = 0
    for i in range(val_pos.shape[0]):
        nh = hdr_count[i]
        if nh == 0:
            continue
        s = src1 if source[i] == 1 else src0
        p = val_pos[i] + (val_len[i] if val_len[i] > 0 else 0)
        end = s.shape[0]
        _, p = _read_varint(s, p, end)          # the header count
        for _ in range(nh):
            kl, p = _read_varint(s, p, end)
            hk_pos[h] = p
            hk_len[h] = kl
            p += kl
            vl, p = _read_varint(s, p, end)
            hv_pos[h] = p
            hv_len[h] = vl
            if vl > 0:
                p += vl
            h_source[h] = source[i]
            h += 1
    return h
