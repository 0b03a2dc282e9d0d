"""Kafka's groupSegmentsBySize: consecutive segments merged while the result stays a valid segment."""

from __future__ import annotations

from typing import NamedTuple

INT_MAX = 2147483647


class SegmentSizes(NamedTuple):
    base_offset: int
    log_bytes: int
    offset_index_bytes: int
    time_index_bytes: int
    last_offset_in_index: int   # the offset index's last offset (base offset when it has no entry)


def group_segments_by_size(segments: list[SegmentSizes], max_size: int, max_index_size: int,
                           first_uncleanable_offset: int) -> list[list[SegmentSizes]]:
    groups = []
    segs = list(segments)
    i = 0
    while i < len(segs):
        group = [segs[i]]
        log_bytes = segs[i].log_bytes
        index_bytes = segs[i].offset_index_bytes
        time_bytes = segs[i].time_index_bytes
        i += 1
        while i < len(segs):
            nxt = segs[i]
            if not (log_bytes + nxt.log_bytes <= max_size
                    and index_bytes + nxt.offset_index_bytes <= max_index_size
                    and time_bytes + nxt.time_index_bytes <= max_index_size
                    and (nxt.log_bytes == 0
                         or _last_offset_for_first_segment(segs, i, first_uncleanable_offset)
                         - group[0].base_offset <= INT_MAX)):
                break
            group.append(nxt)
            log_bytes += nxt.log_bytes
            index_bytes += nxt.offset_index_bytes
            time_bytes += nxt.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def _last_offset_for_first_segment(segs: list[SegmentSizes], i: int, first_uncleanable_offset: int) -> int:
    """The last offset the head of ``segs[i:]`` can hold: the next segment's base - 1."""
    if i + 1 < len(segs):
        return segs[i + 1].base_offset - 1
    return first_uncleanable_offset - 1
