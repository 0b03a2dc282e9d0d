"""Opening a partition after a clean or unclean shutdown (Kafka's LogLoader, segment-files.md §10).

The issue's acceptance: a torn last batch, a flipped bit, a deleted index, leftover .cleaned/.swap
files (and a kill -9 during appends, see test_kill_during_append.py) each recover with no flushed
record lost.
"""

from __future__ import annotations

import json
import os
import struct

import pytest

from compactlog.errors import CorruptRecordError
from compactlog.storage.checkpoint import OffsetCheckpointFile
from compactlog.storage.datadir import DataDir
from compactlog.storage.log import Log
from compactlog.storage.segment import LogSegment
from compactlog.storage.txn_index import AbortedTxn
from storage_support import (Clock, check_partition_dir, expected_indexes, flip_bit,
                             raw_batches, read, time_index_entries)

T0 = 1_700_000_000_000
TOPIC = "events"
CONFIGS = {"segment.bytes": "1200", "index.interval.bytes": "150", "segment.index.bytes": "4096"}
INTERVAL = 150


def crash(log: Log) -> None:
    """What a kill -9 leaves: no final time-index entry, untrimmed indexes, no snapshot, no marker."""
    for seg in log.segments:
        seg.close_handles()
    log.closed = True


def crash_datadir(dd: DataDir) -> None:
    dd.abandon()


def put(log: Log, i: int, n: int = 2, **kw):
    keys = [b"key-%d-%d" % (i, j) for j in range(n)]
    values = [b"value-%d-%d-" % (i, j) + b"x" * (i % 7) * 5 for j in range(n)]
    return log.append_records(keys, values, timestamps=[T0 + 1000 * i + j for j in range(n)], **kw)


def records(log: Log, start=None):
    return [(r.offset, r.timestamp, r.key, r.value) for r in log.records(start)]


@pytest.fixture
def env(tmp_path):
    clock = Clock(T0 + 10**6)
    root = str(tmp_path / "data")

    def open_dd() -> DataDir:
        return DataDir(root, clock=clock, create=True, writable=True)

    dd = open_dd()
    dd.create_topic(TOPIC, 1, CONFIGS)
    dd.close()
    return open_dd, os.path.join(root, f"{TOPIC}-0"), clock


def pfile(pdir: str, base: int, suffix: str) -> str:
    return os.path.join(pdir, f"{base:020d}{suffix}")


# --- clean shutdown ---------------------------------------------------------------------------

def test_clean_shutdown_marker_and_checkpoints(env):
    open_dd, pdir, _ = env
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    for i in range(30):
        put(log, i)
    expected = records(log)
    leo = log.log_end_offset
    dd.close()
    root = os.path.dirname(pdir)
    marker = os.path.join(root, ".kafka_cleanshutdown")
    assert json.loads(read(marker)) == {"version": 0, "brokerEpoch": 0}
    assert OffsetCheckpointFile(os.path.join(root, "recovery-point-offset-checkpoint")).read() == \
        {(TOPIC, 0): leo}
    check_partition_dir(pdir, INTERVAL)
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert not os.path.exists(marker)                 # removed on open: a crash now is unclean
    assert log.recovery_point == leo
    assert records(log) == expected
    dd.close()


# --- torn last batch --------------------------------------------------------------------------

def test_torn_last_batch_after_unclean_shutdown(env):
    open_dd, pdir, _ = env
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    for i in range(25):
        put(log, i)
    log.flush()
    flushed = log.recovery_point
    dd.checkpoint_logs()
    for i in range(25, 28):
        put(log, i)
    expected = records(log)
    active = log.active_segment
    crash_datadir(dd)

    data = read(active.log.path)
    batches, _ = raw_batches(data)
    last_pos = batches[-1][0]
    torn = data[:len(data) - 9]                        # the last write stopped 9 bytes short
    with open(active.log.path, "wb") as f:
        f.write(torn)

    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    last_batch_offsets = (batches[-1][1], batches[-1][2])
    assert log.log_end_offset == last_batch_offsets[0]
    assert records(log) == [r for r in expected if r[0] < last_batch_offsets[0]]
    assert log.log_end_offset >= flushed
    # the torn bytes are kept beside the segment, not lost
    assert read(active.log.path + ".discarded") == torn[last_pos:]
    assert os.path.getsize(active.log.path) == last_pos
    # appends continue at the recovered end
    info = put(log, 99)
    assert info.first_offset == last_batch_offsets[0]
    dd.close()
    # (an append after a reopen starts counting index.interval.bytes from 0, as Kafka's does,
    # so the index no longer equals a from-scratch rebuild: exact_indexes=False)
    check_partition_dir(pdir, INTERVAL, exact_indexes=False)
    dd = open_dd()
    assert records(dd.open_log(TOPIC, 0))[-2:][0][2] == b"key-99-0"
    dd.close()


def test_torn_batch_header_only(env):
    """A crash after the first bytes of a batch: even the 12-byte prefix may be incomplete."""
    open_dd, pdir, _ = env
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    for i in range(5):
        put(log, i)
    expected = records(log)
    path = log.active_segment.log.path
    crash_datadir(dd)
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00")
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert records(log) == expected
    assert put(log, 5).first_offset == 10
    dd.close()
    check_partition_dir(pdir, INTERVAL, exact_indexes=False)


# --- flipped bits -----------------------------------------------------------------------------

def _segments_with_data(open_dd, n=40):
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    for i in range(n):
        put(log, i)
    return dd, log


def test_flipped_bit_in_unflushed_batch_quarantines_that_batch_alone(env):
    """Kafka truncates at the bad batch and drops every later segment; compactlog sets the one
    batch aside (its bytes kept, its offsets a gap) and keeps every valid batch after it."""
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    assert len(log.segments) >= 4
    flushed_to = log.segments[1].base_offset       # segments 0 is flushed (rolled), 1.. not
    log.recovery_point = flushed_to
    dd.checkpoint_logs()
    expected = records(log)
    leo = log.log_end_offset
    seg = log.segments[1]
    later = [(s.base_offset, read(s.log.path)) for s in log.segments[2:]]
    crash_datadir(dd)

    data = read(seg.log.path)
    batches, _ = raw_batches(data)
    bad_pos, bad_base = batches[3][0], batches[3][1]
    bad_end = batches[4][0]
    flip_bit(seg.log.path, bad_pos + 70)            # inside the 4th batch's records
    flipped = read(seg.log.path)
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert log.log_end_offset == leo
    bad_offsets = set(range(bad_base, bad_base + 2))
    assert records(log) == [r for r in expected if r[0] not in bad_offsets]
    assert log.segment_bases()[:2] == [0, seg.base_offset]
    # the quarantined batch is kept byte for byte; the segment holds every other batch
    assert read(seg.log.path + ".quarantined") == flipped[bad_pos:bad_end]
    assert read(seg.log.path) == data[:bad_pos] + data[bad_end:]
    for base, content in later:                      # later segments untouched
        assert read(pfile(pdir, base, ".log")) == content
    events = [e for e in dd.data_events() if e.kind == "quarantine"]
    assert len(events) == 1 and events[0].position == bad_pos
    assert (events[0].first_offset, events[0].last_offset) == (bad_base, bad_base + 1)
    put(log, 500)
    dd.close()
    check_partition_dir(pdir, INTERVAL, exact_indexes=False)


def test_flipped_bit_below_the_recovery_point_is_reported_not_recovered(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    log.flush()
    dd.checkpoint_logs()
    leo = log.log_end_offset
    seg = log.segments[1]
    crash_datadir(dd)
    data = read(seg.log.path)
    batches, _ = raw_batches(data)
    bad_pos, bad_base = batches[2][0], batches[2][1]
    flip_bit(seg.log.path, bad_pos + 65)
    before = {n: read(os.path.join(pdir, n)) for n in os.listdir(pdir) if n.endswith(".log")}

    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert log.log_end_offset == leo                   # nothing silently dropped
    assert not any(n.endswith(".discarded") for n in os.listdir(pdir))
    assert {n: read(os.path.join(pdir, n)) for n in before} == before
    with pytest.raises(CorruptRecordError) as err:
        records(log)
    assert err.value.file == seg.log.path and err.value.position == bad_pos
    assert seg.log.path in str(err.value) and f"position {bad_pos}" in str(err.value)
    # reads that do not touch the bad batch still work
    assert records(log, bad_base + 2)[0][0] == bad_base + 2
    dd.close()


# --- indexes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("clean", [True, False])
def test_deleted_offset_index_is_rebuilt_identically(env, clean):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    bases = log.segment_bases()
    dd.close()
    originals = {b: read(pfile(pdir, b, ".index")) for b in bases}
    time_originals = {b: read(pfile(pdir, b, ".timeindex")) for b in bases}
    assert any(originals.values())
    victims = [bases[0], bases[2], bases[-1]]
    for b in victims:
        os.remove(pfile(pdir, b, ".index"))
    if not clean:
        os.remove(os.path.join(os.path.dirname(pdir), ".kafka_cleanshutdown"))
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    dd.close()
    for b in bases:
        assert read(pfile(pdir, b, ".index")) == originals[b], b
        assert read(pfile(pdir, b, ".timeindex")) == time_originals[b], b
    assert not any(n.endswith(".discarded") for n in os.listdir(pdir))


def test_deleted_time_index_is_created_empty_after_clean_shutdown(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    bases = log.segment_bases()
    dd.close()
    os.remove(pfile(pdir, bases[1], ".timeindex"))
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert os.path.getsize(pfile(pdir, bases[1], ".timeindex")) == 0
    assert log.segments[1].time_index.entries == 0
    assert log.offset_for_timestamp(T0)[0] == 0
    put(log, 100)
    dd.close()
    assert os.path.exists(pfile(pdir, bases[1], ".timeindex"))


def test_deleted_time_index_of_an_unflushed_segment_is_rebuilt(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    bases = log.segment_bases()
    dd.close()
    original = read(pfile(pdir, bases[-2], ".timeindex"))
    os.remove(pfile(pdir, bases[-2], ".timeindex"))
    os.remove(os.path.join(os.path.dirname(pdir), ".kafka_cleanshutdown"))
    ck = OffsetCheckpointFile(os.path.join(os.path.dirname(pdir), "recovery-point-offset-checkpoint"))
    ck.write({(TOPIC, 0): bases[-2]})
    dd = open_dd()
    dd.open_log(TOPIC, 0)
    dd.close()
    assert read(pfile(pdir, bases[-2], ".timeindex")) == original


def test_untrimmed_indexes_after_a_crash_are_rebuilt(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    active = log.active_segment
    assert os.path.getsize(active.offset_index.path) == 4096          # preallocated
    assert os.path.getsize(active.time_index.path) == 4092
    expected = records(log)
    crash_datadir(dd)
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert records(log) == expected
    offs, times = expected_indexes(read(active.log.path), active.base_offset, INTERVAL)
    assert log.active_segment.offset_index.all_entries() == offs
    assert log.active_segment.time_index.all_entries() == times
    dd.close()
    check_partition_dir(pdir, INTERVAL)


def test_crashed_active_segment_keeps_its_largest_timestamp(env):
    """After a crash the active segment's time index lacks the final entry; recovery restores it,
    so time retention and ListOffsets see the segment's real largest timestamp."""
    open_dd, pdir, clock = env
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    put(log, 0)
    put(log, 1)                                     # too few bytes for any index entry
    assert log.active_segment.time_index.entries == 0
    crash_datadir(dd)
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert log.active_segment.max_timestamp_so_far == T0 + 1001
    assert log.active_segment.largest_timestamp() == T0 + 1001
    assert log.offset_for_timestamp(T0 + 1001) == (3, T0 + 1001)
    dd.close()
    assert time_index_entries(pfile(pdir, 0, ".timeindex"), 0) == [(T0 + 1001, 3)]


def test_orphaned_index_files_are_deleted(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd, 5)
    dd.close()
    for suffix in (".index", ".timeindex", ".txnindex"):
        with open(pfile(pdir, 777, suffix), "wb") as f:
            f.write(b"\0" * 24)
    dd = open_dd()
    dd.open_log(TOPIC, 0)
    dd.close()
    assert not any(n.startswith(f"{777:020d}") for n in os.listdir(pdir))


# --- leftovers of an interrupted clean --------------------------------------------------------

def _cleaned_copy(log: Log, olds: list[LogSegment], keep_every: int, suffix: str) -> LogSegment:
    """A segment at olds[0].base holding every keep_every-th batch of ``olds`` (as a cleaner's output)."""
    new = LogSegment(log.dir, olds[0].base_offset, log.config, now_ms=T0, suffix=".cleaned")
    i = 0
    for old in olds:
        for b in old.batches():
            if i % keep_every == 0:
                new.append(b.last_offset, b.max_timestamp, b.last_offset, b.raw())
            i += 1
    new.on_become_inactive()
    new.close_handles()
    if suffix != ".cleaned":
        new.change_suffix(".cleaned", suffix)
    return new


def test_leftover_cleaned_files_are_deleted_old_data_intact(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    expected = records(log)
    bases = log.segment_bases()
    _cleaned_copy(log, log.segments[:2], 2, ".cleaned")
    dd.close()
    assert os.path.exists(pfile(pdir, 0, ".log.cleaned"))
    before = {n: read(os.path.join(pdir, n)) for n in os.listdir(pdir) if n.endswith(".log")}
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert not any(n.endswith(".cleaned") for n in os.listdir(pdir))
    assert records(log) == expected and log.segment_bases() == bases
    assert {n: read(os.path.join(pdir, n)) for n in before} == before
    dd.close()


@pytest.mark.parametrize("olds_already_deleted", [False, True])
def test_complete_swap_set_is_swapped_in(env, olds_already_deleted):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    bases = log.segment_bases()
    olds = log.segments[:3]
    kept = [b for s in olds for b in s.batches()][::2]
    kept_offsets = {o for b in kept for o in range(b.base_offset, b.last_offset + 1)}
    before = records(log)
    _cleaned_copy(log, olds, 2, ".swap")
    if olds_already_deleted:                       # crash after the old files got .deleted
        for s in olds[1:]:
            for p in s.file_paths():
                if os.path.exists(p):
                    os.replace(p, p + ".deleted")
    dd.close()
    swap_data = read(pfile(pdir, 0, ".log.swap"))
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert log.segment_bases() == [0] + bases[3:]
    assert read(pfile(pdir, 0, ".log")) == swap_data
    assert not any(n.endswith((".swap", ".deleted", ".cleaned")) for n in os.listdir(pdir))
    for b in bases[1:3]:
        assert not any(n.startswith(f"{b:020d}.") for n in os.listdir(pdir))
    cut = bases[3]
    assert records(log) == [r for r in before if r[0] >= cut or r[0] in kept_offsets]
    put(log, 1000)
    dd.close()
    check_partition_dir(pdir, INTERVAL, exact_indexes=False)


def test_swap_of_an_interrupted_split_is_deleted(env):
    """A .swap whose base offset is >= a .cleaned file's belongs to an unfinished split: both go."""
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    expected = records(log)
    bases = log.segment_bases()
    _cleaned_copy(log, log.segments[:1], 1, ".cleaned")
    _cleaned_copy(log, log.segments[1:2], 1, ".swap")
    dd.close()
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert not any(n.endswith((".swap", ".cleaned")) for n in os.listdir(pdir))
    assert records(log) == expected and log.segment_bases() == bases
    dd.close()


def test_deleted_suffix_files_are_removed(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    expected = records(log)
    dd.close()
    for name in ("00000000000000000999.log.deleted", "00000000000000000999.index.deleted",
                 "00000000000000000005.snapshot.deleted"):
        with open(os.path.join(pdir, name), "wb") as f:
            f.write(b"junk")
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert not any(n.endswith(".deleted") for n in os.listdir(pdir))
    assert records(log) == expected
    dd.close()


# --- checkpoints ------------------------------------------------------------------------------

def test_unreadable_recovery_point_checkpoint_means_recover_everything(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    expected = records(log)
    dd.checkpoint_logs()
    path = log.active_segment.log.path
    crash_datadir(dd)
    root = os.path.dirname(pdir)
    with open(os.path.join(root, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n5\nevents 0 3\n")                   # count does not match: unreadable
    with open(path, "ab") as f:
        f.write(b"\x01" * 20)
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert records(log) == expected
    assert log.recovery_point == 0
    dd.close()
    check_partition_dir(pdir, INTERVAL)


def test_log_start_offset_checkpoint_beyond_the_log_end(env):
    """Segments removed externally: the log restarts empty at the checkpointed log start."""
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd, 10)
    dd.close()
    root = os.path.dirname(pdir)
    OffsetCheckpointFile(os.path.join(root, "log-start-offset-checkpoint")).write({(TOPIC, 0): 500})
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert log.segment_bases() == [500]
    assert put(log, 1).first_offset == 500
    dd.close()


def test_log_start_offset_checkpoint_is_restored(env):
    open_dd, pdir, _ = env
    dd, log = _segments_with_data(open_dd)
    log.log_start_offset = log.segments[1].base_offset + 3
    start = log.log_start_offset
    dd.close()
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert log.log_start_offset == start
    assert records(log)[0][0] == start
    dd.close()


# --- producer state and transaction index after recovery --------------------------------------

def test_txn_index_rebuilt_when_recovery_spans_valid_and_recovered_segments(env):
    """Segment A is recovered (index deleted), B validates, C is torn: the transaction started in
    B and aborted in C must still be in C's rebuilt .txnindex."""
    open_dd, pdir, _ = env
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    for i in range(12):
        put(log, i)
    while len(log.segments) < 2:
        put(log, 50)
    seq = 0
    start = put(log, 60, producer_id=7, producer_epoch=0, base_sequence=seq, transactional=True)
    seq += 2
    while len(log.segments) < 3:
        put(log, 61, producer_id=7, producer_epoch=0, base_sequence=seq, transactional=True)
        seq += 2
    marker = log.append_control(commit=False, producer_id=7, producer_epoch=0)
    put(log, 70)
    put(log, 71)
    bases = log.segment_bases()
    c = log.active_segment
    entry = AbortedTxn(7, start.first_offset, marker.first_offset, marker.first_offset + 1)
    assert c.txn_index.entries() == [entry]
    expected = records(log)
    crash_datadir(dd)
    os.remove(pfile(pdir, bases[0], ".index"))
    with open(c.log.path, "r+b") as f:
        f.truncate(os.path.getsize(c.log.path) - 5)
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert log.segment_bases() == bases
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [entry]
    assert records(log) == expected[:-2]
    assert log.last_stable_offset == log.log_end_offset
    dd.close()
    raw = read(pfile(pdir, bases[-1], ".txnindex"))
    assert raw == struct.pack(">hqqqq", 0, *entry)


def test_open_transaction_and_sequences_survive_a_crash(env):
    open_dd, pdir, _ = env
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    for i in range(6):
        put(log, i, producer_id=1, producer_epoch=0, base_sequence=2 * i)
    t = put(log, 10, producer_id=2, producer_epoch=0, base_sequence=0, transactional=True)
    for i in range(6, 20):
        put(log, i, producer_id=1, producer_epoch=0, base_sequence=2 * i)
    crash_datadir(dd)
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert log.last_stable_offset == t.first_offset
    dup = put(log, 19, producer_id=1, producer_epoch=0, base_sequence=38)
    assert dup.duplicate
    log.append_control(commit=False, producer_id=2, producer_epoch=0)
    assert log.collect_aborted_transactions(0, log.log_end_offset)[0].first_offset == t.first_offset
    dd.close()


def test_bytes_kept_by_earlier_recoveries_are_never_overwritten(env):
    open_dd, pdir, _ = env
    tails = []
    for round_ in range(3):
        dd = open_dd()
        log = dd.open_log(TOPIC, 0)
        for i in range(3):
            put(log, 10 * round_ + i)
        path = log.active_segment.log.path
        crash_datadir(dd)
        data = read(path)
        last_pos = raw_batches(data)[0][-1][0]
        with open(path, "wb") as f:
            f.write(data[:-4])                     # tear the last batch
        tails.append(data[last_pos:-4])
        dd = open_dd()
        dd.open_log(TOPIC, 0)
        crash_datadir(dd)
    assert read(path + ".discarded") == tails[0]
    assert read(path + ".1.discarded") == tails[1]
    assert read(path + ".2.discarded") == tails[2]


def test_reusing_a_closed_datadir_consumes_the_marker_again(env):
    """close() then open_log() on the same DataDir: a crash in that second session is unclean."""
    open_dd, pdir, _ = env
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    put(log, 0)
    dd.close()
    marker = os.path.join(os.path.dirname(pdir), ".kafka_cleanshutdown")
    assert os.path.exists(marker)
    log = dd.open_log(TOPIC, 0)
    assert not os.path.exists(marker)
    put(log, 1)
    path = log.active_segment.log.path
    crash_datadir(dd)
    with open(path, "ab") as f:
        f.write(b"\0\0\0\0\0\0\0\4\0\0\1\0\0")            # a torn batch prefix
    dd = open_dd()
    log = dd.open_log(TOPIC, 0)
    assert [r[0] for r in records(log)] == [0, 1, 2, 3]
    assert put(log, 2).first_offset == 4
    dd.close()
    check_partition_dir(pdir, INTERVAL, exact_indexes=False)
