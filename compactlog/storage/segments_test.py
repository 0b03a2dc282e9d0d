"""LogSegments: the ordered segment map (add, replace, remove, lookups, ranges, the active rule)."""

from __future__ import annotations

import pytest

from compactlog.errors import StorageError
from compactlog.storage.config import LogConfig
from compactlog.storage.segment import LogSegment
from compactlog.storage.segments import LogSegments


@pytest.fixture
def make(tmp_path):
    opened = []

    def segment(base: int) -> LogSegment:
        seg = LogSegment(str(tmp_path), base, LogConfig(), now_ms=0, new=True)
        opened.append(seg)
        return seg
    yield segment
    for seg in opened:
        seg.close_handles()


def test_segments_stay_in_offset_order_whatever_the_order_they_come_in(make):
    segs = LogSegments()
    for base in (20, 0, 10):
        segs.add(make(base))
    assert segs.bases() == [0, 10, 20] and [s.base_offset for s in segs] == [0, 10, 20]
    assert len(segs) == 3 and segs.first.base_offset == 0 and segs.last.base_offset == 20
    assert [s.base_offset for s in segs[:-1]] == [0, 10]


def test_a_segment_of_the_same_base_replaces_the_old_one(make):
    segs = LogSegments()
    old, new = make(10), make(10)
    segs.add(make(0))
    segs.add(old)
    segs.add(new)
    assert segs.bases() == [0, 10] and segs.get(10) is new and old not in segs and new in segs


def test_remove_and_clear(make):
    segs = LogSegments()
    a, b = make(0), make(5)
    segs.add(a)
    segs.add(b)
    assert segs.remove(7) is None
    assert segs.remove(5) is b and segs.bases() == [0] and not segs.contains(5)
    assert segs.clear() == [a] and not segs and segs.first is None and segs.last is None


def test_floor_higher_and_next_base(make):
    segs = LogSegments()
    for base in (0, 10, 20):
        segs.add(make(base))
    assert segs.floor(-1) is None
    assert segs.floor(0).base_offset == 0 and segs.floor(19).base_offset == 10 and segs.floor(99).base_offset == 20
    assert segs.higher(10).base_offset == 20 and segs.higher(20) is None
    assert segs.next_base(segs.get(0)) == 10 and segs.next_base(segs.get(20)) is None


def test_ranges_as_kafka_values_from_to(make):
    segs = LogSegments()
    for base in (0, 10, 20):
        segs.add(make(base))
    bases = lambda found: [s.base_offset for s in found]   # noqa: E731
    assert bases(segs.in_range(5, 20)) == [0, 10]          # the segment holding 5, then below 20
    assert bases(segs.in_range(10, 21)) == [10, 20]
    assert segs.in_range(7, 7) == []
    with pytest.raises(StorageError, match="invalid segment range"):
        segs.in_range(8, 7)
    assert bases(segs.from_offset(15)) == [10, 20] and bases(segs.from_offset(-5)) == [0, 10, 20]
    assert bases(segs.holding_and_after(15)) == [10, 20] and segs.holding_and_after(-5) == []
    assert LogSegments().from_offset(3) == []


def test_the_last_segment_is_the_active_one(make):
    reported = []
    segs = LogSegments(report=reported.append)
    first, second = make(0), make(10)
    segs.add(first)
    assert segs.active is first and first.is_active()
    segs.add(second)
    assert segs.active is second and second.is_active() and not first.is_active()
    segs.remove(10)
    assert first.is_active() and not second.is_active()
    assert first.report == reported.append           # index rebuilds are reported through the map


def test_size_and_index(make):
    segs = LogSegments()
    a, b = make(0), make(3)
    segs.add(a)
    segs.add(b)
    a.log.append(b"x" * 7)
    assert segs.size_in_bytes() == 7 and segs.index(b) == 1
    with pytest.raises(ValueError):
        segs.index(make(9))
