"""The sparse offset index (``.index``): 8-byte entries (relative offset, position)."""

from __future__ import annotations

import bisect
import struct

from .index_file import IndexFile

_ENTRY = struct.Struct(">ii")


class OffsetIndex(IndexFile):
    entry_size = 8

    def _decode(self, raw: bytes) -> list[tuple[int, int]]:
        return [(self.base_offset + rel, pos) for rel, pos in _ENTRY.iter_unpack(raw)]

    def _encode(self, entry: tuple[int, int]) -> bytes:
        return _ENTRY.pack(entry[0] - self.base_offset, entry[1])

    @property
    def last_offset(self) -> int:
        return self._entries[-1][0] if self._entries else self.base_offset

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise self.corrupt(f"attempt to append to a full index (size = {self.entries})")
        if self._entries and offset <= self._entries[-1][0]:
            raise self.corrupt(
                f"attempt to append an offset ({offset}) no larger than the last offset appended "
                f"({self._entries[-1][0]})")
        rel = offset - self.base_offset
        if not 0 <= rel <= 0x7FFFFFFF:
            raise self.corrupt(f"offset {offset} is out of the relative range of base offset {self.base_offset}")
        self._write_entry((offset, position))

    def lookup(self, target: int) -> tuple[int, int]:
        """The entry with the largest offset <= target, or (base offset, 0)."""
        i = bisect.bisect_right(self._entries, (target, float("inf"))) - 1
        if i < 0:
            return self.base_offset, 0
        return self._entries[i]

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        i = bisect.bisect_left(self._entries, (offset, -1))
        self.truncate_entries(i)

    def sanity_check(self) -> None:
        if self.length % self.entry_size:
            raise self.corrupt(f"index file size {self.length} is not a multiple of {self.entry_size}")
        if self._entries and self._entries[-1][0] < self.base_offset:
            raise self.corrupt(f"last offset {self._entries[-1][0]} is below the base offset {self.base_offset}")
