"""Kafka's ListOffsets for a timestamp: the first offset whose record is at or after it.

``find_offset_by_timestamp`` is ``UnifiedLog.fetchOffsetByTimestamp`` for an ordinary target with
``LogSegment.findOffsetByTimestamp`` inside each segment: skip the segments whose largest
timestamp is below the target, then, from where the segment's time index points, the first batch
whose max timestamp reaches it and in that batch the first record that does, never below the log
start. ``fetchable_answer`` is ``Partition.fetchOffsetForTimestamp``'s last step: an answer at or
past the fetchable offset (the high watermark or the last stable offset, ``isolation``) is no
answer, while EARLIEST is always the log start.

The writer's log (``LocalLog``, trusting its checked time indexes) and the read-only
``PartitionReader`` (which trusts no index, so it knows no largest timestamp and scans from the log
start) both answer through these two functions.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator

# ListOffsetsRequest's special timestamps
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4

SegmentTimes = tuple[int | None, Callable[[], Iterator]]
"""A segment as the lookup sees it: its largest timestamp (None when it is not known), and the
batches to scan for the target, from where the segment's time index points (called only for a
segment that may hold the answer)."""


def find_offset_by_timestamp(segments: Iterable[SegmentTimes], target: int,
                             log_start_offset: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or above ``log_start_offset`` whose timestamp is
    ``target`` or later, over ``segments`` in offset order; None when there is none."""
    for largest, batches_from in segments:
        if largest is not None and largest < target:
            continue
        for b in batches_from():
            if b.max_timestamp < target or b.last_offset < log_start_offset:
                continue
            for r in b.records():
                if r.timestamp >= target and r.offset >= log_start_offset:
                    return r.offset, r.timestamp
    return None


def fetchable_answer(found: tuple[int, int] | None, fetchable: int, *,
                     target: int | None = None) -> tuple[int, int] | None:
    """What ListOffsets answers for ``found``: only an offset below the fetchable one, except for
    the special ``target`` EARLIEST (and EARLIEST_LOCAL): the log start, whatever the bound."""
    if target in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return found
    if found is None or found[0] >= fetchable:
        return None
    return found
