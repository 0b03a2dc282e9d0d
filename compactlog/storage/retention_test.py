"""Retention (log-cleaner.md §15): retention.ms, retention.bytes, log start offset."""

from __future__ import annotations

import os

from compactlog.storage.conftest import T0, config
from compactlog.storage.log import Log

HOUR = 3_600_000


def put(log, ts, n=1):
    keys = [b"k%d" % (log.log_end_offset + i) for i in range(n)]
    return log.append_records(keys, [b"v" * 30] * n, timestamps=[ts] * n)


def build(open_log, cfg, stamps, per_segment=3, name="topic-0"):
    """One segment per group of ``per_segment`` appends (rolled explicitly), timestamps given."""
    log = open_log(cfg, name=name)
    for i, ts in enumerate(stamps):
        if i and i % per_segment == 0:
            log.roll()
        put(log, ts)
    return log


def names(log):
    return sorted(os.listdir(log.dir))


def test_retention_ms_deletes_expired_segments_from_the_oldest(open_log, clock):
    stamps = [T0 + i * HOUR for i in range(12)]               # 4 segments of 3 records
    log = build(open_log, config(retention_ms=5 * HOUR), stamps)
    assert log.segment_bases() == [0, 3, 6, 9]
    clock.now = T0 + 2 * HOUR + 5 * HOUR                       # segment 0's largest ts is T0+2h
    assert log.delete_old_segments() == 0                      # exactly retention.ms: not breached
    clock.now += 1
    assert log.delete_old_segments() == 1
    assert log.segment_bases() == [3, 6, 9] and log.log_start_offset == 3
    assert not any(n.startswith("00000000000000000000.") for n in names(log))
    assert [r.offset for r in log.records()][0] == 3
    clock.now = T0 + 8 * HOUR + 5 * HOUR + 1
    assert log.delete_old_segments() == 2
    assert log.segment_bases() == [9] and log.log_start_offset == 9


def test_deletion_stops_at_the_first_segment_to_keep(open_log, clock):
    # segment 1 holds a far-future timestamp: it and everything after it stay
    stamps = [T0, T0, T0, T0, T0 + 1000 * HOUR, T0, T0, T0, T0, T0, T0, T0]
    log = build(open_log, config(retention_ms=HOUR, segment_ms=10**12), stamps)
    assert log.segment_bases() == [0, 3, 6, 9]
    clock.now = T0 + 10 * HOUR
    assert log.delete_old_segments() == 1
    assert log.segment_bases() == [3, 6, 9]


def test_active_segment_deleted_only_when_everything_expired_after_a_roll(open_log, clock):
    stamps = [T0 + i for i in range(7)]
    log = build(open_log, config(retention_ms=HOUR), stamps)
    assert log.segment_bases() == [0, 3, 6]
    clock.now = T0 + 2 * HOUR
    assert log.delete_old_segments() == 3
    # a new empty active segment was rolled at the log end first
    assert log.segment_bases() == [7]
    assert log.active_segment.size == 0
    assert (log.log_start_offset, log.log_end_offset) == (7, 7)
    assert list(log.records()) == []
    assert os.path.exists(os.path.join(log.dir, "00000000000000000007.log"))
    assert not any(n.startswith(("00000000000000000000.", "00000000000000000003.",
                                 "00000000000000000006.")) for n in names(log))
    # the empty active segment is never deleted
    clock.now += 10 * HOUR
    assert log.delete_old_segments() == 0
    assert put(log, clock()).first_offset == 7


def test_active_segment_kept_while_it_has_unexpired_records(open_log, clock):
    stamps = [T0, T0, T0, T0, T0, T0, T0 + 5 * HOUR]
    log = build(open_log, config(retention_ms=HOUR), stamps)
    clock.now = T0 + 3 * HOUR
    assert log.delete_old_segments() == 2
    assert log.segment_bases() == [6]


def test_segment_without_timestamps_uses_file_mtime(open_log, clock):
    log = open_log(config(retention_ms=HOUR))
    put(log, -1)
    log.roll()
    put(log, T0)
    old = log.segments[0]
    old.log.set_last_modified_ms(T0 - 5 * HOUR)
    clock.now = T0 + HOUR // 2
    assert log.delete_old_segments() == 1
    assert log.segment_bases() == [1]


def test_retention_ms_minus_one_keeps_everything(open_log, clock):
    log = build(open_log, config(retention_ms=-1), [T0] * 9)
    clock.now = T0 + 10**12
    assert log.delete_old_segments() == 0


def test_retention_bytes(open_log, clock):
    log = build(open_log, config(retention_ms=-1), [T0] * 10)   # segments 3,3,3,1 batches
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    log.config = config(retention_ms=-1, retention_bytes=total)
    assert log.delete_old_segments() == 0                   # diff 0: the first segment does not fit
    log.config = config(retention_ms=-1, retention_bytes=total - sizes[0] + 1)
    assert log.delete_old_segments() == 0                   # excess < oldest segment: kept
    log.config = config(retention_ms=-1, retention_bytes=total - sizes[0])
    assert log.delete_old_segments() == 1                   # excess == oldest segment: deleted
    assert log.segment_bases() == [3, 6, 9]


def test_retention_bytes_deletes_while_the_excess_covers_whole_segments(open_log):
    log = build(open_log, config(retention_ms=-1), [T0] * 10)
    s = [seg.size for seg in log.segments]
    # excess exactly two segments: both go
    log.config = config(retention_ms=-1, retention_bytes=sum(s) - s[0] - s[1])
    assert log.delete_old_segments() == 2
    assert log.segment_bases() == [6, 9]
    # excess smaller than the oldest segment: nothing goes
    log.config = config(retention_ms=-1, retention_bytes=sum(s[2:]) - s[2] + 1)
    assert log.delete_old_segments() == 0
    # log smaller than retention.bytes: nothing
    log.config = config(retention_ms=-1, retention_bytes=10**9)
    assert log.delete_old_segments() == 0


def test_log_start_offset_breach(open_log):
    log = build(open_log, config(retention_ms=-1), [T0] * 12)
    log.log_start_offset = 7                                 # e.g. after DeleteRecords
    assert log.delete_old_segments() == 2                    # [0,3) and [3,6) are below 7
    assert log.segment_bases() == [6, 9]
    assert log.log_start_offset == 7                         # never decreases
    assert [r.offset for r in log.records()][0] == 7
    log.log_start_offset = 9
    assert log.delete_old_segments() == 1
    assert log.segment_bases() == [9]


def test_compact_only_logs_drop_only_segments_below_the_log_start(open_log, clock):
    log = build(open_log, config(cleanup_policy="compact", retention_ms=1, retention_bytes=1),
                [T0] * 12)
    clock.now = T0 + 10**9
    assert log.delete_old_segments() == 0                    # neither time nor size applies
    log.log_start_offset = 6
    assert log.delete_old_segments() == 2
    assert log.segment_bases() == [6, 9]


def test_compact_delete_logs_get_time_retention(open_log, clock):
    log = build(open_log, config(cleanup_policy="compact,delete", retention_ms=HOUR),
                [T0] * 6 + [T0 + 10 * HOUR] * 3)
    clock.now = T0 + 2 * HOUR
    assert log.delete_old_segments() == 2
    assert log.segment_bases() == [6]


def test_retention_deletes_producer_snapshots_and_state_survives_reopen(open_log, clock):
    log = open_log(config(retention_ms=HOUR))
    for i in range(9):
        if i and i % 3 == 0:
            log.roll()
        ts = T0 + i if i < 6 else T0 + 10 * HOUR
        log.append_records([b"k%d" % i], [b"v"], timestamps=[ts], producer_id=1,
                           producer_epoch=0, base_sequence=i)
    assert [n for n in names(log) if n.endswith(".snapshot")] == \
        ["00000000000000000003.snapshot", "00000000000000000006.snapshot"]
    clock.now = T0 + 2 * HOUR
    assert log.delete_old_segments() == 2
    assert [n for n in names(log) if n.endswith(".snapshot")] == ["00000000000000000006.snapshot"]
    log.close()
    again = Log(log.dir, log.config, clock=clock, had_clean_shutdown=True, log_start_offset=6)
    assert (again.log_start_offset, again.log_end_offset) == (6, 9)
    assert again.producer_state.producers[1].last_seq == 8
    again.close()


def test_snapshot_at_the_log_start_is_dropped_when_everything_expired(open_log, clock):
    """Kafka deletes snapshots <= the log start offset on load: when retention removed every
    record, producer state does not survive a restart (the producer may start any sequence)."""
    log = open_log(config(retention_ms=HOUR))
    for i in range(3):
        log.append_records([b"k"], [b"v"], timestamps=[T0], producer_id=1, producer_epoch=0,
                           base_sequence=i)
    clock.now = T0 + 2 * HOUR
    assert log.delete_old_segments() == 1
    assert log.producer_state.producers[1].last_seq == 2     # still known in memory
    log.close()
    again = Log(log.dir, log.config, clock=clock, had_clean_shutdown=True, log_start_offset=3)
    assert again.producer_state.producers == {}
    again.append_records([b"k"], [b"v"], producer_id=1, producer_epoch=0, base_sequence=40)
    again.close()


# --- the rules alone (retention.py), over stand-in segments ----------------------------------

class _Seg:
    def __init__(self, base, size, newest):
        self.base_offset, self.size, self._newest = base, size, newest

    def largest_timestamp(self):
        return self._newest


def test_rules_are_a_prefix_below_the_high_watermark():
    from compactlog.storage import retention
    segs = [_Seg(0, 10, T0), _Seg(5, 10, T0 + HOUR), _Seg(9, 10, T0), _Seg(12, 0, T0)]
    old = lambda seg, nxt: seg._newest == T0        # noqa: E731
    # the walk stops at the first segment kept (5), even though 9 matches too
    assert [s.base_offset for s in retention.deletable_segments(segs, 12, 12, old)] == [0]
    # nothing at or above the high watermark goes
    assert retention.deletable_segments(segs, 12, 4, lambda s, n: True) == []
    # an empty active segment never goes
    assert [s.base_offset for s in retention.deletable_segments(segs, 12, 12, lambda s, n: True)] == [0, 5, 9]
    found, why = retention.retention_size_breached(segs, 12, 12, 15)
    assert [s.base_offset for s in found] == [0] and why == "retention.bytes=15 exceeded (log size 30)"
    assert retention.retention_size_breached(segs, 12, 12, -1) == ([], "")
    found, _ = retention.log_start_offset_breached(segs, 12, 12, 9)
    assert [s.base_offset for s in found] == [0, 5]
    calls = []
    assert retention.retention_ms_breached(segs, 12, 12, -1, lambda: calls.append(1)) == ([], "")
    assert calls == []                                  # time retention off: the clock is not read
    found, why = retention.retention_ms_breached(segs, 12, 12, HOUR, lambda: T0 + HOUR + 1)
    assert [s.base_offset for s in found] == [0] and why.startswith(f"retention.ms={HOUR}: ")


def test_which_rules_apply():
    from compactlog.storage import retention
    from compactlog.storage.config import LogConfig
    assert len(retention.rules(config(), 0, lambda: T0)) == 3
    assert len(retention.rules(config(cleanup_policy="compact"), 0, lambda: T0)) == 1   # log start only
    unknown = LogConfig(known=False)        # a copied Kafka dir's topic: its configs are not here
    assert retention.rules(unknown, 0, lambda: T0) == []
