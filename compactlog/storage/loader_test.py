"""LogLoader on its own: collaborators in, LoadedOffsets out, no Log (Kafka's LogLoader.load)."""

from __future__ import annotations

import os

from compactlog.storage.checkpoint import LeaderEpochCache, LeaderEpochCheckpointFile
from compactlog.storage.conftest import T0, batch, config, crash
from compactlog.storage.events import RECOVERY_CUT, REBUILT
from compactlog.storage.loader import LoadedOffsets, LogLoader, rebuild_producer_state
from compactlog.storage.producer_state import ProducerStateManager
from compactlog.storage.segments import LogSegments


def load(path, cfg=None, *, recovery_point=0, log_start_offset=0, clean=False, read_only=False):
    """The collaborators a Log would make, handed to the loader; (offsets, segments, state, epochs, events)."""
    segments = LogSegments()
    state = ProducerStateManager(str(path), "topic-0", read_only=read_only)
    epochs = LeaderEpochCache(LeaderEpochCheckpointFile(os.path.join(path, "leader-epoch-checkpoint")))
    events = []
    offsets = LogLoader(str(path), cfg or config(), segments, state, epochs, clock=lambda: T0,
                        name="topic-0", recovery_point=recovery_point, log_start_offset=log_start_offset,
                        had_clean_shutdown=clean, read_only=read_only, events=events).load()
    return offsets, segments, state, epochs, events


def written(open_log, cfg=None):
    """A partition of 3 segments (offsets 0-5, 6-11, 12-14), two of them with an idempotent producer."""
    log = open_log(cfg or config())
    log.append_as_leader(batch(0, 6, producer_id=3, producer_epoch=0, base_sequence=0))
    log.roll()
    log.append_as_leader(batch(0, 6, producer_id=3, producer_epoch=0, base_sequence=6))
    log.roll()
    log.append_as_leader(batch(0, 3))
    return log


def test_an_empty_directory_loads_one_empty_segment_at_the_log_start(tmp_path):
    path = tmp_path / "topic-0"
    path.mkdir()
    offsets, segments, state, epochs, events = load(path, log_start_offset=7)
    # not a clean shutdown: the checkpointed recovery point (0) stays, as Kafka keeps it
    assert offsets == LoadedOffsets(log_start_offset=7, recovery_point=0, log_end_offset=7)
    assert segments.bases() == [7] and segments.active.size == 0 and events == []
    for seg in segments:
        seg.close_handles()


def test_a_clean_shutdown_loads_offsets_segments_and_producers(open_log, tmp_path):
    log = written(open_log)
    log.close()
    offsets, segments, state, epochs, events = load(tmp_path / "topic-0", clean=True)
    assert offsets == LoadedOffsets(0, 15, 15)
    assert segments.bases() == [0, 6, 12]
    assert state.producers[3].last_seq == 11 and state.last_map_offset == 15
    assert epochs.entries == [(0, 0)] and events == []
    for seg in segments:
        seg.close_handles()


def test_after_a_crash_the_recovery_point_is_kept_and_a_torn_tail_cut(open_log, tmp_path):
    log = written(open_log)
    log.flush()
    tail = log.active_segment.log.path
    crash(log)
    with open(tail, "ab") as f:
        f.write(batch(15, 2)[:-5])                      # a torn write after the last batch
    offsets, segments, state, epochs, events = load(tmp_path / "topic-0", recovery_point=12)
    assert offsets == LoadedOffsets(0, 12, 15)
    assert [e.kind for e in events] == [RECOVERY_CUT] and events[0].kept_at == tail + ".discarded"
    assert os.path.getsize(tail) == segments.active.size
    for seg in segments:
        seg.close_handles()


def test_read_only_loading_changes_nothing_on_disk(open_log, tmp_path):
    log = written(open_log)
    log.flush()
    crash(log)
    path = tmp_path / "topic-0"
    os.remove(path / "leader-epoch-checkpoint")
    os.truncate(path / "00000000000000000012.log", os.path.getsize(path / "00000000000000000012.log") - 3)
    before = {n: (path / n).read_bytes() for n in os.listdir(path)}
    offsets, segments, _, _, events = load(path, read_only=True)
    assert offsets.log_end_offset == 12 and [e.kind for e in events] == ["would-cut"]
    assert {n: (path / n).read_bytes() for n in os.listdir(path)} == before
    for seg in segments:
        seg.close_handles()



def test_leader_epochs_past_the_log_end_go_but_the_own_epoch_begun_at_it_stays(tmp_path):
    """Entries starting at or past the log end are dropped (Kafka's truncateFromEnd), except the
    log's own leader epoch begun at the log end before its first record, as a partition is created
    (Kafka drops it and its makeLeader writes it back): the file is left as it is."""
    path = tmp_path / "topic-0"
    path.mkdir()
    (path / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    before = os.stat(path / "leader-epoch-checkpoint").st_mtime_ns
    _, _, _, epochs, _ = load(path, clean=True)
    assert epochs.entries == [(0, 0)]
    assert os.stat(path / "leader-epoch-checkpoint").st_mtime_ns == before
    # another epoch last, begun at the log end (a Kafka broker's makeLeader before it stopped):
    # every entry from the log end goes, as Kafka's loader drops them
    (path / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n4 0\n")
    _, _, _, epochs, _ = load(path, clean=True)
    assert epochs.entries == []
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n0\n"

def test_an_unreadable_leader_epoch_checkpoint_is_rebuilt_and_reported(open_log, tmp_path):
    log = written(open_log)
    log.close()
    path = tmp_path / "topic-0"
    (path / "leader-epoch-checkpoint").write_text("garbage\n")
    offsets, segments, _, epochs, events = load(path, clean=True)
    assert epochs.entries == [(0, 0)] and [e.kind for e in events] == [REBUILT]
    assert (path / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    for seg in segments:
        seg.close_handles()


def test_rebuild_producer_state_replays_the_batches_after_the_latest_snapshot(open_log, tmp_path):
    log = written(open_log)
    log.close()
    path = tmp_path / "topic-0"
    for name in os.listdir(path):
        if name.endswith(".snapshot"):
            os.remove(path / name)
    _, segments, _, _, _ = load(path, clean=False, recovery_point=15)
    state = ProducerStateManager(str(path), "topic-0")
    rebuild_producer_state(segments, state, 9, 0, reload_from_clean_shutdown=False, now=T0)
    assert state.last_map_offset == 9 and state.producers[3].last_seq == 11   # the whole batch 6-11
    for seg in segments:
        seg.close_handles()


def test_a_full_disk_during_recovery_leaves_no_partial_discarded_file(open_log, tmp_path, monkeypatch):
    """Keeping a torn tail aside fails (ENOSPC): the load fails, nothing is cut, and no empty or
    partial ``*.log.discarded`` is left to pass for what was kept; with room again it succeeds."""
    import errno

    import pytest

    from compactlog.storage import repair

    log = written(open_log)
    log.flush()
    tail = log.active_segment.log.path
    crash(log)
    with open(tail, "ab") as f:
        f.write(batch(15, 2)[:-5])
    size = os.path.getsize(tail)

    class FullDisk:
        """A file on a disk that fills up half way through the write."""
        def __init__(self, path, mode):
            self.f = open(path, mode)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def write(self, data):
            self.f.write(data[:len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(repair, "open", FullDisk, raising=False)
    with pytest.raises(OSError) as e:
        load(tmp_path / "topic-0", recovery_point=12)
    assert e.value.errno == errno.ENOSPC
    assert not [n for n in os.listdir(tmp_path / "topic-0") if n.endswith(".discarded")]
    assert os.path.getsize(tail) == size                 # nothing cut before the bytes were kept
    monkeypatch.undo()
    offsets, segments, state, epochs, events = load(tmp_path / "topic-0", recovery_point=12)
    assert offsets.log_end_offset == 15 and os.path.getsize(tail + ".discarded") > 0
    for seg in segments:
        seg.close_handles()
