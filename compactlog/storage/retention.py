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


def tiered_rules(config, log_start_offset: int, highest_remote_offset: int,
                 clock: Callable[[], int]) -> list[Rule]:
    """The rules of a tiered log (``UnifiedLog.deleteOldSegments`` with remote storage on): the
    log start offset as always; then, while copying is on, size and time by
    ``local.retention.bytes/ms`` (-2: ``retention.*``) and only over segments already copied
    (``nextBase - 1 <= highestOffsetInRemoteStorage``, ``deletableSegments``), so deletion only
    moves the local log start. With ``remote.log.copy.disable=true`` plain ``retention.*``
    applies to every segment and moves the log start (KIP-950).

    Kafka applies size and time only when the policy has delete; compactlog applies the local
    ones to a compact-only tiered topic too, since dropping a copied segment from the disk
    deletes no record (Kafka 4.2 does the same for an empty cleanup.policy, KAFKA-19112)."""
    if not config.known:
        return []
    out: list[Rule] = [lambda segs, leo, hw: log_start_offset_breached(segs, leo, hw, log_start_offset)]
    if not config.remote_copy_enabled:
        if config.delete:
            out.append(lambda segs, leo, hw: retention_size_breached(segs, leo, hw, config.get("retention.bytes")))
            out.append(lambda segs, leo, hw: retention_ms_breached(segs, leo, hw, config.get("retention.ms"), clock))
        return out

    def copied(segs, leo):
        # the segments wholly in the remote tier, as a prefix: retention never passes one that is not
        out = []
        items = list(segs)
        for i, seg in enumerate(items):
            nxt = items[i + 1].base_offset if i + 1 < len(items) else None
            if nxt is None or nxt - 1 > highest_remote_offset:
                break
            out.append(seg)
        return out

    def local_size(segs, leo, hw):
        found, why = retention_size_breached(segs, leo, hw, config.local_retention_bytes)
        allowed = set(map(id, copied(segs, leo)))
        kept = []
        for seg in found:
            if id(seg) not in allowed:
                break
            kept.append(seg)
        return kept, why.replace("retention.bytes", "local.retention.bytes")

    def local_time(segs, leo, hw):
        found, why = retention_ms_breached(segs, leo, hw, config.local_retention_ms, clock)
        allowed = set(map(id, copied(segs, leo)))
        kept = []
        for seg in found:
            if id(seg) not in allowed:
                break
            kept.append(seg)
        return kept, why.replace("retention.ms", "local.retention.ms")
    out.append(local_size)
    out.append(local_time)
    return out
