"""LocalLog: the file side of a log, driven on its own over loaded segments."""

from __future__ import annotations

import os
import threading

import pytest

from compactlog.errors import OffsetOutOfRangeError, StorageError
from compactlog.storage import files
from compactlog.storage.conftest import T0, batch, config
from compactlog.storage.local_log import LocalLog, replace_segments
from compactlog.storage.segment import LogSegment
from compactlog.storage.segments import NO_UPPER_BOUND, LogSegments


@pytest.fixture
def local(tmp_path):
    path = tmp_path / "topic-0"
    path.mkdir()
    segments = LogSegments()
    segments.add(LogSegment(str(path), 0, config(), now_ms=T0, new=True))
    log = LocalLog(str(path), config(), segments, recovery_point=0, log_end_offset=0, clock=lambda: T0,
                   read_only=False, name="topic-0", lock=threading.RLock(), events=[])
    yield log
    log.close_handles()


def append(local, base, n):
    data = batch(base, n)
    local.append(base + n - 1, T0, base + n - 1, data)
    return data


def test_append_roll_flush_and_read(local):
    a = append(local, 0, 3)
    assert local.log_end_offset == 3 and local.recovery_point == 0
    assert local.roll() is local.segments.active and local.segments.bases() == [0, 3]
    assert local.roll() is local.segments.active and local.segments.bases() == [0, 3]   # empty: kept
    b = append(local, 3, 2)
    local.flush()
    assert local.recovery_point == 5
    span = local.read_span(1, 1 << 20, True, NO_UPPER_BOUND, log_start_offset=0)
    assert (span.position, span.length, span.last_offset, span.read()) == (0, len(a), 2, a)
    assert local.read_span(3, 1 << 20, True, 4, log_start_offset=0).read() == b
    assert local.read_span(4, 1 << 20, True, 4, log_start_offset=0).length == 0     # at the bound
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 6 is outside \[1, 5\]"):
        local.read_span(6, 100, True, NO_UPPER_BOUND, log_start_offset=1)
    assert [b.base_offset for b in local.batches(1, NO_UPPER_BOUND)] == [0, 3]
    assert [r.offset for r in local.records(1, include_control=False, validate=True)] == [1, 2, 3, 4]


def test_truncation_removes_later_segments_and_cuts_the_one_holding_the_offset(local):
    append(local, 0, 3)
    local.roll()
    append(local, 3, 3)
    local.flush()
    local.truncate_to(2)
    assert local.segments.bases() == [0] and local.log_end_offset == 2 and local.recovery_point == 2
    assert not os.path.exists(files.segment_file(local.dir, 3, files.LOG_SUFFIX))
    assert [b.base_offset for b in local.batches(0, NO_UPPER_BOUND)] == []   # the batch 0-2 held offset 2
    with pytest.raises(StorageError, match="cannot truncate below the first segment"):
        local.segments.remove(0).close_handles()
        local.segments.add(LogSegment(local.dir, 9, config(), now_ms=T0, new=True))
        local.truncate_to(1)


def test_replace_segments_swaps_by_renames(local):
    append(local, 0, 3)
    local.roll()
    append(local, 3, 2)
    old = local.segments[0]
    cleaned = LogSegment(local.dir, 0, config(), now_ms=T0, suffix=files.CLEANED_SUFFIX, new=True)
    cleaned.log.append(batch(2, 1))
    dropped = []
    replace_segments(local.segments, [cleaned], [old], local.dir, on_dropped=dropped.append)
    assert local.segments[0] is cleaned and cleaned.suffix == "" and dropped == []
    assert sorted(n for n in os.listdir(local.dir) if not n.endswith(".snapshot")) == sorted(
        os.path.basename(p) for s in local.segments for p in s.file_paths() if os.path.exists(p))
    assert [r.offset for r in local.records(0, include_control=False, validate=True)] == [2, 3, 4]


def test_a_read_committed_consume_walks_each_segment_once(tmp_path, monkeypatch):
    """The .txnindex check before the first read_committed read walks every segment's batches;
    the offset and time indexes' first-use check reuses that walk (issue 28: a consume from the
    start walked the whole log twice)."""
    from compactlog.storage.datadir import DataDir
    with DataDir(str(tmp_path), create=True, writable=True) as dd:
        dd.create_topic("t", 1, {"segment.bytes": "2000"})
        log = dd.open_log("t", 0)
        for i in range(40):
            log.append_records([b"k%d" % i], [b"v" * 100])
        segments = len(log.segments)
        assert segments > 3
    walks = []
    real = LogSegment.layout
    monkeypatch.setattr(LogSegment, "layout", lambda self: walks.append(self.base_offset) or real(self))
    with DataDir(str(tmp_path), writable=True) as dd:
        log = dd.open_log("t", 0)
        walks.clear()       # opening checks the active segment (recovery): not the reads' doing
        offset = 0
        while offset < log.log_end_offset:
            span = log.read_span(offset, 300, max_offset=log.last_stable_offset)
            assert log.collect_aborted_transactions(offset, span.last_offset + 1) == []
            offset = span.last_offset + 1
        # the segment of the first read is walked by that read, then by the check; every other once
        assert walks[0] == 0 and sorted(walks[1:]) == sorted(set(walks)) and len(walks) == segments + 1
