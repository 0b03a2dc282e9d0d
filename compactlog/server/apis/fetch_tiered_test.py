"""Fetch of a tiered partition while its segments move to the remote tier (local retention of copied
segments moves the local log start under a reader): an offset never skipped. The remote log
manager over a local-directory store, a real log, the fetch path's own functions."""

from __future__ import annotations

import types

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.record.batch import iter_batches
from compactlog.server.apis.fetch import BelowLocalLog, _read_one, read_partition, read_remote
from compactlog.storage.config import BrokerConfig
from compactlog.storage.conftest import local_tier_manager, local_tier_props
from compactlog.storage.datadir import DataDir


@pytest.fixture
def tiered(tmp_path):
    props = local_tier_props(str(tmp_path / "bucket"))
    dd = DataDir(str(tmp_path / "data"), broker=BrokerConfig(props), create=True, writable=True)
    dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "400",
                             "local.retention.bytes": "0", "retention.ms": "-1"})
    rm = local_tier_manager(dd, props)
    yield dd, rm
    rm.close()
    dd.close()


def produce(log, start: int, n: int) -> None:
    for i in range(start, start + n):
        log.append_records([b"k%d" % i], [b"value-%05d" % i + b"." * 40])


def first_offset(pr) -> int:
    data = pr.records if isinstance(pr.records, bytes) else pr.records.read()
    return next(r.offset for b in iter_batches(data) for r in b.records())


def copy_and_trim(dd, rm, log) -> None:
    rm.copy_partition(log)
    dd.delete_old_segments(log)


def test_segments_copied_between_the_remote_read_and_the_local_one_are_read_remotely(tiered, monkeypatch):
    dd, rm = tiered
    log = dd.open_log("t", 0)
    produce(log, 0, 20)
    copy_and_trim(dd, rm, log)
    remote_end = log.highest_remote_offset
    produce(log, 20, 20)                    # local segments above the remote tier, not copied yet
    assert log.local_log_start_offset == remote_end + 1
    real = rm.fetch
    calls = []

    def racing(plog, offset, *a):
        calls.append(offset)
        if len(calls) == 1:
            # nothing remote at or past the offset (as for a compacted-away remote tail), and the
            # copy task and local retention run before the local read
            copy_and_trim(dd, rm, plog)
            assert plog.local_log_start_offset > remote_end + 1
            return types.SimpleNamespace(continue_local=True, next_offset=remote_end + 1, records=b"",
                                         aborted=None)
        return real(plog, offset, *a)
    monkeypatch.setattr(rm, "fetch", racing)
    pr = read_remote(rm, log, remote_end, 100_000, True, False, 1 << 30, [False])
    assert first_offset(pr) == remote_end + 1       # not the new local log start
    assert calls == [remote_end, remote_end + 1]


def test_a_local_read_below_the_local_log_start_goes_to_the_remote_tier(tiered):
    dd, rm = tiered
    log = dd.open_log("t", 0)
    produce(log, 0, 40)
    rm.copy_partition(log)
    first_local = log.local_log_start_offset
    offset = first_local + 1                       # chosen local, then trimmed under the reader
    dd.delete_old_segments(log)
    assert log.local_log_start_offset > offset
    with pytest.raises(BelowLocalLog):
        read_partition(log, offset, 100_000, True, False, 1 << 30, tiered=True)
    state = types.SimpleNamespace(remote=rm, log=lambda topic, p: log)
    part = types.SimpleNamespace(partition=0, fetch_offset=offset, current_leader_epoch=-1)
    assert first_offset(_read_one(state, "t", part, 100_000, True, False, 1 << 30, [False])) == offset


class _TrimmedFirst:
    """A log's lock whose first acquisition lets local retention run first: the copied segments
    trimmed between the fetch's choice of the local log and its read under the lock."""

    def __init__(self, real, trim):
        self.real, self.trim, self.fired = real, trim, False

    def acquire(self, blocking=True, timeout=-1):
        if not self.fired:
            self.fired = True
            self.trim()
        return self.real.acquire(blocking, timeout)

    def release(self):
        self.real.release()

    def __enter__(self):
        self.acquire()
        return self

    def __exit__(self, *exc):
        self.release()


def test_a_local_read_whose_segment_is_trimmed_before_it_holds_the_lock(tiered, monkeypatch):
    dd, rm = tiered
    log = dd.open_log("t", 0)
    produce(log, 0, 40)
    rm.copy_partition(log)
    offset = log.local_log_start_offset + 1         # local when the fetch looks
    monkeypatch.setattr(log, "lock", _TrimmedFirst(log.lock, lambda: dd.delete_old_segments(log)))
    state = types.SimpleNamespace(remote=rm, log=lambda topic, p: log)
    part = types.SimpleNamespace(partition=0, fetch_offset=offset, current_leader_epoch=-1)
    pr = _read_one(state, "t", part, 100_000, True, False, 1 << 30, [False])
    assert log.local_log_start_offset > offset
    assert first_offset(pr) == offset               # from the remote tier, nothing skipped
