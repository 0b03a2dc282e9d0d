"""What the cleaner checks before it trusts a segment: CRCs, offsets, indexes.

Kafka's cleaner reads batches with ``MemoryRecords.filterTo``, which never checks a CRC, and it
trusts the offset index, the batch base offsets (outside the CRC) and the ``.txnindex``: a batch
whose CRC fails is copied into the cleaned segment, a flipped base offset or index entry makes the
key map wrong and latest values disappear, a flipped txn-index entry makes aborted data look
committed. Here every segment a round reads is checked first, against one walk of its batch
headers (``index_check.walk_segment``):

* every batch read has a valid CRC-32C (one C call per batch; a batch checked in the map phase is
  not checked again in the rewrite);
* offsets strictly increase from batch to batch, every batch lies inside its segment's range
  (base offset >= the segment's base, last offset < the next segment's base and within the 32-bit
  relative range), and the walk covers the whole file;
* the offset index (which tells the map where to start) and the ``.txnindex`` (which tells the
  round what was aborted) agree with the batches (``index_check``).

Any violation raises CorruptRecordError or CorruptIndexError naming the file, byte position,
offset, field, and the value found against what was expected; the task fails and nothing of the
partition changes.
"""

from __future__ import annotations

from ..record import crc as _crc32c
import numpy as np

from ..errors import CorruptRecordError
from ..storage.index_check import (SegmentLayout, TxnCarry, breaks_order, check_offset_index,
                                   check_txn_index, previous_lasts, WALK_BAD_MAGIC, WALK_OK)

INT32_MAX = 0x7FFFFFFF


def check_layout(path: str, layout: SegmentLayout, next_base: int | None) -> None:
    """Structure and offsets of a whole segment (headers only; see the module docstring)."""
    if layout.error != WALK_OK or layout.end != layout.log_size:
        field = "magic" if layout.error == WALK_BAD_MAGIC else "length"
        raise CorruptRecordError(f"{layout.error_detail}: the segment cannot be read to its end "
                                 f"({layout.log_size} bytes)", file=path, position=layout.end, field=field)
    n = layout.batches
    if n == 0:
        return
    legacy = np.flatnonzero(layout.magic != 2)
    if legacy.size:
        i = int(legacy[0])
        raise CorruptRecordError("cleaning magic v0/v1 batches is not supported", file=path,
                                 position=int(layout.pos[i]), offset=int(layout.last[i]), field="magic")
    base, last, seg_base = layout.base, layout.last, layout.base_offset
    prev_last = previous_lasts(last, seg_base - 1)
    bad_base = breaks_order(base, prev_last)
    bad_last = (last < base) | (last - seg_base > INT32_MAX)
    if next_base is not None:
        bad_last |= last >= next_base
    bad = np.flatnonzero(bad_base | bad_last)
    if not bad.size:
        return
    i = int(bad[0])
    pos, b, lst = int(layout.pos[i]), int(base[i]), int(last[i])
    if bad_base[i]:
        expected = (f"above {int(prev_last[i])}, the previous batch's last offset" if i
                    else f"at least {seg_base}, the segment's base offset")
        raise CorruptRecordError(f"found {b}, expected {expected} (the base offset is not covered by the CRC)",
                                 file=path, position=pos, offset=b, field="baseOffset")
    if lst < b:
        raise CorruptRecordError(f"last offset {lst} below base offset {b}", file=path, position=pos, offset=b,
                                 field="lastOffsetDelta")
    if next_base is not None and lst >= next_base:
        raise CorruptRecordError(f"last offset {lst} (base offset {b}) found, expected below {next_base}, "
                                 f"the next segment's base offset", file=path, position=pos, offset=b,
                                 field="baseOffset")
    raise CorruptRecordError(f"last offset {lst} (base offset {b}) is outside the 32-bit relative range of the "
                             f"segment's base offset {seg_base}", file=path, position=pos, offset=b,
                             field="baseOffset")


def check_crcs(path: str, buf, layout: SegmentLayout, lo: int, hi: int) -> None:
    """CRC-32C of every batch starting in [lo, hi) (one C call per batch)."""
    if layout.batches == 0:
        return
    a, b = np.searchsorted(layout.pos, [lo, hi])
    if a >= b:
        return
    view = memoryview(buf)
    crc = _crc32c.crc32c
    starts = layout.pos[a:b].tolist()
    ends = (layout.pos[a:b] + layout.size[a:b]).tolist()
    stored = layout.crc[a:b].tolist()
    try:
        for i, (s, e, want) in enumerate(zip(starts, ends, stored)):
            if crc(view[s + 21:e]) != want:
                k = a + i
                raise CorruptRecordError(
                    f"stored CRC {want:#010x}, computed {crc(view[s + 21:e]):#010x}: the batch is corrupt",
                    file=path, position=s, offset=int(layout.base[k]), field="crc")
    finally:
        view.release()


def check_offset_index_of(seg, raw: bytes) -> None:
    """The offset index the map starts from (its bytes ``raw``), against the segment's batches."""
    problem = check_offset_index(raw, seg.layout(), path=seg.index_path)
    if problem is not None:
        raise problem.error()


def check_txn_index_of(seg, next_base: int | None, carry: TxnCarry | None) -> None:
    """The ``.txnindex`` (the bytes its entries are loaded from) against the segment's markers."""
    problem = check_txn_index(seg.txn_index_bytes(), seg.layout(), next_base=next_base,
                              path=seg.txn_index.path, carry=carry)
    if problem is not None:
        raise problem.error()
