"""The visible-records view: the fetch bound per isolation level, where a consumer starts,
control batches and aborted transactions dropped (Python records and Arrow columns alike)."""

from __future__ import annotations

import pytest

from compactlog.errors import OffsetOutOfRangeError
from compactlog.storage.conftest import T0, config
from compactlog.storage.isolation import READ_COMMITTED, READ_UNCOMMITTED, last_fetchable_offset
from compactlog.storage.reader import PartitionReader
from compactlog.storage.visible import StartSpec


def txn(log, key, pid, **kw):
    return log.append_records([key], [b"v-" + key], producer_id=pid, producer_epoch=0, base_sequence=0,
                              transactional=True, **kw)


@pytest.fixture
def mixed(open_log):
    """0 plain, 1 aborted (marker 2), 3 committed (marker 4), 5 plain, 6 open, 7 plain."""
    log = open_log(config(segment_bytes=300))
    log.append_records([b"a"], [b"plain-0"], timestamps=[T0])
    txn(log, b"x", 7, timestamps=[T0 + 10])
    log.append_control(commit=False, producer_id=7, producer_epoch=0, timestamp=T0 + 11)
    txn(log, b"y", 8, timestamps=[T0 + 20])
    log.append_control(commit=True, producer_id=8, producer_epoch=0, timestamp=T0 + 21)
    log.append_records([b"b"], [b"plain-5"], timestamps=[T0 + 30])
    txn(log, b"z", 9, timestamps=[T0 + 40])
    log.append_records([b"c"], [b"plain-7"], timestamps=[T0 + 50])
    log.flush()
    return log, PartitionReader(log.dir)


def offsets(view, start=0, end=None):
    return [r.offset for _, recs in view.batches(start, end) for r in recs]


def test_the_bound_is_the_high_watermark_or_the_last_stable_offset(mixed):
    log, reader = mixed
    assert reader.visible().end == reader.high_watermark == 8
    assert reader.visible(READ_COMMITTED).end == reader.last_stable_offset == 6
    for committed in (False, True):   # the broker's log and the reader agree on the rule
        assert last_fetchable_offset(log, committed) == last_fetchable_offset(reader, committed)
    with pytest.raises(ValueError, match="read_uncommitted or read_committed"):
        reader.visible("read_some")


def test_batches_skip_markers_and_aborted_transactions(mixed):
    _, reader = mixed
    assert offsets(reader.visible(READ_UNCOMMITTED)) == [0, 1, 3, 5, 6, 7]
    assert offsets(reader.visible(READ_COMMITTED)) == [0, 3, 5]
    assert offsets(reader.visible(READ_COMMITTED), 1, 4) == [3]


def test_columns_are_the_same_records(mixed):
    _, reader = mixed
    for level in (READ_UNCOMMITTED, READ_COMMITTED):
        view = reader.visible(level)
        cols = [o for b in view.columns() for o in b.column("offset").to_pylist()]
        assert cols == offsets(view)
        assert view.aborted(0, view.end) == ({7: [(1, 2)]} if level == READ_COMMITTED else {})


def test_start_offsets_by_spec(mixed):
    _, reader = mixed
    view = reader.visible()
    assert view.start_offset(StartSpec("earliest"), "t-0") == 0
    assert view.start_offset(StartSpec("latest"), "t-0") == 8
    assert view.start_offset(StartSpec("offset", 5), "t-0") == 5
    assert view.start_offset(StartSpec("timestamp", T0 + 15), "t-0") == 3
    assert view.start_offset(StartSpec("timestamp", T0 + 51), "t-0") is None
    assert view.start_offset(StartSpec("max-timestamp"), "t-0") == 7
    with pytest.raises(OffsetOutOfRangeError, match=r"t-0: offset 9 is outside the log \[0, 8\]"):
        view.start_offset(StartSpec("offset", 9), "t-0")
