"""Writes a cleaned segment the way Kafka's LogSegment.append indexes it, as a replacement staged
by the plan's segment source (``.cleaned`` files in a local partition directory)."""

from __future__ import annotations

import struct
import time

from ..errors import StorageError
from ..storage import files
from ..storage.segment_source import SegmentSource, as_source
from ..storage.txn_index import AbortedTxn

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
INT_MAX = 2147483647


class CleanedSegmentWriter:
    def __init__(self, source: SegmentSource | str, base_offset: int, *, index_interval_bytes: int,
                 max_index_size: int, members=None):
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_offset_entries = max_index_size // 8
        self.max_time_entries = max_index_size // 12
        self._out = as_source(source).create_replacement(base_offset, members)
        self.size = 0
        self.bytes_since_last_index_entry = 0
        self.offset_entries: list[tuple[int, int]] = []
        self.time_entries: list[tuple[int, int]] = []
        self.max_ts = -1
        self.offset_of_max_ts = base_offset
        self.aborted: list[AbortedTxn] = []
        self.io_seconds = 0.0   # time in write() and fsync(), for the benchmark's breakdown

    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_ts: int,
               data: bytes) -> None:
        if not data:
            return
        t0 = time.perf_counter()
        physical_position = self.size
        rel = largest_offset - self.base_offset
        if not 0 <= rel <= INT_MAX:
            raise StorageError(f"cleaned segment {self.base_offset}: offset {largest_offset} overflows "
                               f"the 32-bit relative range")
        self._out.append(data)
        self.io_seconds += time.perf_counter() - t0
        self.size += len(data)
        if largest_timestamp > self.max_ts:
            self.max_ts, self.offset_of_max_ts = largest_timestamp, shallow_offset_of_max_ts
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self._append_offset_entry(largest_offset, physical_position)
            self._maybe_append_time_entry(self.max_ts, self.offset_of_max_ts)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += len(data)

    def _append_offset_entry(self, offset: int, position: int) -> None:
        if len(self.offset_entries) >= self.max_offset_entries:
            raise StorageError(f"cleaned segment {self.base_offset}: offset index is full")
        if self.offset_entries and offset <= self.offset_entries[-1][0]:
            raise StorageError(f"cleaned segment {self.base_offset}: index offset {offset} not increasing")
        self.offset_entries.append((offset, position))

    def _maybe_append_time_entry(self, ts: int, offset: int, skip_full_check: bool = False) -> None:
        if not skip_full_check and len(self.time_entries) >= self.max_time_entries - 1:
            raise StorageError(f"cleaned segment {self.base_offset}: time index is full")
        last_ts = self.time_entries[-1][0] if self.time_entries else -1
        if ts > last_ts:
            self.time_entries.append((ts, offset))

    def add_aborted_txn(self, txn: AbortedTxn) -> None:
        self.aborted.append(txn)

    def finish(self, mtime_ms: int | None = None) -> None:
        """Final time-index entry, index files written trimmed, everything fsynced."""
        t0 = time.perf_counter()
        self._maybe_append_time_entry(self.max_ts, self.offset_of_max_ts, skip_full_check=True)
        indexes = [
            (files.INDEX_SUFFIX, b"".join(_OFFSET_ENTRY.pack(o - self.base_offset, p) for o, p in self.offset_entries)),
            (files.TIME_INDEX_SUFFIX, b"".join(_TIME_ENTRY.pack(t, o - self.base_offset) for t, o in self.time_entries)),
        ]
        if self.aborted:       # no empty .txnindex: Kafka's TransactionIndex creates its file on the first entry
            indexes.append((files.TXN_INDEX_SUFFIX, b"".join(t.encode() for t in self.aborted)))
        self._out.finish(indexes, mtime_ms)
        self.io_seconds += time.perf_counter() - t0

    @property
    def staged(self) -> dict | None:
        """What the source's replacement describes for its commit (None: nothing to describe)."""
        return getattr(self._out, "descriptor", None)

    def abort(self) -> None:
        self._out.abort()


class DryRunWriter:
    """Counts what a cleaned segment would hold, writes nothing (for explain)."""

    def __init__(self, base_offset: int):
        self.base_offset = base_offset
        self.size = 0
        self.aborted: list[AbortedTxn] = []
        self.io_seconds = 0.0

    def append(self, largest_offset, largest_timestamp, shallow_offset_of_max_ts, data) -> None:
        self.size += len(data)

    def finish(self, mtime_ms=None) -> None:
        pass

    def abort(self) -> None:
        pass
