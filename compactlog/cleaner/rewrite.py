"""Rewriting a group of segments into one cleaned segment (Kafka's cleanSegments/cleanInto/filterTo).

The source is read in chunks of the cleaner's I/O buffer, and each chunk's retained batches are
appended to the cleaned segment as one append, exactly as Kafka does: the sparse index entries of
the cleaned segment depend on those chunk boundaries.
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecordError
from ..record import kernels
from ..record.batch import (BatchSpec, LOG_APPEND_TIME, assemble_batch, empty_batch)
from ..storage.index_check import TxnCarry
from . import rules, validate
from .map_builder import control_type_of, key_hashes
from .offset_map import OffsetMap
from .rules import BatchRetention
from .segment_writer import CleanedSegmentWriter
from .source import SourceLog, SourceSegment
from .stats import CleanerStats
from .strategy import DEFAULT, CompactionStrategy
from .txn_state import CleanedTransactionState

REASONS = {rules.SUPERSEDED: "superseded", rules.TOMBSTONE_EXPIRED: "tombstone-expired",
           rules.KEYLESS: "keyless", rules.DISCARDED_BATCH: "discarded"}


class RoundContext:
    """Everything fixed for one round of one partition."""

    def __init__(self, *, now_ms: int, delete_retention_ms: int, upper_bound: int,
                 active_producers: dict, offset_map: OffsetMap, io_buffer_size: int,
                 max_message_size: int, broker_max_message_size: int, legacy_delete_horizon_ms: int,
                 observer=None, strategy: CompactionStrategy = DEFAULT):
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.upper_bound = upper_bound
        self.active_producers = active_producers
        self.map = offset_map
        self.io_buffer_size = io_buffer_size
        self.max_message_size = max_message_size
        self.max_io_buffer_size = broker_max_message_size
        self.legacy_delete_horizon_ms = legacy_delete_horizon_ms
        self.observer = observer   # explain: told about every tombstone and marker that stays
        self.txn_carry = TxnCarry()   # producers' transactions over the segments rewritten so far
        self.strategy = strategy      # which record of a key wins (strategy.py)


class _ChunkResult:
    __slots__ = ("max_ts", "shallow", "max_offset", "parts", "size")

    def __init__(self):
        self.max_ts = -1
        self.shallow = -1
        self.max_offset = -1
        self.parts = []
        self.size = 0

    def add(self, data: bytes, max_ts: int, shallow: int, max_offset: int) -> None:
        if max_ts > self.max_ts:
            self.max_ts, self.shallow = max_ts, shallow
        self.max_offset = max(self.max_offset, max_offset)
        self.parts.append(data)
        self.size += len(data)


def filter_batch(batch, ctx: RoundContext, txn: CleanedTransactionState, legacy_retain: bool,
                 stats: CleanerStats):
    """The retained form of one batch: (bytes, max_ts, shallow offset, max offset) or None."""
    h = batch.header
    if batch.magic < 2:
        raise CorruptRecordError("cleaning magic v0/v1 batches is not supported", offset=batch.last_offset,
                                 field="magic")
    ctype = None
    if h.is_control:
        ctype = control_type_of(batch)
        can_discard = txn.on_control_batch(h.last_offset, h.producer_id, ctype)
    else:
        can_discard = txn.on_data_batch(h.last_offset, h.producer_id, h.is_transactional)
    decision = rules.decide_batch(
        is_control=h.is_control, can_discard=can_discard, has_delete_horizon=h.has_delete_horizon,
        delete_horizon_ms=h.delete_horizon_ms, producer_id=h.producer_id,
        producer_epoch=h.producer_epoch, last_offset=h.last_offset, next_offset=h.next_offset,
        active_producers=ctx.active_producers, upper_bound=ctx.upper_bound, now_ms=ctx.now_ms)
    stats.bytes_read += h.size
    if decision.retention is BatchRetention.DELETE:
        stats.count_removed(decision.reason, h.records_count)
        return None
    n = h.records_count
    stats.messages_read += n
    if n == 0:
        kept = np.zeros(0, dtype=np.int64)
        cols = None
    else:
        cols = batch.columns()
        if decision.discard_records:
            kept = np.zeros(0, dtype=np.int64)
            stats.count_removed("marker" if h.is_control else "aborted", n)
        elif h.is_control:
            kept = np.arange(n, dtype=np.int64)
        else:
            offsets = h.base_offset + cols.off_delta
            has_key = cols.key_len >= 0
            has_value = cols.val_len >= 0
            h1, h2 = key_hashes(cols)
            mapped = ctx.map.get(h1, h2, offsets)
            mapped[~has_key] = -1
            retain = rules.retain_deletes(magic=h.magic, has_delete_horizon=h.has_delete_horizon,
                                          delete_horizon_ms=h.delete_horizon_ms, now_ms=ctx.now_ms,
                                          legacy_retain=legacy_retain)
            fates = rules.record_fates(offsets, has_key, has_value, mapped, ctx.map.latest_offset, retain,
                                       ctx.strategy.versioned)
            kept = np.flatnonzero(fates == rules.KEPT)
            if kept.size != n:
                gone = fates[fates != rules.KEPT]
                for code in np.unique(gone):
                    stats.count_removed(REASONS[int(code)], int((gone == code).sum()))
                stats.invalid_messages_read += int((fates == rules.KEYLESS).sum())
    if kept.size:
        tomb = bool((cols.val_len[kept] < 0).any())
        need_horizon = rules.needs_delete_horizon(magic=h.magic, has_delete_horizon=h.has_delete_horizon,
                                                  kept_tombstone=tomb,
                                                  marker_for_empty_txn=decision.marker_for_empty_txn)
        if ctx.observer is not None:
            _observe(ctx, h, cols, kept, need_horizon, can_discard, ctype)
        if kept.size == n and not need_horizon:
            data = batch.raw()
            stats.messages_written += n
            stats.bytes_written += len(data)
            return data, h.max_timestamp, h.last_offset, h.last_offset
        horizon = ctx.now_ms + ctx.delete_retention_ms if need_horizon else h.delete_horizon_ms
        data, max_ts, max_offset = rebuild_batch(batch, cols, kept, horizon)
        stats.messages_written += int(kept.size)
        stats.bytes_written += len(data)
        return data, max_ts, h.last_offset, max_offset
    if decision.retention is BatchRetention.RETAIN_EMPTY:
        data = empty_batch(h)
        stats.bytes_written += len(data)
        return data, h.max_timestamp, h.last_offset, h.last_offset
    return None


def _observe(ctx: RoundContext, h, cols, kept: np.ndarray, need_horizon: bool, can_discard: bool,
             control_type: int | None) -> None:
    horizon = ctx.now_ms + ctx.delete_retention_ms if need_horizon else h.delete_horizon_ms
    if h.is_control:
        ctx.observer.retained_marker(h, horizon, can_discard, control_type)
        return
    tomb = kept[cols.val_len[kept] < 0]
    if tomb.size:
        keys = [bytes(cols.data[cols.key_pos[i]:cols.key_pos[i] + cols.key_len[i]]) if cols.key_len[i] >= 0
                else None for i in tomb.tolist()]
        offsets = (h.base_offset + cols.off_delta[tomb]).tolist()
        ctx.observer.retained_tombstones(h, offsets, keys, horizon)


def rebuild_batch(batch, cols, kept: np.ndarray, delete_horizon_ms: int | None):
    """Re-encode the kept records with the batch's header fields (Kafka's buildRetainedRecordsInto)."""
    h = batch.header
    timestamps = batch.record_timestamps()[kept]
    if h.timestamp_type == LOG_APPEND_TIME:
        max_ts = h.max_timestamp
    else:
        max_ts = int(timestamps.max())
    base_ts = delete_horizon_ms if delete_horizon_ms is not None else int(timestamps[0])
    bound = int((cols.rec_end[kept] - cols.tail_pos[kept]).sum()) + 21 * kept.size
    out = np.empty(bound, dtype=np.uint8)
    end = kernels.reencode_records(out, 0, cols.data, kept, timestamps - base_ts, cols.off_delta,
                                   cols.tail_pos, cols.rec_end)
    spec = BatchSpec(base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                     compression=h.compression, timestamp_type=h.timestamp_type,
                     transactional=h.is_transactional, control=h.is_control,
                     producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                     base_sequence=h.base_sequence, delete_horizon_ms=delete_horizon_ms)
    data = assemble_batch(spec, h.last_offset_delta, base_ts, max_ts, int(kept.size), out[:end].tobytes())
    max_offset = h.base_offset + int(cols.off_delta[kept[-1]])
    return data, max_ts, max_offset


def clean_segment_into(seg: SourceSegment, writer: CleanedSegmentWriter, ctx: RoundContext,
                       txn: CleanedTransactionState, stats: CleanerStats) -> None:
    from .fast_path import rewrite_segment_fast
    if rewrite_segment_fast(seg, writer, ctx, txn, stats):
        return
    legacy_retain = seg.info.mtime_ms > ctx.legacy_delete_horizon_ms
    capacity = ctx.io_buffer_size
    position = 0
    size = seg.size
    batches = seg.batches(0)
    pending = None
    while position < size:
        chunk_end = min(position + capacity, size)
        chunk = _ChunkResult()
        bytes_read = 0
        while True:
            if pending is None:
                pending = next(batches, None)
            if pending is None or pending.position + pending.size > chunk_end:
                break
            b, pending = pending, None
            try:
                out = filter_batch(b, ctx, txn, legacy_retain, stats)
            except CorruptRecordError as e:
                raise e.located(file=seg.path, position=b.position) from None
            bytes_read += b.size
            if out is not None:
                chunk.add(*out)
                if chunk.size > capacity:
                    break   # Kafka's filterTo returns once its output buffer had to grow
        position += bytes_read
        if chunk.parts:
            writer.append(chunk.max_offset, chunk.max_ts, chunk.shallow, b"".join(chunk.parts))
        if bytes_read == 0:
            capacity = _grow(capacity, pending, position, size, ctx, seg)


def _grow(capacity: int, pending, position: int, size: int, ctx: RoundContext, seg: SourceSegment) -> int:
    """Kafka's growBuffersOrFail: double up to the largest message size, or the next batch's size."""
    if pending is None:
        raise CorruptRecordError(f"{size - position} bytes at the end of the segment are not a complete batch",
                                 file=seg.path, position=position)
    if capacity >= ctx.max_message_size:
        next_size = pending.size
        if next_size > size - position:
            raise CorruptRecordError(f"batch size {next_size} > {size - position} bytes left in the segment",
                                     file=seg.path, position=position)
        max_size = next_size
    else:
        max_size = ctx.max_message_size
    max_buffer = max(max_size, ctx.max_io_buffer_size)
    if capacity >= max_buffer:
        raise CorruptRecordError(f"the log contains a message larger than the maximum allowable size "
                                 f"of {max_buffer}", file=seg.path, position=position)
    return min(capacity * 2, max_buffer)


def clean_group(log: SourceLog, group: list[SourceSegment], writer: CleanedSegmentWriter,
                ctx: RoundContext, txn: CleanedTransactionState, stats: CleanerStats) -> None:
    txn.cleaned_index = writer.aborted
    for i, seg in enumerate(group):
        # the groups cover the log from its first segment: the txn index is checked against the
        # markers with every producer's history
        next_base = log.next_base(seg)
        seg.validate(next_base, 0)
        validate.check_txn_index_of(seg, next_base, ctx.txn_carry)
        upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset()
        txn.add_aborted(log.collect_aborted(seg.base_offset, upper))
        clean_segment_into(seg, writer, ctx, txn, stats)
        seg.close()   # its last use in this round: unmap it
