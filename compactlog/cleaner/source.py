"""A read-only view of a partition's segments, for the code that runs inside a cleaning task.

Every byte is read through the plan's segment source (``storage/segment_source.py``): the local
directory, or any store a Spark task can reach; this module names no file.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from ..errors import CorruptRecordError
from ..record.batch import iter_batches
from ..storage import files
from ..storage.index_check import SegmentLayout, walk_segment
from ..storage.segment_source import SegmentSource, as_source
from ..storage.txn_index import TransactionIndex, collect_aborted
from . import validate
from .fast_path import ScanScratch

_OFFSET_ENTRY = struct.Struct(">ii")


@dataclass(frozen=True)
class SegmentInfo:
    """What the planner knows of a segment before cleaning (sizes are pre-cleaning)."""
    base_offset: int
    log_bytes: int
    offset_index_bytes: int
    time_index_bytes: int
    mtime_ms: int


class SourceSegment:
    """One segment as a cleaning task reads it: nothing is used before ``validate`` checked it
    (see validate.py); ``max_message_bytes`` bounds what a compressed batch may inflate to."""

    def __init__(self, source: SegmentSource | str, info: SegmentInfo, max_message_bytes: int | None = None):
        self.source = source = as_source(source)
        self.info = info
        self.base_offset = info.base_offset
        self.size = info.log_bytes
        # names for messages only: the bytes come from the source
        self.path = source.location(info.base_offset, files.LOG_SUFFIX)
        self.index_path = source.location(info.base_offset, files.INDEX_SUFFIX)
        self.txn_index = TransactionIndex(source.location(info.base_offset, files.TXN_INDEX_SUFFIX),
                                          info.base_offset)
        self.max_message_bytes = max_message_bytes
        self._buffer = None
        self._index: list[tuple[int, int]] | None = None
        self._layout: SegmentLayout | None = None
        self._structure_checked = False
        self._crc_from = info.log_bytes   # CRCs verified for every batch from here to the end
        self._txn_raw: bytes | None = None
        self._txn_loaded = False
        self.cached_digests = None   # key digests the map phase computed, for the rewrite
        self.digest_room = 0         # bytes of digests the map phase may keep for the rewrite
        self.scan_scratch = None     # fast_path.ScanScratch: the scanner's matrices, its log's

    @property
    def buffer(self):
        if self._buffer is None:
            self._buffer = self.source.read_segment(self.base_offset, self.size)
        return self._buffer

    def layout(self) -> SegmentLayout:
        """The batch headers of the whole file (lengths only; one numba walk, cached)."""
        if self._layout is None:
            self._layout = walk_segment(self.buffer, self.base_offset)
        return self._layout

    def check_structure(self, next_base: int | None) -> None:
        """The structure and offsets of the whole segment, from its batch headers (once)."""
        if not self._structure_checked:
            validate.check_layout(self.path, self.layout(), next_base)
            self._structure_checked = True

    def validate(self, next_base: int | None, from_position: int = 0) -> None:
        """Check the structure and offsets of the whole segment (once) and the CRC of every batch
        from ``from_position`` on (each batch once per round); raises on the first violation."""
        self.check_structure(next_base)
        if from_position < self._crc_from:
            validate.check_crcs(self.path, self.buffer, self.layout(), from_position, self._crc_from)
            self._crc_from = from_position

    def txn_index_bytes(self) -> bytes:
        """The ``.txnindex`` bytes, read once: every check of the file and its entries use them."""
        if self._txn_raw is None:
            self._txn_raw = self.source.read_index(self.base_offset, files.TXN_INDEX_SUFFIX) or b""
        return self._txn_raw

    def txn_entries(self) -> list:
        """The ``.txnindex`` entries, decoded from ``txn_index_bytes`` (an unknown version field is
        reported here, before any check of the entries)."""
        if not self._txn_loaded:
            self.txn_index.load(self.txn_index_bytes())
            self._txn_loaded = True
        return self.txn_index.entries()

    def index_entries(self) -> list[tuple[int, int]]:
        """The offset index, checked against the batches before it is trusted (a flipped entry
        would make the map start past records it must see)."""
        if self._index is None:
            raw = self.source.read_index(self.base_offset, files.INDEX_SUFFIX) or b""
            validate.check_offset_index_of(self, raw)
            raw = raw[:len(raw) - len(raw) % 8]
            self._index = [(self.base_offset + r, p) for r, p in _OFFSET_ENTRY.iter_unpack(raw)]
        return self._index

    def index_position(self, offset: int) -> int:
        """Position of the offset-index entry with the largest offset <= ``offset`` (0 if none)."""
        entries = self.index_entries()
        i = bisect.bisect_right(entries, (offset, float("inf"))) - 1
        return entries[i][1] if i >= 0 else 0

    def batches(self, start_position: int = 0):
        try:
            yield from iter_batches(self.buffer, start_position, self.size,
                                    max_message_bytes=self.max_message_bytes)
        except CorruptRecordError as e:
            raise e.located(file=self.path) from None

    def read_next_offset(self) -> int:
        entries = self.index_entries()
        start = entries[-1][1] if entries else 0
        last = None
        for b in self.batches(start):
            last = b.next_offset
        return last if last is not None else self.base_offset

    def release(self) -> None:
        """Unmap a mapped segment (mapped again on its next use), keeping what was learnt of it;
        bytes fetched from a store are kept (fetching them again costs more than holding them)."""
        if self._buffer is not None and hasattr(self._buffer, "close"):
            try:
                self._buffer.close()
            except BufferError:
                pass   # a batch view still refers to it; the mapping goes with it
            self._buffer = None

    def close(self) -> None:
        self.release()
        self._buffer = None


class SourceLog:
    def __init__(self, source: SegmentSource | str, segments: list[SegmentInfo],
                 max_message_bytes: int | None = None):
        self.source = source = as_source(source)
        self.segments = [SourceSegment(source, s, max_message_bytes) for s in segments]
        self.bases = [s.base_offset for s in self.segments]
        # one set of scan matrices for every scan of the log's segments (fast_path.ScanScratch)
        self.scan_scratch = ScanScratch()
        for seg in self.segments:
            seg.scan_scratch = self.scan_scratch

    def segments_in_range(self, start: int, end: int) -> list[SourceSegment]:
        if start >= end:
            return []
        i = max(bisect.bisect_right(self.bases, start) - 1, 0)
        j = bisect.bisect_left(self.bases, end)
        return self.segments[i:j]

    def collect_aborted(self, start: int, upper_bound: int):
        """Kafka's collectAbortedTransactions; every txn index consulted is first checked against
        its segment's markers (the rewrite checks them again with the producers' history)."""
        i = bisect.bisect_right(self.bases, start) - 1
        if i < 0:
            return []
        return collect_aborted(self._checked_txn_indexes(self.segments[i:]), start, upper_bound)

    def _checked_txn_indexes(self, segments):
        """The segments' txn indexes, each checked when the walk reaches it."""
        for seg in segments:
            if seg.txn_entries():
                seg.check_structure(self.next_base(seg))   # a bad base offset is named as such
                validate.check_txn_index_of(seg, self.next_base(seg), None)
            yield seg.txn_index

    def next_base(self, seg: SourceSegment) -> int | None:
        i = bisect.bisect_right(self.bases, seg.base_offset)
        return self.bases[i] if i < len(self.bases) else None

    def close(self) -> None:
        for s in self.segments:
            s.close()
        self.scan_scratch.release()
