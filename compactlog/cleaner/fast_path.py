"""Whole-segment kernels for the common case: uncompressed v2 data batches, no transactions.

The per-batch path (``rewrite.filter_batch``) runs Python once per batch; a 100 MiB segment holds
tens of thousands of batches. Here one numba pass scans every batch and record of a segment, one
decides every record (map lookups, tombstone horizons), one sizes and one writes every output
batch, copying kept records as byte spans; Python only checksums rewritten batches and appends
Kafka's read-buffer chunks to the cleaned segment. The decisions are the same functions of the
same inputs as ``rules.py`` (the corpus runs through both paths). A segment holding anything else
(compressed, control or transactional batches, legacy magic, a structural error) takes the
per-batch path, which also produces the precise error.
"""

from __future__ import annotations

import struct

import crc32c as _crc32c
import numpy as np
from numba import njit

from ..record import kernels
from ..record.batch import as_u8
from ..record.kernels import _be_i16 as _be16, _be_i32 as _be32, _be_i64 as _be64, scan_records
from .stats import CleanerStats

# batch kinds in the output
DROP, VERBATIM, REBUILD, EMPTY = 0, 1, 2, 3

NOT_SIMPLE = 1        # compressed, control, transactional or legacy batch present
BAD_STRUCTURE = 2     # a header or record the per-batch path must report

_I32 = struct.Struct(">I")

# the per-batch path alone when False (tests run the corpus both ways)
ENABLED = True


@njit(cache=True)
def count_segment(buf, start, end):
    """(batches, records, flags, end position) of the complete batches in buf[start:end]."""
    pos = start
    nb = 0
    nr = 0
    flags = 0
    while pos + 17 < end:
        length = _be32(buf, pos + 8)
        if length < 14:
            return nb, nr, flags | BAD_STRUCTURE, pos
        size = length + 12
        if pos + size > end:
            break
        if buf[pos + 16] != 2:
            flags |= NOT_SIMPLE
        elif size < 61:
            return nb, nr, flags | BAD_STRUCTURE, pos
        else:
            attrs = _be16(buf, pos + 21)
            if attrs & 0x37:          # codec bits, transactional, control
                flags |= NOT_SIMPLE
            count = _be32(buf, pos + 57)
            if count < 0 or count * 7 > size - 61:
                return nb, nr, flags | BAD_STRUCTURE, pos
            nr += count
        nb += 1
        pos += size
    return nb, nr, flags, pos


@njit(cache=True)
def scan_segment(buf, start, nb, b_pos, b_size, b_base, b_lod, b_attrs, b_base_ts, b_max_ts, b_pid,
                 b_rec, r_pos, r_end, r_tsd, r_od, r_tail, r_kpos, r_klen, r_vpos, r_vlen, r_hdr):
    """Fill the batch and record arrays of the ``nb`` simple batches from ``start``; 0 or an error."""
    pos = start
    rec = 0
    for i in range(nb):
        length = _be32(buf, pos + 8)
        size = length + 12
        count = _be32(buf, pos + 57)
        b_pos[i] = pos
        b_size[i] = size
        b_base[i] = _be64(buf, pos)
        b_lod[i] = _be32(buf, pos + 23)
        b_attrs[i] = _be16(buf, pos + 21)
        b_base_ts[i] = _be64(buf, pos + 27)
        b_max_ts[i] = _be64(buf, pos + 35)
        b_pid[i] = _be64(buf, pos + 43)
        b_rec[i] = rec
        err, _ = scan_records(buf, pos + 61, pos + size, count, r_pos[rec:rec + count], r_end[rec:rec + count],
                              r_tsd[rec:rec + count], r_od[rec:rec + count], r_tail[rec:rec + count],
                              r_kpos[rec:rec + count], r_klen[rec:rec + count], r_vpos[rec:rec + count],
                              r_vlen[rec:rec + count], r_hdr[rec:rec + count])
        if err < 0:
            return err
        rec += count
        pos += size
    b_rec[nb] = rec
    return 0


class SegmentScan:
    """The batches and records of the simple part of a segment, as arrays."""

    def __init__(self, buf: np.ndarray, start: int, end: int):
        self.ok = False
        nb, nr, flags, _ = count_segment(buf, start, end)
        if flags:
            return
        self.nb, self.nr = nb, nr
        i64 = lambda n: np.empty(n, dtype=np.int64)   # noqa: E731
        self.b_pos, self.b_size, self.b_base, self.b_lod = i64(nb), i64(nb), i64(nb), i64(nb)
        self.b_attrs, self.b_base_ts, self.b_max_ts, self.b_pid = i64(nb), i64(nb), i64(nb), i64(nb)
        self.b_rec = i64(nb + 1)
        self.r_pos, self.r_end, self.r_tsd, self.r_od = i64(nr), i64(nr), i64(nr), i64(nr)
        self.r_tail, self.r_kpos, self.r_vpos = i64(nr), i64(nr), i64(nr)
        self.r_klen = np.empty(nr, dtype=np.int32)
        self.r_vlen = np.empty(nr, dtype=np.int32)
        self.r_hdr = np.empty(nr, dtype=np.int32)
        err = scan_segment(buf, start, nb, self.b_pos, self.b_size, self.b_base, self.b_lod, self.b_attrs,
                           self.b_base_ts, self.b_max_ts, self.b_pid, self.b_rec, self.r_pos, self.r_end,
                           self.r_tsd, self.r_od, self.r_tail, self.r_kpos, self.r_klen, self.r_vpos,
                           self.r_vlen, self.r_hdr)
        if err < 0:
            return
        self.buf = buf
        self.ok = True

    def record_batch(self) -> np.ndarray:
        return np.repeat(np.arange(self.nb), np.diff(self.b_rec))

    def record_offsets(self) -> np.ndarray:
        return np.repeat(self.b_base, np.diff(self.b_rec)) + self.r_od

    def key_hashes(self):
        h1 = np.zeros(self.nr, dtype=np.uint64)
        h2 = np.zeros(self.nr, dtype=np.uint64)
        kernels.hash_keys(self.buf, self.r_kpos, self.r_klen, h1, h2)
        return h1, h2


# --- the map -----------------------------------------------------------------------------------

def map_segment_fast(seg, start: int, offset_map, stats: CleanerStats) -> int | None:
    """Map a simple segment's keys; the last offset seen, or None when the segment is not simple."""
    if not ENABLED:
        return None
    pos = seg.index_position(start)
    buf = as_u8(seg.buffer)
    scan = SegmentScan(buf, pos, seg.size)
    if not scan.ok:
        return None
    offsets = scan.record_offsets()
    sel = np.flatnonzero((scan.r_klen >= 0) & (offsets >= start))
    if sel.size:
        if pos == 0 and sel.size == scan.nr and seg.cache_digests:
            # the rewrite scans this segment from 0 again: keep the digests for it (16 B/record)
            h1, h2 = scan.key_hashes()
            seg.cached_digests = (h1, h2)
        else:
            h1 = np.zeros(sel.size, dtype=np.uint64)
            h2 = np.zeros(sel.size, dtype=np.uint64)
            kernels.hash_keys(buf, scan.r_kpos[sel], scan.r_klen[sel], h1, h2)
        offset_map.put(h1, h2, offsets[sel])
    stats.map_messages_read += scan.nr
    stats.map_bytes_read += seg.size - pos
    lasts = scan.b_base + scan.b_lod
    seen = lasts[lasts >= start]
    return int(seen.max()) if seen.size else -1


# --- the rewrite -------------------------------------------------------------------------------

@njit(cache=True)
def _uvarint_size(u):
    size = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True)
def _zz64(v):
    return np.uint64((v << 1) ^ (v >> 63))


@njit(cache=True)
def _zz32(v):
    v32 = np.int64(np.int32(v))
    return np.uint64(np.uint32((v32 << 1) ^ (v32 >> 31)))


@njit(cache=True)
def decide_segment(nb, b_rec, b_base, b_lod, b_attrs, b_base_ts, b_max_ts, retain_empty, r_od, r_tsd,
                   r_klen, r_vlen, r_tail, r_end, mapped, latest_offset, now_ms, horizon_new,
                   keep, kind, out_size, new_base_ts, new_max_ts, new_max_off, new_attrs, counts):
    """Record fates and each batch's output form (log-cleaner.md §10.2-10.4 for data batches).

    counts: [kept, superseded, tombstone-expired, keyless]
    """
    for i in range(nb):
        a = b_rec[i]
        b = b_rec[i + 1]
        attrs = b_attrs[i]
        has_horizon = (attrs & 0x40) != 0
        log_append = (attrs & 0x08) != 0
        retain_deletes = (not has_horizon) or now_ms < b_base_ts[i]
        kept = 0
        kept_tomb = False
        first = -1
        max_ts = np.int64(-9223372036854775807)
        max_off = np.int64(-1)
        for j in range(a, b):
            off = b_base[i] + r_od[j]
            k = True
            if off <= latest_offset:
                if r_klen[j] < 0:
                    k = False
                    counts[3] += 1
                elif off < mapped[j]:
                    k = False
                    counts[1] += 1
                elif r_vlen[j] < 0 and not retain_deletes:
                    k = False
                    counts[2] += 1
            keep[j] = k
            if k:
                kept += 1
                if first < 0:
                    first = j
                if r_vlen[j] < 0:
                    kept_tomb = True
                ts = b_max_ts[i] if log_append else b_base_ts[i] + r_tsd[j]
                if ts > max_ts:
                    max_ts = ts
                if off > max_off:
                    max_off = off
        counts[0] += kept
        n = b - a
        need_horizon = kept_tomb and not has_horizon
        new_attrs[i] = attrs
        new_max_off[i] = b_base[i] + b_lod[i]
        new_max_ts[i] = b_max_ts[i]
        if kept == n and n > 0 and not need_horizon:
            kind[i] = VERBATIM
            out_size[i] = 0
        elif kept > 0:
            kind[i] = REBUILD
            new_attrs[i] = attrs & 0x48   # what Kafka's builder writes: timestamp type, horizon
            if need_horizon:
                base_ts = horizon_new
                new_attrs[i] = (attrs & 0x48) | 0x40
            elif has_horizon:
                base_ts = b_base_ts[i]
            else:
                base_ts = b_max_ts[i] if log_append else b_base_ts[i] + r_tsd[first]
            new_base_ts[i] = base_ts
            new_max_ts[i] = b_max_ts[i] if log_append else max_ts
            new_max_off[i] = max_off
            size = 61
            for j in range(a, b):
                if keep[j]:
                    ts = b_max_ts[i] if log_append else b_base_ts[i] + r_tsd[j]
                    body = 1 + _uvarint_size(_zz64(ts - base_ts)) + _uvarint_size(_zz32(r_od[j])) + (r_end[j] - r_tail[j])
                    size += _uvarint_size(_zz32(body)) + body
            out_size[i] = size
        elif retain_empty[i]:
            kind[i] = EMPTY
            out_size[i] = 61
        else:
            kind[i] = DROP
            out_size[i] = 0


@njit(cache=True)
def _put_be(out, p, v, n):
    for k in range(n):
        out[p + n - 1 - k] = np.uint8(v & 0xFF)
        v >>= 8


@njit(cache=True)
def emit_segment(buf, nb, b_pos, b_size, b_rec, b_base_ts, b_max_ts, b_attrs, kind, out_size, new_base_ts,
                 new_max_ts, new_attrs, keep, r_od, r_tsd, r_tail, r_end, out, out_pos):
    """Write every kept batch into ``out`` (CRCs of rewritten batches left for the caller)."""
    p = 0
    for i in range(nb):
        out_pos[i] = p
        kd = kind[i]
        src = b_pos[i]
        if kd == VERBATIM:
            size = b_size[i]
            out[p:p + size] = buf[src:src + size]
            p += size
        elif kd == REBUILD:
            size = out_size[i]
            out[p:p + 61] = buf[src:src + 61]
            _put_be(out, p + 8, size - 12, 4)
            _put_be(out, p + 21, new_attrs[i], 2)
            _put_be(out, p + 27, new_base_ts[i], 8)
            _put_be(out, p + 35, new_max_ts[i], 8)
            q = p + 61
            n = 0
            log_append = (b_attrs[i] & 0x08) != 0
            for j in range(b_rec[i], b_rec[i + 1]):
                if not keep[j]:
                    continue
                n += 1
                ts = b_max_ts[i] if log_append else b_base_ts[i] + r_tsd[j]
                zts = _zz64(ts - new_base_ts[i])
                zod = _zz32(r_od[j])
                tail = r_end[j] - r_tail[j]
                body = 1 + _uvarint_size(zts) + _uvarint_size(zod) + tail
                q = kernels._write_uvarint(out, q, _zz32(body))
                out[q] = 0
                q += 1
                q = kernels._write_uvarint(out, q, zts)
                q = kernels._write_uvarint(out, q, zod)
                out[q:q + tail] = buf[r_tail[j]:r_end[j]]
                q += tail
            _put_be(out, p + 57, n, 4)
            p += size
        elif kd == EMPTY:
            out[p:p + 61] = buf[src:src + 61]
            _put_be(out, p + 8, 49, 4)
            _put_be(out, p + 21, b_attrs[i] & 0x38, 2)
            _put_be(out, p + 27, -1, 8)
            _put_be(out, p + 57, 0, 4)
            p += 61
    return p


@njit(cache=True)
def plan_chunks(nb, b_pos, b_size, seg_size, kind, out_len, new_max_ts, new_max_off, b_base, b_lod,
                capacity, max_message_size, max_io_buffer, c_first, c_last, c_max_ts, c_shallow, c_max_off):
    """Kafka's read-buffer chunks over the batches: (chunks, 0) or (_, error) when a buffer must
    grow beyond what Kafka allows (the per-batch path reports it)."""
    nc = 0
    i = 0
    position = 0
    while position < seg_size and i < nb:
        chunk_end = min(position + capacity, seg_size)
        first = i
        out = 0
        max_ts = np.int64(-1)
        shallow = np.int64(-1)
        max_off = np.int64(-1)
        read = 0
        while i < nb and b_pos[i] + b_size[i] <= chunk_end:
            read += b_size[i]
            if kind[i] != DROP:
                if new_max_ts[i] > max_ts:
                    max_ts = new_max_ts[i]
                    shallow = b_base[i] + b_lod[i]
                if new_max_off[i] > max_off:
                    max_off = new_max_off[i]
                out += out_len[i]
            i += 1
            if out > capacity:
                break
        if read == 0:
            if capacity >= max_message_size:
                target = b_size[i]
            else:
                target = max_message_size
            limit = max(target, max_io_buffer)
            if capacity >= limit:
                return nc, -1
            capacity = min(capacity * 2, limit)
            continue
        if out > 0:
            c_first[nc] = first
            c_last[nc] = i
            c_max_ts[nc] = max_ts
            c_shallow[nc] = shallow
            c_max_off[nc] = max_off
            nc += 1
        position += read
    return nc, 0


def rewrite_segment_fast(seg, writer, ctx, txn, stats: CleanerStats) -> bool:
    """Clean a simple segment into ``writer``; False (nothing done) when it is not simple."""
    if not ENABLED or ctx.observer is not None:
        return False
    buf = as_u8(seg.buffer)
    scan = SegmentScan(buf, 0, seg.size)
    if not scan.ok:
        return False
    end_pos = int(scan.b_pos[-1] + scan.b_size[-1]) if scan.nb else 0
    if end_pos != seg.size:
        return False
    nb, nr = scan.nb, scan.nr
    if nb == 0:
        return True
    lasts = scan.b_base + scan.b_lod
    retain_empty = (lasts + 1) == ctx.upper_bound
    producers = scan.b_pid >= 0
    if producers.any():
        for pid in np.unique(scan.b_pid[producers]).tolist():
            active = ctx.active_producers.get(pid)
            if active is not None and active[0] is not None:
                retain_empty |= (scan.b_pid == pid) & (lasts == active[0])
    cached = getattr(seg, "cached_digests", None)
    h1, h2 = cached if cached is not None and cached[0].shape[0] == nr else scan.key_hashes()
    seg.cached_digests = None
    mapped = ctx.map.get(h1, h2, scan.record_offsets())
    keep = np.empty(nr, dtype=np.bool_)
    kind = np.empty(nb, dtype=np.int8)
    out_size = np.empty(nb, dtype=np.int64)
    new_base_ts = np.zeros(nb, dtype=np.int64)
    new_max_ts = np.empty(nb, dtype=np.int64)
    new_max_off = np.empty(nb, dtype=np.int64)
    new_attrs = np.empty(nb, dtype=np.int64)
    counts = np.zeros(4, dtype=np.int64)
    decide_segment(nb, scan.b_rec, scan.b_base, scan.b_lod, scan.b_attrs, scan.b_base_ts, scan.b_max_ts,
                   retain_empty, scan.r_od, scan.r_tsd, scan.r_klen, scan.r_vlen, scan.r_tail, scan.r_end,
                   mapped, ctx.map.latest_offset, ctx.now_ms, ctx.now_ms + ctx.delete_retention_ms,
                   keep, kind, out_size, new_base_ts, new_max_ts, new_max_off, new_attrs, counts)
    out_len = np.where(kind == VERBATIM, scan.b_size, np.where(kind == DROP, 0, out_size))
    c_first, c_last = np.empty(nb, dtype=np.int64), np.empty(nb, dtype=np.int64)
    c_max_ts, c_shallow, c_max_off = np.empty(nb, dtype=np.int64), np.empty(nb, dtype=np.int64), np.empty(nb, dtype=np.int64)
    nc, err = plan_chunks(nb, scan.b_pos, scan.b_size, seg.size, kind, out_len, new_max_ts, new_max_off,
                          scan.b_base, scan.b_lod, ctx.io_buffer_size, ctx.max_message_size,
                          ctx.max_io_buffer_size, c_first, c_last, c_max_ts, c_shallow, c_max_off)
    if err:
        return False
    out = np.empty(int(out_len.sum()), dtype=np.uint8)
    out_pos = np.empty(nb, dtype=np.int64)
    emit_segment(buf, nb, scan.b_pos, scan.b_size, scan.b_rec, scan.b_base_ts, scan.b_max_ts, scan.b_attrs,
                 kind, out_size, new_base_ts, new_max_ts, new_attrs, keep, scan.r_od, scan.r_tsd, scan.r_tail,
                 scan.r_end, out, out_pos)
    view = memoryview(out)
    for i in np.flatnonzero((kind == REBUILD) | (kind == EMPTY)).tolist():
        p = int(out_pos[i])
        size = int(out_len[i])
        _I32.pack_into(view, p + 17, _crc32c.crc32c(view[p + 21:p + size]))
    for c in range(nc):
        a, b = int(c_first[c]), int(c_last[c])
        start = int(out_pos[a])
        stop = int(out_pos[b - 1] + out_len[b - 1])
        writer.append(int(c_max_off[c]), int(c_max_ts[c]), int(c_shallow[c]), view[start:stop])
    # non-transactional batches only advance the round's view of aborted transactions
    txn._consume_up_to(int(lasts[-1]))
    stats.bytes_read += int(scan.b_size.sum())
    stats.messages_read += nr
    stats.messages_written += int(counts[0])
    stats.bytes_written += int(out_len.sum())
    stats.invalid_messages_read += int(counts[3])
    stats.count_removed("superseded", int(counts[1]))
    stats.count_removed("tombstone-expired", int(counts[2]))
    stats.count_removed("keyless", int(counts[3]))
    return True
