"""A read-only view of one partition: its live segments, batches, records and columns.

``PartitionReader(dir)`` reads a partition directory; ``PartitionReader(source)`` any segment
source (``segment_source.py``), through which every byte is read. It never writes anything: no
recovery, no producer snapshots, no index rebuild, no clean-shutdown marker, and no renaming or
deleting of leftover files. For a directory it works out in memory which ``.log`` files Kafka's
loader would consider live (``loader.py`` and segment-files.md §10, passes 1-3): ``*.deleted`` and
``*.cleaned`` files are ignored, ``.swap`` files at or above the lowest ``.cleaned`` offset are
ignored (an interrupted split), and the remaining ``.log.swap`` files replace every segment whose
base offset falls in [lowest swap base, highest swap next offset).

A reader reads one state of the partition, whatever a writer beside it does: it pins the live
segment files when it is made (``pinned.py``: all mapped, the listing checked again) and reads only
those mappings, up to the log end they held, so a broker's swap, roll or delete meanwhile changes
nothing it returns (a read of a later state under the end offset of an earlier one would miss the
keys compacted away for records past that end). ``LogChangedError`` when the directory never holds
still long enough to be pinned.

Reads go through read-only memory maps. ``read_columns`` is the fast path: a numba kernel
(``kernels.scan_log_uncompressed``) walks all batches of a segment in one call and a gather
kernel copies keys and values into contiguous Arrow buffers, so no per-record Python runs;
compressed batches are decompressed per batch and decoded by the same record kernel, and CRCs are
checked per batch with the hardware CRC-32C (the chunk buffers and the Arrow side are
``column_chunk.py``). ``batches`` and ``records`` yield the codec's Python objects, for tools.
What a consumer sees (where it starts, the high watermark or last stable offset it stops at, no
control batches, no aborted transactions) is ``visible()``, the view of ``visible.py``.

The reader trusts no index file: it finds its starting batch by walking batch headers (cheap:
one header per batch), so an untrimmed or stale ``.index`` of a running broker does not matter.
"""

from __future__ import annotations

import bisect
import functools
from typing import Iterator

from ..record import crc as _crc32c
import numpy as np
import pyarrow as pa

from ..errors import CompactlogError, CorruptRecordError, LogChangedError, StorageError
from ..record import compression, kernels
from ..record.batch import CREATE_TIME, LOG_APPEND_TIME, Record, as_u8, iter_batches
from ..record.layout import (ATTRIBUTES_OFFSET, COMPRESSION_MASK, CONTROL_FLAG, CRC_OFFSET, LENGTH_OFFSET,
                             LOG_OVERHEAD, MAGIC_OFFSET, RECORD_BATCH_OVERHEAD, RECORDS_COUNT_OFFSET,
                             TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG)
from . import files
from .batch_order import past_bound
from .index_check import breaks_order, previous_lasts
from .txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE, LAST_OFFSET_AT as TXN_LAST_OFFSET_AT
from .txn_index import TransactionIndex, collect_aborted
# which files are live: layout.py (one rule set for readers and the loader); holding them for the
# whole read, as one state of the log: pinned.py
from .layout import SegmentFile, live_segment_files, next_offset_of
from .pinned import PinnedSegments, without_in_flight
from .segment_source import SegmentSource, as_source
# the Arrow side of a scan (schema, chunk buffers, gathers into Arrow arrays)
from .column_chunk import HEADERS_TYPE, column_schema
from .column_chunk import Chunk as _Chunk, binary_array as _binary_array, headers_array as _headers_array
from .column_chunk import to_large as _to_large
from .isolation import READ_UNCOMMITTED
from .timestamp_lookup import fetchable_answer, find_offset_by_timestamp
from .txn_trust import untrusted_txn_indexes
from .visible import VisibleRecords

K = kernels
INT64_MAX = 2**63 - 1


# --- the reader ------------------------------------------------------------------------------

def _check_first_base(seg) -> None:
    """A segment's first batch holds offsets from its base offset on (the name is the base offset
    of the batch it starts with). One below it (a segment file renamed, a stray copy) would be
    skipped: a read goes on at each segment's base, past a compaction gap, so its records would
    be missing without a word. The read stops there instead, with the file and position."""
    if seg.size < 8:
        return
    first = int.from_bytes(bytes(seg.data[0:8]), "big", signed=True)
    if first < seg.base_offset:
        raise CorruptRecordError(f"base offset {first} is below the segment's base offset {seg.base_offset}",
                                 file=seg.path, position=0, offset=first, field="baseOffset")


class PartitionReader:
    """Read-only access to one partition (a directory ``<topic>-<partition>`` or a segment source)."""

    def __init__(self, source: SegmentSource | str, *, log_start_offset: int | None = None,
                 chunk_records: int = 1 << 20, chunk_bytes: int = 256 << 20):
        self.source = as_source(source)
        self.dir = self.source.location()
        if not self.source.exists():
            raise StorageError(f"{self.dir}: partition directory does not exist")
        # after a crash (no clean-shutdown marker) an unreadable tail of the last segment is a torn
        # write that the next writer's recovery cuts: reads end before it, with a note, as they
        # would after that recovery; anywhere else a corrupt batch is an error
        self.torn_tail_possible = not self.source.clean_shutdown()
        self.notes: list[str] = []
        self._aborted: list | None = None
        self.chunk_records = max(1, int(chunk_records))
        self.chunk_bytes = max(1, int(chunk_bytes))
        # the checkpoint first: a log start written before the pin is at most the pinned log's end
        checkpoint = log_start_offset if log_start_offset is not None else self.source.log_start_checkpoint()
        # every read of this reader is of this one state of the log, whatever a writer does meanwhile
        self._pinned: PinnedSegments = self.source.pin()
        self._segments = self._pinned.files()
        self._log_end: int | None = None
        if checkpoint is not None and self._segments and self.log_end_offset < checkpoint:
            # Kafka deletes every segment when the log ends below the checkpointed log start
            self._pinned.close()
            self._pinned.segments = []
            self._segments = []
            self._log_end = checkpoint
        first = self._segments[0].base_offset if self._segments else (checkpoint or 0)
        self.log_start_offset = max(checkpoint or 0, first)
        self._bases = [s.base_offset for s in self._segments]

    # -- structure
    def segments(self) -> list[SegmentFile]:
        """The live segments in offset order (base offset, path, size pinned)."""
        return list(self._segments)

    def index_bytes(self, base_offset: int, suffix: str) -> bytes | None:
        """The bytes of an index of the pinned segment with this base offset, read now; None when
        it has none, or when the segment was replaced since the pin (its name may hold another's)."""
        i = bisect.bisect_left(self._bases, base_offset)
        if i == len(self._bases) or self._bases[i] != base_offset:
            return None
        try:
            return self._pinned.sidecar(i, suffix)
        except LogChangedError:
            return None

    def segment_identity(self, base_offset: int) -> tuple[int, int] | None:
        """(device, inode) of the pinned segment with this base offset (None when there is none):
        which file it is, for a reader in another process to check it reads the same one."""
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            return self._pinned.segments[i].identity
        return None

    @property
    def log_end_offset(self) -> int:
        """The last live segment's next offset (Kafka's readNextOffset of the active segment),
        in the pinned bytes."""
        if self._log_end is None:
            self._log_end = self._pinned.segments[-1].next_offset() if self._pinned.segments else 0
        return self._log_end

    def close(self) -> None:
        """Let go of the pinned segment files (the garbage collector does it otherwise)."""
        self._pinned.close()

    def __enter__(self) -> "PartitionReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _mapped_segments(self, start: int, end: int, cursor: list[int]):
        """(segment, mapping, size, start within it) from the segment holding ``start`` on.

        ``cursor[0]`` is the next offset the caller still needs; the caller advances it as it
        yields. Every segment is the one pinned when the reader was made: a writer's swap or
        delete since then changes nothing here (``pinned.py``).
        """
        cursor[0] = max(cursor[0], start)
        pinned = self._pinned.segments
        i = max(bisect.bisect_right(self._bases, cursor[0]) - 1, 0)
        while i < len(pinned):
            seg = pinned[i]
            if seg.size:
                _check_first_base(seg)      # also where the read ends: its batches may lie below
            if seg.base_offset >= end:
                return
            if seg.size:
                try:
                    yield seg.file, seg.data, seg.size, cursor[0]
                finally:
                    seg.release_pages()
            if i + 1 < len(pinned):
                cursor[0] = max(cursor[0], pinned[i + 1].base_offset)
            i += 1

    # -- Python objects
    def batches(self, start_offset: int | None = None, end_offset: int | None = None) -> Iterator:
        """Every batch (RecordBatch or legacy entry) holding offsets >= start_offset, in order,
        over read-only memory maps (kept alive by the batches themselves)."""
        start = self.log_start_offset if start_offset is None else start_offset
        end = INT64_MAX if end_offset is None else end_offset
        cursor = [start]
        prev_last = -1
        for seg, m, size, first in self._mapped_segments(start, end, cursor):
            pos = int(K.seek_batch(as_u8(m), 0, size, first))
            if pos < 0:
                pos = -1 - pos    # an impossible batch size there: the iterator reports it
            try:
                after = pos         # where the batches walked so far end
                for b in iter_batches(m, pos, size):
                    _check_order(b.base_offset, b.last_offset, prev_last, b.position)
                    prev_last = b.last_offset
                    after = b.position + b.size
                    if b.last_offset < first:
                        continue
                    if b.base_offset >= end:
                        self._check_stop(seg, as_u8(m), b.position, size)
                        return
                    cursor[0] = b.last_offset + 1
                    yield b
                self._check_cut_short(seg, as_u8(m), after, size)
            except CorruptRecordError as e:
                if e.position is not None and self._torn_tail(seg, as_u8(m), e.position):
                    return
                raise e.located(file=seg.path) from None

    def records(self, start_offset: int | None = None, end_offset: int | None = None, *,
                include_control: bool = False, validate: bool = True) -> Iterator[Record]:
        """Records as Python objects (as ``Log.records``): for tools and small reads."""
        start = self.log_start_offset if start_offset is None else start_offset
        for b in self.batches(start, end_offset):
            try:
                if validate:
                    b.ensure_valid()
                if b.is_control and not include_control:
                    continue
                recs = b.records()
            except CorruptRecordError as e:
                seg = self._segment_file(b.base_offset)
                if seg is not None and self._torn_tail(seg, as_u8(b.buffer), b.position):
                    return
                raise e.located(file=self.segment_path(b.base_offset), position=b.position) from None
            if b.base_offset >= start and (end_offset is None or b.last_offset < end_offset):
                yield from recs
            else:
                for r in recs:
                    if r.offset >= start and (end_offset is None or r.offset < end_offset):
                        yield r

    def _segment_file(self, offset: int) -> SegmentFile | None:
        i = bisect.bisect_right(self._bases, offset) - 1
        return self._segments[i] if i >= 0 else None

    def segment_path(self, offset: int) -> str | None:
        """The file of the segment holding ``offset`` (for naming it in an error)."""
        seg = self._segment_file(offset)
        return seg.path if seg is not None else None

    # -- what a consumer sees
    def visible(self, isolation_level: str = READ_UNCOMMITTED) -> VisibleRecords:
        """The partition as a consumer at ``isolation_level`` sees it (``visible.py``): where to
        start, up to which offset, without control batches and aborted transactions."""
        return VisibleRecords(self, isolation_level)

    # -- transactions (the read_committed view)
    def aborted_transactions(self, start: int, end: int) -> list:
        """Aborted transactions overlapping [start, end), as Kafka's collectAbortedTxns walks the
        ``.txnindex`` files; the files are first checked against the log's markers
        (``txn_trust``) and, when one lies, the aborted transactions are taken from the markers
        instead (with a note): a wrong entry would serve aborted records."""
        if self._aborted is None:
            self._aborted = self._load_aborted()
        i = bisect.bisect_right(self._bases, start) - 1
        if i < 0:
            return []
        return collect_aborted(self._aborted[i:], start, end)

    def _load_aborted(self) -> list:
        from .index_check import walk_segment
        from .txn_index import aborted_from_markers
        pinned = self._pinned.segments
        layouts = [walk_segment(seg.data, seg.base_offset, end=seg.size) for seg in pinned]
        paths = [self._pinned.location(i, files.TXN_INDEX_SUFFIX) for i in range(len(pinned))]
        indexes = [TransactionIndex(path, seg.base_offset, read_only=True)
                   for path, seg in zip(paths, pinned)]
        try:
            raws = [self._pinned.sidecar(i, files.TXN_INDEX_SUFFIX) or b"" for i in range(len(pinned))]
        except LogChangedError:
            # a segment was replaced since the pin, so its name may hold another segment's index
            # now: the markers of the pinned bytes say what the index would
            for index, txns in zip(indexes, aborted_from_markers(layouts)):
                index._entries = txns
            return indexes
        if raws:
            # the writer appends an entry just after its ABORT marker: one past the pinned bytes
            # belongs to a later state of the log
            raws[-1] = without_in_flight(raws[-1], TXN_ENTRY_SIZE, TXN_LAST_OFFSET_AT,
                                         pinned[-1].next_offset() - 1)

        def index_bytes(i: int) -> bytes:
            return raws[i]

        untrusted = untrusted_txn_indexes(layouts, paths, index_bytes)
        if untrusted is None:
            for i, index in enumerate(indexes):
                index.load(raws[i])      # checked: the file is not read a second time
            return indexes
        problem, rebuilt = untrusted
        self.notes.append(f"{problem}; aborted transactions are taken from the log's markers instead "
                          f"(a writer's recovery or `verify --repair` rebuilds the file)")
        for index, txns in zip(indexes, rebuilt):
            index._entries = txns
        return indexes

    def offset_for_timestamp(self, target: int, end: int | None = None) -> int | None:
        """Kafka's ListOffsets for a timestamp (``timestamp_lookup``): the first offset at or after
        the log start whose record timestamp is >= ``target``; None when there is none (below
        ``end``, if given). No index is trusted: the scan starts at the log start."""
        start = self.log_start_offset
        found = find_offset_by_timestamp([(None, lambda: self.batches(start))], target, start)
        if end is not None:
            found = fetchable_answer(found, end)
        return None if found is None else found[0]

    @property
    def high_watermark(self) -> int:
        """What a single replica has written is committed: the log end offset."""
        return self.log_end_offset

    @functools.cached_property
    def last_stable_offset(self) -> int:
        """The first offset of the earliest open transaction, else the log end offset.

        Open transactions come from the newest producer snapshot at or below the log end (as Kafka's
        loader reads them) plus the transactional batches and markers after it. Nothing is stable
        past a batch that cannot be read: the records before it are served, then the read reports it.
        """
        from .producer_state import decode_snapshot
        end = self.log_end_offset
        open_txns: dict[int, int] = {}
        scan_from = self.log_start_offset
        for snap in self._snapshot_offsets(end):
            try:
                entries = decode_snapshot(self.source.producer_snapshot(snap),
                                          self.source.location(snap, files.SNAPSHOT_SUFFIX))
            except (CompactlogError, OSError):
                continue       # unreadable: Kafka deletes it and rebuilds from an older one or the log
            open_txns = {e.producer_id: e.current_txn_first_offset for e in entries
                         if e.current_txn_first_offset is not None}
            scan_from = snap
            break
        readable_end = end
        try:
            for b in self.batches(scan_from):
                if b.base_offset >= scan_from and b.is_transactional:
                    if b.is_control:
                        open_txns.pop(b.producer_id, None)
                    else:
                        open_txns.setdefault(b.producer_id, b.base_offset)
                readable_end = b.last_offset + 1
        except CorruptRecordError:
            end = min(end, readable_end)
        return min([end, *open_txns.values()])

    def _snapshot_offsets(self, log_end: int) -> list[int]:
        """Offsets of the usable producer snapshots, newest first."""
        return sorted((off for off in self.source.producer_snapshot_offsets()
                       if self.log_start_offset <= off <= log_end), reverse=True)

    # -- columns
    def read_columns(self, start_offset: int | None = None, end_offset: int | None = None, *,
                     include_control: bool = False, validate_crc: bool = True,
                     with_headers: bool = False) -> pa.Table:
        """Records in [start_offset, end_offset) as a ``pyarrow.Table`` (see ``column_schema``).

        Control records (transaction markers) are left out unless ``include_control``;
        ``validate_crc`` checks every batch read (CorruptRecordError on a mismatch), as
        ``Log.records`` does. Headers (list<struct<key: string, value: binary>>) only when
        ``with_headers``.
        """
        chunks = list(self.iter_columns(start_offset, end_offset, include_control=include_control,
                                        validate_crc=validate_crc, with_headers=with_headers))
        large = any(c.schema.field("key").type == pa.large_binary() for c in chunks)
        schema = column_schema(with_headers=with_headers, large=large)
        if large:
            chunks = [c if c.schema == schema else _to_large(c, schema) for c in chunks]
        return pa.Table.from_batches(chunks, schema=schema)

    def iter_columns(self, start_offset: int | None = None, end_offset: int | None = None, *,
                     include_control: bool = False, validate_crc: bool = True,
                     with_headers: bool = False) -> Iterator[pa.RecordBatch]:
        """``read_columns`` as a stream of Arrow record batches (bounded memory)."""
        start = self.log_start_offset if start_offset is None else start_offset
        end = INT64_MAX if end_offset is None else end_offset
        if start >= end:
            return
        chunk = None
        cursor = [start]
        for seg, m, size, first in self._mapped_segments(start, end, cursor):
            want = min(self.chunk_records, max(1024, size // 64))
            if chunk is None or chunk.record_capacity < want:
                prev_last = chunk.prev_last if chunk is not None else -1
                chunk = _Chunk(want, 1 << 14)
                chunk.prev_last = prev_last
            for batch in self._scan_segment(seg, m, size, chunk, first, end, include_control,
                                            validate_crc, with_headers):
                if batch is not None and batch.num_rows:
                    cursor[0] = batch.column(2)[-1].as_py() + 1
                    yield batch

    def _segment_bound(self, seg: SegmentFile) -> int:
        """The offset every batch of ``seg`` lies below: the next segment's base offset, or for the
        last segment the log end offset (its last batch's next offset, as Kafka reads it)."""
        i = bisect.bisect_left(self._bases, seg.base_offset)
        return self._bases[i + 1] if i + 1 < len(self._bases) else self.log_end_offset

    def _check_stop(self, seg: SegmentFile, buf: np.ndarray, position: int, size: int) -> None:
        """A read ends at the first batch at or past its end offset; one at or above its segment's
        bound is corrupt (``batch_order``): the offsets go backwards after it, and a read to the
        log end would stop there short of the records after it, without a word."""
        error = past_bound(buf, seg.base_offset, position, size, self._segment_bound(seg),
                           last_segment=seg.path == self._segments[-1].path, path=seg.path)
        if error is not None:
            raise error

    def _check_cut_short(self, seg: SegmentFile, buf: np.ndarray, position: int, size: int) -> None:
        """A scan that ended on an incomplete batch in a segment that is not the last one: no
        write is in flight there (a writer appends to the last segment only), so the bytes were
        cut (a truncated copy, a lost block). Going on at the next segment would skip the cut
        batches' offsets without a word; the read stops with the file and position instead."""
        if position >= size or not self._segments or seg.path == self._segments[-1].path:
            return
        if position + LOG_OVERHEAD <= size:
            length = int.from_bytes(bytes(buf[position + LENGTH_OFFSET:position + LOG_OVERHEAD]), "big",
                                    signed=True)
            if position + LOG_OVERHEAD + length <= size:
                return          # a complete batch: the scan stopped at its end offset
        offset = int.from_bytes(bytes(buf[position:position + 8]), "big", signed=True) \
            if position + 8 <= size else None
        raise CorruptRecordError(
            f"the {size - position} bytes at the end of this segment are not a complete batch "
            f"(a truncated or torn write), and later segments follow it",
            file=seg.path, position=position, offset=offset, field="length")

    def _torn_tail(self, seg: SegmentFile, buf: np.ndarray, position: int) -> bool:
        """Is the unreadable batch at ``position`` a torn write recovery would cut: in the last
        segment, after a crash, with no valid batch anywhere after it?"""
        if not self.torn_tail_possible or not self._segments or seg.path != self._segments[-1].path:
            return False
        from .repair import _batch_problem, _resync
        if _batch_problem(buf, position, buf.shape[0], -1, seg.base_offset)[0] is None:
            return False      # a complete batch with a valid CRC is not a torn write
        if _resync(buf, position, buf.shape[0], -1, seg.base_offset) is not None:
            return False
        note = (f"{seg.path}: the {buf.shape[0] - position} bytes from position {position} are not a "
                f"valid batch: the torn tail of a write interrupted by a crash, which the next writer's "
                f"recovery cuts; records before it were read")
        if note not in self.notes:
            self.notes.append(note)
        return True

    def _keep_before(self, chunk: _Chunk, position: int) -> None:
        """Drop from the chunk every batch (and its records) at or after ``position``."""
        kb = int(np.searchsorted(chunk.bmeta[:chunk.nb, K.BM_POS], position))
        chunk.nr = int(np.searchsorted(chunk.r32[K.R32_BATCH, :chunk.nr], kb))
        chunk.nb = kb
        chunk.checked = min(chunk.checked, kb)

    def _scan_segment(self, seg: SegmentFile, m, size: int, chunk: _Chunk, start: int, end: int,
                      include_control: bool, validate_crc: bool, with_headers: bool):
        """Chunks of the segment's records; records before a corrupt batch are yielded first,
        then the error raised (or, for a torn tail after a crash, the scan ends)."""
        buf = as_u8(m)
        try:
            yield from self._scan_chunks(seg, m, buf, size, chunk, start, end, include_control,
                                         validate_crc, with_headers)
        except CorruptRecordError as e:
            if e.position is None:
                raise
            self._keep_before(chunk, e.position)
            if chunk.nr:
                yield self._flush(chunk, buf, with_headers)
            if self._torn_tail(seg, buf, e.position):
                return
            raise
        finally:
            chunk.reset()
            del buf

    def _scan_chunks(self, seg: SegmentFile, m, buf, size: int, chunk: _Chunk, start: int, end: int,
                     include_control: bool, validate_crc: bool, with_headers: bool):
        view = memoryview(m) if size else None
        pos = 0
        try:
            while True:
                status, pos, nb, nr, where, used = K.scan_log_uncompressed(
                    buf, pos, size, start, end, include_control, chunk.bmeta, chunk.nb,
                    chunk.r64, chunk.r32, chunk.nr, self.chunk_bytes - chunk.used, 0)
                chunk.nb, chunk.nr = int(nb), int(nr)
                chunk.used += int(used)
                pos = int(pos)
                self._check_batches(seg, view, chunk, validate_crc)
                if status < 0:
                    self._raise_scan_error(seg, buf, view, int(status), pos, int(where), validate_crc)
                if status == K.SCAN_END:
                    self._check_stop(seg, buf, pos, size)
                    self._check_cut_short(seg, buf, pos, size)
                    break
                if status == K.SCAN_FULL:
                    if chunk.nb == 0 and chunk.nr == 0:
                        self._grow(seg, chunk, buf, view, pos)
                        continue
                    full = chunk.nr
                    yield self._flush(chunk, buf, with_headers)
                    if full and chunk.record_capacity < self.chunk_records:
                        chunk.resize(min(2 * chunk.record_capacity, self.chunk_records))
                    continue
                if status == K.SCAN_COMPRESSED:
                    pos = self._decode_compressed(seg, view, chunk, pos, start, end)
                    continue
                if status == K.SCAN_LEGACY:
                    result = self._decode_legacy(seg, m, chunk, pos, start, end, validate_crc)
                    if result is None:        # chunk full: flush, then retry the entry
                        yield self._flush(chunk, buf, with_headers)
                        continue
                    if result < 0:            # past end_offset
                        break
                    pos = result
            if chunk.nr:
                yield self._flush(chunk, buf, with_headers)
        finally:
            if view is not None:
                view.release()

    def _grow(self, seg: SegmentFile, chunk: _Chunk, buf, view, pos: int) -> None:
        """Make room for a batch holding more records than an empty chunk can take."""
        count = int(K._be_i32(buf, pos + RECORDS_COUNT_OFFSET))
        codec = int(K._be_i16(buf, pos + ATTRIBUTES_OFFSET)) & COMPRESSION_MASK
        if codec != 0:
            # a compressed batch's count is only checked after decompression: check it first here
            # rather than allocate for a corrupt count
            size = int(K._be_i32(buf, pos + LENGTH_OFFSET)) + LOG_OVERHEAD
            try:
                plain = compression.decompress(codec, view[pos + RECORD_BATCH_OVERHEAD:pos + size])
            except CorruptRecordError as e:
                raise e.located(file=seg.path, position=pos, offset=int(K._be_i64(buf, pos))) from None
            if count * K.MIN_RECORD_SIZE > len(plain):
                raise CorruptRecordError(
                    f"records count {count} cannot fit in {len(plain)} decompressed bytes",
                    file=seg.path, position=pos, offset=int(K._be_i64(buf, pos)), field="recordsCount")
        chunk.resize(max(count, 2 * chunk.record_capacity))

    def _check_batches(self, seg: SegmentFile, view, chunk: _Chunk, validate_crc: bool) -> None:
        """Offsets increasing from batch to batch (a base offset is outside the CRC) and, with
        ``validate_crc``, the CRC-32C of every v2 batch entered since the last check (one C call
        per batch)."""
        lo, hi = chunk.checked, chunk.nb
        if hi <= lo:
            return
        chunk.checked = hi
        bm = chunk.bmeta[lo:hi]
        base = bm[:, K.BM_BASE_OFFSET]
        last = base + bm[:, K.BM_LAST_OFFSET_DELTA]
        prev = previous_lasts(last, chunk.prev_last)
        bad = np.flatnonzero(breaks_order(base, prev))
        if bad.size:
            i = int(bad[0])
            try:
                _check_order(int(base[i]), int(last[i]), int(prev[i]), int(bm[i, K.BM_POS]))
            except CorruptRecordError as e:
                raise e.located(file=seg.path) from None
        chunk.prev_last = int(last[-1])
        if not validate_crc:
            return
        crc = _crc32c.crc32c
        rows = zip((bm[:, K.BM_POS] + ATTRIBUTES_OFFSET).tolist(), (bm[:, K.BM_POS] + bm[:, K.BM_SIZE]).tolist(),
                   bm[:, K.BM_CRC].tolist(), bm[:, K.BM_SOURCE].tolist())
        for i, (start, end, stored, source) in enumerate(rows):
            if source != 2 and crc(view[start:end]) != stored:   # 2: legacy, checked when decoded
                computed = crc(view[start:end])
                raise CorruptRecordError(
                    f"stored CRC {stored:#010x} does not match computed {computed:#010x}",
                    file=seg.path, position=start - ATTRIBUTES_OFFSET, offset=int(bm[i, K.BM_BASE_OFFSET]),
                    field="crc")

    def _raise_scan_error(self, seg: SegmentFile, buf, view, status: int, pos: int, where: int,
                          validate_crc: bool):
        base = int(K._be_i64(buf, pos)) if pos + LENGTH_OFFSET <= buf.shape[0] else None
        if status not in (K.ERR_BATCH_SIZE, K.ERR_MAGIC) and validate_crc:
            size = int(K._be_i32(buf, pos + LENGTH_OFFSET)) + LOG_OVERHEAD
            if RECORD_BATCH_OVERHEAD <= size and pos + size <= buf.shape[0]:
                stored = int(K._be_u(buf, pos + CRC_OFFSET, 4))
                computed = _crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size])
                if stored != computed:
                    raise CorruptRecordError(
                        f"stored CRC {stored:#010x} does not match computed {computed:#010x}",
                        file=seg.path, position=pos, offset=base, field="crc")
        if status == K.ERR_BATCH_SIZE:
            length = int(K._be_i32(buf, pos + LENGTH_OFFSET))
            msg = f"record batch size {length + LOG_OVERHEAD} is invalid (length field {length})"
            field = "length"
        elif status == K.ERR_MAGIC:
            msg = f"invalid magic {int(buf[pos + MAGIC_OFFSET])}"
            field = "magic"
        elif status == K.ERR_RECORDS_COUNT:
            msg = f"invalid records count {int(K._be_i32(buf, pos + RECORDS_COUNT_OFFSET))}"
            field = "recordsCount"
        elif status == K.ERR_CODEC:
            msg = f"unknown compression codec {int(K._be_i16(buf, pos + ATTRIBUTES_OFFSET)) & COMPRESSION_MASK}"
            field = "attributes"
        else:
            msg = K.ERROR_MESSAGES.get(status, f"error {status}") + f" (record at byte {where})"
            field = "records"
        raise CorruptRecordError(msg, file=seg.path, position=pos, offset=base, field=field)

    def _decode_compressed(self, seg: SegmentFile, view, chunk: _Chunk, pos: int, start: int,
                           end: int) -> int:
        b = chunk.nb - 1
        bm = chunk.bmeta[b]
        size = int(bm[K.BM_SIZE])
        count = int(bm[K.BM_RECORDS_COUNT])
        codec = int(bm[K.BM_ATTRIBUTES]) & COMPRESSION_MASK
        try:
            plain = compression.decompress(codec, view[pos + RECORD_BATCH_OVERHEAD:pos + size])
        except CorruptRecordError as e:
            raise e.located(file=seg.path, position=pos, offset=int(bm[K.BM_BASE_OFFSET])) from None
        bias = chunk.add_scratch(plain)
        data = as_u8(plain)
        err, res = K.scan_section_records(data, 0, data.shape[0], count, chunk.bmeta, b, chunk.r64,
                                          chunk.r32, chunk.nr, bias, start, end)
        if err < 0:
            if err == K.ERR_RECORDS_COUNT:
                msg = f"records count {count} cannot fit in {data.shape[0]} decompressed bytes"
            else:
                msg = K.ERROR_MESSAGES.get(int(err), f"error {err}") + \
                    f" (decompressed byte {int(res)})"
            raise CorruptRecordError(msg, file=seg.path, position=pos,
                                     offset=int(bm[K.BM_BASE_OFFSET]), field="records")
        chunk.nr = int(res)
        return pos + size

    def _decode_legacy(self, seg: SegmentFile, m, chunk: _Chunk, pos: int, start: int, end: int,
                       validate_crc: bool) -> int | None:
        """A magic 0/1 entry into the chunk: next position, None when the chunk is full, -1 past end."""
        from ..record.legacy import LegacyEntry
        try:
            e = LegacyEntry.parse(m, pos)
            if e.last_offset < start:
                return pos + e.size
            if e.base_offset >= end:
                return -1
            if validate_crc:
                e.ensure_valid()
            recs = [r for r in e.records() if start <= r.offset < end]
        except CorruptRecordError as err:
            raise err.located(file=seg.path, position=pos) from None
        if chunk.nb >= chunk.bmeta.shape[0] or chunk.nr + len(recs) > chunk.record_capacity:
            if chunk.nb == 0 and chunk.nr == 0:
                chunk.resize(max(len(recs), 2 * chunk.record_capacity))
            else:
                return None
        b = chunk.nb
        bm = chunk.bmeta[b]
        bm[:] = -1
        bm[K.BM_POS] = pos
        bm[K.BM_SIZE] = e.size
        bm[K.BM_BASE_OFFSET] = e.base_offset
        bm[K.BM_LAST_OFFSET_DELTA] = e.last_offset - e.base_offset
        append_time = e.timestamp_type == LOG_APPEND_TIME
        bm[K.BM_ATTRIBUTES] = (e.attributes & COMPRESSION_MASK) | (TIMESTAMP_TYPE_MASK if append_time else 0)
        bm[K.BM_RECORDS_COUNT] = e.records_count
        bm[K.BM_CRC] = e.crc
        bm[K.BM_SOURCE] = 2
        bm[K.BM_FIRST_RECORD] = chunk.nr
        bm[K.BM_MAGIC] = e.magic
        chunk.nb += 1
        r64, r32 = chunk.r64, chunk.r32
        for r in recs:
            i = chunk.nr
            r64[K.R64_OFFSET, i] = r.offset
            r64[K.R64_TIMESTAMP, i] = r.timestamp
            for data, prow, lrow in ((r.key, K.R64_KEY_POS, K.R32_KEY_LEN),
                                     (r.value, K.R64_VAL_POS, K.R32_VAL_LEN)):
                if data is None:
                    r64[prow, i] = chunk.scratch_len
                    r32[lrow, i] = -1
                else:
                    r64[prow, i] = chunk.add_scratch(bytes(data))
                    r32[lrow, i] = len(data)
            r32[K.R32_HDR_COUNT, i] = 0
            r32[K.R32_BATCH, i] = b
            chunk.nr += 1
        return pos + e.size

    def _flush(self, chunk: _Chunk, buf, with_headers: bool) -> pa.RecordBatch | None:
        n, nb = chunk.nr, chunk.nb
        if n == 0:
            chunk.reset()
            return None
        bm = chunk.bmeta[:nb]
        r64, r32 = chunk.r64, chunk.r32
        bidx = r32[K.R32_BATCH, :n]
        src1 = as_u8(b"".join(chunk.scratch)) if chunk.scratch else as_u8(b"")
        if chunk.scratch:
            source = (bm[:, K.BM_SOURCE] != 0).astype(np.int8)[bidx]
        else:
            source = np.zeros(n, dtype=np.int8)
        kpos, klen = r64[K.R64_KEY_POS, :n], r32[K.R32_KEY_LEN, :n]
        vpos, vlen = r64[K.R64_VAL_POS, :n], r32[K.R32_VAL_LEN, :n]
        keys, large_k = _binary_array(buf, src1, source, kpos, klen)
        values, large_v = _binary_array(buf, src1, source, vpos, vlen)
        large = large_k or large_v
        if large:
            keys = keys.cast(pa.large_binary()) if not large_k else keys
            values = values.cast(pa.large_binary()) if not large_v else values
        attrs = bm[:, K.BM_ATTRIBUTES][bidx]
        columns = [
            keys, values,
            pa.array(r64[K.R64_OFFSET, :n].copy()),
            pa.array(r64[K.R64_TIMESTAMP, :n].copy()),
            pa.array(((attrs & TIMESTAMP_TYPE_MASK) != 0).astype(np.int32)),
            pa.array(bm[:, K.BM_PRODUCER_ID][bidx]),
            pa.array(bm[:, K.BM_PRODUCER_EPOCH].astype(np.int16)[bidx]),
            pa.array(bm[:, K.BM_LEADER_EPOCH].astype(np.int32)[bidx]),
            pa.array((attrs & TRANSACTIONAL_FLAG) != 0),
            pa.array((attrs & CONTROL_FLAG) != 0),
        ]
        if with_headers:
            columns.append(_headers_array(buf, src1, source, vpos, vlen, r32[K.R32_HDR_COUNT, :n]))
        chunk.reset()
        return pa.RecordBatch.from_arrays(columns, schema=column_schema(with_headers=with_headers,
                                                                        large=large))


def _check_order(base: int, last: int, prev_last: int, position: int) -> None:
    """The order rule (index_check.breaks_order) for one batch, raised as the reader reports it."""
    if breaks_order(base, prev_last):
        raise CorruptRecordError(f"base offset {base} is not above the previous batch's last offset "
                                 f"{prev_last} (the base offset is not covered by the CRC)",
                                 position=position, offset=base, field="baseOffset")


def read_columns(dir_path: str, start_offset: int | None = None, end_offset: int | None = None,
                 **kwargs) -> pa.Table:
    """Shorthand for ``PartitionReader(dir_path).read_columns(...)``."""
    return PartitionReader(dir_path).read_columns(start_offset, end_offset, **kwargs)


__all__ = ["PartitionReader", "SegmentFile", "column_schema", "live_segment_files",
           "next_offset_of", "read_columns", "HEADERS_TYPE", "CREATE_TIME", "LOG_APPEND_TIME"]
