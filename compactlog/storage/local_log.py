"""A partition's segments on local disk: Kafka's LocalLog.

The file side of a log: the segment map (``LogSegments``), the log end offset and recovery point,
rolling, flushing, reading spans of whole batches, truncation, deleting segments and swapping
cleaned ones in (``replace_segments``, Kafka's ``LocalLog.replaceSegments``). It knows nothing of
producers, transactions' stability, validation or retention policy: those are ``Log``'s (Kafka's
UnifiedLog), which builds a ``LocalLog`` from what the loader returns and calls it under the
partition lock. The lock is shared so that ``batches`` can map a segment under it and read the
mapping outside it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Callable, Iterator

from ..errors import CorruptRecordError, OffsetOutOfRangeError, StorageError
from ..record.batch import Record, compute_crc, iter_batches
from ..record.layout import BASE_OFFSET_OFFSET, INT32, INT64, LENGTH_OFFSET, LOG_OVERHEAD
from . import files
from .events import REBUILT, DataEvent
from .batch_order import past_bound
from .index_check import breaks_order
from .fsutil import fsync_dir
from .layout import close_map
from .segment import FileRecords, LogSegment
from .segments import NO_UPPER_BOUND, LogSegments
from .timestamp_lookup import (EARLIEST_LOCAL_TIMESTAMP, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP,
                               SegmentTimes, find_offset_by_timestamp)
from .txn_index import AbortedTxn, collect_aborted
from .txn_trust import untrusted_txn_indexes


@dataclass(slots=True)
class ReadSpan:
    """Whole batches of one segment file, as ``Log.read_span`` found them: ``length`` bytes from
    ``position`` of ``file`` (None when nothing is readable), the last of them at ``last_offset``."""
    file: FileRecords | None
    position: int
    length: int
    last_offset: int

    def read(self) -> bytes:
        return self.file.read(self.position, self.length) if self.length else b""


NOTHING = ReadSpan(None, 0, 0, -1)


def replace_segments(segments: LogSegments, new_segments: list[LogSegment], old_segments: list[LogSegment],
                     dir_path: str, *, on_dropped: Callable[[int], None] | None = None) -> None:
    """Kafka's LocalLog.replaceSegments: ``.cleaned`` -> ``.swap`` -> live, old ones -> ``.deleted``
    -> gone. ``on_dropped(base_offset)`` for each old segment whose base offset no new one takes.

    Every step is a rename; the loader finishes or rolls back a crash between any two of them.
    """
    new_segments = sorted(new_segments, key=lambda s: s.base_offset)
    old_segments = [s for s in old_segments if segments.contains(s.base_offset)]
    for seg in reversed(new_segments):
        seg.change_suffix(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
    fsync_dir(dir_path)
    for seg in reversed(new_segments):
        segments.add(seg)
    new_bases = {s.base_offset for s in new_segments}
    for seg in old_segments:
        if seg.base_offset not in new_bases:
            segments.remove(seg.base_offset)
            if on_dropped is not None:
                on_dropped(seg.base_offset)
        seg.close_handles()
        for p in seg.file_paths():
            if os.path.exists(p):
                os.replace(p, p + files.DELETED_SUFFIX)
    fsync_dir(dir_path)
    for seg in new_segments:
        seg.change_suffix(files.SWAP_SUFFIX, "")
    fsync_dir(dir_path)
    for seg in old_segments:
        for p in seg.file_paths():
            try:
                os.remove(p + files.DELETED_SUFFIX)
            except FileNotFoundError:
                pass


def read_batches(segments: LogSegments, start: int, end: int, lock=None) -> Iterator:
    """Every batch (RecordBatch or legacy entry) holding offsets in [start, end), in order.

    Each segment is mapped under ``lock`` and read outside it, so a writer is never held up; a
    segment replaced or deleted meanwhile is found again from the next offset needed.
    """
    guard = lock if lock is not None else contextlib.nullcontext()
    needed = start
    while needed < end:
        with guard:
            seg = segments.floor(needed)
            if seg is None:
                seg = segments.first
                if seg is None or seg.base_offset >= end:
                    return
            nxt = segments.next_base(seg)
            if seg.base_offset >= end:
                return
            pos = seg.lookup_position(needed)
            buf, size = seg.log.map(), seg.log.size
        try:
            for b in iter_batches(buf, pos, size):
                if b.last_offset < needed:
                    continue
                if b.base_offset >= end:
                    return
                needed = b.last_offset + 1
                yield b
        except CorruptRecordError as e:
            raise e.located(file=seg.log.path) from None
        if nxt is None:
            return
        needed = max(needed, nxt)


class LocalLog:
    """The segments of one partition directory and the offsets that describe them."""

    def __init__(self, dir_path: str, config, segments: LogSegments, *, recovery_point: int,
                 log_end_offset: int, clock, read_only: bool, name: str, lock, events: list[DataEvent]):
        self.dir = dir_path
        self.config = config
        self.segments = segments
        self.recovery_point = recovery_point
        self.log_end_offset = log_end_offset
        self.clock = clock
        self.read_only = read_only
        self.name = name
        self.lock = lock
        self.events = events
        self._txn_indexes_trusted = False

    # -- writing
    def append(self, last_offset: int, max_timestamp: int, offset_of_max_timestamp: int, data) -> LogSegment:
        """Whole batches onto the active segment; the log end moves past ``last_offset``."""
        seg = self.segments.active
        seg.append(last_offset, max_timestamp, offset_of_max_timestamp, data)
        self.log_end_offset = last_offset + 1
        return seg

    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Close the active segment and start a new one at max(expected, log end offset); the
        active segment itself when it is empty and already there."""
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.segments.active
        if active.base_offset == new_base:
            if active.size == 0:
                return active
            raise StorageError(f"{self.name}: trying to roll a new segment at {new_base} which already exists")
        if new_base < active.base_offset:
            raise StorageError(f"{self.name}: roll offset {new_base} below the active segment {active.base_offset}")
        for suffix in files.SEGMENT_SUFFIXES:
            stale = files.segment_file(self.dir, new_base, suffix)
            if os.path.exists(stale):
                os.remove(stale)
        active.on_become_inactive()
        seg = LogSegment(self.dir, new_base, self.config, now_ms=self.clock(), preallocate_indexes=True,
                         new=True)
        self.segments.add(seg)
        return seg

    def flush(self, offset: int | None = None) -> bool:
        """fsync every segment below ``offset`` (default: the log end) and advance the recovery
        point; whether the directory was fsynced too (a segment made since the last flush)."""
        upto = self.log_end_offset if offset is None else offset
        if upto <= self.recovery_point:
            return False
        flushed = self.segments.in_range(self.recovery_point, upto)
        for seg in flushed:
            seg.flush()
        new_segment = any(seg.base_offset >= self.recovery_point for seg in flushed)
        if new_segment:
            fsync_dir(self.dir)     # a segment made since the last flush (Kafka's LocalLog.flush)
        self.recovery_point = upto
        return new_segment

    def truncate_to(self, offset: int) -> None:
        """Remove every batch at or after ``offset``: later segments deleted, the one holding it cut."""
        for seg in [s for s in self.segments if s.base_offset > offset]:
            if seg is self.segments.first:
                break
            self.segments.remove(seg.base_offset)
            seg.delete_files()
        if not self.segments or self.segments.first.base_offset > offset:
            raise StorageError(f"{self.name}: cannot truncate below the first segment")
        active = self.segments.active
        active.truncate_to(offset)
        active.resize_indexes(self.config.max_index_size)
        if active.size == 0:
            active.created_ms = self.clock()   # as Kafka's LogSegment.truncateTo
        self.log_end_offset = offset
        self.recovery_point = min(self.recovery_point, offset)

    def truncate_fully_and_start_at(self, offset: int, set_aside: Callable[[LogSegment], None]) -> None:
        """Every segment removed (``set_aside`` first keeps what a non-empty one holds) and an empty
        active segment started at ``offset``, the log end. The old segments go first: a crash
        between the two leaves a directory without segments, which the next start takes up again,
        where one with a new segment above old ones would serve the old ones."""
        for seg in list(self.segments):
            if seg.size > 0:
                set_aside(seg)
            self.segments.remove(seg.base_offset)
            seg.delete_files()
        for suffix in files.SEGMENT_SUFFIXES:
            stale = files.segment_file(self.dir, offset, suffix)
            if os.path.exists(stale):
                os.remove(stale)
        seg = LogSegment(self.dir, offset, self.config, now_ms=self.clock(), preallocate_indexes=True, new=True)
        self.segments.add(seg)
        self.log_end_offset = offset
        self.recovery_point = offset

    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment], *,
                         on_dropped: Callable[[int], None] | None = None) -> None:
        replace_segments(self.segments, new_segments, old_segments, self.dir, on_dropped=on_dropped)

    def close(self) -> None:
        """Clean close: every segment let go of, the active one trimmed with its final time-index
        entry."""
        for seg in self.segments[:-1]:
            seg.close_handles()
        self.segments.active.close()

    def close_handles(self) -> None:
        for seg in self.segments:
            seg.close_handles()

    # -- reading
    def read_span(self, start_offset: int, max_bytes: int, min_one_batch: bool, bound: int, *,
                  log_start_offset: int) -> ReadSpan:
        """The whole batches from the one holding ``start_offset`` within ``max_bytes`` (at least
        one when ``min_one_batch``), stopping at the first batch whose base offset is ``bound`` or
        more; an offset outside [log start, log end] is out of range. The caller holds the lock."""
        if start_offset < log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(f"{self.name}: offset {start_offset} is outside "
                                        f"[{log_start_offset}, {self.log_end_offset}]")
        if start_offset >= bound:
            return NOTHING
        for seg in self.segments.from_offset(start_offset):
            if seg.base_offset >= bound:
                break
            pos = seg.read_position(start_offset)
            if pos is None:
                self._check_cut_short(seg)
                continue            # the offset is past this segment's last batch (a compaction gap)
            f = seg.log
            length = 0
            last = -1
            written_from = seg.written_from
            checked_lo, checked_hi = seg.crc_checked_lo, seg.crc_checked_hi
            unchecked = []          # (position, header, the span's length and last offset before it)
            for p, h in f.batch_headers(pos):
                if h is None:
                    # a message-format v0/v1 entry: its offset is its last one (a compressed
                    # wrapper carries its last inner record's)
                    prefix = f.read(p, LOG_OVERHEAD)
                    (last_offset,) = INT64.unpack_from(prefix, BASE_OFFSET_OFFSET)
                    (size_field,) = INT32.unpack_from(prefix, LENGTH_OFFSET)
                    base_offset, size = last_offset, size_field + LOG_OVERHEAD
                else:
                    base_offset, last_offset, size = h.base_offset, h.last_offset, h.size
                if length and breaks_order(base_offset, last):
                    # offsets going backwards (a base offset is outside the CRC): not served
                    raise CorruptRecordError(f"base offset {base_offset} is not above the previous batch's "
                                             f"last offset {last} (the base offset is not covered by the CRC)",
                                             file=f.path, position=p, offset=base_offset, field="baseOffset")
                if base_offset >= bound:
                    self._check_stop(seg, p, base_offset)
                    break
                if length + size > max_bytes and (length > 0 or not min_one_batch):
                    break
                if h is not None and p < written_from and not (checked_lo <= p and p + size <= checked_hi):
                    unchecked.append((p, h, length, last))
                length += size
                last = last_offset
            if unchecked:
                length, last = self._check_crcs(seg, pos, length, last, unchecked)
            return ReadSpan(f, pos, length, last)
        return NOTHING

    @staticmethod
    def _check_crcs(seg: LogSegment, pos: int, length: int, last: int, unchecked: list) -> tuple[int, int]:
        """The span from ``pos`` (``length`` bytes up to offset ``last``) cut before its first
        batch whose CRC does not match its bytes; CorruptRecordError when that is its first
        batch. ``unchecked``: the span's batches found on disk and not checked before, each
        with the span's length and last offset before it; their bytes are read in one call.
        The run of checked bytes then covers the span's good part (grown when it meets the
        run before), so readers going forward check each batch once. Under the partition lock."""
        f = seg.log
        first = unchecked[0][0]
        data = f.read(first, pos + length - first)
        for p, h, length_before, last_before in unchecked:
            computed = compute_crc(data, p - first, h.size)
            if computed != h.crc:
                if not length_before:
                    raise CorruptRecordError(
                        f"the batch's CRC does not match its bytes (stored {h.crc}, computed {computed})",
                        file=f.path, position=p, offset=h.base_offset, field="crc")
                length, last = length_before, last_before    # served up to it; a fetch at it fails
                break
        end = pos + length
        lo, hi = seg.crc_checked_lo, seg.crc_checked_hi
        if lo <= end and pos <= hi and hi > lo:
            seg.crc_checked_lo, seg.crc_checked_hi = min(lo, pos), max(hi, end)
        else:
            seg.crc_checked_lo, seg.crc_checked_hi = pos, end
        return length, last

    def _check_cut_short(self, seg: LogSegment) -> None:
        """A fetch past a segment's last batch goes on at the next segment (a compaction gap);
        past an incomplete batch at the end of a segment that is not the active one (no write is
        in flight there: bytes were cut), it would skip the cut batches' offsets without a word.
        Raised instead: CORRUPT_MESSAGE for the partition, the file and position in the log."""
        if self.segments.next_base(seg) is None:
            return
        at = seg.cut_short_at()
        if at is not None:
            raise CorruptRecordError(
                f"the {seg.log.size - at} bytes at the end of this segment are not a complete batch "
                f"(a truncated or torn write), and later segments follow it",
                file=seg.log.path, position=at, field="length")

    def _check_stop(self, seg: LogSegment, position: int, base_offset: int) -> None:
        """A fetch stops at the batch at ``position``; one at or above its segment's bound is
        corrupt (``batch_order``): a fetch to the high watermark would end there, short of the
        records after it, and answer nothing forever. Raised: CORRUPT_MESSAGE for the partition."""
        following = self.segments.next_base(seg)
        upper = following if following is not None else self.log_end_offset
        if base_offset < upper:
            return
        buf = seg.log.map()
        try:
            error = past_bound(buf, seg.base_offset, position, seg.log.size, upper,
                               last_segment=following is None, path=seg.log.path)
        finally:
            close_map(buf)
        if error is not None:
            raise error

    def batches(self, start: int, end: int) -> Iterator:
        """Every batch holding offsets in [start, end), in order (``read_batches`` under the lock)."""
        return read_batches(self.segments, start, end, self.lock)

    def records(self, start: int, *, include_control: bool, validate: bool) -> Iterator[Record]:
        """Records from ``start`` as Python objects (for tools and small reads); with ``validate``
        each batch's CRC is checked and a failure names the segment file."""
        for b in self.batches(start, NO_UPPER_BOUND):
            if validate:
                try:
                    b.ensure_valid()
                except CorruptRecordError as e:
                    seg = self.segments.floor(b.base_offset)
                    raise e.located(file=seg.log.path if seg else None, position=b.position) from None
            if b.is_control and not include_control:
                continue
            for r in b.records():
                if r.offset >= start:
                    yield r

    def size(self) -> int:
        return self.segments.size_in_bytes()

    # -- timestamps
    def offset_for_timestamp(self, target: int, log_start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= target (Kafka's ListOffsets);
        the special targets EARLIEST (-2), LATEST (-1), MAX_TIMESTAMP (-3), EARLIEST_LOCAL (-4)."""
        if target in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):     # no tiered storage
            return log_start_offset, -1
        if target == LATEST_TIMESTAMP:
            return self.log_end_offset, -1
        if target == MAX_TIMESTAMP:
            return self.offset_of_max_timestamp()
        return self.first_record_at_or_after(target, log_start_offset)

    def first_record_at_or_after(self, target: int, log_start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above ``log_start_offset`` whose
        timestamp is ``target`` or later, found through the time indexes."""
        return find_offset_by_timestamp(self._segment_times(target, log_start_offset), target,
                                        log_start_offset)

    def _segment_times(self, target: int, log_start_offset: int) -> Iterator[SegmentTimes]:
        """Each segment for the timestamp lookup: its largest timestamp, and its batches from the
        one its (checked) time index points to for ``target``."""
        def batches_from(seg: LogSegment) -> Iterator:
            seg.ensure_indexes_trusted()
            _, ts_off = seg.time_index.lookup(target)
            return seg.batches(seg.lookup_position(max(ts_off, log_start_offset)))

        for seg in self.segments:
            yield seg.largest_timestamp(), lambda seg=seg: batches_from(seg)

    def offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """Kafka's MAX_TIMESTAMP lookup: the first record carrying the largest timestamp of the
        (first) segment with the largest maxTimestampSoFar."""
        seg = max(self.segments, key=lambda s: s.max_timestamp_so_far)
        ts, off = seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far
        pos = seg.lookup_position(off)
        for b in seg.batches(pos):
            if b.max_timestamp == ts:
                for r in b.records():
                    if r.timestamp == ts:
                        return r.offset, ts
                return None
        return None

    # -- transactions
    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper_bound), walking txn indexes forward."""
        with self.lock:
            self._ensure_txn_indexes_trusted()
            indexes = [s.txn_index for s in self.segments.holding_and_after(start)]
        return collect_aborted(indexes, start, upper_bound)

    def _ensure_txn_indexes_trusted(self) -> None:
        """The ``.txnindex`` files checked against the log's markers (index_check) before the first
        read_committed read; when one lies they are all rebuilt from the markers (on disk for a
        writer) and that is reported: a wrong entry would serve aborted records."""
        if self._txn_indexes_trusted:
            return
        self._txn_indexes_trusted = True
        segs = self.segments.values()
        layouts = []
        for seg in segs:
            layouts.append(seg.layout())
            # the walk the offset and time indexes' first use needs too: done once, not twice
            # (a read_committed consume from the start walked every segment two times)
            seg.ensure_indexes_trusted(layouts[-1])
        untrusted = untrusted_txn_indexes(
            layouts, [seg.txn_index.path for seg in segs],
            lambda i: b"".join(t.encode() for t in segs[i].txn_index.entries()))
        if untrusted is None:
            return
        problem, rebuilt = untrusted
        for seg, txns in zip(segs, rebuilt):
            seg.txn_index._rewrite(txns)
        where = "rebuilt from the log's markers" + (" (in memory)" if self.read_only else "")
        self.events.append(DataEvent(REBUILT, self.name, self.dir, f"{problem}; every .txnindex {where}"))


__all__ = ["LocalLog", "ReadSpan", "replace_segments", "NO_UPPER_BOUND"]
