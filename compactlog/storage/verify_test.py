"""verify_partition beside a writer: one pinned state checked, the writer's work in flight no problem.

A writer (a DataDir holding the data dir's lock, as a broker does) appends with an index entry per
batch right after the state verify pinned, swaps a segment, deletes a producer snapshot, or is in
the middle of writing a batch; none of it is reported. The same bytes with no writer holding the
dir are what a crashed writer left: then they are reported.
"""

from __future__ import annotations

import os
import shutil

import pytest

from compactlog.storage import files, verify
from compactlog.storage.checkpoint import OffsetCheckpointFile  # noqa: F401 - read_checkpoints uses it
from compactlog.storage.datadir import DataDir
from compactlog.storage.pinned import pin_live_segments
from compactlog.storage.segment_source import LocalDirSource

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


def pin_with(monkeypatch, pin) -> None:
    """verify pins each state through the partition's segment source: ``pin(pdir)`` instead."""
    monkeypatch.setattr(LocalDirSource, "pin", lambda source: pin(source.dir))


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
        pin_with(monkeypatch, pin_then_append)
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
        pin_with(monkeypatch, pin_then_change)
        monkeypatch.setattr(verify.os, "listdir", listdir_then_delete)
        assert problems(dd) == []
    finally:
        dd.close()


def swapping_index_reads(monkeypatch, times: float) -> list:
    """The first ``times`` index reads find their segment swapped since the pin (the same bytes in
    another file under its name, as a cleaner's swap leaves it): that state cannot be checked."""
    from compactlog.storage.pinned import PinnedSegments
    real = PinnedSegments.sidecar
    swapped = []

    def sidecar(self, i, suffix):
        if len(swapped) < times:
            path = self.segments[i].path
            shutil.copyfile(path, path + ".swap-copy")
            os.replace(path + ".swap-copy", path)
            swapped.append(path)
        return real(self, i, suffix)
    monkeypatch.setattr(PinnedSegments, "sidecar", sidecar)
    return swapped


def test_a_state_changed_before_its_indexes_were_read_is_checked_again(tmp_path, monkeypatch):
    """A swap between the pin and the index reads: the partition is checked again in a newer
    state, as the other readers pin again, and the check passes."""
    dd, _ = writer(tmp_path)
    try:
        swapped = swapping_index_reads(monkeypatch, times=5)
        assert problems(dd) == []
        assert len(swapped) == 5
    finally:
        dd.close()


def test_a_log_that_keeps_changing_fails_the_check_loudly(tmp_path, monkeypatch, capsys):
    from compactlog.cli.main import main
    from compactlog.errors import LogChangedError
    dd, _ = writer(tmp_path)
    try:
        monkeypatch.setattr(verify, "CHANGED_TIMEOUT_S", 0.3)
        swapping_index_reads(monkeypatch, times=float("inf"))
        with pytest.raises(LogChangedError, match=r"the log changed under the read \(\d+ states of it changed "
                                                  r"before each was checked whole, for [0-9.]+ s; the last: "
                                                  r"\d{20}\.log was replaced before its \.index could be read\)"):
            problems(dd)
        assert main(["--data-dir", dd.path, "verify"]) == 1
        out, err = capsys.readouterr()
        assert out == ""                        # no partial result, no summary
        assert err.startswith("error: ") and "the log changed under the read" in err and "retry" in err, err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    finally:
        dd.close()


def test_an_index_a_swap_is_renaming_into_place_is_not_missing(tmp_path, monkeypatch):
    """The last step of a swap renames the new segment's .log into place before its indexes: an
    index read between the two is still ``.index.swap``. Beside the writer that state is read
    again (no note about a missing index); after a crash the leftover is what the loader deletes,
    and the missing index is the note."""
    dd, log = writer(tmp_path)
    index = log.segments.first.offset_index.path
    pins = []

    def pin_mid_swap(pdir, **kw):
        pinned = pin_live_segments(pdir, **kw)
        pins.append(pdir)
        if len(pins) == 1:
            os.replace(index, index + files.SWAP_SUFFIX)    # the first state: the index on its way
        elif os.path.exists(index + files.SWAP_SUFFIX):
            os.replace(index + files.SWAP_SUFFIX, index)    # then the swap is done
        return pinned
    pin_with(monkeypatch, pin_mid_swap)
    try:
        assert problems(dd) == []
        assert len(pins) == 2
    finally:
        dd.close()
    pin_with(monkeypatch, pin_live_segments)
    os.replace(index, index + files.SWAP_SUFFIX)            # no writer: a crash's leftover
    found = problems(DataDir(dd.path, clock=lambda: T0))
    assert found == [f"{index}: offset index is missing: Kafka rebuilds it when it loads the log, and "
                     f"`compactlog verify --repair` rebuilds it now"], found


def test_an_index_renamed_into_place_between_the_read_and_the_look_for_its_swap_is_not_missing(
        tmp_path, monkeypatch):
    """The swap's last rename lands between the index read (no file yet) and the look for its
    ``.swap`` (none any more): the state is read again, not reported as a missing index (seen once
    in a hundred ``verify`` runs beside a cleaning broker)."""
    from compactlog.storage import pinned as pinned_module
    dd, log = writer(tmp_path)
    index = log.segments.first.offset_index.path
    raced = []

    open_regular = pinned_module.open_regular

    def open_racing_the_swap(path, *args, **kwargs):
        if path == index and not raced:
            raced.append(path)          # the read finds nothing; the rename lands right after it
            raise FileNotFoundError(2, "No such file or directory", path)
        return open_regular(path, *args, **kwargs)
    monkeypatch.setattr(pinned_module, "open_regular", open_racing_the_swap)
    try:
        assert problems(dd) == []
        assert raced == [index]
    finally:
        dd.close()


def test_an_index_a_roll_creates_after_its_log_is_looked_at_again(tmp_path, monkeypatch):
    """A segment pinned after its ``.log`` was created and before its ``.index`` (a roll in
    progress): beside the writer the note is looked at again in a newer state, where the index is
    there; nothing is reported."""
    dd, log = writer(tmp_path)
    index = log.segments.active.offset_index.path
    pins = []

    def pin_mid_roll(pdir, **kw):
        pinned = pin_live_segments(pdir, **kw)
        pins.append(pdir)
        if len(pins) == 1:
            os.replace(index, index + ".not-yet")
        elif os.path.exists(index + ".not-yet"):
            os.replace(index + ".not-yet", index)
        return pinned
    pin_with(monkeypatch, pin_mid_roll)
    try:
        assert problems(dd) == []
        assert len(pins) == 2
    finally:
        dd.close()


def test_a_batch_saying_it_holds_no_record_with_records_after_its_header(tmp_path):
    """A v2 batch whose records count was set to 0 and its CRC made right: every reader (Kafka's
    record iterator too) reads no record from it, so its records vanish without a word; the empty
    batch Kafka's cleaner keeps is the 61-byte header alone. verify names it, and does not promise
    that --repair fixes it (the repair keeps such a batch as every reader takes it)."""
    import struct

    from compactlog.record.batch import crc32c
    from compactlog.record.layout import ATTRIBUTES_OFFSET, CRC_OFFSET, RECORDS_COUNT_OFFSET
    dd, log = writer(tmp_path)
    dd.close()
    path = os.path.join(str(tmp_path), "t-0", files.filename_prefix(0) + files.LOG_SUFFIX)
    with open(path, "r+b") as f:
        raw = bytearray(f.read())
        size = struct.unpack_from(">i", raw, 8)[0] + 12          # the first batch, offset 0
        struct.pack_into(">i", raw, RECORDS_COUNT_OFFSET, 0)
        struct.pack_into(">I", raw, CRC_OFFSET, crc32c(bytes(raw[ATTRIBUTES_OFFSET:size])))
        f.seek(0)
        f.write(raw)
    checkpoints, found = verify.read_checkpoints(str(tmp_path))
    reader = DataDir(str(tmp_path))
    try:
        found += verify.verify_partition(str(tmp_path), "t", 0, reader.topic_config("t"), checkpoints)
    finally:
        reader.close()
    assert [(p.where, p.message, p.repairable) for p in found] == [
        ("position 0", f"the batch at offset 0 says it holds no record but {size - 61} bytes follow its header: "
                       f"no reader reads them", False)]
