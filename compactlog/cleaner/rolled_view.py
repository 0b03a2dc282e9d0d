"""A log as ``clean --roll`` would leave it, without rolling it: for dry runs and ``explain --roll``.

Kafka never cleans the active segment; offline compaction (``clean --roll``) first rolls every
chosen partition's non-empty active segment (``Log.roll``: it becomes an ordinary segment and an
empty one starts at the log end offset). A dry run must write nothing, so instead the planner
(``plan.partition_status``, ``cleaner.make_plan``) is given this view: the same segments, then an
empty segment at the log end offset that exists only here. A cleaning task never reads that
segment (it starts at the end of every cleanable range); it only bounds the one before it.
"""

from __future__ import annotations

import bisect


class _EmptyIndex:
    entries = 0

    def __init__(self, base_offset: int):
        self.last_offset = base_offset


class _EmptyLogFile:
    size = 0

    def read(self, position: int, length: int) -> bytes:
        return b""


class NextSegment:
    """The empty active segment a roll would create at ``base_offset`` (never on disk)."""

    size = 0

    def __init__(self, base_offset: int, now_ms: int):
        self.base_offset = base_offset
        self._now_ms = now_ms
        self.offset_index = _EmptyIndex(base_offset)
        self.time_index = _EmptyIndex(base_offset)
        self.log = _EmptyLogFile()

    def largest_timestamp(self) -> int:
        return self._now_ms              # an empty segment's is its modification time, as Kafka's

    def first_batch_timestamp(self) -> int | None:
        return None

    def last_modified_ms(self) -> int:
        return self._now_ms


class RolledView:
    """``log`` with its active segment closed and an empty one after it; every other attribute is
    the log's own. Only for planning: nothing may be written through it."""

    def __init__(self, log):
        self._log = log
        self.segments = list(log.segments) + [NextSegment(log.log_end_offset, log.clock())]
        self._bases = [s.base_offset for s in self.segments]

    @property
    def active_segment(self):
        return self.segments[-1]

    def segments_in_range(self, start: int, end: int) -> list:
        """As ``Log.segments_in_range``: the segment holding ``start`` and the later ones below ``end``."""
        if start >= end:
            return []
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        j = bisect.bisect_left(self._bases, end)
        return self.segments[i:j]

    def __getattr__(self, name):
        return getattr(self._log, name)


def as_rolled(log):
    """The view a dry run of ``clean --roll`` plans on: the log itself when a roll would not change
    it (an empty active segment is never rolled, nor a partition that is not compacted)."""
    if not log.config.compact or log.active_segment.size == 0:
        return log
    return RolledView(log)
