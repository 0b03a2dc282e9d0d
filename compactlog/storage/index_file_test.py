"""IndexFile.entry_bytes: the bytes read at load handed to the index check, with entries added,
truncated or reset since then accounted for."""

from __future__ import annotations

import struct

import pytest

from compactlog.storage.offset_index import OffsetIndex
from compactlog.storage.time_index import TimeIndex

BASE = 1000


def encoded(index) -> bytes:
    return b"".join(index._encode(e) for e in index.all_entries())


def offset_index(tmp_path, entries, *, read_only=False) -> OffsetIndex:
    path = tmp_path / f"{BASE:020d}.index"
    path.write_bytes(b"".join(struct.pack(">ii", off - BASE, pos) for off, pos in entries) + b"\0" * 16)
    return OffsetIndex(str(path), BASE, 1 << 12, preallocate=not read_only, read_only=read_only)


@pytest.mark.parametrize("read_only", [False, True])
def test_entry_bytes_are_the_loaded_bytes_plus_entries_added_since(tmp_path, read_only):
    idx = offset_index(tmp_path, [(1005, 0), (1010, 4096), (1020, 8192)], read_only=read_only)
    assert idx.untrimmed_slots == 2
    idx.append(1030, 12288)
    want = encoded(idx)
    assert idx.entry_bytes() == want
    assert idx.entry_bytes() == want          # handed over once; later calls encode the entries


@pytest.mark.parametrize("read_only", [False, True])
def test_entry_bytes_after_truncation_and_appends(tmp_path, read_only):
    idx = offset_index(tmp_path, [(1005, 0), (1010, 4096), (1020, 8192)], read_only=read_only)
    idx.truncate_to(1010)
    idx.append(1015, 5000)
    assert [e[0] for e in idx.all_entries()] == [1005, 1015]
    assert idx.entry_bytes() == encoded(idx)


def test_entry_bytes_after_reset(tmp_path):
    idx = offset_index(tmp_path, [(1005, 0), (1010, 4096)])
    idx.reset()
    assert idx.entry_bytes() == b""
    idx.append(1001, 100)
    assert idx.entry_bytes() == encoded(idx) == struct.pack(">ii", 1, 100)


def test_time_index_entry_bytes(tmp_path):
    path = tmp_path / f"{BASE:020d}.timeindex"
    path.write_bytes(struct.pack(">qi", 50, 3) + struct.pack(">qi", 70, 9))
    idx = TimeIndex(str(path), BASE, 1 << 12, preallocate=False)
    idx.maybe_append(90, 1012)
    assert idx.entry_bytes() == encoded(idx) == path.read_bytes()
