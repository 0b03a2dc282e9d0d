"""Indexes are checked against the log before their first use (storage/index_check.py) and rebuilt
when they lie, even after a clean shutdown, where Kafka trusts them: no open ends in a traceback,
the log end offset comes from the batches, reads find every record, retention reads the right
timestamps."""

from __future__ import annotations

import os
import random
import struct

import pytest

from storage_support import Clock, check_partition_dir, expected_indexes, index_entries, read, \
    time_index_entries
from compactlog.storage.datadir import DataDir

T0 = 1_700_000_000_000
CONFIGS = {"segment.bytes": "2000", "index.interval.bytes": "100", "retention.ms": "3600000"}


def build(root):
    dd = DataDir(root, create=True, writable=True, clock=Clock(T0 + 10**6))
    dd.create_topic("t", 1, CONFIGS)
    log = dd.open_log("t", 0)
    for i in range(60):
        log.append_records([b"k%d" % i], [b"v%d" % i * 5], timestamps=[T0 + 1000 * i])
    expected = [(r.offset, r.key, r.value) for r in log.records()]
    bases = log.segment_bases()
    dd.close()
    return expected, bases


def reopen(root, now=T0 + 10**6):
    dd = DataDir(root, writable=True, clock=lambda: now)
    return dd, dd.open_log("t", 0)


def pfile(root, base, suffix):
    return os.path.join(root, "t-0", f"{base:020d}{suffix}")


@pytest.mark.parametrize("segment", ["first", "last"])
@pytest.mark.parametrize("garbage", ["random", "negative-position", "huge-offset", "zeros"])
def test_garbage_offset_index_after_a_clean_shutdown(tmp_path, segment, garbage):
    root = str(tmp_path / "d")
    expected, bases = build(root)
    base = bases[0] if segment == "first" else bases[-1]
    path = pfile(root, base, ".index")
    n = max(len(read(path)) // 8, 3)
    rng = random.Random(hash((segment, garbage)) & 0xFFFF)
    if garbage == "random":
        data = bytes(rng.randrange(256) for _ in range(8 * n))
    elif garbage == "negative-position":
        data = b"".join(struct.pack(">ii", i, -1000 * (i + 1)) for i in range(n))
    elif garbage == "huge-offset":
        data = b"".join(struct.pack(">ii", 0x7FFF0000 + i, 0) for i in range(n))
    else:
        data = b"\x00" * 8 * n
    with open(path, "wb") as f:
        f.write(data)
    dd, log = reopen(root)
    assert log.log_end_offset == expected[-1][0] + 1            # from the batches, not the index
    assert [(r.offset, r.key, r.value) for r in log.records()] == expected
    for off, key, value in expected[::7]:                       # lookups from every position
        r = next(iter(log.records(off)))
        assert (r.offset, r.key, r.value) == (off, key, value)
    events = [e for e in dd.data_events() if e.kind == "rebuilt"]
    assert events and events[0].file == path
    dd.close()
    exp_offsets, _ = expected_indexes(read(pfile(root, base, ".log")), base, 100)
    assert index_entries(path, base) == exp_offsets              # rebuilt on disk, as Kafka would
    check_partition_dir(os.path.join(root, "t-0"), 100, exact_indexes=False)


def test_read_only_open_rebuilds_in_memory_and_changes_nothing(tmp_path):
    root = str(tmp_path / "d")
    expected, bases = build(root)
    path = pfile(root, bases[-1], ".index")
    with open(path, "wb") as f:
        f.write(struct.pack(">ii", 5, -7) * 4)
    before = read(path)
    dd = DataDir(root)
    log = dd.open_log("t", 0)
    assert [(r.offset, r.key, r.value) for r in log.records()] == expected
    dd.close()
    assert read(path) == before


def test_lowered_time_index_entry_does_not_make_retention_delete_early(tmp_path):
    """A closed segment's newest timestamp is its time index's last entry: lowered by a flipped
    byte, retention would delete the segment too early. The check rebuilds it first."""
    root = str(tmp_path / "d")
    expected, bases = build(root)
    first = bases[0]
    path = pfile(root, first, ".timeindex")
    entries = time_index_entries(path, first)
    ts, off = entries[-1]
    with open(path, "r+b") as f:
        f.seek(12 * (len(entries) - 1))
        f.write(struct.pack(">q", T0 - 10**9))       # as if its newest record were very old
    newest_in_first = ts
    # retention of one hour: at newest + 30 min nothing in the first segment is expired yet
    dd, log = reopen(root, now=newest_in_first + 30 * 60 * 1000)
    assert log.delete_old_segments() == 0
    assert log.segment_bases()[0] == first
    assert time_index_entries(path, first)[-1] == (ts, off)     # rebuilt
    dd.close()
