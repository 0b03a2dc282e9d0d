"""TimeIndex: 12-byte (timestamp, relative offset) entries, Kafka's TimeIndex rules."""

from __future__ import annotations

import os
import struct

import pytest

from compactlog.errors import StorageError
from compactlog.storage.conftest import vector
from compactlog.storage.time_index import TimeIndex

BASE = 500


def new_index(tmp_path, size=120, preallocate=True, base=BASE) -> TimeIndex:
    return TimeIndex(str(tmp_path / f"{base:020d}.timeindex"), base, size, preallocate=preallocate)


def test_preallocated_to_whole_entries(tmp_path):
    idx = new_index(tmp_path, size=100)
    assert os.path.getsize(idx.path) == 96           # floor(100 / 12) * 12
    assert idx.entries == 0
    assert idx.last_entry() == (-1, BASE)


def test_entries_format_and_trim(tmp_path):
    idx = new_index(tmp_path)
    idx.maybe_append(1_000, BASE + 3)
    idx.maybe_append(2_000, BASE + 9)
    idx.trim_to_valid_size()
    idx.close()
    with open(idx.path, "rb") as f:
        assert f.read() == struct.pack(">qiqi", 1_000, 3, 2_000, 9)


def test_only_larger_timestamps_are_appended(tmp_path):
    idx = new_index(tmp_path)
    idx.maybe_append(1_000, BASE + 3)
    idx.maybe_append(1_000, BASE + 5)                # same timestamp: skipped
    assert idx.all_entries() == [(1_000, BASE + 3)]
    with pytest.raises(StorageError, match="timestamp"):
        idx.maybe_append(999, BASE + 6)
    with pytest.raises(StorageError, match="offset"):
        idx.maybe_append(5_000, BASE + 2)
    assert idx.all_entries() == [(1_000, BASE + 3)]


def test_full_keeps_one_slot_for_the_final_entry(tmp_path):
    idx = new_index(tmp_path, size=36)               # 3 slots: full at 2 entries
    idx.maybe_append(10, BASE + 1)
    assert not idx.is_full()
    idx.maybe_append(20, BASE + 2)
    assert idx.is_full()
    with pytest.raises(StorageError, match="full"):
        idx.maybe_append(30, BASE + 3)
    idx.maybe_append(30, BASE + 3, skip_full_check=True)
    assert idx.all_entries()[-1] == (30, BASE + 3)


def test_lookup_by_timestamp(tmp_path):
    idx = new_index(tmp_path)
    for ts, off in [(100, 2), (200, 5), (300, 9)]:
        idx.maybe_append(ts, BASE + off)
    assert idx.lookup(50) == (-1, BASE)
    assert idx.lookup(100) == (100, BASE + 2)
    assert idx.lookup(250) == (200, BASE + 5)
    assert idx.lookup(10**15) == (300, BASE + 9)


def test_truncate_to_offset(tmp_path):
    idx = new_index(tmp_path)
    for ts, off in [(100, 2), (200, 5), (300, 9)]:
        idx.maybe_append(ts, BASE + off)
    idx.truncate_to(BASE + 5)
    assert idx.all_entries() == [(100, BASE + 2)]
    idx.maybe_append(150, BASE + 4)
    assert idx.all_entries() == [(100, BASE + 2), (150, BASE + 4)]


def test_sanity_check(tmp_path):
    path = tmp_path / f"{BASE:020d}.timeindex"
    path.write_bytes(struct.pack(">qi", 5, 1) + b"\0")
    with pytest.raises(StorageError, match="multiple of 12"):
        TimeIndex(str(path), BASE, 1200, preallocate=False).sanity_check()
    path.write_bytes(struct.pack(">qiqi", 50, 1, 40, 2))
    with pytest.raises(StorageError, match="smaller than the first"):
        TimeIndex(str(path), BASE, 1200, preallocate=False).sanity_check()
    path.write_bytes(struct.pack(">qi", 50, -1))
    with pytest.raises(StorageError, match="below the base offset"):
        TimeIndex(str(path), BASE, 1200, preallocate=False).sanity_check()


def test_ldi_poc_time_index(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(vector("Niloufar1171+LDI-POC/__consumer_offsets-6/00000000000000000000.timeindex"))
    idx = TimeIndex(str(path), 0, 10485760, preallocate=False)
    assert idx.all_entries() == [(1769791783399, 3), (1769792518093, 7), (1769793578176, 12)]
    assert idx.lookup(1769792518093) == (1769792518093, 7)
    assert idx.lookup(1769792518092) == (1769791783399, 3)
    idx.sanity_check()
