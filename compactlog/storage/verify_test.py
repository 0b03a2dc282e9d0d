"""verify_partition beside a writer: one pinned state checked, the writer's work in flight no problem.

A writer (a DataDir holding the data dir's lock, as a broker does) appends with an index entry per
batch right after the state verify pinned, swaps a segment, deletes a producer snapshot, or is in
the middle of writing a batch; none of it is reported. The same bytes with no writer holding the
dir are what a crashed writer left: then they are reported.
"""

from __future__ import annotations

import os

from compactlog.storage import files, verify
from compactlog.storage.checkpoint import OffsetCheckpointFile  # noqa: F401 - read_checkpoints uses it
from compactlog.storage.datadir import DataDir
from compactlog.storage.pinned import pin_live_segments

T0 = 1_900_000_000_000


def writer(path) -> tuple[DataDir, object]:
    dd = DataDir(str(path), clock=lambda: T0, create=True, writable=True)
    dd.create_topic("t", 1, {"cleanup.policy": "compact", "index.interval.bytes": "1"})
    log = dd.open_log("t", 0)
    for i in range(20):
        log.append_records([b"k%d" % (i % 5)], [b"v%d" % i])
    log.roll()
    log.append_records([b"k0"], [b"v-active"])
    return dd, log


def problems(dd) -> list[str]:
    checkpoints, found = verify.read_checkpoints(dd.path)
    found += verify.verify_partition(dd.path, "t", 0, dd.topic_config("t"), checkpoints)
    return [str(p) for p in found]


def test_index_entries_appended_after_the_pinned_bytes_are_not_problems(tmp_path, monkeypatch):
    dd, log = writer(tmp_path)
    try:
        def pin_then_append(pdir, **kw):
            pinned = pin_live_segments(pdir, **kw)
            for i in range(3):          # every append writes offset- and time-index entries
                log.append_records([b"k1"], [b"after-the-pin-%d" % i], timestamps=[T0 + 1000 + i])
            return pinned
        monkeypatch.setattr(verify, "pin_live_segments", pin_then_append)
        assert problems(dd) == []
    finally:
        dd.close()


def test_a_batch_being_written_is_not_a_torn_tail_while_the_writer_runs(tmp_path):
    dd, log = writer(tmp_path)
    active = log.segments.active.log.path
    with open(active, "ab") as f:            # the first bytes of a batch the writer is writing
        f.write(b"\x00" * 8 + (500).to_bytes(4, "big") + b"\x00" * 20)
    try:
        assert problems(dd) == []
    finally:
        log.segments.active.log.truncate_to(log.segments.active.log.size)   # as the writer would go on
        dd.close()
    with open(active, "ab") as f:            # ... and what a crashed writer leaves is reported
        f.write(b"\x00" * 8 + (500).to_bytes(4, "big") + b"\x00" * 20)
    dd2 = DataDir(dd.path, clock=lambda: T0)
    found = problems(dd2)
    assert any("not a complete batch" in p for p in found), found


def test_a_swap_and_a_deleted_snapshot_during_the_check_are_not_problems(tmp_path, monkeypatch):
    dd, log = writer(tmp_path)
    try:
        pdir = log.dir
        first = log.segments.first

        def pin_then_change(pdir_, **kw):
            pinned = pin_live_segments(pdir_, **kw)
            for p in first.file_paths():          # the first segment replaced by a swap: renamed away
                if os.path.exists(p):
                    os.replace(p, p + files.DELETED_SUFFIX)
            return pinned
        snapshot = os.path.join(pdir, files.filename_prefix(log.segments.active.base_offset) + files.SNAPSHOT_SUFFIX)
        assert os.path.exists(snapshot)
        real_listdir = os.listdir

        def listdir_then_delete(path):
            names = real_listdir(path)
            if path == pdir and os.path.exists(snapshot):
                os.remove(snapshot)               # deleted by the writer after the listing
            return names
        monkeypatch.setattr(verify, "pin_live_segments", pin_then_change)
        monkeypatch.setattr(verify.os, "listdir", listdir_then_delete)
        assert problems(dd) == []
    finally:
        dd.close()
