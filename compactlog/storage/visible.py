"""What a consumer sees of one partition: Kafka's fetch rules over a read-only ``PartitionReader``.

The broker's half of a fetch (``UnifiedLog.read`` with ``FetchIsolation``: records up to the high
watermark, or up to the last stable offset for read_committed, and ``collectAbortedTransactions``
for the aborted transactions of the range) joined to the consumer's half (``CompletedFetch``:
control batches skipped, the batches of aborted transactions dropped), and ListOffsets for where
a consumer starts (``StartSpec``). ``PartitionReader.visible(isolation_level)`` gives the view;
``consume``, the Python API (read, follow, latest, latest state) and the Spark source read
through it, as Python records a batch at a time (``batches``) or as Arrow columns (``columns``).

The aborted transactions come from ``PartitionReader.aborted_transactions``, which checks the
``.txnindex`` files against the markers first (``txn_trust``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa

from ..errors import CorruptRecordError, OffsetOutOfRangeError
from .isolation import READ_UNCOMMITTED, is_read_committed, last_fetchable_offset

# where a consumer starts (kafka-console-consumer's --from-beginning / --offset / --timestamp)
EARLIEST = "earliest"
LATEST = "latest"
OFFSET = "offset"
TIMESTAMP = "timestamp"
MAX_TIMESTAMP = "max-timestamp"

Aborted = dict[int, list[tuple[int, int]]]
"""producer id -> [(first offset, last offset)] of its aborted transactions."""


@dataclass(frozen=True)
class StartSpec:
    """Where each partition is read from: earliest, latest, an offset, the first record at or
    after a timestamp, or the record with the largest timestamp."""
    kind: str
    value: int = 0


# -- aborted transactions, as the consumer drops them ------------------------------------------

def aborted_ranges(reader, start: int, end: int) -> Aborted:
    """The aborted transactions overlapping [start, end) of ``reader``, per producer."""
    out: Aborted = {}
    for t in reader.aborted_transactions(start, end):
        out.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return out


def batch_is_aborted(batch, aborted: Aborted) -> bool:
    """A transactional data batch of an aborted transaction of its producer."""
    ranges = aborted.get(batch.producer_id)
    return ranges is not None and batch.is_transactional and \
        any(lo <= batch.base_offset <= hi for lo, hi in ranges)


def aborted_mask(batch: pa.RecordBatch, aborted: Aborted) -> np.ndarray:
    """Rows of aborted transactions in a ``read_columns`` batch: transactional data records of an
    aborted (producer, range)."""
    txn = batch.column("is_transactional").to_numpy(zero_copy_only=False)
    mask = np.zeros(batch.num_rows, dtype=bool)
    if not txn.any():
        return mask
    pid = batch.column("producer_id").to_numpy()
    ctl = batch.column("is_control").to_numpy(zero_copy_only=False)
    off = batch.column("offset").to_numpy()
    lo, hi = int(off.min()), int(off.max())
    candidates = txn & ~ctl
    for producer in np.unique(pid[candidates]).tolist():
        spans = [(a, b) for a, b in aborted.get(producer, ()) if a <= hi and b >= lo]
        if not spans:
            continue
        mine = candidates & (pid == producer)
        for a, b in spans:
            mask |= mine & (off >= a) & (off <= b)
    return mask


def drop_aborted(batch: pa.RecordBatch, aborted: Aborted) -> pa.RecordBatch:
    """``batch`` without the rows of aborted transactions (itself when there are none)."""
    if not aborted:
        return batch
    mask = aborted_mask(batch, aborted)
    return batch.filter(pa.array(~mask)) if mask.any() else batch


# -- the view ------------------------------------------------------------------------------------

class VisibleRecords:
    """One partition as a consumer at ``isolation_level`` sees it. Use
    ``PartitionReader.visible``."""

    def __init__(self, reader, isolation_level: str = READ_UNCOMMITTED):
        self.reader = reader
        self.read_committed = is_read_committed(isolation_level)

    @functools.cached_property
    def end(self) -> int:
        """The offset reads stop before: the last stable offset (read_committed) or the high
        watermark (``isolation.last_fetchable_offset``)."""
        return last_fetchable_offset(self.reader, self.read_committed)

    def start_offset(self, start: StartSpec, name: str) -> int | None:
        """The first offset to read; None when there is nothing to read (no record at or after
        the timestamp, or no record at all for the largest timestamp). An offset outside the log
        is OffsetOutOfRangeError, named after ``name`` (``topic-partition``)."""
        reader = self.reader
        if start.kind == EARLIEST:
            return reader.log_start_offset
        if start.kind == LATEST:
            return reader.log_end_offset
        if start.kind == TIMESTAMP:
            return reader.offset_for_timestamp(start.value)
        if start.kind == MAX_TIMESTAMP:
            largest = max((b.max_timestamp for b in reader.batches(reader.log_start_offset)), default=None)
            return None if largest is None else reader.offset_for_timestamp(largest)
        if not reader.log_start_offset <= start.value <= reader.log_end_offset:
            raise OffsetOutOfRangeError(f"{name}: offset {start.value} is outside the log "
                                        f"[{reader.log_start_offset}, {reader.log_end_offset}]")
        return start.value

    def aborted(self, start: int, end: int) -> Aborted:
        """The aborted transactions a read of [start, end) must drop (none for read_uncommitted)."""
        return aborted_ranges(self.reader, start, end) if self.read_committed else {}

    def batches(self, start: int, end: int | None = None) -> Iterator[tuple[object, list]]:
        """(batch, its records in [start, end)) of every data batch a consumer sees, CRC checked;
        ``end`` defaults to ``self.end``."""
        end = self.end if end is None else end
        aborted = self.aborted(start, end)
        for b in self.reader.batches(start, end):
            try:
                b.ensure_valid()
                if b.is_control or aborted and batch_is_aborted(b, aborted):
                    continue
                records = b.records()
            except CorruptRecordError as e:
                raise e.located(file=self.reader.segment_path(b.base_offset), position=b.position) from None
            if b.base_offset < start or b.last_offset >= end:      # a batch across either end
                records = [r for r in records if start <= r.offset < end]
            if records:
                yield b, records

    def columns(self, start: int | None = None, end: int | None = None, **scan) -> Iterator[pa.RecordBatch]:
        """The records of [start, end) as ``read_columns`` batches without the rows of aborted
        transactions (``scan``: ``iter_columns``' options); from the log start to ``self.end`` by
        default."""
        start = self.reader.log_start_offset if start is None else start
        end = self.end if end is None else end
        aborted = self.aborted(start, end) if start < end else {}
        for batch in self.reader.iter_columns(start, end, **scan):
            batch = drop_aborted(batch, aborted)
            if batch.num_rows:
                yield batch
