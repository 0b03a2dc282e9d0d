"""Whole-segment kernels for the common case: uncompressed v2 data batches, no transactions.

Kafka's ``Cleaner.buildOffsetMap`` and ``Cleaner.cleanInto`` over a whole segment at once. The
per-batch path (``rewrite.filter_batch``) runs Python once per batch; a 100 MiB segment holds
tens of thousands of batches. Here the one whole-segment scanner of ``record/kernels/scan.py`` (the
reader's too, so both accept and reject the same bytes) lays out every batch and record of a
segment, one numba pass decides every record (map lookups, tombstone horizons), one sizes and one
writes every output batch, copying kept records as byte spans; Python only checksums rewritten
batches and appends Kafka's read-buffer chunks to the cleaned segment. The decisions are the same functions of the
same inputs as ``rules.py`` (the corpus runs through both paths). A segment holding anything else
(compressed, control or transactional batches, legacy magic, a structural error) takes the
per-batch path, which also produces the precise error.
"""

from __future__ import annotations

from ..record import crc as _crc32c
import numpy as np
from ..record.jit import njit

from ..record import kernels as K
from ..record.batch import as_u8
from ..record.layout import (ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, COMPRESSION_MASK, CONTROL_FLAG,
                             CRC_OFFSET, DELETE_HORIZON_FLAG, LENGTH_OFFSET, LOG_OVERHEAD,
                             MAX_TIMESTAMP_OFFSET, RECORD_BATCH_OVERHEAD, RECORDS_COUNT_OFFSET,
                             TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG, UINT32)
from .stats import CleanerStats
from .strategy import DEFAULT, CompactionStrategy

# batch kinds in the output
DROP, VERBATIM, REBUILD, EMPTY = 0, 1, 2, 3

# what makes a batch not simple: the scanner stops there and the per-batch path takes the segment
NOT_SIMPLE = COMPRESSION_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG
# the attributes Kafka's builder writes into a rebuilt batch: timestamp type and delete horizon
REBUILT_ATTRIBUTES = TIMESTAMP_TYPE_MASK | DELETE_HORIZON_FLAG
# and into an emptied one: timestamp type, transactional and control
EMPTIED_ATTRIBUTES = TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG

# the per-batch path alone when False (tests run the corpus both ways)
ENABLED = True


class ScanScratch:
    """The scanner's matrices, reused by every scan of one partition's clean (64 bytes a record),
    and the rewrite's output buffer, reused by every segment it rewrites.

    A segment's scan used to fill fresh matrices, and half of a clean's CPU was the kernel
    faulting in fresh pages (system time, most of it the scan's: ~0.3 CPU-s of the reference
    clean's 1.4); the map phase kept the scans of the first segments for the rewrite, so that
    memory stayed fresh and the clean's peak held it. Scanning a segment again into matrices
    already resident costs ~0.02 CPU-s (reference segments of 100 MiB), far less than faulting
    one set in, so each segment is scanned once by the map and once by the rewrite (as Kafka's
    cleaner reads it twice) into the same memory. Grown by a quarter when a segment needs more.
    The output buffer likewise (~20 MB a reference segment, 0.08 CPU-s of faults a clean): the
    writers copy what they are given before ``append`` returns (segment_source.ReplacementWriter).
    """

    def __init__(self):
        self.release()

    def matrices(self, most_batches: int, most_records: int):
        """(bmeta, r64, r32) with room for ``most_batches`` and ``most_records``."""
        if self.bmeta.shape[0] < most_batches:
            self.bmeta = np.empty((max(most_batches, self.bmeta.shape[0] * 5 // 4), K.BM_FIELDS), dtype=np.int64)
        if self.r64.shape[1] < most_records:
            cap = max(most_records, self.r64.shape[1] * 5 // 4)
            self.r64 = np.empty((K.R64_ROWS, cap), dtype=np.int64)
            self.r32 = np.empty((K.R32_ROWS, cap), dtype=np.int32)
        return self.bmeta, self.r64, self.r32

    def output(self, size: int, bound: int) -> np.ndarray:
        """A buffer of ``size`` bytes (valid until the next call); ``bound``: what the buffer may
        have to hold (a segment's rewrite is at most the segment). Grown straight to the bound:
        the pages of an untouched tail are never faulted in, while the outputs of a range grow
        segment by segment (1.4 to 56 MB over the reference clean's six: 120 MB fresh when each
        took a larger buffer, 56 here)."""
        if self.out.shape[0] < size:
            self.out = np.empty(max(size, bound), dtype=np.uint8)
        return self.out[:size]

    def release(self) -> None:
        """Drop the matrices and the buffer (the partition's clean is over)."""
        self.bmeta = np.empty((1, K.BM_FIELDS), dtype=np.int64)
        self.r64 = np.empty((K.R64_ROWS, 1), dtype=np.int64)
        self.r32 = np.empty((K.R32_ROWS, 1), dtype=np.int32)
        self.out = np.empty(0, dtype=np.uint8)


class SegmentScan:
    """The batches and records of a segment from ``start``, as the one scanner
    (``kernels.scan_log_uncompressed``) lays them out; ``ok`` only when every complete batch there
    is simple (an uncompressed v2 data batch, not transactional) and valid.

    Batch fields are contiguous arrays (``b_*``, records of batch i in ``b_rec[i]:b_rec[i + 1]``);
    record fields are rows of the scanner's matrices: absolute offsets and timestamps, key
    positions and lengths, value lengths (-1: null) and each record's span, whose tail (key,
    value, headers) a rebuilt batch copies as it is.
    """

    def __init__(self, buf: np.ndarray, start: int, end: int, scratch: ScanScratch | None = None):
        self.ok = False
        # arrays sized from the headers (a bound the scan cannot exceed), as one matrix each; the
        # views are the scratch's when one is given (valid until its next scan)
        most_batches, most_records = K.scan_capacity(buf, start, end)
        bmeta, r64, r32 = (scratch or ScanScratch()).matrices(most_batches, most_records)
        status, pos, nb, nr, _, _ = K.scan_log_uncompressed(
            buf, start, end, K.INT64_MIN, K.INT64_MAX, False, bmeta, 0, r64, r32, 0, K.INT64_MAX, NOT_SIMPLE)
        # a complete batch left after the end means the scan ended at INT64_MAX: not simple either
        if status != K.SCAN_END or K.last_batch_end(buf, pos, end)[1] != pos:
            return
        self.nb, self.nr = int(nb), int(nr)
        bm = bmeta[:self.nb]
        column = lambda field: np.ascontiguousarray(bm[:, field])   # noqa: E731
        self.b_pos, self.b_size = column(K.BM_POS), column(K.BM_SIZE)
        self.b_base, self.b_lod = column(K.BM_BASE_OFFSET), column(K.BM_LAST_OFFSET_DELTA)
        self.b_attrs, self.b_pid = column(K.BM_ATTRIBUTES), column(K.BM_PRODUCER_ID)
        self.b_base_ts, self.b_max_ts = column(K.BM_BASE_TIMESTAMP), column(K.BM_MAX_TIMESTAMP)
        self.b_rec = np.append(bm[:, K.BM_FIRST_RECORD], self.nr)
        n = self.nr
        self.r_offset, self.r_ts = r64[K.R64_OFFSET, :n], r64[K.R64_TIMESTAMP, :n]
        self.r_kpos, self.r_klen = r64[K.R64_KEY_POS, :n], r32[K.R32_KEY_LEN, :n]
        self.r_vlen = r32[K.R32_VAL_LEN, :n]
        self.r_vpos, self.r_hcount = r64[K.R64_VAL_POS, :n], r32[K.R32_HDR_COUNT, :n]   # version strategies
        self.r_tail, self.r_end = r64[K.R64_TAIL_POS, :n], r64[K.R64_RECORD_END, :n]
        self.buf = buf
        self.ok = True

    def key_hashes(self, select: np.ndarray | None = None):
        """128-bit digests of the keys of all records (or of rows ``select``); 0 for a null key."""
        kpos, klen = (self.r_kpos, self.r_klen) if select is None else (self.r_kpos[select], self.r_klen[select])
        h1 = np.zeros(kpos.shape[0], dtype=np.uint64)
        h2 = np.zeros(kpos.shape[0], dtype=np.uint64)
        K.hash_keys(self.buf, kpos, klen, h1, h2)
        return h1, h2


# --- the map -----------------------------------------------------------------------------------

def map_segment_fast(seg, start: int, offset_map, stats: CleanerStats, strategy: CompactionStrategy = DEFAULT,
                     end: int | None = None) -> int | None:
    """Map a simple segment's keys; the last offset seen, or None when the segment is not simple.
    A version strategy maps the keys below ``end`` with their versions (strategy.py)."""
    if not ENABLED:
        return None
    pos = seg.index_position(start)
    buf = as_u8(seg.buffer)
    scan = SegmentScan(buf, pos, seg.size, seg.scan_scratch)
    if not scan.ok:
        return None
    offsets = scan.r_offset
    keyed = (scan.r_klen >= 0) & (offsets >= start)
    if strategy.versioned:
        keyed &= offsets < end
    n_keyed = int(np.count_nonzero(keyed))
    if n_keyed:
        # every record, the common case: no index array of the rows (8 B a record, fresh pages)
        whole = n_keyed == scan.nr
        rows = slice(None) if whole else np.flatnonzero(keyed)
        if pos == 0 and whole and 16 * scan.nr <= seg.digest_room:
            # the rewrite scans this segment from 0 again: keep the digests for it (16 B/record)
            # while the round's room for digests allows
            h1, h2 = scan.key_hashes()
            seg.cached_digests = (h1, h2)
        else:
            h1, h2 = scan.key_hashes(None if whole else rows)
        if strategy.versioned:
            offset_map.put(h1, h2, offsets[rows], *strategy.record_versions(
                buf, scan.r_ts[rows], scan.r_vpos[rows], scan.r_vlen[rows], scan.r_hcount[rows]))
        else:
            offset_map.put(h1, h2, offsets[rows])
    stats.map_messages_read += scan.nr
    stats.map_bytes_read += seg.size - pos
    lasts = scan.b_base + scan.b_lod
    seen = lasts[lasts >= start]
    return int(seen.max()) if seen.size else -1


# --- the rewrite -------------------------------------------------------------------------------

@njit(cache=True)
def decide_segment(nb, b_rec, b_base, b_lod, b_attrs, b_base_ts, b_max_ts, retain_empty, r_off, r_ts,
                   r_klen, r_vlen, r_tail, r_end, mapped, latest_offset, now_ms, horizon_new,
                   keep, kind, out_size, new_base_ts, new_max_ts, new_max_off, new_attrs, counts, exact):
    """Record fates and each batch's output form (log-cleaner.md §10.2-10.4 for data batches).

    counts: [kept, superseded, tombstone-expired, keyless]; ``exact``: a version strategy's map
    (``mapped`` is the winner's offset: any other offset of the key is superseded, as in
    ``rules.record_fates``)
    """
    for i in range(nb):
        a = b_rec[i]
        b = b_rec[i + 1]
        attrs = b_attrs[i]
        has_horizon = (attrs & DELETE_HORIZON_FLAG) != 0
        log_append = (attrs & TIMESTAMP_TYPE_MASK) != 0
        retain_deletes = (not has_horizon) or now_ms < b_base_ts[i]
        kept = 0
        kept_tomb = False
        first = -1
        max_ts = np.int64(-9223372036854775807)
        max_off = np.int64(-1)
        for j in range(a, b):
            off = r_off[j]
            k = True
            if off <= latest_offset:
                if r_klen[j] < 0:
                    k = False
                    counts[3] += 1
                elif off < mapped[j] if not exact else (mapped[j] >= 0 and off != mapped[j]):
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
                if r_ts[j] > max_ts:
                    max_ts = r_ts[j]
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
            new_attrs[i] = attrs & REBUILT_ATTRIBUTES
            if need_horizon:
                base_ts = horizon_new
                new_attrs[i] = (attrs & REBUILT_ATTRIBUTES) | DELETE_HORIZON_FLAG
            elif has_horizon:
                base_ts = b_base_ts[i]
            else:
                base_ts = r_ts[first]
            new_base_ts[i] = base_ts
            new_max_ts[i] = b_max_ts[i] if log_append else max_ts
            new_max_off[i] = max_off
            size = RECORD_BATCH_OVERHEAD
            for j in range(a, b):
                if keep[j]:
                    size += K.record_size(r_ts[j] - base_ts, r_off[j] - b_base[i], r_end[j] - r_tail[j])
            out_size[i] = size
        elif retain_empty[i]:
            kind[i] = EMPTY
            out_size[i] = RECORD_BATCH_OVERHEAD
        else:
            kind[i] = DROP
            out_size[i] = 0


@njit(cache=True)
def emit_segment(buf, nb, b_pos, b_size, b_rec, b_base, b_attrs, kind, out_size, new_base_ts,
                 new_max_ts, new_attrs, keep, r_off, r_ts, r_tail, r_end, out, out_pos):
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
            out[p:p + RECORD_BATCH_OVERHEAD] = buf[src:src + RECORD_BATCH_OVERHEAD]
            K._put_be(out, p + LENGTH_OFFSET, size - LOG_OVERHEAD, 4)
            K._put_be(out, p + ATTRIBUTES_OFFSET, new_attrs[i], 2)
            K._put_be(out, p + BASE_TIMESTAMP_OFFSET, new_base_ts[i], 8)
            K._put_be(out, p + MAX_TIMESTAMP_OFFSET, new_max_ts[i], 8)
            q = p + RECORD_BATCH_OVERHEAD
            n = 0
            base_ts = new_base_ts[i]
            base = b_base[i]
            for j in range(b_rec[i], b_rec[i + 1]):
                if keep[j]:
                    n += 1
                    q = K.write_record_from_tail(out, q, r_ts[j] - base_ts, r_off[j] - base, buf, r_tail[j], r_end[j])
            K._put_be(out, p + RECORDS_COUNT_OFFSET, n, 4)
            p += size
        elif kd == EMPTY:
            out[p:p + RECORD_BATCH_OVERHEAD] = buf[src:src + RECORD_BATCH_OVERHEAD]
            K._put_be(out, p + LENGTH_OFFSET, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, 4)
            K._put_be(out, p + ATTRIBUTES_OFFSET, b_attrs[i] & EMPTIED_ATTRIBUTES, 2)
            K._put_be(out, p + BASE_TIMESTAMP_OFFSET, -1, 8)
            K._put_be(out, p + RECORDS_COUNT_OFFSET, 0, 4)
            p += RECORD_BATCH_OVERHEAD
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
    scan = SegmentScan(buf, 0, seg.size, seg.scan_scratch)
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
    mapped = ctx.map.get(h1, h2, scan.r_offset)
    keep = np.empty(nr, dtype=np.bool_)
    kind = np.empty(nb, dtype=np.int8)
    out_size = np.empty(nb, dtype=np.int64)
    new_base_ts = np.zeros(nb, dtype=np.int64)
    new_max_ts = np.empty(nb, dtype=np.int64)
    new_max_off = np.empty(nb, dtype=np.int64)
    new_attrs = np.empty(nb, dtype=np.int64)
    counts = np.zeros(4, dtype=np.int64)
    decide_segment(nb, scan.b_rec, scan.b_base, scan.b_lod, scan.b_attrs, scan.b_base_ts, scan.b_max_ts,
                   retain_empty, scan.r_offset, scan.r_ts, scan.r_klen, scan.r_vlen, scan.r_tail, scan.r_end,
                   mapped, ctx.map.latest_offset, ctx.now_ms, ctx.now_ms + ctx.delete_retention_ms,
                   keep, kind, out_size, new_base_ts, new_max_ts, new_max_off, new_attrs, counts,
                   ctx.strategy.versioned)
    out_len = np.where(kind == VERBATIM, scan.b_size, np.where(kind == DROP, 0, out_size))
    c_first, c_last = np.empty(nb, dtype=np.int64), np.empty(nb, dtype=np.int64)
    c_max_ts, c_shallow, c_max_off = np.empty(nb, dtype=np.int64), np.empty(nb, dtype=np.int64), np.empty(nb, dtype=np.int64)
    nc, err = plan_chunks(nb, scan.b_pos, scan.b_size, seg.size, kind, out_len, new_max_ts, new_max_off,
                          scan.b_base, scan.b_lod, ctx.io_buffer_size, ctx.max_message_size,
                          ctx.max_io_buffer_size, c_first, c_last, c_max_ts, c_shallow, c_max_off)
    if err:
        return False
    out = (seg.scan_scratch or ScanScratch()).output(int(out_len.sum()), seg.size)
    out_pos = np.empty(nb, dtype=np.int64)
    emit_segment(buf, nb, scan.b_pos, scan.b_size, scan.b_rec, scan.b_base, scan.b_attrs,
                 kind, out_size, new_base_ts, new_max_ts, new_attrs, keep, scan.r_offset, scan.r_ts, scan.r_tail,
                 scan.r_end, out, out_pos)
    view = memoryview(out)
    for i in np.flatnonzero((kind == REBUILD) | (kind == EMPTY)).tolist():
        p = int(out_pos[i])
        size = int(out_len[i])
        UINT32.pack_into(view, p + CRC_OFFSET, _crc32c.crc32c(view[p + ATTRIBUTES_OFFSET:p + size]))
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
