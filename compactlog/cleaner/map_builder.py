"""Building the key map over the cleanable range (Kafka's buildOffsetMap)."""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecordError
from ..record import kernels
from .offset_map import OffsetMap
from .source import SourceLog
from .stats import CleanerStats
from .txn_state import CleanedTransactionState


DIGEST_CACHE_MAX_DIRTY_BYTES = 2 << 30


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
                     stats: CleanerStats) -> None:
    """Map every key in [start, end) to its latest offset, skipping aborted and control data."""
    dirty = log.segments_in_range(start, end)
    txn = CleanedTransactionState()
    txn.add_aborted(log.collect_aborted(start, end))
    from .fast_path import map_segment_fast
    # keeping 16 bytes of digest per record for the rewrite pays off unless the range is huge
    cache = sum(s.size for s in dirty) <= DIGEST_CACHE_MAX_DIRTY_BYTES
    for i, seg in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        seg.cache_digests = cache
        # structure and offsets of the segment, then its offset index, the CRC of every batch read
        seg.check_structure(log.next_base(seg))
        seg.validate(log.next_base(seg), seg.index_position(start))
        last = map_segment_fast(seg, start, offset_map, stats)
        if last is not None:
            if last >= start:
                offset_map.update_latest_offset(last)
            offset_map.update_latest_offset(next_start - 1)
            continue
        pos = seg.index_position(start)
        stats.map_bytes_read += seg.size - pos
        for batch in seg.batches(pos):
            try:
                _map_batch(batch, start, offset_map, txn, stats)
            except CorruptRecordError as e:
                raise e.located(file=seg.path, position=batch.position) from None
            if batch.last_offset >= start:
                offset_map.update_latest_offset(batch.last_offset)
        offset_map.update_latest_offset(next_start - 1)


def _map_batch(batch, start: int, offset_map: OffsetMap, txn: CleanedTransactionState,
               stats: CleanerStats) -> None:
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
    select = np.flatnonzero((cols.key_len >= 0) & (offsets >= start))
    if select.size:
        h1, h2 = key_hashes(cols, select)
        offset_map.put(h1, h2, offsets[select])
    stats.map_messages_read += h.records_count
