"""LogSegment and FileRecords: sparse index rule, roll decision, reads, recovery, truncation."""

from __future__ import annotations

import os
import random

import pytest

from compactlog.errors import CorruptRecordError, StorageError
from compactlog.storage.conftest import T0, batch, config, flip_bit
from compactlog.storage.segment import FileRecords, LogSegment


def new_segment(tmp_path, base=0, cfg=None, now=T0, **kw) -> LogSegment:
    return LogSegment(str(tmp_path), base, cfg or config(), now_ms=now, **kw)


def append_batch(seg: LogSegment, data: bytes, base: int, n: int, max_ts: int) -> None:
    seg.append(base + n - 1, max_ts, base + n - 1, data)


def spec_index_entries(batches, interval):
    """segment-files.md §3.2: (largestOffset, physicalPosition) when bytesSince > interval (strict)."""
    entries, since, pos = [], 0, 0
    for last_offset, size in batches:
        if since > interval:
            entries.append((last_offset, pos))
            since = 0
        since += size
        pos += size
    return entries


def fill(seg, count, *, base=0, n=1, value_size=20, ts=T0, rng=None):
    """Append ``count`` batches of ``n`` records; returns [(last_offset, size, max_ts)]."""
    out = []
    off = base
    for i in range(count):
        vs = value_size if rng is None else rng.randint(0, 300)
        k = n if rng is None else rng.randint(1, 4)
        stamp = ts + i * 10
        data = batch(off, k, ts=stamp, value_size=vs)
        append_batch(seg, data, off, k, stamp + k - 1)
        out.append((off + k - 1, len(data), stamp + k - 1))
        off += k
    return out


# --- appending and the sparse index ------------------------------------------------------------

def test_first_append_never_indexes(tmp_path):
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=0))
    data = batch(0, 3, value_size=10_000)
    append_batch(seg, data, 0, 3, T0 + 2)
    assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
    data2 = batch(3, 1)
    append_batch(seg, data2, 3, 1, T0)
    assert seg.offset_index.all_entries() == [(3, len(data))]


def test_index_entry_only_when_bytes_since_last_entry_strictly_greater(tmp_path):
    b0 = batch(0, 1, value_size=40)
    size = len(b0)
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=size * 2))
    for i in range(3):
        append_batch(seg, batch(i, 1, value_size=40), i, 1, T0)
    # before the 3rd append bytesSince == 2*size == interval: not strictly greater, no entry
    assert seg.offset_index.entries == 0
    append_batch(seg, batch(3, 1, value_size=40), 3, 1, T0)
    assert seg.offset_index.all_entries() == [(3, 3 * size)]


@pytest.mark.parametrize("interval", [0, 1, 100, 500, 4096])
def test_sparse_index_matches_the_spec_rule(tmp_path, interval):
    rng = random.Random(interval)
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=interval))
    appended = fill(seg, 80, rng=rng)
    expected = spec_index_entries([(last, size) for last, size, _ in appended], interval)
    assert seg.offset_index.all_entries() == expected
    # every time-index entry sits next to an offset-index entry: the running max timestamp so far
    running, expected_ts, pos = (-1, -1), [], 0
    entry_positions = {p for _, p in expected}
    for last, size, max_ts in appended:
        if max_ts > running[0]:
            running = (max_ts, last)
        if pos in entry_positions and (not expected_ts or running[0] > expected_ts[-1][0]):
            expected_ts.append(running)
        pos += size
    assert seg.time_index.all_entries() == expected_ts


def test_recovery_rebuilds_exactly_the_indexes_appends_wrote(tmp_path):
    rng = random.Random(7)
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=300), preallocate_indexes=True)
    fill(seg, 60, rng=rng)
    seg.on_become_inactive()
    offsets, times = seg.offset_index.all_entries(), seg.time_index.all_entries()
    with open(seg.offset_index.path, "rb") as f:
        index_bytes = f.read()
    with open(seg.time_index.path, "rb") as f:
        time_bytes = f.read()
    assert seg.recover() == 0
    assert seg.offset_index.all_entries() == offsets
    assert seg.time_index.all_entries() == times
    seg.close_handles()
    with open(seg.offset_index.path, "rb") as f:
        assert f.read() == index_bytes
    with open(seg.time_index.path, "rb") as f:
        assert f.read() == time_bytes


def test_time_index_final_entry_on_become_inactive(tmp_path):
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=10**6), preallocate_indexes=True)
    fill(seg, 5)                                    # interval never reached: no entries
    assert seg.time_index.entries == 0
    seg.append(5, T0 + 1000, 5, batch(5, 1, ts=T0 + 1000))
    seg.append(6, T0 + 3, 6, batch(6, 1, ts=T0 + 3))     # older timestamp: max stays at offset 5
    assert (seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far) == (T0 + 1000, 5)
    seg.on_become_inactive()
    assert seg.time_index.all_entries() == [(T0 + 1000, 5)]
    assert os.path.getsize(seg.time_index.path) == 12
    assert os.path.getsize(seg.offset_index.path) == 0


def test_append_outside_relative_range_is_refused(tmp_path):
    seg = new_segment(tmp_path, base=10)
    with pytest.raises(StorageError, match="relative"):
        seg.append(10 + 2**31, T0, 10 + 2**31, batch(10 + 2**31, 1))
    assert seg.size == 0


# --- should_roll ------------------------------------------------------------------------------

def test_should_roll_on_size(tmp_path):
    data = batch(0, 1)
    seg = new_segment(tmp_path, cfg=config(segment_bytes=3 * len(data)))
    assert not seg.should_roll(now_ms=T0, max_timestamp=T0, max_offset=0, messages_size=len(data))
    for i in range(3):
        append_batch(seg, batch(i, 1), i, 1, T0)
        full = i == 2
        assert seg.should_roll(now_ms=T0, max_timestamp=T0, max_offset=i + 1,
                               messages_size=len(data)) == full
    # an append that would make the file exceed segment.bytes rolls
    assert seg.should_roll(now_ms=T0, max_timestamp=T0, max_offset=3, messages_size=1)


def test_should_roll_by_record_time_when_first_batch_has_a_timestamp(tmp_path):
    seg = new_segment(tmp_path, cfg=config(segment_ms=1000), now=T0)
    args = dict(max_offset=1, messages_size=10)
    assert not seg.should_roll(now_ms=T0 + 10**9, max_timestamp=T0 + 10**9, **args)   # empty never rolls
    append_batch(seg, batch(0, 1, ts=T0 + 5), 0, 1, T0 + 5)
    assert seg.first_batch_timestamp() == T0 + 5
    # wall clock is irrelevant once the first batch carries a timestamp
    assert not seg.should_roll(now_ms=T0 + 10**9, max_timestamp=T0 + 1005, **args)
    assert seg.should_roll(now_ms=T0, max_timestamp=T0 + 1006, **args)


def test_should_roll_by_wall_clock_without_timestamps(tmp_path):
    seg = new_segment(tmp_path, cfg=config(segment_ms=1000), now=T0)
    append_batch(seg, batch(0, 1, ts=-1), 0, 1, -1)
    assert seg.first_batch_timestamp() is None
    args = dict(max_timestamp=-1, max_offset=1, messages_size=10)
    assert not seg.should_roll(now_ms=T0 + 1000, **args)
    assert seg.should_roll(now_ms=T0 + 1001, **args)


def test_roll_jitter(tmp_path, monkeypatch):
    import compactlog.storage.segment as segment_mod
    monkeypatch.setattr(segment_mod.random, "randrange", lambda a, b: 2**31 - 3)
    seg = new_segment(tmp_path, cfg=config(segment_ms=1000, segment_jitter_ms=300))
    assert seg.roll_jitter_ms == (2**31 - 3) % 300
    jitter = seg.roll_jitter_ms
    append_batch(seg, batch(0, 1, ts=T0), 0, 1, T0)
    args = dict(now_ms=T0, max_offset=1, messages_size=10)
    assert not seg.should_roll(max_timestamp=T0 + 1000 - jitter, **args)
    assert seg.should_roll(max_timestamp=T0 + 1001 - jitter, **args)
    # jitter is bounded by segment.ms
    seg2 = new_segment(tmp_path, base=100, cfg=config(segment_ms=50, segment_jitter_ms=10**6))
    assert seg2.roll_jitter_ms == (2**31 - 3) % 50
    # no jitter configured: 0
    assert new_segment(tmp_path, base=200).roll_jitter_ms == 0


def test_should_roll_when_offset_index_or_time_index_full(tmp_path):
    seg = new_segment(tmp_path, cfg=config(segment_index_bytes=24, index_interval_bytes=0))
    args = dict(now_ms=T0, max_timestamp=T0, messages_size=1)
    append_batch(seg, batch(0, 1, ts=T0), 0, 1, T0)
    assert not seg.should_roll(max_offset=1, **args)
    append_batch(seg, batch(1, 1, ts=T0 + 1), 1, 1, T0 + 1)
    # time index: floor(24/12) = 2 slots, full at 1 entry (one slot kept for the final entry)
    assert seg.time_index.entries == 1 and seg.time_index.is_full()
    assert not seg.offset_index.is_full()
    assert seg.should_roll(max_offset=2, **args)
    # offset index alone: 5 slots of 8 bytes (the time index has 3 slots, and stays at 1 entry)
    seg2 = new_segment(tmp_path, base=100, cfg=config(segment_index_bytes=40, index_interval_bytes=0))
    for i in range(6):
        assert not seg2.should_roll(max_offset=100 + i, **args)
        append_batch(seg2, batch(100 + i, 1, ts=T0), 100 + i, 1, T0)   # same timestamp: one time entry
    assert seg2.offset_index.entries == 5 and seg2.time_index.entries == 1
    assert seg2.offset_index.is_full() and not seg2.time_index.is_full()
    assert seg2.should_roll(max_offset=106, **args)


def test_should_roll_on_relative_offset_overflow(tmp_path):
    seg = new_segment(tmp_path, base=0)
    args = dict(now_ms=T0, max_timestamp=T0, messages_size=1)
    assert not seg.should_roll(max_offset=2**31 - 1, **args)
    assert seg.should_roll(max_offset=2**31, **args)


# --- reading ----------------------------------------------------------------------------------

def test_read_next_offset(tmp_path):
    seg = new_segment(tmp_path, base=40, cfg=config(index_interval_bytes=50))
    assert seg.read_next_offset() == 40
    fill(seg, 10, base=40, n=3)
    assert seg.read_next_offset() == 70
    assert seg.offset_index.entries > 0


def test_read_position_through_sparse_index(tmp_path):
    seg = new_segment(tmp_path, base=100, cfg=config(index_interval_bytes=100))
    positions, pos = {}, 0
    for i in range(20):
        data = batch(100 + i * 5, 5, value_size=30)
        positions[100 + i * 5] = pos
        append_batch(seg, data, 100 + i * 5, 5, T0)
        pos += len(data)
    assert seg.offset_index.entries >= 3
    for target in range(95, 200):
        batch_base = max(100, target - (target - 100) % 5)
        assert seg.read_position(target) == positions[batch_base], target
    assert seg.read_position(200) is None


def test_file_records_batch_headers_stop_at_a_torn_tail(tmp_path):
    fr = FileRecords(str(tmp_path / "x.log"))
    b0, b1 = batch(0, 2), batch(2, 1)
    fr.append(b0)
    fr.append(b1[:-5])
    assert [p for p, _ in fr.batch_headers()] == [0]
    fr.close()


def test_file_records_reports_impossible_length(tmp_path):
    fr = FileRecords(str(tmp_path / "x.log"))
    fr.append(batch(0, 1) + b"\0" * 30)
    with pytest.raises(CorruptRecordError) as err:
        list(fr.batch_headers())
    assert err.value.file == fr.path and err.value.position == len(batch(0, 1))
    fr.close()


def test_preallocated_log_file_and_trim(tmp_path):
    cfg = config(segment_bytes=4096, preallocate="true")
    seg = new_segment(tmp_path, cfg=cfg, new=True)
    assert os.path.getsize(seg.log.path) == 4096 and seg.size == 0
    data = batch(0, 2)
    append_batch(seg, data, 0, 2, T0 + 1)
    assert os.path.getsize(seg.log.path) == 4096 and seg.size == len(data)
    seg.on_become_inactive()
    assert os.path.getsize(seg.log.path) == len(data)


def test_largest_timestamp_falls_back_to_mtime(tmp_path):
    seg = new_segment(tmp_path)
    append_batch(seg, batch(0, 1, ts=-1), 0, 1, -1)
    seg.log.set_last_modified_ms(T0 - 5000)
    assert seg.largest_timestamp() == T0 - 5000
    append_batch(seg, batch(1, 1, ts=T0 + 7), 1, 1, T0 + 7)
    assert seg.largest_timestamp() == T0 + 7


# --- recovery and truncation ------------------------------------------------------------------

def test_recover_truncates_a_torn_last_batch(tmp_path):
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=60))
    appended = fill(seg, 10)
    whole = seg.size
    last_size = appended[-1][1]
    seg.log.truncate_to(whole - 3)                   # torn: 3 bytes missing
    assert seg.recover() == last_size - 3
    assert seg.size == whole - last_size
    assert seg.read_next_offset() == appended[-2][0] + 1
    assert all(pos < seg.size for _, pos in seg.offset_index.all_entries())
    assert seg.time_index.all_entries()[-1] == (appended[-2][2], appended[-2][0])


def test_recover_stops_at_a_flipped_bit(tmp_path):
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=60))
    appended = fill(seg, 10)
    sizes = [s for _, s, _ in appended]
    corrupt_at = sum(sizes[:6])
    flip_bit(seg.log.path, corrupt_at + 70)           # a byte of batch 6's records
    assert seg.recover() == sum(sizes[6:])
    assert seg.size == corrupt_at and seg.read_next_offset() == 6


def test_truncate_to_removes_batches_and_index_entries(tmp_path):
    seg = new_segment(tmp_path, cfg=config(index_interval_bytes=60), preallocate_indexes=True)
    appended = fill(seg, 12, n=2)                   # offsets 0..23, 2 per batch
    sizes = [s for _, s, _ in appended]
    removed = seg.truncate_to(9)                     # offset 9 is inside batch 8-9
    assert removed == sum(sizes[4:])
    assert seg.size == sum(sizes[:4]) and seg.read_next_offset() == 8
    assert all(off < 9 for off, _ in seg.offset_index.all_entries())
    assert all(off < 9 for _, off in seg.time_index.all_entries())
    assert seg.max_timestamp_so_far == appended[3][2]
    # appends continue; the first one after truncation never indexes
    before = seg.offset_index.entries
    append_batch(seg, batch(8, 1), 8, 1, T0)
    assert seg.offset_index.entries == before
    assert seg.read_next_offset() == 9
    size = seg.size
    assert seg.truncate_to(0) == size
    assert seg.size == 0 and seg.read_next_offset() == 0
    assert seg.offset_index.entries == 0 and seg.time_index.entries == 0
    assert seg.first_batch_timestamp() is None


def test_change_suffix_and_delete(tmp_path):
    seg = new_segment(tmp_path, base=7, suffix=".cleaned")
    append_batch(seg, batch(7, 1), 7, 1, T0)
    seg.change_suffix(".cleaned", ".swap")
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000007.index.swap",
                                            "00000000000000000007.log.swap",
                                            "00000000000000000007.timeindex.swap"]
    seg.change_suffix(".swap", "")
    assert os.path.exists(tmp_path / "00000000000000000007.log")
    seg.delete_files()
    assert os.listdir(tmp_path) == []


def test_a_short_write_is_trimmed_at_close(tmp_path, monkeypatch):
    """A full disk lands part of a batch past ``size``: the next trim (on roll or close) cuts it,
    although an untouched file's trim opens nothing."""
    import errno

    from compactlog.errors import StorageError
    from compactlog.storage import segment as segment_mod

    fr = FileRecords(str(tmp_path / "x.log"))
    fr.append(batch(0, 2))
    good = fr.size
    real = os.pwrite
    monkeypatch.setattr(segment_mod.os, "pwrite", lambda fd, data, pos: real(fd, data[:7], pos))
    with pytest.raises(StorageError, match="short write"):
        fr.append(batch(2, 1))
    monkeypatch.setattr(segment_mod.os, "pwrite", lambda fd, data, pos: (_ for _ in ()).throw(
        OSError(errno.ENOSPC, "No space left on device")))
    with pytest.raises(OSError):
        fr.append(batch(2, 1))
    monkeypatch.undo()
    assert fr.size == good and os.path.getsize(fr.path) == good + 7
    fr.trim()
    assert os.path.getsize(fr.path) == good
    fr.close()


def test_read_returns_the_whole_range_when_pread_returns_less(tmp_path, monkeypatch):
    """pread returns at most 0x7ffff000 bytes on Linux (any short count is allowed): recovery
    cutting the 4 GiB zero tail of a sparse segment kept 2147479552 bytes in its .discarded file
    and reported them all kept, and a repair read of a segment that size would lose its end. The
    read loops until the range is read (a cap of 4 KiB stands in for Linux's here)."""
    from compactlog.storage import segment as segment_module
    data = os.urandom(10_000)
    path = str(tmp_path / "00000000000000000000.log")
    with open(path, "wb") as f:
        f.write(data)
    real = os.pread
    monkeypatch.setattr(segment_module.os, "pread", lambda fd, n, pos: real(fd, min(n, 4096), pos))
    records = FileRecords(path)
    assert records.read(0, 10_000) == data
    assert records.read(1234, 8000) == data[1234:9234]
    assert records.read(9000, 5000) == data[9000:]
