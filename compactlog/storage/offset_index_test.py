"""OffsetIndex: 8-byte (relative offset, position) entries, preallocated and trimmed like AbstractIndex."""

from __future__ import annotations

import os
import struct

import pytest

from compactlog.errors import StorageError
from compactlog.storage.offset_index import OffsetIndex

BASE = 1000


def new_index(tmp_path, size=100, preallocate=True, base=BASE) -> OffsetIndex:
    return OffsetIndex(str(tmp_path / f"{base:020d}.index"), base, size, preallocate=preallocate)


def test_new_index_is_preallocated_to_size_rounded_down_to_entries(tmp_path):
    idx = new_index(tmp_path, size=100)
    assert os.path.getsize(idx.path) == 96          # floor(100 / 8) * 8
    assert idx.entries == 0 and idx.max_entries == 12
    with open(idx.path, "rb") as f:
        assert f.read() == b"\0" * 96


def test_not_preallocated_index_starts_empty(tmp_path):
    idx = new_index(tmp_path, preallocate=False)
    assert os.path.getsize(idx.path) == 0 and idx.entries == 0


def test_entries_are_relative_offset_and_position_big_endian(tmp_path):
    idx = new_index(tmp_path)
    idx.append(BASE + 3, 4730)
    idx.append(BASE + 7, 9571)
    assert os.path.getsize(idx.path) == 96           # still preallocated
    idx.trim_to_valid_size()
    idx.close()
    with open(idx.path, "rb") as f:
        raw = f.read()
    assert raw == struct.pack(">iiii", 3, 4730, 7, 9571)


def test_reopened_untrimmed_index_counts_its_zero_slots(tmp_path):
    """Kafka assumes every whole 8-byte slot of a loaded file is valid, so an untrimmed tail reads as
    (baseOffset, 0) entries and fails the sanity check (the segment is rebuilt). compactlog counts
    the zero slots instead of decoding them (a preallocated index can be 2 GiB of sparse zeros):
    the loader rebuilds such a segment all the same."""
    idx = new_index(tmp_path, size=64)
    idx.append(BASE + 5, 100)
    idx.close()                                       # not trimmed (like a crash)
    again = new_index(tmp_path, size=64, preallocate=False)
    assert again.entries == 1
    assert again.all_entries() == [(BASE + 5, 100)]
    assert again.untrimmed_slots == 7


def test_reopened_trimmed_index_and_resize_back_to_max(tmp_path):
    idx = new_index(tmp_path, size=64)
    idx.append(BASE + 5, 100)
    idx.trim_to_valid_size()
    idx.close()
    again = new_index(tmp_path, size=64, preallocate=True)   # active segment: resized back
    assert again.all_entries() == [(BASE + 5, 100)]
    assert os.path.getsize(again.path) == 64
    again.append(BASE + 9, 200)
    again.trim_to_valid_size()
    assert os.path.getsize(again.path) == 16


def test_lookup_returns_largest_offset_not_above_target(tmp_path):
    idx = new_index(tmp_path)
    for rel, pos in [(3, 100), (7, 200), (12, 300)]:
        idx.append(BASE + rel, pos)
    assert idx.lookup(BASE - 5) == (BASE, 0)         # nothing below: (baseOffset, 0)
    assert idx.lookup(BASE + 2) == (BASE, 0)
    assert idx.lookup(BASE + 3) == (BASE + 3, 100)
    assert idx.lookup(BASE + 6) == (BASE + 3, 100)
    assert idx.lookup(BASE + 7) == (BASE + 7, 200)
    assert idx.lookup(BASE + 11) == (BASE + 7, 200)
    assert idx.lookup(BASE + 10**6) == (BASE + 12, 300)
    assert idx.last_offset == BASE + 12


def test_append_must_increase_offsets(tmp_path):
    idx = new_index(tmp_path)
    idx.append(BASE + 3, 100)
    with pytest.raises(StorageError, match="no larger"):
        idx.append(BASE + 3, 200)
    with pytest.raises(StorageError):
        idx.append(BASE + 2, 200)
    assert idx.entries == 1


def test_append_outside_relative_range_is_refused(tmp_path):
    idx = new_index(tmp_path)
    with pytest.raises(StorageError):
        idx.append(BASE + 2**31, 0)
    with pytest.raises(StorageError):
        idx.append(BASE - 1, 0)
    idx.append(BASE + 2**31 - 1, 0)                  # the largest relative offset fits
    idx.close()
    again = new_index(tmp_path, preallocate=False)
    assert again.all_entries()[0] == (BASE + 2**31 - 1, 0)


def test_is_full_at_max_entries(tmp_path):
    idx = new_index(tmp_path, size=24)               # 3 entries
    for i in range(3):
        assert not idx.is_full()
        idx.append(BASE + i + 1, i * 10)
    assert idx.is_full()
    with pytest.raises(StorageError, match="full"):
        idx.append(BASE + 10, 100)


def test_truncate_to_drops_entries_at_or_above_offset(tmp_path):
    idx = new_index(tmp_path)
    for rel, pos in [(3, 100), (7, 200), (12, 300)]:
        idx.append(BASE + rel, pos)
    idx.truncate_to(BASE + 7)                        # an exact match is dropped too
    assert idx.all_entries() == [(BASE + 3, 100)]
    idx.truncate_to(BASE + 100)                      # nothing above: no change
    assert idx.all_entries() == [(BASE + 3, 100)]
    idx.append(BASE + 5, 150)                        # appends continue after the kept entries
    idx.trim_to_valid_size()
    idx.close()
    with open(idx.path, "rb") as f:
        assert f.read() == struct.pack(">iiii", 3, 100, 5, 150)


def test_reset_empties_and_keeps_room_without_preallocating(tmp_path):
    idx = new_index(tmp_path, size=40)
    idx.append(BASE + 1, 10)
    idx.append(BASE + 2, 20)
    idx.reset()
    assert idx.entries == 0 and idx.max_entries == 5
    assert os.path.getsize(idx.path) == 0            # emptied, not preallocated again
    idx.append(BASE + 3, 30)                         # the file grows with its entries
    idx.trim_to_valid_size()
    with open(idx.path, "rb") as f:
        assert f.read() == struct.pack(">ii", 3, 30)
    idx.reset()
    idx.reset()                                      # an empty file: nothing to do
    assert os.path.getsize(idx.path) == 0 and idx.max_entries == 5
    idx.close()


def test_sanity_check(tmp_path):
    path = tmp_path / f"{BASE:020d}.index"
    path.write_bytes(struct.pack(">ii", 1, 0) + b"\0\0\0")    # not a multiple of 8
    with pytest.raises(StorageError, match="multiple of 8"):
        OffsetIndex(str(path), BASE, 1024, preallocate=False).sanity_check()
    path.write_bytes(struct.pack(">ii", -4, 0))               # last offset below the base offset
    with pytest.raises(StorageError, match="below the base offset"):
        OffsetIndex(str(path), BASE, 1024, preallocate=False).sanity_check()
    path.write_bytes(struct.pack(">iiii", 1, 0, 4, 90))
    OffsetIndex(str(path), BASE, 1024, preallocate=False).sanity_check()


def test_ldi_poc_index_reads_as_kafka_wrote_it(tmp_path):
    from compactlog.storage.conftest import vector
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(vector("Niloufar1171+LDI-POC/__consumer_offsets-6/00000000000000000000.index"))
    idx = OffsetIndex(str(path), 0, 10485760, preallocate=False)
    assert idx.all_entries() == [(3, 4730), (7, 9571)]
    assert idx.lookup(5) == (3, 4730)
    idx.sanity_check()
