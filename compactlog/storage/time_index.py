"""The time index (``.timeindex``): 12-byte entries (timestamp, relative offset)."""

from __future__ import annotations

import bisect
import struct

from .index_file import IndexFile

_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class TimeIndex(IndexFile):
    entry_size = 12
    # one slot is kept for the final entry written when the segment becomes inactive
    reserved_slots = 1

    def _decode(self, raw: bytes) -> list[tuple[int, int]]:
        return [(ts, self.base_offset + rel) for ts, rel in _ENTRY.iter_unpack(raw)]

    def _encode(self, entry: tuple[int, int]) -> bytes:
        return _ENTRY.pack(entry[0], entry[1] - self.base_offset)

    def last_entry(self) -> tuple[int, int]:
        return self._entries[-1] if self._entries else (NO_TIMESTAMP, self.base_offset)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        if not skip_full_check and self.is_full():
            raise self.corrupt(f"attempt to append to a full time index (size = {self.entries})")
        last_ts, last_off = self.last_entry()
        if self._entries and offset < last_off:
            raise self.corrupt(f"attempt to append an offset ({offset}) smaller than the last one ({last_off})")
        if self._entries and timestamp < last_ts:
            raise self.corrupt(f"attempt to append a timestamp ({timestamp}) smaller than the last one ({last_ts})")
        if timestamp > last_ts:
            if self.length < (len(self._entries) + 1) * self.entry_size:
                self.resize((len(self._entries) + 1) * self.entry_size)
            self._write_entry((timestamp, offset))

    def lookup(self, target_ts: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= target, or (-1, base offset)."""
        i = bisect.bisect_right([e[0] for e in self._entries], target_ts) - 1
        if i < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._entries[i]

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset >= ``offset``."""
        n = 0
        for ts, off in self._entries:
            if off >= offset:
                break
            n += 1
        self.truncate_entries(n)

    def sanity_check(self) -> None:
        if self.length % self.entry_size:
            raise self.corrupt(f"time index file size {self.length} is not a multiple of {self.entry_size}")
        if self._entries:
            if self._entries[-1][0] < self._entries[0][0]:
                raise self.corrupt("last timestamp is smaller than the first")
            if self._entries[-1][1] < self.base_offset:
                raise self.corrupt(f"last offset {self._entries[-1][1]} is below the base offset {self.base_offset}")
