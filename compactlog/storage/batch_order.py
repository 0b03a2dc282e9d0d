"""Where a read stops: the batch at or past its end offset must lie below its segment's bound.

A read of [start, end) walks a segment's batches and ends at the first one whose base offset is
``end`` or more (Kafka's fetch stops there at the high watermark; ``LocalLog.read_span``,
``PartitionReader``). In a sound log every batch of a segment lies below the segment's bound: the
next segment's base offset, or, for the last segment, the log end offset, which is its last
batch's next offset (Kafka's ``readNextOffset``). A batch at or above that bound means the offsets
go backwards after it (a base offset lies outside the CRC, so a damaged one passes every CRC
check): every read to the log end would stop there, short of the valid records after it, and say
nothing. ``past_bound`` names it instead (``CorruptRecordError``: Kafka's CORRUPT_MESSAGE for a
fetch, an error naming the file and position for a tool).
"""

from __future__ import annotations

import numpy as np

from ..errors import CorruptRecordError
from ..record.batch import as_u8
from ..record.layout import LENGTH_OFFSET, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from .index_check import breaks_order, walk_segment


def past_bound(buf, segment_base: int, position: int, size: int, bound: int, *, last_segment: bool,
               path: str | None = None) -> CorruptRecordError | None:
    """The error for the complete batch at ``position`` of a segment's bytes ``buf[:size]`` when
    its base offset is ``bound`` or more (None otherwise, or when no complete batch is there: the
    segment's end or a torn tail, which the walks report themselves)."""
    data = as_u8(buf)
    if position + LOG_OVERHEAD > size:
        return None
    length = int.from_bytes(bytes(data[position + LENGTH_OFFSET:position + LOG_OVERHEAD]), "big", signed=True)
    if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or position + LOG_OVERHEAD + length > size:
        return None
    base = int.from_bytes(bytes(data[position:position + 8]), "big", signed=True)
    if base < bound:
        return None
    layout = walk_segment(data, segment_base, start=position, end=size)
    last = int(layout.last[0]) if layout.batches else base
    back = np.flatnonzero(breaks_order(layout.base[1:], layout.last[:-1]))
    later = ""
    if back.size:
        j = int(back[0]) + 1
        later = (f"; the batch at position {int(layout.pos[j])} goes back to offsets "
                 f"{int(layout.base[j])}-{int(layout.last[j])}")
    what = "the log end offset" if last_segment else "the next segment's base offset"
    return CorruptRecordError(
        f"offsets {base}-{last} are at or above {what} {bound}{later}: the offsets go backwards in the "
        f"segment (a base offset is not covered by the CRC), so no read can go past this batch in order",
        file=path, position=position, offset=base, field="baseOffset")
