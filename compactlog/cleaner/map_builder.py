"""Building the key map over the cleanable range (Kafka's buildOffsetMap)."""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecordError
from ..record import kernels
from ..record.batch import as_u8
from .offset_map import OffsetMap
from .source import SourceLog
from .stats import CleanerStats
from .strategy import DEFAULT, CompactionStrategy
from .txn_state import CleanedTransactionState


# the key digests the map phase keeps for the rewrite (16 B a record: 128 MiB hold 8M records), so
# that the rewrite does not hash those keys again; bounded, as the digests of a whole range of
# 50M records were 0.8 GB held beside the map
DIGEST_CACHE_BYTES = 128 << 20


def key_hashes(cols, select: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """128-bit digests of the keys of a scanned records section (rows ``select``)."""
    kp, kl = cols.key_pos, cols.key_len
    if select is not None:
        kp, kl = kp[select], kl[select]
    h1 = np.zeros(kp.shape[0], dtype=np.uint64)
    h2 = np.zeros(kp.shape[0], dtype=np.uint64)
    kernels.hash_keys(cols.data, kp, kl, h1, h2)
    return h1, h2


def control_type_of(batch) -> int | None:
    if batch.records_count == 0:
        return None
    return batch.control_type()


def build_offset_map(log: SourceLog, start: int, end: int, offset_map: OffsetMap,
                     stats: CleanerStats, strategy: CompactionStrategy = DEFAULT) -> None:
    """Map every key in [start, end) to its latest offset, skipping aborted and control data; with
    a version strategy, to its winner (``offset_map.VersionMap``) over [start, end), then over the
    clean section below ``start`` for the keys mapped (``rank_clean_section``)."""
    dirty = log.segments_in_range(start, end)
    txn = CleanedTransactionState()
    txn.add_aborted(log.collect_aborted(start, end))
    from .fast_path import map_segment_fast
    digest_room = DIGEST_CACHE_BYTES
    for i, seg in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        seg.digest_room = digest_room
        # structure and offsets of the segment, then its offset index, the CRC of every batch read
        seg.check_structure(log.next_base(seg))
        seg.validate(log.next_base(seg), seg.index_position(start))
        last = map_segment_fast(seg, start, offset_map, stats, strategy, end)
        if seg.cached_digests is not None:
            digest_room -= seg.cached_digests[0].nbytes + seg.cached_digests[1].nbytes
        if last is not None:
            if last >= start:
                offset_map.update_latest_offset(last)
        else:
            pos = seg.index_position(start)
            stats.map_bytes_read += seg.size - pos
            for batch in seg.batches(pos):
                try:
                    _map_batch(batch, start, offset_map, txn, stats, strategy, end)
                except CorruptRecordError as e:
                    raise e.located(file=seg.path, position=batch.position) from None
                if batch.last_offset >= start:
                    offset_map.update_latest_offset(batch.last_offset)
        offset_map.update_latest_offset(next_start - 1)
        # unmapped until the rewrite maps it again: the mapped segments of a big range were
        # resident all at once (1.37 GB of the 50M-key clean's peak)
        seg.release()
    if strategy.versioned:
        rank_clean_section(log, start, offset_map, strategy)


def _map_batch(batch, start: int, offset_map: OffsetMap, txn: CleanedTransactionState,
               stats: CleanerStats, strategy: CompactionStrategy = DEFAULT, end: int | None = None) -> None:
    if batch.magic < 2:
        raise CorruptRecordError("cleaning magic v0/v1 batches is not supported", offset=batch.last_offset,
                                 field="magic")
    h = batch.header
    if h.is_control:
        txn.on_control_batch(h.last_offset, h.producer_id, control_type_of(batch))
        stats.map_messages_read += 1
        return
    if txn.on_data_batch(h.last_offset, h.producer_id, h.is_transactional):
        stats.map_messages_read += h.records_count
        return
    if h.records_count == 0:
        return
    cols = batch.columns()
    offsets = h.base_offset + cols.off_delta
    if strategy.versioned:
        select = np.flatnonzero((cols.key_len >= 0) & (offsets >= start) & (offsets < end))
        if select.size:
            h1, h2 = key_hashes(cols, select)
            offset_map.put(h1, h2, offsets[select], *strategy.column_versions(cols, batch.record_timestamps(), select))
        stats.map_messages_read += h.records_count
        return
    select = np.flatnonzero((cols.key_len >= 0) & (offsets >= start))
    if select.size:
        h1, h2 = key_hashes(cols, select)
        offset_map.put(h1, h2, offsets[select])
    stats.map_messages_read += h.records_count


def keyed_versions(seg, pos: int, lo: int, hi: int, txn: CleanedTransactionState, strategy: CompactionStrategy):
    """(h1, h2, offsets, versions, has-version, records read) of the keyed records in [lo, hi) of
    ``seg`` from ``pos``, aborted transactional data and control batches left out (``txn``)."""
    from .fast_path import SegmentScan
    buf = as_u8(seg.buffer)
    scan = SegmentScan(buf, pos, seg.size, seg.scan_scratch)
    if scan.ok:
        offsets = scan.r_offset
        sel = np.flatnonzero((scan.r_klen >= 0) & (offsets >= lo) & (offsets < hi))
        h1, h2 = scan.key_hashes(sel)
        ver, has = strategy.record_versions(buf, scan.r_ts[sel], scan.r_vpos[sel], scan.r_vlen[sel], scan.r_hcount[sel])
        return h1, h2, offsets[sel], ver, has, scan.nr
    parts, read = [], 0
    for batch in seg.batches(pos):
        h = batch.header
        if batch.magic < 2:
            raise CorruptRecordError("cleaning magic v0/v1 batches is not supported", offset=batch.last_offset,
                                     field="magic", file=seg.path, position=batch.position)
        if h.is_control:
            txn.on_control_batch(h.last_offset, h.producer_id, control_type_of(batch))
            read += 1
            continue
        if txn.on_data_batch(h.last_offset, h.producer_id, h.is_transactional) or h.records_count == 0:
            read += h.records_count
            continue
        cols = batch.columns()
        offsets = h.base_offset + cols.off_delta
        sel = np.flatnonzero((cols.key_len >= 0) & (offsets >= lo) & (offsets < hi))
        if sel.size:
            h1, h2 = key_hashes(cols, sel)
            parts.append((h1, h2, offsets[sel], *strategy.column_versions(cols, batch.record_timestamps(), sel)))
        read += h.records_count
    if not parts:
        z = np.zeros(0, dtype=np.uint64)
        return z, z, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int8), read
    return (*(np.concatenate([p[i] for p in parts]) for i in range(5)), read)


def rank_clean_section(log: SourceLog, start: int, offset_map, strategy: CompactionStrategy) -> None:
    """Rank the records of the clean section [log start, ``start``) against the winners the dirty
    range mapped: a record cleaned in an earlier round still wins over a later, lower version."""
    if not log.segments or start <= log.segments[0].base_offset:
        return
    txn = CleanedTransactionState()
    txn.add_aborted(log.collect_aborted(log.segments[0].base_offset, start))
    for seg in log.segments_in_range(log.segments[0].base_offset, start):
        seg.check_structure(log.next_base(seg))
        h1, h2, offs, ver, has, _ = keyed_versions(seg, 0, 0, start, txn, strategy)
        offset_map.update(h1, h2, offs, ver, has)
