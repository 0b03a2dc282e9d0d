"""A tiered log whose local copy ends below its remote tier (its directory emptied, restored from an
older copy): reconciled, it continues at the remote end + 1 with the remote tier's producer state,
instead of giving new records offsets the remote tier already holds; what the local segments held
is kept aside and reported; a broker reconciles its tiered partitions before it takes requests."""

from __future__ import annotations

import os
import shutil

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.errors import OutOfOrderSequenceError
from compactlog.record.batch import iter_batches
from compactlog.storage.conftest import batch, local_tier_manager, local_tier_props
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.events import QUARANTINE

PID = 11


@pytest.fixture
def tiered(tmp_path):
    props = local_tier_props(str(tmp_path / "bucket"), 3)
    opened = []

    def open_dir(create=False):
        dd = DataDir(str(tmp_path / "data"), broker=BrokerConfig(props), create=create, writable=True)
        rm = local_tier_manager(dd, props)
        opened.append((dd, rm))
        return dd, rm

    dd, rm = open_dir(create=True)
    dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "400",
                             "local.retention.bytes": "0", "retention.ms": "-1"})
    yield open_dir, dd, rm
    for d, r in opened:
        r.close()
        d.close()


def idempotent(seq: int, n: int = 3) -> bytes:
    return batch(0, n, producer_id=PID, producer_epoch=0, base_sequence=seq)


def offsets(data: bytes) -> list[int]:
    return [r.offset for b in iter_batches(data) for r in b.records()]


def uploaded(dd, rm) -> tuple[int, int]:
    """Idempotent batches of 3 records until the remote tier holds some; (remote end, log end)."""
    log = dd.open_log("t", 0)
    for i in range(12):
        log.append_as_leader(idempotent(3 * i))
    rm.copy_partition(log)
    dd.delete_old_segments(log)
    return log.highest_remote_offset, log.log_end_offset


def test_an_emptied_local_log_continues_at_the_remote_end(tiered):
    open_dir, dd, rm = tiered
    hro, leo = uploaded(dd, rm)
    assert 0 < hro < leo - 1
    rm.close()
    dd.close()
    part = os.path.join(dd.path, "t-0")
    for name in os.listdir(part):                   # the segments gone (an emptied directory)
        if name.endswith((".log", ".index", ".timeindex", ".snapshot")):
            os.remove(os.path.join(part, name))
    dd, rm = open_dir()
    log = dd.open_log("t", 0)
    assert log.log_end_offset == 0                  # what the loader finds: no segment
    rm.reconcile_tiered_logs()
    assert log.log_end_offset == log.local_log_start_offset == hro + 1
    assert log.log_start_offset == 0
    # the producer's sequence goes on from the remote tier's last producer snapshot (what the
    # local records above it had is gone with them: the next batch after the remote end's)
    last_seq_remote = hro                           # one record per sequence number from 0
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idempotent(last_seq_remote + 4))
    info = log.append_as_leader(idempotent(last_seq_remote + 1))
    assert info.first_offset == hro + 1             # not an offset the remote tier holds
    # offset 0 still reads from the remote tier
    assert offsets(rm.read(log, 0, 300, True, False).records)[0] == 0
    # what was reconciled stays so across a restart
    rm.close()
    dd.close()
    dd, rm = open_dir()
    rm.reconcile_tiered_logs()
    assert dd.open_log("t", 0).log_end_offset == hro + 4


def test_a_local_log_restored_from_an_older_copy_is_kept_aside(tiered, tmp_path):
    open_dir, dd, rm = tiered
    log = dd.open_log("t", 0)
    log.append_as_leader(idempotent(0))
    log.flush()
    rm.close()
    dd.close()
    backup = tmp_path / "backup"
    shutil.copytree(os.path.join(dd.path, "t-0"), backup)          # an early copy of the partition
    dd, rm = open_dir()
    hro, _ = uploaded(dd, rm)
    rm.close()
    dd.close()
    part = os.path.join(dd.path, "t-0")
    shutil.rmtree(part)
    shutil.copytree(backup, part)                                   # restored: 3 records, far behind
    dd, rm = open_dir()
    log = dd.open_log("t", 0)
    assert log.log_end_offset == 3
    old = [os.path.join(part, n) for n in os.listdir(part) if n.endswith(".log")]
    old_bytes = {p: open(p, "rb").read() for p in old}
    rm.reconcile_tiered_logs()
    assert log.log_end_offset == hro + 1
    kept = [e for e in log.events if e.kind == QUARANTINE]
    assert [(e.first_offset, e.last_offset) for e in kept] == [(0, 2)]
    assert open(kept[0].kept_at, "rb").read() == old_bytes[kept[0].file]


def test_a_store_down_at_start_is_asked_once_not_per_partition(tiered, monkeypatch):
    from compactlog.storage.remote.store import StoreUnavailable
    open_dir, dd, rm = tiered
    dd.create_topic("u", 4, {"remote.storage.enable": "true"})
    rm.close()
    dd.close()
    dd, rm = open_dir()
    asked = []

    def down(*a, **k):
        asked.append(a)
        raise StoreUnavailable("connection refused")
    monkeypatch.setattr(rm.store, "get", down)
    monkeypatch.setattr(rm.store, "put_if_absent", down)
    rm.reconcile_tiered_logs()                      # five tiered partitions, one question
    assert len(asked) == 1
    assert not any(rp.ready for rp in rm.partitions.values())


def test_a_failure_part_way_takes_the_log_offline_and_the_next_start_finishes(tiered, tmp_path, monkeypatch):
    from compactlog.errors import LogOfflineError
    open_dir, dd, rm = tiered
    dd.open_log("t", 0).append_as_leader(idempotent(0))
    rm.close()
    dd.close()
    backup = tmp_path / "backup"
    shutil.copytree(os.path.join(dd.path, "t-0"), backup)
    dd, rm = open_dir()
    hro, _ = uploaded(dd, rm)
    rm.close()
    dd.close()
    part = os.path.join(dd.path, "t-0")
    shutil.rmtree(part)
    shutil.copytree(backup, part)                   # 3 records, far behind the remote tier
    dd, rm = open_dir()
    log = dd.open_log("t", 0)

    def no_space(*a):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "link", no_space)       # keeping the local segment aside fails
    rm.reconcile_tiered_logs()                      # logged, not raised: the broker starts
    assert log.offline is not None
    with pytest.raises(LogOfflineError):
        log.append_as_leader(idempotent(3))         # no append at an offset the remote tier holds
    monkeypatch.undo()
    rm.close()
    dd.close()
    dd, rm = open_dir()                             # the next start does it whole
    rm.reconcile_tiered_logs()
    assert dd.open_log("t", 0).log_end_offset == hro + 1
