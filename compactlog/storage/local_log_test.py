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


def _reopened_with_a_bad_crc(tmp_path, bad_batch: int):
    """A log of ten single-record batches over two segments, closed and opened again (its bytes
    found on disk), with the stored CRC of batch ``bad_batch`` of the first segment zeroed."""
    from compactlog.record.batch import iter_batches
    from compactlog.storage.datadir import DataDir
    with DataDir(str(tmp_path), create=True, writable=True) as dd:
        dd.create_topic("t", 1, {"segment.bytes": "800"})
        log = dd.open_log("t", 0)
        for i in range(10):
            log.append_records([b"k%d" % i], [b"v" * 100])
        first = log.segments[0].log.path
        positions = [b.position for b in iter_batches(open(first, "rb").read())]
    with open(first, "r+b") as f:
        f.seek(positions[bad_batch] + 17)
        f.write(b"\0\0\0\0")
    return first, positions


def test_a_fetch_checks_the_crc_of_batches_found_on_disk_once(tmp_path):
    """Kafka's fetch sends a segment's bytes unchecked; here a batch found on disk is checked once
    (the run of checked bytes grows as readers go forward), and one whose CRC does not match is
    not sent: the batches before it are, and a fetch starting at it is CORRUPT_MESSAGE."""
    from compactlog.errors import CorruptRecordError
    from compactlog.storage.datadir import DataDir
    first, positions = _reopened_with_a_bad_crc(tmp_path, 2)
    with DataDir(str(tmp_path), writable=True) as dd:
        log = dd.open_log("t", 0)
        seg = log.segments[0]
        assert seg.written_from == seg.size and (seg.crc_checked_lo, seg.crc_checked_hi) == (0, 0)
        span = log.read_span(0, 1 << 20, max_offset=log.log_end_offset)
        assert (span.position, span.length, span.last_offset) == (0, positions[2], 1)
        assert (seg.crc_checked_lo, seg.crc_checked_hi) == (0, positions[2])
        # checked once: a second read of the same batches reads no bytes for their CRC
        reads = []
        real = seg.log.read
        seg.log.read = lambda pos, n: reads.append((pos, n)) or real(pos, n)
        assert log.read_span(0, 1 << 20, max_offset=log.log_end_offset).length == positions[2]
        # header chunks, and from the bad batch on again (never found good: checked by each fetch
        # reaching it), nothing before it
        assert [r[0] for r in reads if r[1] < 65536] == [positions[2]], reads
        del seg.log.read
        with pytest.raises(CorruptRecordError, match=r"CRC does not match") as e:
            log.read_span(2, 1 << 20, max_offset=log.log_end_offset)
        assert e.value.file == first and e.value.position == positions[2]
        assert log.read_span(3, 1 << 20, max_offset=log.log_end_offset).position == positions[3]
        # what this process appends was encoded here: never read back for its CRC
        active = log.segments.active
        log.append_records([b"new"], [b"x"])
        span = log.read_span(log.log_end_offset - 1, 1 << 20, max_offset=log.log_end_offset)
        assert span.length and span.position >= active.written_from
