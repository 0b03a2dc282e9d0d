"""A task reads the state its splits were planned in, or one as good for the query, or fails.

Planning pins a state of the partition and names, in each range, the segment file it was cut from
and the partition's planned end; tasks run later. Here a writer swaps a compacted segment in
between planning and reading (as a broker's cleaner does), with and without the log having rolled
past the planned end since. No Spark: the functions the source's tasks call.
"""

from __future__ import annotations

import os

import pytest

from compactlog.errors import LogChangedError
from compactlog.record.batch import iter_batches
from compactlog.storage import files
from compactlog.storage.conftest import Clock, config, crash
from compactlog.storage.log import Log
from compactlog.storage.segment import LogSegment
from compactlog.spark.planning import (PartitionState, ReadSettings, TopicPartition, find_partitions, make_splits,
                                       read_split)
from compactlog.storage.datadir import DataDir

KEYS = [b"a", b"b", b"c"]


def write(log, rounds: int, *, unique: bytes | None = None) -> None:
    """Single-record batches of every key, ``rounds`` times, a segment a round; then ``unique`` once."""
    for rnd in range(rounds):
        for k in KEYS:
            log.append_records([k], [b"%s%d" % (k, rnd)])
        log.roll()
    if unique is not None:
        log.append_records([unique], [b"only"])
        log.roll()
    log.append_records([KEYS[0]], [b"tail"])


def compact(log, clock) -> None:
    """What the cleaner would swap in: one segment keeping each key's last record below the active
    segment (every batch holds one record)."""
    old = list(log.segments)[:-1]
    last = {}
    for seg in old:
        for b in iter_batches(seg.log.map()):
            last[b.records()[0].key] = b.base_offset
    new = LogSegment(log.dir, old[0].base_offset, log.config, now_ms=clock(), suffix=files.CLEANED_SUFFIX,
                     new=True)
    for seg in old:
        for b in iter_batches(seg.log.map()):
            if last[b.records()[0].key] == b.base_offset:
                new.append(b.last_offset, b.max_timestamp, b.last_offset, b.raw())
    new.flush()
    log.replace_segments([new], old)


def plan(log):
    tp = TopicPartition("t", 0, log.dir)
    st = PartitionState(tp, read_committed=False)
    splits = make_splits([(st, st.log_start, st.latest)], split_bytes=1 << 20, explicit_split=False,
                         parallelism=1, max_records=None)
    st.reader.close()
    return splits, st.latest


def read(splits) -> dict:
    state = {}
    for split in splits:
        for batch in read_split(split, ReadSettings()):
            for k, v in zip(batch.column("key").to_pylist(), batch.column("value").to_pylist()):
                state[k] = v
    return state


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def log(tmp_path, clock):
    path = tmp_path / "t-0"
    path.mkdir()
    log = Log(str(path), config(cleanup_policy="compact"), clock=clock)
    write(log, 3, unique=b"z")
    yield log
    crash(log)


def test_a_state_unchanged_since_planning_is_read(log):
    splits, _ = plan(log)
    assert read(splits) == {b"a": b"tail", b"b": b"b2", b"c": b"c2", b"z": b"only"}


def test_compacted_since_planning_without_passing_the_planned_end_is_read(log, clock):
    splits, end = plan(log)
    assert all(r.file is not None and r.planned_end == end for s in splits for r in s.ranges)
    compact(log, clock)
    log.append_records([b"b"], [b"later"])       # appended, not rolled: the active segment is the same
    assert read(splits) == {b"a": b"tail", b"b": b"b2", b"c": b"c2", b"z": b"only"}


def test_compacted_after_the_log_went_past_the_planned_end_fails_the_read(log, clock):
    splits, _ = plan(log)
    log.roll()
    log.append_records([b"z"], [b"newer"])        # supersedes the planned range's only z ...
    log.roll()
    compact(log, clock)                           # ... which the cleaner then removes
    with pytest.raises(LogChangedError, match="the log changed under the read .*planned for offsets .*retry"):
        read(splits)


class _Killed(BaseException):
    pass


def test_the_partitions_of_a_topic_whose_deletion_a_kill_interrupted_are_not_found(tmp_path, monkeypatch):
    """A deletion killed after its record, before its renames, leaves the topic's live directories:
    the source leaves them out, as DataDir does (the topic is deleted), and finds the others."""
    dd = DataDir(str(tmp_path / "data"), create=True, writable=True)
    dd.create_topic("t", 2)
    dd.create_topic("u", 1)
    real_replace = os.replace

    def replace(src, dst):
        if os.path.basename(src).startswith("t-"):
            raise _Killed()
        real_replace(src, dst)
    before = [(tp.topic, tp.partition) for tp in find_partitions(dd.path)]
    with monkeypatch.context() as m:
        m.setattr("compactlog.storage.datadir.os.replace", replace)
        m.setattr(DataDir, "_undo_deletion", lambda *args: None)
        with pytest.raises(_Killed):
            dd.delete_topic("t")
    dd.abandon()
    assert before == [("t", 0), ("t", 1), ("u", 0)]
    assert os.path.isdir(os.path.join(dd.path, "t-0"))
    assert [(tp.topic, tp.partition) for tp in find_partitions(dd.path)] == [("u", 0)]
    assert find_partitions(os.path.join(dd.path, "t"), must_exist=False) == []
    assert [tp.partition for tp in find_partitions(os.path.join(dd.path, "u"))] == [0]
