"""Fault injection under ``Log``'s appends (``log.py``, Kafka's UnifiedLog.append): a failed write
during an append (a full disk, EIO, a short write) leaves the log as it was: nothing acknowledged
is lost, nothing unacknowledged is served, before or after a restart; a failed fsync, or an undo
the disk refuses too, takes the log offline until the next start.

The reproduction (issue: disk full, then space freed): an index write failed after the batch was
in the ``.log``, the log end did not move, and the next append was written behind the failed
batch with the same offsets; the failed batch was served in its place, and the acknowledged one
moved to other offsets at the next start. The whole campaign, every write, fsync, truncate,
rename and create of a broker under real clients, is ``tests/faults/campaign.py``.
"""

from __future__ import annotations

import errno
import os

import pytest

from compactlog.errors import LogOfflineError, StorageError
from compactlog.storage.conftest import config
from compactlog.storage.events import OFFLINE
from compactlog.storage.log import Log


def _path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


class Disk:
    """Fails the ``nth`` call of ``name`` (os.pwrite, os.write, os.fsync, os.ftruncate) whose file
    ends with ``suffix``: ENOSPC, EIO, or a short write (half the bytes land)."""

    def __init__(self, monkeypatch, name: str, suffix: str, failure: str = "enospc", nth: int = 1,
                 times: int = 1):
        self.name, self.suffix, self.failure, self.nth, self.times = name, suffix, failure, nth, times
        self.seen = 0
        self.fired = 0
        self.real = getattr(os, name)
        monkeypatch.setattr(os, name, self._call)

    def _call(self, fd, *args):
        if _path(fd).endswith(self.suffix):
            self.seen += 1
            if self.seen >= self.nth and self.fired < self.times:
                self.fired += 1
                if self.failure == "short":
                    data, pos = args
                    return self.real(fd, data[:len(data) // 2], pos)
                code = errno.EIO if self.failure == "eio" else errno.ENOSPC
                raise OSError(code, os.strerror(code))
        return self.real(fd, *args)


def open_log(path, **kw) -> Log:
    d = path / "t-0"
    d.mkdir(exist_ok=True)
    return Log(str(d), config(index_interval_bytes=1, segment_bytes=kw.pop("segment_bytes", 1 << 20), **kw))


def put(log, tag: bytes, n: int = 3):
    return log.append_records([b"k%d" % i for i in range(n)], [tag] * n)


def served(log) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for r in log.records()]


def files_of(log) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(log.dir)):
        with open(os.path.join(log.dir, name), "rb") as f:
            out[name] = f.read()
    return out


@pytest.mark.parametrize("suffix,name,failure", [
    (".log", "pwrite", "enospc"),
    (".log", "pwrite", "eio"),
    (".log", "pwrite", "short"),
    (".index", "pwrite", "enospc"),       # the reproduction: the batch landed, its index entry not
    (".timeindex", "pwrite", "enospc"),
])
def test_a_failed_append_is_undone_and_the_next_one_is_served_where_acknowledged(
        tmp_path, monkeypatch, suffix, name, failure):
    log = open_log(tmp_path)
    put(log, b"a")
    put(log, b"b")
    before = files_of(log)
    disk = Disk(monkeypatch, name, suffix, failure)
    with pytest.raises((OSError, StorageError)):
        put(log, b"FAILED")
    assert disk.fired == 1
    assert log.log_end_offset == 6 and log.offline is None
    assert files_of(log) == before                 # byte for byte what it was
    info = put(log, b"acked")                      # the disk has room again
    assert (info.first_offset, info.last_offset) == (6, 8)
    expected = [(o, b"a") for o in range(3)] + [(o, b"b") for o in range(3, 6)] + [(o, b"acked") for o in range(6, 9)]
    assert served(log) == expected
    log.close()
    again = open_log(tmp_path)
    assert served(again) == expected and again.events == []


def test_a_failed_abort_marker_leaves_no_index_entry_and_no_completed_transaction(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    log.append_records([b"k"], [b"v"], producer_id=7, producer_epoch=0, base_sequence=0, transactional=True)
    real_append = log.active_segment.txn_index.append
    calls = []

    def failing(entry):
        calls.append(entry)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(log.active_segment.txn_index, "append", failing)
    with pytest.raises(OSError):
        log.append_control(commit=False, producer_id=7, producer_epoch=0)
    assert calls and log.log_end_offset == 1
    assert log.first_unstable_offset() == 0         # still open: nothing was applied
    monkeypatch.setattr(log.active_segment.txn_index, "append", real_append)
    log.append_control(commit=False, producer_id=7, producer_epoch=0)
    assert log.first_unstable_offset() is None
    assert [(t.first_offset, t.last_offset) for t in log.active_segment.txn_index.entries()] == [(0, 1)]


def test_a_failed_leader_epoch_checkpoint_undoes_the_append(tmp_path, monkeypatch):
    log = open_log(tmp_path, segment_bytes=1 << 20)
    put(log, b"a")
    log.leader_epoch = 5                            # the next batch starts epoch 5: the checkpoint is written
    real_replace = os.replace
    refused = []

    def replace(src, dst):
        if dst.endswith("leader-epoch-checkpoint") and not refused:
            refused.append(dst)
            raise OSError(errno.EIO, os.strerror(errno.EIO), dst)
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError):
        put(log, b"FAILED")
    assert refused and log.leader_epochs.entries == [(0, 0)] and log.log_end_offset == 3
    put(log, b"acked")
    assert log.leader_epochs.entries == [(0, 0), (5, 3)]
    assert [v for _, v in served(log)][3:] == [b"acked"] * 3


def test_an_undo_the_disk_refuses_takes_the_log_offline_until_a_restart(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    put(log, b"a")
    Disk(monkeypatch, "pwrite", ".log", "short")
    Disk(monkeypatch, "ftruncate", ".log", "eio", times=10)
    with pytest.raises(LogOfflineError, match="could not be undone"):
        put(log, b"FAILED")
    assert [e.kind for e in log.events] == [OFFLINE]
    for refused in (lambda: put(log, b"later"), lambda: served(log), lambda: log.read_span(0), log.flush):
        with pytest.raises(LogOfflineError):
            refused()
    monkeypatch.undo()
    log.close()                                     # left as it is for recovery
    again = open_log(tmp_path)                      # recovery cuts the torn tail
    assert served(again) == [(o, b"a") for o in range(3)]
    assert put(again, b"b").first_offset == 3


def test_a_failed_fsync_takes_the_log_offline(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    put(log, b"a")
    Disk(monkeypatch, "fsync", ".log", "eio")
    with pytest.raises(LogOfflineError, match="fsync failed"):
        log.flush()
    with pytest.raises(LogOfflineError):
        put(log, b"b")
    assert log.recovery_point == 0                  # not advanced past what may not be on disk
