"""Offline compaction's guards: keyless records counted on every path, a task that finds keyless
records the driver did not, and dry runs of ``clean --roll`` that match the real clean."""

from __future__ import annotations

import os

import pytest

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.explain import explain_partition
from compactlog.cleaner.offline import compacted_by_session, config_scope_error, count_keyless, dry_run, find_keyless
from compactlog.cleaner.rolled_view import RolledView, as_rolled
from compactlog.storage.datadir import DataDir

T0 = 1_900_000_000_000


def files_of(pdir: str) -> dict:
    out = {}
    for name in sorted(os.listdir(pdir)):
        with open(os.path.join(pdir, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_keyless_records_are_counted_on_the_fast_and_the_batch_path(tmp_path, compression):
    with DataDir(str(tmp_path), create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "delete", "segment.bytes": "400"})
        log = dd.open_log("t", 0)
        for i in range(20):
            log.append_records([b"k%d" % i, None, None], [b"v", b"w", b"x"], compression=compression)
        assert len(log.segments) > 2
        assert count_keyless(log, 0, log.log_end_offset) == (60, 40)
        assert count_keyless(log, 3, 9) == (6, 4)       # offsets 3..8: keys at 3 and 6
        assert count_keyless(log, 5, 5) == (0, 0)


def test_keyless_records_are_read_through_the_logs_segment_source(tmp_path, monkeypatch):
    """The guard reads what a clean would read, where the clean reads it: through the log's
    segment source, one read per segment in the range (none for a segment outside it)."""
    from compactlog.storage.log import Log
    from compactlog.storage.segment_source import LocalDirSource

    reads = []

    class Counting(LocalDirSource):
        def read_segment(self, base_offset, size):
            reads.append(base_offset)
            return super().read_segment(base_offset, size)

    monkeypatch.setattr(Log, "segment_source", property(lambda log: Counting(log.dir)))
    with DataDir(str(tmp_path), create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "delete", "segment.bytes": "400"})
        log = dd.open_log("t", 0)
        for i in range(20):
            log.append_records([b"k%d" % i, None, None], [b"v", b"w", b"x"])
        assert count_keyless(log, 0, log.log_end_offset) == (60, 40)
        assert reads == [s.base_offset for s in log.segments if s.size]
        reads.clear()
        assert count_keyless(log, 3, 9) == (6, 4)
        assert reads == [s.base_offset for s in log.segments_in_range(3, 9)]


def test_only_partitions_compacted_by_the_session_are_guarded(tmp_path):
    with DataDir(str(tmp_path), create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("plain", 2, {"cleanup.policy": "delete"})
        dd.create_topic("compacted", 1, {"cleanup.policy": "compact"})
        assert compacted_by_session(dd) == []
    with DataDir(str(tmp_path), writable=True, clock=lambda: T0,
                 session_configs={"cleanup.policy": "compact"}) as dd:
        assert compacted_by_session(dd) == [("plain", 0), ("plain", 1)]
        assert compacted_by_session(dd, ["compacted"]) == []
        assert config_scope_error(dd.topics(), [], False, "D") == (
            "--config without --topic would apply to every topic of D (2: compacted, plain); name the topics "
            "with --topic T (repeatable) or give --all-topics")
        assert config_scope_error(dd.topics(), ["plain"], False, "D") is None
        assert config_scope_error(dd.topics(), [], True, "D") is None
        many = [f"t{i:02d}" for i in range(25)]
        assert "t09 and 15 more);" in config_scope_error(many, [], False, "D")


def test_a_task_refuses_keyless_records_the_driver_did_not_count(tmp_path):
    """Keyless records written between the driver's count and the clean (another writer between
    the read-only check and the writer's lock) fail that partition's task; nothing changes."""
    root = str(tmp_path)
    with DataDir(root, create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "delete"})
        dd.open_log("t", 0).append_records([b"a", b"a", b"b"], [b"1", b"2", b"3"])
    with DataDir(root, clock=lambda: T0, session_configs={"cleanup.policy": "compact"}) as ro:   # the driver's count
        guarded = compacted_by_session(ro)
        assert guarded == [("t", 0)] and find_keyless(ro, guarded, roll=True) == []
    with DataDir(root, writable=True, clock=lambda: T0) as dd:   # another writer, meanwhile
        log = dd.open_log("t", 0)
        log.append_records([None], [b"late"])
        log.roll()
    with DataDir(root, writable=True, clock=lambda: T0, session_configs={"cleanup.policy": "compact"}) as dd:
        pdir = dd.open_log("t", 0).dir
        before = files_of(pdir)
        (out,) = Cleaner(dd).run(T0, force=True, refuse_keyless=frozenset(guarded))
        assert not out.cleaned and "1 records without a key would be removed" in out.error
        assert "--drop-keyless" in out.error
        assert files_of(pdir) == before
        (found,) = find_keyless(dd, guarded, roll=True)
        assert (found.records, found.keyless) == (4, 1)
        (out,) = Cleaner(dd).run(T0, force=True)           # --drop-keyless
        assert out.cleaned and out.stats.removed == {"superseded": 1, "keyless": 1}


def test_the_rolled_view_adds_an_empty_segment_at_the_log_end(tmp_path):
    with DataDir(str(tmp_path), create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "compact"})
        log = dd.open_log("t", 0)
        assert as_rolled(log) is log                       # an empty active segment is never rolled
        log.append_records([b"a"], [b"1"])
        view = as_rolled(log)
        assert isinstance(view, RolledView)
        assert [s.base_offset for s in view.segments] == [0, 1] and view.active_segment.size == 0
        assert view.segments_in_range(0, 1) == [log.segments[0]] and view.log_end_offset == 1
        assert len(log.segments) == 1                      # the log itself is not rolled


def _mixed_log(dd):
    dd.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "2000", "delete.retention.ms": "0"})
    log = dd.open_log("t", 0)
    for i in range(30):
        log.append_records([b"k%d" % (i % 7)], [b"v%d" % i * 10], compression="gzip" if i % 3 else "none")
    log.append_records([b"k1", b"k2"], [None, None])
    log.append_records([b"t1"], [b"x"], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True)
    log.append_control(commit=False, producer_id=5, producer_epoch=0)
    log.append_records([b"k3"], [b"last"])
    return log


def test_a_dry_run_of_clean_roll_matches_the_real_clean(tmp_path):
    root = str(tmp_path / "d")
    with DataDir(root, create=True, writable=True, clock=lambda: T0) as dd:
        _mixed_log(dd)
    before = {name: files_of(os.path.join(root, name)) for name in os.listdir(root)
              if os.path.isdir(os.path.join(root, name))}
    with DataDir(root, clock=lambda: T0) as ro:                # read-only, as clean --dry-run
        (ex,) = dry_run(Cleaner(ro), T0, roll=True, force=True)
        plain = explain_partition(Cleaner(ro), "t", 0, T0)
    assert {name: files_of(os.path.join(root, name)) for name in before} == before
    assert ex.rolled and ex.would_clean and not plain.rolled
    assert ex.dirty_range[1] == 35 and plain.dirty_range[1] < 35
    with DataDir(root, writable=True, clock=lambda: T0) as dd:
        log = dd.open_log("t", 0)
        log.roll()
        (out,) = Cleaner(dd).run(T0, force=True)
    s = out.stats
    assert out.cleaned and out.end_offset == ex.dirty_range[1]
    assert (s.messages_read, s.messages_written, s.bytes_read, s.bytes_written) == \
           (ex.records_read, ex.records_kept, ex.bytes_read, ex.bytes_kept)
    assert s.removed == ex.removed and {"superseded", "aborted"} <= set(ex.removed)
