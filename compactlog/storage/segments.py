"""The segments of one partition, ordered by base offset: Kafka's LogSegments.

One map from base offset to ``LogSegment`` that the loader fills and the log (``LocalLog``,
``Log``) reads and changes; every "which segment holds this offset" question is a bisect here and
nowhere else. The last segment is the active one: the only one appended to, and the only one whose
time index may lack its final entry (``LogSegment.is_active`` asks this map).

It is not thread-safe on its own, as Kafka's is not meant to be mutated concurrently either: the
log changes it under the partition lock. It reads as a sequence (``len``, iteration in offset
order, indexing and slicing) so that callers that walk a partition's segments need no copy of it.
"""

from __future__ import annotations

import bisect
from typing import Callable, Iterator

from ..errors import StorageError
from .segment import LogSegment

NO_UPPER_BOUND = 2**63 - 1


class LogSegments:
    """Base offset -> segment, in offset order."""

    def __init__(self, report: Callable | None = None):
        # called with a DataEvent when a segment's index is found lying and rebuilt
        self._report = report
        self._bases: list[int] = []
        self._segments: list[LogSegment] = []

    # -- changing the map
    def add(self, seg: LogSegment) -> None:
        """Add ``seg``, replacing a segment of the same base offset (a swap keeps its base)."""
        seg.report = self._report
        seg.is_active = lambda: self.is_active(seg)
        i = bisect.bisect_left(self._bases, seg.base_offset)
        if i < len(self._bases) and self._bases[i] == seg.base_offset:
            self._segments[i] = seg
        else:
            self._bases.insert(i, seg.base_offset)
            self._segments.insert(i, seg)

    def remove(self, base_offset: int) -> LogSegment | None:
        """Take the segment at ``base_offset`` out of the map (its files are the caller's)."""
        i = self._index_of(base_offset)
        if i is None:
            return None
        del self._bases[i]
        return self._segments.pop(i)

    def clear(self) -> list[LogSegment]:
        out = self._segments
        self._bases, self._segments = [], []
        return out

    # -- one segment
    def _index_of(self, base_offset: int) -> int | None:
        i = bisect.bisect_left(self._bases, base_offset)
        return i if i < len(self._bases) and self._bases[i] == base_offset else None

    def get(self, base_offset: int) -> LogSegment | None:
        i = self._index_of(base_offset)
        return None if i is None else self._segments[i]

    def contains(self, base_offset: int) -> bool:
        return self._index_of(base_offset) is not None

    def floor(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= ``offset`` (the one that may hold it)."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[i] if i >= 0 else None

    def higher(self, offset: int) -> LogSegment | None:
        """The first segment whose base offset is above ``offset``."""
        i = bisect.bisect_right(self._bases, offset)
        return self._segments[i] if i < len(self._segments) else None

    def next_base(self, seg: LogSegment) -> int | None:
        """The base offset of the segment after ``seg`` (None for the last one)."""
        nxt = self.higher(seg.base_offset)
        return None if nxt is None else nxt.base_offset

    @property
    def first(self) -> LogSegment | None:
        return self._segments[0] if self._segments else None

    @property
    def last(self) -> LogSegment | None:
        return self._segments[-1] if self._segments else None

    @property
    def active(self) -> LogSegment:
        """The segment appends go to: the last one (a loaded log always has one)."""
        return self._segments[-1]

    def is_active(self, seg: LogSegment) -> bool:
        return bool(self._segments) and self._segments[-1] is seg

    # -- several segments
    def values(self) -> list[LogSegment]:
        return list(self._segments)

    def in_range(self, start: int, end: int) -> list[LogSegment]:
        """Kafka's LogSegments.values(from, to): the segment containing ``start`` and every later
        one whose base offset is below ``end``."""
        if start == end:
            return []
        if start > end:
            raise StorageError(f"invalid segment range [{start}, {end})")
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        j = bisect.bisect_left(self._bases, end)
        return self._segments[i:j]

    def from_offset(self, offset: int) -> list[LogSegment]:
        """The segment holding ``offset`` (the first one when it lies below every segment) and
        every later one."""
        return self.in_range(offset, NO_UPPER_BOUND) if self._segments else []

    def holding_and_after(self, offset: int) -> list[LogSegment]:
        """The segment whose base offset is the floor of ``offset`` and every later one; empty
        when ``offset`` lies below the first segment."""
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[i:] if i >= 0 else []

    def bases(self) -> list[int]:
        return list(self._bases)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    # -- a read-only sequence in offset order
    def __len__(self) -> int:
        return len(self._segments)

    def __bool__(self) -> bool:
        return bool(self._segments)

    def __iter__(self) -> Iterator[LogSegment]:
        # over a copy: a caller may remove segments while it walks them
        return iter(list(self._segments))

    def __getitem__(self, i):
        return self._segments[i]

    def __contains__(self, seg) -> bool:
        return any(s is seg for s in self._segments)

    def index(self, seg: LogSegment) -> int:
        for i, s in enumerate(self._segments):
            if s is seg:
                return i
        raise ValueError(f"{seg!r} is not a segment of this log")

    def __repr__(self) -> str:
        return f"LogSegments({self._bases})"
