"""Recovery that keeps every valid batch: a corrupt batch is set aside alone, not the rest of the log.

Kafka's recovery (LogSegment.recover, LogLoader.recoverLog) truncates a segment at its first
invalid batch and deletes every later segment: one flipped bit in an unflushed segment loses
everything after it. Here a segment is scanned as a sequence of batch boundaries:

* a batch whose CRC fails (or whose header cannot be right) but whose length leads to a valid
  batch is *quarantined* alone: its bytes are kept in ``<segment>.log.quarantined`` and its offsets
  stay a gap in the log, as compaction leaves gaps;
* when the length itself is damaged, the scan looks for the next position where a valid batch
  starts (magic 2, a plausible length, a matching CRC-32C, offsets above the last good one) and
  quarantines the bytes in between;
* a CRC-valid batch whose base offset (outside the CRC) contradicts its neighbours is repaired
  when exactly one single-byte correction makes the offsets consistent with both neighbours
  (a contiguous stretch), and quarantined otherwise;
* only bytes after which nothing valid can be found are cut (kept in ``.log.discarded``, as
  recovery's torn-tail cut).

The repaired segment is written beside the old one as ``.cleaned``, made ``.swap`` and swapped in
by the same renames as a cleaned segment (``Log.replace_segments``), so a crash at any point leaves
the old or the new segment and the loader finishes or undoes it. The result is a segment Kafka's
own loader accepts, with indexes rebuilt from its batches.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import CorruptRecordError
from ..record.batch import (LOG_OVERHEAD, MAGIC_V2, MIN_LEGACY_SIZE, RECORD_BATCH_OVERHEAD,
                            BatchHeader, compute_crc, with_base_offset)
from ..record.layout import (HEADER_SIZE_UP_TO_MAGIC, INT32, LAST_OFFSET_DELTA_OFFSET, MAGIC_OFFSET,
                             MAGIC_V0, MAGIC_V1, PREFIX as _PREFIX)
from . import files
from .events import QUARANTINE, RECOVERY_CUT, REPAIRED, WOULD_CUT, WOULD_REPAIR, DataEvent
from .fsutil import fsync_dir

INT32_MAX = 0x7FFFFFFF


@dataclass
class Span:
    position: int
    size: int
    base_offset: int
    last_offset: int
    fixed_base: int | None = None     # a repaired base offset, written into the copy


@dataclass
class Hole:
    position: int
    end: int
    reason: str


@dataclass
class RepairScan:
    """A segment as valid batches, holes to quarantine and an unreadable tail to cut (what
    ``verify --repair`` found; the cleaner's numba scan is ``cleaner.fast_path.SegmentScan``)."""
    size: int
    spans: list[Span] = field(default_factory=list)
    holes: list[Hole] = field(default_factory=list)
    tail: Hole | None = None

    @property
    def clean(self) -> bool:
        return not self.holes and self.tail is None and not any(s.fixed_base is not None for s in self.spans)

    @property
    def valid_end(self) -> int:
        return self.spans[-1].position + self.spans[-1].size if self.spans else 0

    @property
    def next_offset(self) -> int | None:
        return self.spans[-1].last_offset + 1 if self.spans else None


def _batch_problem(buf, pos: int, end: int, base_offset_floor: int, segment_base: int) -> tuple[str | None, int]:
    """(why the batch at ``pos`` is not valid or None, its total size or -1 when unknown)."""
    if pos + HEADER_SIZE_UP_TO_MAGIC > end:          # the length, epoch and magic fields
        return "incomplete batch header at the end of the segment (a torn write)", -1
    base, length, _epoch, magic = _PREFIX.unpack_from(buf, pos)
    total = length + LOG_OVERHEAD
    if length < MIN_LEGACY_SIZE:
        return f"record size {length} is smaller than the minimum record overhead ({MIN_LEGACY_SIZE})", -1
    if pos + total > end:
        return f"batch of {total} bytes runs past the end of the segment (a torn write)", -1
    if magic != MAGIC_V2:
        if magic in (MAGIC_V0, MAGIC_V1):
            from ..record.legacy import LegacyEntry
            try:
                entry = LegacyEntry.parse(buf, pos)
                entry.ensure_valid()
            except CorruptRecordError as e:
                return e.detail, total
            last = entry.last_offset
            if entry.base_offset < base_offset_floor or last - segment_base > INT32_MAX:
                return f"offset {entry.base_offset} is not above the previous batch's", total
            return None, total
        return f"invalid magic {magic}", total
    if total < RECORD_BATCH_OVERHEAD:
        return f"batch size {total} is less than the minimum {RECORD_BATCH_OVERHEAD}", total
    header = BatchHeader.unpack(buf, pos)
    computed = compute_crc(buf, pos, total)
    if header.crc != computed:
        return f"stored CRC {header.crc:#010x} does not match computed {computed:#010x}", total
    if header.last_offset_delta < 0 or header.records_count < 0:
        return "negative last offset delta or records count", total
    return None, total


def _resync(buf: np.ndarray, start: int, end: int, floor: int, segment_base: int) -> int | None:
    """The first position after ``start`` where a valid v2 batch starts (CRC checked), or None."""
    if end - start < RECORD_BATCH_OVERHEAD:
        return None
    first, last = start + 1, end - RECORD_BATCH_OVERHEAD      # where a batch may start
    magic_at = np.flatnonzero(buf[first + MAGIC_OFFSET:last + MAGIC_OFFSET + 1] == MAGIC_V2) + first
    for q in magic_at.tolist():
        base, length, _epoch, _magic = _PREFIX.unpack_from(buf, q)
        total = length + LOG_OVERHEAD
        if total < RECORD_BATCH_OVERHEAD or q + total > end:
            continue
        if base < floor or base - segment_base > INT32_MAX:
            continue
        problem, _ = _batch_problem(buf, q, end, floor, segment_base)
        if problem is None:
            return q
    return None


def scan_segment(buf, size: int, segment_base: int, prev_last: int) -> RepairScan:
    """Every batch boundary of a segment; ``prev_last``: the last valid offset before it."""
    arr = np.frombuffer(buf, dtype=np.uint8, count=size) if size else np.zeros(0, dtype=np.uint8)
    scan = RepairScan(size)
    floor = max(prev_last + 1, segment_base)
    pos = 0
    while pos < size:
        problem, total = _batch_problem(buf, pos, size, floor, segment_base)
        if problem is None:
            base, _length, _epoch, magic = _PREFIX.unpack_from(buf, pos)
            if magic == MAGIC_V2:
                (delta,) = INT32.unpack_from(buf, pos + LAST_OFFSET_DELTA_OFFSET)
                last = base + delta
            else:
                from ..record.legacy import LegacyEntry
                last = LegacyEntry.parse(buf, pos).last_offset
            scan.spans.append(Span(pos, total, base, last))
            pos += total
            continue
        nxt = pos + total if total > 0 else -1
        if nxt > 0 and (nxt == size or _batch_problem(buf, nxt, size, floor, segment_base)[0] is None):
            if nxt == size:
                scan.tail = Hole(pos, size, problem)        # the last batch: nothing after it to keep
                break
            scan.holes.append(Hole(pos, nxt, problem))
            pos = nxt
            continue
        q = _resync(arr, pos, size, floor, segment_base)
        if q is None:
            scan.tail = Hole(pos, size, problem)
            break
        scan.holes.append(Hole(pos, q, problem + " (its length does not lead to a valid batch)"))
        pos = q
    _order_offsets(buf, scan, prev_last, segment_base)
    return scan


def _order_offsets(buf, scan: RepairScan, prev_last: int, segment_base: int) -> None:
    """Offsets must increase: a batch whose base offset (outside the CRC) breaks the order is
    repaired when one single-byte change fits it between its neighbours, else quarantined."""
    spans = scan.spans
    if not spans:
        return
    keep = _longest_increasing(spans, prev_last)
    out = []
    for i, span in enumerate(spans):
        if i in keep:
            out.append(span)
            continue
        lo = max((spans[j].last_offset for j in keep if j < i), default=prev_last)
        hi = min((spans[j].base_offset for j in keep if j > i), default=None)
        fixed = _single_byte_fix(span, lo, hi)
        if fixed is not None:
            span.last_offset = fixed + (span.last_offset - span.base_offset)
            span.fixed_base = fixed
            out.append(span)
            continue
        scan.holes.append(Hole(span.position, span.position + span.size,
                               f"base offset {span.base_offset} (outside the CRC) is out of order "
                               f"with the batches around it (after {lo}"
                               + (f", before {hi})" if hi is not None else ")")))
    scan.spans = out
    scan.holes.sort(key=lambda h: h.position)


def _longest_increasing(spans: list[Span], prev_last: int) -> set[int]:
    """Indexes of the largest set of spans whose offset ranges increase in file order."""
    import bisect
    tails: list[int] = []       # smallest last offset of a chain of each length
    tail_idx: list[int] = []
    parent = [-1] * len(spans)
    for i, s in enumerate(spans):
        if s.base_offset <= prev_last:
            continue
        k = bisect.bisect_left(tails, s.base_offset)      # chains whose last offset < base
        if k > 0:
            parent[i] = tail_idx[k - 1]
        if k == len(tails):
            tails.append(s.last_offset)
            tail_idx.append(i)
        elif s.last_offset < tails[k]:
            tails[k] = s.last_offset
            tail_idx[k] = i
    keep = set()
    i = tail_idx[-1] if tail_idx else -1
    while i >= 0:
        keep.add(i)
        i = parent[i]
    return keep


def _single_byte_fix(span: Span, lo: int, hi: int | None) -> int | None:
    """The base offset one byte away from the stored one that fills the gap between the
    neighbours exactly (a contiguous stretch), when there is exactly one."""
    count = span.last_offset - span.base_offset + 1
    targets = {lo + 1} if hi is None else {lo + 1, hi - count}
    found = [t for t in targets
             if t > lo and (hi is None or t + count - 1 < hi) and _one_byte(t ^ span.base_offset)
             and (hi is None or t == lo + 1 and t + count == hi)]
    return found[0] if len(found) == 1 else None


def _one_byte(diff: int) -> bool:
    return diff != 0 and any(diff == (diff & (0xFF << (8 * b))) for b in range(8))


def numbered_path(path: str, suffix: str) -> str:
    """``path + suffix``, or ``path.<n> + suffix`` when earlier ones exist (never overwrite)."""
    out = path + suffix
    n = 1
    while os.path.exists(out):
        out = f"{path}.{n}{suffix}"
        n += 1
    return out


def kept_already(path: str, suffix: str, data: bytes) -> str | None:
    """The copy ``numbered_path`` made of exactly these bytes before (a repair killed after keeping
    them, before the segment was replaced: the bytes are still in it), else None: they are kept
    once, however often the repair is run."""
    candidate, n = path + suffix, 1
    while os.path.exists(candidate):
        try:
            if os.path.getsize(candidate) == len(data):
                with open(candidate, "rb") as f:
                    if f.read() == bytes(data):
                        return candidate
        except OSError:
            pass
        candidate = f"{path}.{n}{suffix}"
        n += 1
    return None


def keep_bytes(path: str, data: bytes, *, staged: bool = True) -> None:
    """Write bytes set aside by recovery (never overwriting: see numbered_path), fsynced. The copy
    is written whole at ``path.partial`` and renamed to ``path`` (the directory synced), so that a
    write that fails (a full disk) or a kill leaves no file at ``path``: a partial or empty copy
    would pass for what was kept (and a kill left one: the next repair kept a second copy beside
    it). A failed write removes its partial; recovery then stops before cutting anything.
    ``staged=False``: written in place (a ``.cleaned`` file, which a crash's loader removes)."""
    partial = path + ".partial" if staged else path
    try:
        with open(partial, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if staged:
            os.rename(partial, path)
            fsync_dir(os.path.dirname(path) or ".")
    except BaseException:
        for p in (partial, path):
            try:
                os.remove(p)
            except OSError:
                pass
        raise


def repair_segment(log, seg, scan: RepairScan) -> list:
    """Replace ``seg`` by a copy holding only its valid batches; the rest kept aside and reported.

    Returns the new segment list entries (the new segment, or [] when nothing valid is left).
    Read-only logs only report what a writer would do.
    """
    from .segment import LogSegment
    buf = seg.log.read(0, seg.log.size)
    events = []
    # the copies of what is set aside are written before the segment is replaced (never a byte
    # removed before it is kept), and taken back with the events that report them when anything
    # fails before the replacement: the segment then still holds those bytes, and a copy left
    # beside it was reported by verify as set aside, and doubled by the next repair (.1.quarantined)
    kept_files: list[str] = []
    cleaned = files.segment_file(log.dir, seg.base_offset, files.LOG_SUFFIX, files.CLEANED_SUFFIX)
    try:
        for hole in scan.holes + ([scan.tail] if scan.tail else []):
            is_tail = hole is scan.tail
            first = next((s.last_offset + 1 for s in reversed(scan.spans) if s.position < hole.position), None)
            last = next((s.base_offset - 1 for s in scan.spans if s.position >= hole.end), None)
            if log.read_only:
                events.append(DataEvent(WOULD_CUT, log.name, seg.log.path, hole.reason, position=hole.position,
                                        first_offset=first, last_offset=last, bytes=hole.end - hole.position))
                continue
            suffix = ".discarded" if is_tail else ".quarantined"
            data = buf[hole.position:hole.end]
            kept = kept_already(seg.log.path, suffix, data)
            if kept is None:
                kept = numbered_path(seg.log.path, suffix)
                keep_bytes(kept, data)
                kept_files.append(kept)
            events.append(DataEvent(RECOVERY_CUT if is_tail else QUARANTINE, log.name, seg.log.path,
                                    hole.reason, position=hole.position, first_offset=first,
                                    last_offset=last, bytes=hole.end - hole.position, kept_at=kept))
        for span in scan.spans:
            if span.fixed_base is not None:
                events.append(DataEvent(WOULD_REPAIR if log.read_only else REPAIRED, log.name, seg.log.path,
                                        f"base offset {span.base_offset} (outside the CRC) corrected to "
                                        f"{span.fixed_base}: one byte differed, the CRC-covered contents are intact",
                                        position=span.position, first_offset=span.fixed_base,
                                        last_offset=span.last_offset, bytes=0))
        if log.read_only:
            log.events.extend(events)
            return [seg]
        data = bytearray()
        for span in scan.spans:
            chunk = bytearray(buf[span.position:span.position + span.size])
            if span.fixed_base is not None:
                with_base_offset(chunk, 0, span.fixed_base)
            data += chunk
        for suffix in files.SEGMENT_SUFFIXES:
            stale = files.segment_file(log.dir, seg.base_offset, suffix, files.CLEANED_SUFFIX)
            if os.path.exists(stale):
                os.remove(stale)
        keep_bytes(cleaned, bytes(data), staged=False)
        new = LogSegment(log.dir, seg.base_offset, log.config, now_ms=log.clock(), suffix=files.CLEANED_SUFFIX)
        new.recover()                       # indexes rebuilt from the batches kept
        new.flush()
        fsync_dir(log.dir)
    except BaseException:
        for path in kept_files + [files.segment_file(log.dir, seg.base_offset, suffix, files.CLEANED_SUFFIX)
                                  for suffix in files.SEGMENT_SUFFIXES]:
            try:
                os.remove(path)
            except OSError:
                pass
        raise
    log.events.extend(events)
    log.replace_segments([new], [seg])
    return [new]
