"""Which segments retention deletes: the rules of Kafka's UnifiedLog.deleteOldSegments.

Pure functions over the partition's segments and offsets: each returns the segments a rule
breaches and why, and ``Log.delete_old_segments`` deletes them (``Log._delete_segments``), rule
after rule in the order ``rules`` gives. As in
Kafka (``deletableSegments``), only a prefix of the log is ever deletable: the walk stops at the
first segment a rule keeps, at a segment not wholly below the high watermark, and at an empty
active segment.
"""

from __future__ import annotations

from typing import Callable

from .segment import LogSegment

# (segment, the segment after it or None) -> whether the rule deletes it
Predicate = Callable[[LogSegment, "LogSegment | None"], bool]
# (segments, log end offset, high watermark) -> (segments to delete, why)
Rule = Callable[[object, int, int], "tuple[list[LogSegment], str]"]


def rules(config, log_start_offset: int, clock: Callable[[], int]) -> list[Rule]:
    """The rules deleteOldSegments applies, in Kafka's order: the log start offset always, size
    and time for a topic whose cleanup.policy includes delete. A topic whose configs are unknown
    (a copied Kafka dir) gets none: its retention would be a guess."""
    if not config.known:
        return []
    out: list[Rule] = [lambda segs, leo, hw: log_start_offset_breached(segs, leo, hw, log_start_offset)]
    if config.delete:
        out.append(lambda segs, leo, hw: retention_size_breached(segs, leo, hw, config.get("retention.bytes")))
        out.append(lambda segs, leo, hw: retention_ms_breached(segs, leo, hw, config.get("retention.ms"), clock))
    return out


def deletable_segments(segments, log_end_offset: int, high_watermark: int,
                       predicate: Predicate) -> list[LogSegment]:
    """The leading segments ``predicate`` deletes, each wholly below the high watermark."""
    segs = list(segments)
    out = []
    for i, seg in enumerate(segs):
        nxt = segs[i + 1] if i + 1 < len(segs) else None
        upper = nxt.base_offset if nxt else log_end_offset
        if high_watermark >= upper and predicate(seg, nxt) and not (nxt is None and seg.size == 0):
            out.append(seg)
        else:
            break
    return out


def log_start_offset_breached(segments, log_end_offset: int, high_watermark: int,
                              log_start_offset: int) -> tuple[list[LogSegment], str]:
    """Segments wholly below the log start offset (DeleteRecords, or a start moved by retention)."""
    return (deletable_segments(segments, log_end_offset, high_watermark,
                               lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start_offset),
            f"below the log start offset {log_start_offset}")


def retention_size_breached(segments, log_end_offset: int, high_watermark: int,
                            retention_bytes: int) -> tuple[list[LogSegment], str]:
    """The oldest segments whose removal keeps the log at or above ``retention.bytes``."""
    size = sum(s.size for s in segments)
    if retention_bytes < 0 or size < retention_bytes:
        return [], ""
    excess = [size - retention_bytes]

    def within_excess(seg, nxt):
        if excess[0] - seg.size >= 0:
            excess[0] -= seg.size
            return True
        return False
    return (deletable_segments(segments, log_end_offset, high_watermark, within_excess),
            f"retention.bytes={retention_bytes} exceeded (log size {size})")


def retention_ms_breached(segments, log_end_offset: int, high_watermark: int, retention_ms: int,
                          clock: Callable[[], int]) -> tuple[list[LogSegment], str]:
    """The oldest segments whose newest record is older than ``retention.ms`` (the clock read
    only when time retention is on)."""
    if retention_ms < 0:
        return [], ""
    now = clock()
    return (deletable_segments(segments, log_end_offset, high_watermark,
                               lambda seg, nxt: now - seg.largest_timestamp() > retention_ms),
            f"retention.ms={retention_ms}: newest record older than that at {now}")
