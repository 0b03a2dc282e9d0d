"""Log: appends (offsets, rolls, validation), reads, flushes, truncation."""

from __future__ import annotations

import os
import struct

import pytest

from compactlog.errors import (CorruptRecordError, InvalidRecordError, OffsetOutOfRangeError,
                               OutOfOrderSequenceError, RecordTooLargeError)
from compactlog.record.batch import BatchHeader, encode_marker, iter_batches
from compactlog.storage.conftest import T0, batch, config, crash, vector
from compactlog.storage.log import Log
from compactlog.storage.loader import segment_is_valid
from compactlog.storage.txn_index import AbortedTxn

DPKP_V2 = "dpkp+kafka-python/record_batch_data_v2.bin"


def put(log, n=1, *, key=b"k", value=b"v" * 20, ts=None, **kw):
    """append_records of n records with distinct keys; ts: one timestamp for all (default: clock)."""
    keys = [key + b"%d" % (log.log_end_offset + i) for i in range(n)]
    stamps = None if ts is None else [ts] * n
    return log.append_records(keys, [value] * n, timestamps=stamps, **kw)


def seg_files(log, suffix):
    return sorted(n for n in os.listdir(log.dir) if n.endswith(suffix))


# --- offsets and leader epochs -----------------------------------------------------------------

def test_offsets_are_assigned_from_the_log_end(open_log):
    log = open_log()
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    a = put(log, 3)
    b = put(log, 2)
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 2, 3, 4)
    assert log.log_end_offset == 5
    # a producer's batch carries base offset 0: the leader rewrites it (and the leader epoch)
    info = log.append_as_leader(batch(0, 2, key=b"z"))
    assert (info.first_offset, info.last_offset) == (5, 6)
    assert [r.offset for r in log.records()] == list(range(7))
    headers = [b.header for b in log.batches()]
    assert [h.base_offset for h in headers] == [0, 3, 5]
    assert all(h.partition_leader_epoch == 0 for h in headers)
    # the CRC does not cover the base offset and leader epoch: every stored batch stays valid
    for b in log.batches():
        b.ensure_valid()


def test_leader_epoch_cache_follows_appended_batches(open_log):
    log = open_log(leader_epoch=3)
    put(log)
    log.leader_epoch = 5
    put(log, 2)
    put(log)
    assert log.leader_epochs.entries == [(3, 0), (5, 1)]
    with open(os.path.join(log.dir, "leader-epoch-checkpoint")) as f:
        assert f.read() == "0\n2\n3 0\n5 1\n"


def test_append_as_follower_keeps_offsets_and_refuses_non_monotonic(open_log):
    log = open_log()
    data = vector(DPKP_V2)
    batches = list(iter_batches(data))
    assert [b.base_offset for b in batches] == [0, 1, 3, 0]
    with pytest.raises(InvalidRecordError, match="offsets must increase"):
        log.append_as_follower(data)
    assert log.log_end_offset == 0 and log.size() == 0
    first_three = data[:batches[3].position]
    info = log.append_as_follower(first_three)
    assert (info.first_offset, info.last_offset) == (0, 3)
    assert [r.value for r in log.records()] == [b"123", b"", b"", b"123"]
    assert log.leader_epochs.entries == [(1, 0), (2, 1)]
    # the 4th batch alone restarts at offset 0, below the log end: refused
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(batches[3].raw())
    assert log.log_end_offset == 4
    # offsets may jump forward
    log.append_as_follower(batch(100, 2))
    assert log.log_end_offset == 102
    assert [r.offset for r in log.records(3)] == [3, 100, 101]


def test_append_as_follower_refuses_a_bad_crc(open_log):
    log = open_log()
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_follower(vector("dpkp+kafka-python/control_batch_data_v2.bin"))
    assert log.log_end_offset == 0 and log.size() == 0


# --- batch validation on the leader ------------------------------------------------------------

def test_bad_crc_is_refused_and_nothing_written(open_log):
    log = open_log()
    put(log)
    data = bytearray(batch(0, 2))
    data[-1] ^= 0x01
    with pytest.raises(CorruptRecordError, match="CRC"):
        log.append_as_leader(bytes(data))
    assert log.log_end_offset == 1 and log.size() == log.active_segment.size


def test_batch_larger_than_max_message_bytes(open_log):
    log = open_log(config(max_message_bytes=200))
    ok = batch(0, 1, value_size=100)
    too_big = batch(0, 1, value_size=300)
    assert len(ok) <= 200 < len(too_big)
    log.append_as_leader(ok)
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        log.append_as_leader(too_big)
    assert log.log_end_offset == 1


def test_keyless_record_refused_on_compacted_topic(open_log):
    log = open_log(config(cleanup_policy="compact"))
    with pytest.raises(InvalidRecordError, match="without a key"):
        log.append_records([b"a", None], [b"1", b"2"])
    assert log.log_end_offset == 0
    log.append_records([b"a"], [None])               # a tombstone has a key: fine
    plain = open_log(name="plain-0")
    plain.append_records([None], [b"x"])             # delete policy takes keyless records
    assert plain.log_end_offset == 1


def test_control_batch_from_a_client_is_refused(open_log):
    log = open_log()
    data = vector("IBM+sarama/control_batch.bin")
    assert next(iter_batches(data)).is_valid()
    with pytest.raises(InvalidRecordError, match="record count 0"):      # no record: Kafka's first rule
        log.append_as_leader(data)
    marker = encode_marker(offset=0, commit=False, producer_id=5, producer_epoch=0, coordinator_epoch=0,
                           timestamp=0)
    with pytest.raises(InvalidRecordError, match="control"):
        log.append_as_leader(marker)
    assert log.log_end_offset == 0


def test_timestamps_out_of_range(open_log, clock):
    log = open_log(config(message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=500))
    now = clock()
    put(log, ts=now - 1000)
    put(log, ts=now + 500)
    with pytest.raises(InvalidRecordError, match="out of range"):
        put(log, ts=now - 1001)
    with pytest.raises(InvalidRecordError, match="out of range"):
        log.append_records([b"a", b"b"], [b"1", b"2"], timestamps=[now, now + 501])
    assert log.log_end_offset == 2
    # Kafka does not range-check records without a timestamp (-1)
    put(log, ts=-1)
    assert log.log_end_offset == 3


def test_log_append_time_topic_overwrites_timestamps(open_log, clock):
    log = open_log(config(message_timestamp_type="LogAppendTime"))
    put(log, 2, ts=5)
    b = next(log.batches())
    assert b.max_timestamp == clock() and [r.timestamp for r in b.records()] == [clock()] * 2
    b.ensure_valid()


# --- rolling ----------------------------------------------------------------------------------

def test_roll_on_segment_bytes(open_log):
    log = open_log()
    put(log)
    one = log.size()                                 # every put below has the same size
    log = open_log(config(segment_bytes=one * 4), name="small-0")
    for _ in range(10):
        put(log, key=b"x")
    assert log.segment_bases() == [0, 4, 8]
    assert [s.size for s in log.segments] == [4 * one, 4 * one, 2 * one]
    assert seg_files(log, ".snapshot") == ["00000000000000000004.snapshot", "00000000000000000008.snapshot"]
    # rolled segments are flushed: the recovery point moved to the new active segment
    assert log.recovery_point == 8


def test_batch_larger_than_segment_bytes_is_refused(open_log):
    log = open_log(config(segment_bytes=100))
    with pytest.raises(RecordTooLargeError, match="segment.bytes"):
        put(log, value=b"x" * 200)


def test_roll_on_segment_ms_uses_record_timestamps(open_log, clock):
    log = open_log(config(segment_ms=1000))
    put(log, ts=T0)
    clock.advance(10**7)                             # wall clock does not matter
    put(log, ts=T0 + 1000)
    assert log.segment_bases() == [0]
    put(log, ts=T0 + 1001)
    assert log.segment_bases() == [0, 2]
    put(log, ts=T0 + 1500)
    assert log.segment_bases() == [0, 2]


def test_roll_on_segment_ms_uses_the_clock_without_timestamps(open_log, clock):
    log = open_log(config(segment_ms=1000))
    put(log, ts=-1)
    clock.advance(1000)
    put(log, ts=-1)
    assert log.segment_bases() == [0]
    clock.advance(1)
    put(log, ts=-1)
    assert log.segment_bases() == [0, 2]
    # the new segment's clock starts at its creation
    clock.advance(999)
    put(log, ts=-1)
    assert log.segment_bases() == [0, 2]
    clock.advance(2)
    put(log, ts=-1)
    assert log.segment_bases() == [0, 2, 4]


def test_idle_log_never_rolls_without_appends(open_log, clock):
    log = open_log(config(segment_ms=10))
    put(log, ts=T0)
    clock.advance(10**9)
    assert log.segment_bases() == [0]


def test_segment_jitter(open_log, monkeypatch):
    import compactlog.storage.segment as segment_mod
    monkeypatch.setattr(segment_mod.random, "randrange", lambda a, b: 1234567)
    log = open_log(config(segment_ms=1000, segment_jitter_ms=100))
    jitter = 1234567 % 100
    assert log.active_segment.roll_jitter_ms == jitter
    put(log, ts=T0)
    put(log, ts=T0 + 1000 - jitter)
    assert log.segment_bases() == [0]
    put(log, ts=T0 + 1001 - jitter)
    assert log.segment_bases() == [0, 2]


def test_max_compaction_lag_caps_the_roll_time_on_compacted_topics(open_log):
    compacted = open_log(config(cleanup_policy="compact", segment_ms=10**9, max_compaction_lag_ms=500),
                         name="c-0")
    put(compacted, ts=T0)
    put(compacted, ts=T0 + 500)
    assert compacted.segment_bases() == [0]
    put(compacted, ts=T0 + 501)
    assert compacted.segment_bases() == [0, 2]
    # on a delete-only topic max.compaction.lag.ms plays no part
    plain = open_log(config(segment_ms=10**9, max_compaction_lag_ms=500), name="d-0")
    put(plain, ts=T0)
    put(plain, ts=T0 + 10**6)
    assert plain.segment_bases() == [0]


def test_roll_when_offset_index_is_full(open_log):
    # 5 offset-index slots, 3 time-index slots (full at 2): equal timestamps keep the time index
    # at one entry, so that only the offset index fills up
    log = open_log(config(segment_index_bytes=40, index_interval_bytes=0))   # 5 offset slots
    for _ in range(13):
        put(log, ts=T0)
    # each segment: first append (no entry) + 5 indexed appends, then the full index rolls
    assert log.segment_bases() == [0, 6, 12]
    assert [s.offset_index.entries for s in log.segments[:2]] == [5, 5]
    assert [s.time_index.entries for s in log.segments[:2]] == [1, 1]


def test_roll_when_time_index_is_full(open_log):
    log = open_log(config(segment_index_bytes=36, index_interval_bytes=0))   # 3 slots: full at 2
    for i in range(7):
        put(log, ts=T0 + i)
    assert log.segment_bases() == [0, 3, 6]
    # the final entry of a rolled segment is written even though the index was "full"
    assert log.segments[0].time_index.all_entries() == [(T0 + 1, 1), (T0 + 2, 2)]


def test_roll_on_relative_offset_overflow(open_log):
    log = open_log()
    log.append_as_follower(batch(0, 2))
    far = 2**31 + 10
    log.append_as_follower(batch(far, 3))
    assert log.segment_bases() == [0, far]
    assert log.log_end_offset == far + 3
    assert [r.offset for r in log.records()] == [0, 1, far, far + 1, far + 2]
    assert [r.offset for r in log.records(2)] == [far, far + 1, far + 2]
    # still within range of the first segment: no roll
    log2 = open_log(name="near-0")
    log2.append_as_follower(batch(0, 1))
    log2.append_as_follower(batch(2**31 - 1, 1))
    assert log2.segment_bases() == [0]


def test_roll_takes_max_of_expected_offset_and_log_end(open_log):
    log = open_log()
    put(log, 3)
    seg = log.roll(1)
    assert seg.base_offset == 3
    assert log.roll() is seg                           # an empty active segment is not rolled again
    log.append_as_follower(batch(10, 1))
    assert log.roll(20).base_offset == 20
    assert log.segment_bases() == [0, 3, 20]


def test_active_indexes_preallocated_and_trimmed_on_roll_and_close(open_log):
    log = open_log(config(segment_index_bytes=1000, index_interval_bytes=10, segment_bytes=600))
    put(log)
    act = log.active_segment
    assert os.path.getsize(act.offset_index.path) == 1000
    assert os.path.getsize(act.time_index.path) == 996       # floor(1000 / 12) * 12
    while len(log.segments) < 2:
        put(log, ts=T0 + log.log_end_offset)
    old = log.segments[0]
    assert os.path.getsize(old.offset_index.path) == 8 * old.offset_index.entries > 0
    assert os.path.getsize(old.time_index.path) == 12 * old.time_index.entries > 0
    assert os.path.getsize(log.active_segment.offset_index.path) == 1000
    log.close()
    act = log.active_segment
    assert os.path.getsize(act.offset_index.path) == 8 * act.offset_index.entries
    assert os.path.getsize(act.time_index.path) == 12 * act.time_index.entries
    for seg in log.segments:
        assert segment_is_valid_after_reopen(seg)


def segment_is_valid_after_reopen(seg):
    from compactlog.storage.segment import LogSegment
    again = LogSegment(seg.dir, seg.base_offset, seg.config, now_ms=T0)
    try:
        return segment_is_valid(again)
    finally:
        again.close_handles()


def test_preallocated_log_file_trimmed_on_roll_and_close(open_log):
    log = open_log(config(preallocate="true", segment_bytes=2048))
    put(log)
    first = log.active_segment
    assert os.path.getsize(first.log.path) == 2048
    while len(log.segments) < 2:
        put(log)
    assert os.path.getsize(first.log.path) == first.size < 2048
    assert os.path.getsize(log.active_segment.log.path) == 2048
    log.close()
    assert os.path.getsize(log.active_segment.log.path) == log.active_segment.size
    again = Log(log.dir, log.config, had_clean_shutdown=True)
    assert again.log_end_offset == log.log_end_offset
    assert [r.offset for r in again.records()] == list(range(log.log_end_offset))
    again.close()


# --- flush ------------------------------------------------------------------------------------

def test_flush_advances_the_recovery_point(open_log):
    log = open_log()
    put(log, 4)
    assert log.recovery_point == 0
    log.flush()
    assert log.recovery_point == 4
    put(log)
    assert log.recovery_point == 4


def test_flush_messages(open_log):
    log = open_log(config(flush_messages=3))
    put(log, 2)
    assert log.recovery_point == 0
    put(log)
    assert log.recovery_point == 3



def fsync_calls(monkeypatch) -> list[str]:
    """The name of each file or directory os.fsync is called on, in order (a directory as '<dir>')."""
    calls = []
    real = os.fsync

    def fsync(fd):
        path = os.readlink(f"/proc/self/fd/{fd}")
        calls.append("<dir>" if os.path.isdir(path) else os.path.basename(path))
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_clean_close_fsyncs_the_directory_once_after_the_snapshot_and_segment(open_log, monkeypatch):
    """Close: the producer snapshot written and fsynced, the .log fsynced, then one directory
    fsync for the snapshot's rename and the segment made since the last flush (it was two)."""
    log = open_log()
    put(log, 3)
    calls = fsync_calls(monkeypatch)
    log.close()
    assert calls == ["00000000000000000003.snapshot.tmp", "00000000000000000000.log", "<dir>"]
    assert seg_files(log, ".snapshot") == ["00000000000000000003.snapshot"]


def test_closing_a_log_nobody_appended_to_writes_nothing(open_log, monkeypatch):
    """A log opened after a clean shutdown and closed again without an append: no snapshot, no
    fsync, no trim; every file byte for byte and to the nanosecond as it was."""
    log = open_log()
    put(log, 3)
    log.close()

    def state():
        out = {}
        for name in sorted(os.listdir(log.dir)):
            path = os.path.join(log.dir, name)
            with open(path, "rb") as f:
                out[name] = (f.read(), os.stat(path).st_mtime_ns)
        return out

    before = state()
    calls = fsync_calls(monkeypatch)
    again = open_log(had_clean_shutdown=True, recovery_point=3)
    assert [r.offset for r in again.records()] == [0, 1, 2]
    again.close()
    assert calls == [] and state() == before

# --- reads ------------------------------------------------------------------------------------

@pytest.fixture
def multi_segment_log(open_log):
    """60 batches of 3 records (offsets 0..179), several segments, sparse indexes."""
    log = open_log(config(segment_bytes=2000, index_interval_bytes=150))
    for i in range(60):
        keys = [b"key-%d" % (3 * i + j) for j in range(3)]
        log.append_records(keys, [b"val-%d" % (3 * i + j) for j in range(3)],
                           timestamps=[T0 + 10 * (3 * i + j) for j in range(3)])
    assert len(log.segments) >= 4 and all(s.offset_index.entries > 0 for s in log.segments[:-1])
    return log


def test_read_from_any_offset(multi_segment_log):
    log = multi_segment_log
    for start in [0, 1, 2, 3, 47, 100, 101, 178, 179]:
        pos, data = log.read(start, max_bytes=300)
        batches = list(iter_batches(data))
        assert batches, start
        assert batches[0].base_offset <= start <= batches[0].last_offset
        seg = log.floor_segment(batches[0].base_offset)
        assert seg.log.read(pos, len(data)) == data
        assert sum(b.size for b in batches) == len(data) <= max(300, batches[0].size)
    # at a segment boundary the read starts at the next segment's first batch
    for seg in log.segments[1:]:
        pos, data = log.read(seg.base_offset)
        assert pos == 0 and BatchHeader.unpack(data).base_offset == seg.base_offset
    assert log.read(180) == (0, b"")
    with pytest.raises(OffsetOutOfRangeError):
        log.read(181)


def test_read_span_stops_at_max_offset_and_names_the_last_offset(multi_segment_log):
    log = multi_segment_log
    span = log.read_span(4, max_offset=10)
    batches = list(iter_batches(span.read()))
    # the batch holding 9 starts below the bound: it is whole in the span
    assert [b.base_offset for b in batches] == [3, 6, 9] and span.last_offset == 11
    assert span.file is log.floor_segment(3).log and span.length == sum(b.size for b in batches)
    assert log.read(4, max_offset=10) == (span.position, span.read())
    for start, bound in [(9, 9), (12, 10), (180, None)]:
        empty = log.read_span(start, max_offset=bound)
        assert (empty.length, empty.last_offset, empty.read()) == (0, -1, b"")
    span = log.read_span(0, max_bytes=1, min_one_batch=False)
    assert (span.length, span.read()) == (0, b"")
    with pytest.raises(OffsetOutOfRangeError):
        log.read_span(181)


def test_records_from_the_middle(multi_segment_log):
    log = multi_segment_log
    for start in [0, 5, 64, 133, 179]:
        recs = list(log.records(start))
        assert [r.offset for r in recs] == list(range(start, 180))
        assert [r.value for r in recs] == [b"val-%d" % o for o in range(start, 180)]


def test_offset_for_timestamp(multi_segment_log):
    log = multi_segment_log
    # record o has timestamp T0 + 10*o
    assert log.offset_for_timestamp(T0 - 100) == (0, T0)
    assert log.offset_for_timestamp(T0) == (0, T0)
    for o in [1, 2, 3, 59, 100, 133, 179]:
        assert log.offset_for_timestamp(T0 + 10 * o) == (o, T0 + 10 * o)
        assert log.offset_for_timestamp(T0 + 10 * o - 5) == (o, T0 + 10 * o)
    assert log.offset_for_timestamp(T0 + 10 * 179 + 1) is None
    assert log.offset_for_timestamp(-1) == (180, -1)
    assert log.offset_for_timestamp(-2) == (0, -1)


def test_offset_for_timestamp_out_of_order_timestamps(open_log):
    log = open_log(config(index_interval_bytes=0))
    stamps = [[T0 + 50, T0 + 10], [T0 + 20, T0 + 30], [T0 + 100, T0 + 5], [T0 + 60]]
    for s in stamps:
        log.append_records([b"a"] * len(s), [b"v"] * len(s), timestamps=s)
    # the first record (in offset order) whose timestamp >= target
    assert log.offset_for_timestamp(T0 + 15) == (0, T0 + 50)
    assert log.offset_for_timestamp(T0 + 55) == (4, T0 + 100)
    assert log.offset_for_timestamp(T0 + 60) == (4, T0 + 100)
    assert log.offset_for_timestamp(T0 + 101) is None


def test_offset_for_timestamp_respects_log_start(open_log):
    log = open_log(config(segment_bytes=300))
    for i in range(10):
        put(log, ts=T0 + i)
    log.log_start_offset = 3
    assert log.offset_for_timestamp(T0)[0] == 3


def test_fetch_offset_for_timestamp_answers_only_fetchable_offsets(open_log):
    log = open_log(config())
    assert log.fetch_offset_for_timestamp(-2) == (0, -1)       # empty: the log start, not "none"
    assert log.fetch_offset_for_timestamp(-1) == (0, -1)
    put(log, ts=T0)                                            # offset 0
    put(log, ts=T0 + 10, producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)  # open txn
    assert log.last_stable_offset == 1 and log.high_watermark == 2
    assert log.fetch_offset_for_timestamp(T0 + 5) == (1, T0 + 10)
    assert log.fetch_offset_for_timestamp(T0 + 5, read_committed=True) is None   # past the LSO
    assert log.fetch_offset_for_timestamp(-1, read_committed=True) == (1, -1)
    assert log.fetch_offset_for_timestamp(T0, read_committed=True) == (0, T0)
    assert log.fetch_offset_for_timestamp(T0 + 11) is None


def test_collect_aborted_transactions_across_segments(open_log):
    log = open_log(config(segment_bytes=400))
    aborted = []
    for pid in (10, 11, 12, 13):
        first = put(log, 2, producer_id=pid, producer_epoch=0, base_sequence=0, transactional=True)
        put(log)
        marker = log.append_control(commit=pid == 11, producer_id=pid, producer_epoch=0)
        if pid != 11:
            aborted.append(AbortedTxn(pid, first.first_offset, marker.first_offset, marker.first_offset + 1))
        put(log)
    assert len(log.segments) >= 3
    per_segment = [s.txn_index.entries() for s in log.segments]
    assert sorted(sum(per_segment, [])) == sorted(aborted)
    assert log.collect_aborted_transactions(0, log.log_end_offset) == aborted
    a10, a12, a13 = aborted
    assert log.collect_aborted_transactions(a10.last_offset + 1, log.log_end_offset) == [a12, a13]
    assert log.collect_aborted_transactions(0, a12.first_offset) == [a10]
    assert log.collect_aborted_transactions(a12.first_offset + 1, a12.first_offset + 2) == [a12]


# --- truncation -------------------------------------------------------------------------------

def test_truncate_to_removes_later_segments(multi_segment_log):
    log = multi_segment_log
    bases = log.segment_bases()
    cut = bases[2] + 3                                   # a batch boundary (3 records a batch)
    log.truncate_to(cut)
    assert log.segment_bases() == bases[:3]
    assert log.log_end_offset == cut
    assert log.active_segment.read_next_offset() == cut
    assert [r.offset for r in log.records()][-1] == bases[2] + 2
    assert not any(n.startswith(f"{b:020d}") for b in bases[3:] for n in os.listdir(log.dir))
    info = put(log)
    assert info.first_offset == bases[2] + 3
    log.close()
    again = Log(log.dir, log.config, had_clean_shutdown=True)
    assert again.log_end_offset == bases[2] + 4
    again.close()


def test_unclean_reopen_of_a_cleanly_written_log(open_log, clock):
    log = open_log(config(segment_bytes=500, segment_index_bytes=4096))
    for i in range(20):
        put(log, ts=T0 + i)
    log.flush()
    expected = [(r.offset, r.key, r.value) for r in log.records()]
    crash(log)
    again = Log(log.dir, log.config, clock=clock)
    assert [(r.offset, r.key, r.value) for r in again.records()] == expected
    assert again.log_end_offset == 20
    again.close()


def test_data_written_as_leader_is_byte_identical_on_disk(open_log):
    log = open_log()
    data = bytearray(batch(0, 3, key=b"q"))
    info = log.append_as_leader(bytes(data))
    with open(log.active_segment.log.path, "rb") as f:
        stored = f.read()
    struct.pack_into(">q", data, 0, info.first_offset)
    struct.pack_into(">i", data, 12, 0)
    assert stored == bytes(data)


def test_offset_for_max_timestamp(open_log):
    log = open_log(config(segment_bytes=400, index_interval_bytes=0))
    assert log.offset_for_timestamp(-3) is None                  # empty log
    stamps = [[T0 + 5, T0 + 1], [T0 + 90, T0 + 200, T0 + 3], [T0 + 7], [T0 + 200], [T0 + 50]]
    for s in stamps:
        log.append_records([b"k"] * len(s), [b"v" * 40] * len(s), timestamps=s)
    assert len(log.segments) >= 2
    # the first record holding the largest timestamp (a later equal one does not win)
    assert log.offset_for_timestamp(-3) == (3, T0 + 200)
    assert log.offset_for_timestamp(-4) == (0, -1)               # EARLIEST_LOCAL = log start
    log.close()
    again = Log(log.dir, log.config, had_clean_shutdown=True)    # from the time index after reload
    assert again.offset_for_timestamp(-3) == (3, T0 + 200)
    again.close()


def test_truncation_to_an_empty_segment_restarts_its_roll_clock(open_log, clock):
    log = open_log(config(segment_ms=1000))
    put(log, ts=-1)
    clock.advance(5000)
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.active_segment.size == 0
    put(log, ts=-1)
    clock.advance(500)
    put(log, ts=-1)                                   # 500 ms since the truncation: no roll
    assert log.segment_bases() == [0]
    clock.advance(501)
    put(log, ts=-1)
    assert log.segment_bases() == [0, 2]


# --- a request of several batches: all or nothing ---------------------------------------------

def _dir_state(log):
    out = {}
    for name in sorted(os.listdir(log.dir)):
        with open(os.path.join(log.dir, name), "rb") as f:
            out[name] = f.read()
    return out


def _last_bit_flipped(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


def _producers(log):
    return {pid: (e.producer_epoch, list(e.batches), e.current_txn_first_offset)
            for pid, e in log.producer_state.producers.items()}


@pytest.mark.parametrize("second, error", [
    (lambda: _last_bit_flipped(batch(0, 2, key=b"y")), CorruptRecordError),                 # bad CRC
    (lambda: batch(0, 2, key=None), InvalidRecordError),                                    # keyless
    (lambda: batch(0, 2, key=b"y", producer_id=9, producer_epoch=0, base_sequence=7),       # sequence gap
     OutOfOrderSequenceError),
])
def test_a_request_whose_second_batch_fails_appends_nothing(open_log, second, error):
    initial = batch(0, 3, key=b"a", producer_id=9, producer_epoch=0, base_sequence=0)
    first = batch(0, 2, key=b"x", producer_id=9, producer_epoch=0, base_sequence=3)
    # the first batch of the request would roll a new segment
    log = open_log(config(cleanup_policy="compact", segment_bytes=max(len(initial), len(first)) + 1))
    log.append_as_leader(initial)
    end, files, producers = log.log_end_offset, _dir_state(log), _producers(log)
    with pytest.raises(error):
        log.append_as_leader(first + second())
    # nothing of the first batch was written: no roll, no bytes, no producer state, no offsets
    assert log.log_end_offset == end
    assert _dir_state(log) == files
    assert _producers(log) == producers
    assert [r.offset for r in log.records()] == [0, 1, 2]
    # the first batch alone is fine, and follows on at the same offset and sequence
    info = log.append_as_leader(first)
    assert (info.first_offset, info.last_offset) == (3, 4) and log.segment_bases() == [0, 3]


def test_a_request_of_batches_is_judged_as_successive_requests(open_log):
    log = open_log()
    one = batch(0, 2, key=b"a", producer_id=4, producer_epoch=0, base_sequence=0)
    two = batch(0, 3, key=b"b", producer_id=4, producer_epoch=0, base_sequence=2)
    # the second batch's sequence follows the first one's, which is not applied yet when it is checked
    info = log.append_as_leader(one + two)
    assert (info.first_offset, info.last_offset, info.records, info.duplicate) == (0, 4, 5, False)
    assert [h.base_offset for h in (b.header for b in log.batches())] == [0, 2]
    assert log.producer_state.producers[4].last_seq == 4
    # a batch repeating one validated earlier in the same request is answered as a duplicate of it
    three = batch(0, 1, key=b"c", producer_id=4, producer_epoch=0, base_sequence=5)
    info = log.append_as_leader(three + three)
    assert (info.first_offset, info.last_offset, info.records) == (5, 5, 1)
    assert log.log_end_offset == 6
    # and a whole request of duplicates writes nothing
    again = log.append_as_leader(one + two)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 4) and log.log_end_offset == 6


@pytest.mark.parametrize("cfg", [{}, {"compression.type": "gzip"}, {"message.timestamp.type": "LogAppendTime"}])
def test_a_coordinators_own_records_are_stored_as_a_clients_batch_would_be(open_log, cfg):
    """``append_records(trusted=True)`` without a producer (``__transaction_state``) encodes the
    batch at its final offset instead of re-parsing it: the log holds the same bytes as through
    ``append_as_leader`` (offsets, leader epoch, CRC, conversion to the topic's codec or time)."""
    from compactlog.record.batch import BatchSpec, encode_small_batch
    from compactlog.storage.config import LogConfig
    fast, slow = open_log(LogConfig(cfg), name="fast-0"), open_log(LogConfig(cfg), name="slow-0")
    rows = [([b"k1"], [b"v" * 30]), ([b"txn-a", b"txn-b"], [b"x", None]), (["str-key"], ["str-value"])]
    for i, (keys, values) in enumerate(rows):
        ts = [T0 + i] * len(keys)
        a = fast.append_records(keys, values, timestamps=ts, trusted=True)
        b = slow.append_as_leader(encode_small_batch(BatchSpec(), range(len(keys)), ts, keys, values), _own=True)
        assert a == b

    def stored(lg):
        return [bytes(b.raw()) for b in lg.batches()]
    assert stored(fast) == stored(slow) and len(stored(fast)) == 3
    assert fast.log_end_offset == slow.log_end_offset == 4
    for b in fast.batches():
        b.ensure_valid()
