"""A log segment: the ``.log`` file of batches with its offset, time and transaction indexes.

Mirrors Kafka's LogSegment: appends add sparse index entries every ``index.interval.bytes``,
``recover`` rebuilds the indexes from the batches and truncates an invalid tail, and a segment
that stops being active gets its final time-index entry and trimmed files.
"""

from __future__ import annotations

import errno
import mmap
import os
import random

from ..errors import CorruptRecordError, ReadOnlyError, StorageError
from ..record.batch import BatchHeader, iter_batches
from ..record.layout import (BASE_OFFSET_OFFSET, HEADER_SIZE_UP_TO_MAGIC, INT64, LENGTH_OFFSET, LOG_OVERHEAD, MAGIC_V2,
                             MIN_LEGACY_SIZE, PREFIX, RECORD_BATCH_OVERHEAD)
from . import files
from .events import REBUILT, DataEvent
from . import object_body
from .file_handles import PooledFile, is_too_many_open_files, too_many_open_files
from .index_check import IndexProblem, check_offset_index, check_time_index, walk_segment
from .offset_index import OffsetIndex
from .time_index import TimeIndex
from .txn_index import TransactionIndex

_READ_CHUNK = 1 << 16


class FileRecords:
    """The ``.log`` file: batches end to end, appended at ``size``.

    Its descriptor comes from the process's file-handle cache (``file_handles``): a writer's is
    opened on first use and may be closed between uses, so that open descriptors stay bounded
    however many segments there are. A reader's is opened at once, so that it keeps reading the
    file it loaded while a writer beside it replaces segments.

    Opened ``read_only``, the file is never written: recovery's truncation only moves ``size``,
    which bounds every read, so a reader sees what a writer's recovery would keep.
    """

    def __init__(self, path: str, *, preallocate_size: int = 0, read_only: bool = False):
        self.read_only = read_only
        self._file: PooledFile | None = None
        self._path = path
        # a ``.log`` whose bytes are a bucket's object (``object_body``: clean over a bucket)
        self._body = object_body.body_of(path) if object_body.active() else None
        if read_only:
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                # the empty active segment a writer would create: it exists in memory only
                self.size = 0
                return
            except OSError as e:
                if is_too_many_open_files(e):
                    raise too_many_open_files(path, e) from None
                raise
            self.size = os.fstat(fd).st_size
            self._file = PooledFile(path, os.O_RDONLY, fd=fd)
            return
        try:
            st = os.stat(path)
        except FileNotFoundError:
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                if is_too_many_open_files(e):
                    raise too_many_open_files(path, e) from None
                raise
            self._file = PooledFile(path, os.O_RDWR, fd=fd)
            self.size = 0
            if preallocate_size:
                os.ftruncate(fd, preallocate_size)
            self._disk_size = preallocate_size
            return
        self.size = self._disk_size = st.st_size
        self._file = PooledFile(path, os.O_RDWR, identity=(st.st_dev, st.st_ino))

    @property
    def path(self) -> str:
        return self._file.path if self._file is not None else self._path

    @property
    def exists(self) -> bool:
        """False for a read-only segment that exists in memory only."""
        return self._file is not None

    def _use(self):
        if self._file is None:
            raise OSError(errno.EBADF, "no such file (in memory only)", self._path)
        return self._file.use()

    def read(self, position: int, length: int) -> bytes:
        length = max(0, min(length, self.size - position))
        if not length:
            return b""
        if self._body is not None:
            return self._body.read(position, length, self.size)
        with self._use() as fd:
            data = os.pread(fd, length, position)
            if len(data) == length:
                return data
            # a short read (Linux returns at most 0x7ffff000 bytes a call): the rest, up to EOF
            parts = [data]
            got = len(data)
            while got < length:
                more = os.pread(fd, length - got, position + got)
                if not more:
                    break
                parts.append(more)
                got += len(more)
            return b"".join(parts)

    def map(self):
        """A read-only mapping of [0, size) (bytes when the file is empty)."""
        if self.size == 0:
            return b""
        if self._body is not None:
            return self._body.whole(self.size)
        with self._use() as fd:
            return mmap.mmap(fd, self.size, access=mmap.ACCESS_READ)

    def dup(self) -> int:
        """A descriptor of its own for the caller (who closes it): sendfile from it stays safe
        after the segment is closed, replaced or deleted."""
        if self._file is None:
            raise OSError(errno.EBADF, "no such file (in memory only)", self._path)
        return self._file.dup()

    def _writable(self) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{self.path}: opened read-only")

    def append(self, data) -> int:
        if self.read_only:
            self._writable()        # refused, saying why
        if self._body is not None:
            raise StorageError(f"{self.path}: its bytes are the object {self._body.key}; a segment in a bucket "
                               f"is not appended to")
        n = len(data)
        if self._file is None:
            raise OSError(errno.EBADF, "no such file (in memory only)", self._path)
        try:
            written = self._file.pwrite(data, self.size)
        except BaseException:
            self._disk_size = -1        # some bytes may have landed past size: trim must look
            raise
        if written != n:
            self._disk_size = -1
            raise StorageError(f"{self.path}: short write ({written} of {n} bytes)")
        self.size += n
        self._disk_size = max(self._disk_size, self.size)
        return n

    def cut_back(self, size: int) -> None:
        """Undo a failed append: the file cut to ``size`` (whatever a short or failed write left
        past it goes) and fsynced, so that no torn tail survives to lie behind later batches."""
        self._writable()
        with self._use() as fd:
            os.ftruncate(fd, size)
            os.fsync(fd)
        self.size = self._disk_size = size

    def truncate_to(self, size: int) -> int:
        if size > self.size or size < 0:
            raise StorageError(f"{self.path}: cannot truncate to {size} bytes, file holds {self.size}")
        removed = self.size - size
        if not self.read_only and self._disk_size != size:     # (recovery cuts nothing, mostly)
            with self._use() as fd:
                os.ftruncate(fd, size)
            self._disk_size = size
        self.size = size
        return removed

    def trim(self) -> None:
        """The file cut to its batches (a preallocated one ends with zeros); nothing to do, and
        no descriptor opened, when it holds only them."""
        if self.read_only or self._disk_size == self.size:
            return
        with self._use() as fd:
            if os.fstat(fd).st_size != self.size:
                os.ftruncate(fd, self.size)
        self._disk_size = self.size

    def flush(self) -> None:
        if not self.read_only:
            with self._use() as fd:
                os.fsync(fd)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()

    def rename(self, new_path: str) -> None:
        self._writable()
        self._file.rename(new_path)

    def last_modified_ms(self) -> int:
        if self._file is not None and self._file.is_open:
            try:
                with self._file.use() as fd:
                    return int(os.fstat(fd).st_mtime * 1000)
            except OSError:
                pass        # closed meanwhile: the path tells
        try:
            return int(os.stat(self.path).st_mtime * 1000)
        except FileNotFoundError:
            if self.read_only:
                return 0   # a segment that exists in memory only
            raise

    def set_last_modified_ms(self, ms: int) -> None:
        self._writable()
        os.utime(self.path, ns=(ms * 1_000_000, ms * 1_000_000))

    def batch_headers(self, start: int = 0):
        """(position, BatchHeader or legacy prefix) of each complete batch from ``start``."""
        pos = start
        end = self.size
        buf = b""
        buf_pos = pos
        while pos + HEADER_SIZE_UP_TO_MAGIC < end:
            rel = pos - buf_pos
            if rel + RECORD_BATCH_OVERHEAD > len(buf):
                buf = self.read(pos, max(_READ_CHUNK, RECORD_BATCH_OVERHEAD))
                buf_pos = pos
                rel = 0
            base_offset, length, _epoch, magic = PREFIX.unpack_from(buf, rel)
            if length < MIN_LEGACY_SIZE:
                raise CorruptRecordError(
                    f"record size {length} is smaller than the minimum record overhead ({MIN_LEGACY_SIZE})",
                    file=self.path, position=pos, offset=base_offset, field="length")
            if pos + LOG_OVERHEAD + length > end:
                return
            if magic == MAGIC_V2:
                if length + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
                    raise CorruptRecordError(
                        f"batch size {length + LOG_OVERHEAD} is smaller than the v2 header",
                        file=self.path, position=pos, offset=base_offset, field="length")
                yield pos, BatchHeader.unpack(buf, rel)
            else:
                yield pos, None
            pos += LOG_OVERHEAD + length


class LogSegment:
    def __init__(self, dir_path: str, base_offset: int, config, *, now_ms: int,
                 suffix: str = "", preallocate_indexes: bool = False, new: bool = False,
                 read_only: bool = False):
        self.dir = dir_path
        self.base_offset = base_offset
        self.config = config
        self.suffix = suffix
        self.read_only = read_only
        init_size = config.init_file_size if new else 0
        self.log = FileRecords(files.segment_file(dir_path, base_offset, files.LOG_SUFFIX, suffix),
                               preallocate_size=init_size, read_only=read_only)
        self.time_index_newly_created = not os.path.exists(
            files.segment_file(dir_path, base_offset, files.TIME_INDEX_SUFFIX, suffix))
        self.index_missing = not os.path.exists(
            files.segment_file(dir_path, base_offset, files.INDEX_SUFFIX, suffix))
        self.offset_index = OffsetIndex(files.segment_file(dir_path, base_offset, files.INDEX_SUFFIX, suffix),
                                        base_offset, config.max_index_size, preallocate=preallocate_indexes,
                                        read_only=read_only)
        self.time_index = TimeIndex(files.segment_file(dir_path, base_offset, files.TIME_INDEX_SUFFIX, suffix),
                                    base_offset, config.max_index_size, preallocate=preallocate_indexes,
                                    read_only=read_only)
        self.txn_index = TransactionIndex(files.segment_file(dir_path, base_offset, files.TXN_INDEX_SUFFIX, suffix),
                                          base_offset, read_only=read_only)
        self.index_interval_bytes = config.index_interval_bytes
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        self._max_ts_offset: tuple[int, int] | None = None
        self.created_ms = now_ms
        # The bytes a fetch may send without checking their CRC (``LocalLog.read_span``): those
        # this process appended (validated or encoded here) from ``written_from`` on, and the
        # run [crc_checked_lo, crc_checked_hi) of the bytes found on disk that a fetch checked
        # already. Kafka's zero-copy fetch checks none and leaves it to the client (librdkafka
        # does not by default): a batch damaged on disk would be served as good records.
        self.written_from = self.log.size
        self.crc_checked_lo = self.crc_checked_hi = 0
        # Kafka trusts a loaded index; here it is checked against the .log before its first use
        self._indexes_trusted = False
        self.report = None          # set by LogSegments: called with a DataEvent when an index is rebuilt
        self.is_active = lambda: True   # set by LogSegments; a closed segment's time index must end
                                        # with its largest timestamp (retention trusts it)
        jitter = config.get("segment.jitter.ms")
        self.roll_jitter_ms = 0 if jitter == 0 else random.randrange(0, 2**31) % min(jitter, config.segment_ms)

    # -- identity
    @property
    def size(self) -> int:
        return self.log.size

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size})"

    # -- timestamps
    def _max_ts(self) -> tuple[int, int]:
        if self._max_ts_offset is None:
            self.ensure_indexes_trusted()      # retention decides by it
        if self._max_ts_offset is None:
            self._max_ts_offset = self.time_index.last_entry()
        return self._max_ts_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_ts()[0]

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._max_ts()[1]

    def largest_timestamp(self) -> int:
        ts = self.max_timestamp_so_far
        return ts if ts >= 0 else self.last_modified_ms()

    def _load_first_batch_timestamp(self) -> None:
        if self.rolling_based_timestamp is None:
            for _, h in self.log.batch_headers():
                self.rolling_based_timestamp = h.max_timestamp if h is not None else -1
                break

    def first_batch_timestamp(self) -> int | None:
        """MaxTimestamp of the first batch, or None (Kafka: Long.MAX_VALUE) when there is none."""
        self._load_first_batch_timestamp()
        ts = self.rolling_based_timestamp
        return ts if ts is not None and ts >= 0 else None

    def should_roll(self, *, now_ms: int, max_timestamp: int, max_offset: int, messages_size: int) -> bool:
        # Kafka's LogSegment.shouldRoll, its conditions in order, each looked at only when the
        # ones before did not decide. Asked twice per small append on the broker's event loop (a
        # single-record transaction asks nine times), so written out here rather than through the
        # indexes' ``is_full`` and ``can_convert_to_relative_offset``, which say the same; the time
        # waited is Kafka's timeWaitedForRoll: from the first batch's max timestamp, else from the
        # segment's creation (segment_test.py checks each condition)
        config = self.config
        size = self.log.size
        if size > config.segment_bytes - messages_size:
            return True
        if size > 0:
            ts = self.rolling_based_timestamp
            if ts is None:
                self._load_first_batch_timestamp()
                ts = self.rolling_based_timestamp
            waited = max_timestamp - ts if ts is not None and ts >= 0 else now_ms - self.created_ms
            if waited > config.max_segment_ms - self.roll_jitter_ms:
                return True
        offsets, times = self.offset_index, self.time_index
        return (len(offsets._entries) >= offsets.full_at or len(times._entries) >= times.full_at
                or not 0 <= max_offset - self.base_offset <= 0x7FFFFFFF)

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def last_modified_ms(self) -> int:
        return self.log.last_modified_ms()

    # -- writing
    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_ts: int,
               data) -> None:
        """Append whole batches; index entries as Kafka's LogSegment.append writes them."""
        n = len(data)
        if n == 0:
            return
        physical_position = self.log.size
        if physical_position == 0:
            self.rolling_based_timestamp = largest_timestamp
        if not 0 <= largest_offset - self.base_offset <= 0x7FFFFFFF:      # can_convert_to_relative_offset
            raise StorageError(f"{self.log.path}: offset {largest_offset} does not fit the relative "
                               f"offset range of base offset {self.base_offset}")
        self.log.append(data)
        max_ts = self._max_ts_offset
        if largest_timestamp > (max_ts if max_ts is not None else self._max_ts())[0]:
            self._max_ts_offset = (largest_timestamp, shallow_offset_of_max_ts)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += n

    def append_mark(self) -> tuple:
        """What ``undo_append`` restores: the file's size, the index entries and the in-memory
        state an append changes."""
        return (self.log.size, len(self.offset_index._entries), len(self.time_index._entries),
                self.txn_index.entry_count(),
                self._max_ts_offset, self.bytes_since_last_index_entry, self.rolling_based_timestamp)

    def undo_append(self, mark: tuple) -> None:
        """Cut the ``.log``, its indexes and its ``.txnindex`` back to ``mark`` (fsynced) after an
        append failed part way: the segment is byte for byte what it was before it. Raises
        OSError when the disk refuses even that (the caller takes the log offline)."""
        (size, offsets, times, txns, self._max_ts_offset, self.bytes_since_last_index_entry,
         self.rolling_based_timestamp) = mark
        self.log.cut_back(size)
        self.offset_index.cut_back(offsets)
        self.time_index.cut_back(times)
        self.txn_index.cut_back(txns)

    def on_become_inactive(self) -> None:
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    def reserve_indexes(self, size: int) -> None:
        """An active segment loaded from disk: its indexes may grow to ``size`` (written as they
        grow, not preallocated now)."""
        self.offset_index.reserve(size)
        self.time_index.reserve(size)

    def flush(self) -> None:
        self.log.flush()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        """Clean close: final time-index entry, trimmed indexes and .log (as Kafka's close)."""
        self.on_become_inactive()
        self.close_handles()

    def close_handles(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self.log.close()

    # -- index checks
    def layout(self):
        """The segment's batch headers (index_check.walk_segment over the .log, lengths only)."""
        buf = self.log.map()
        try:
            return walk_segment(buf, self.base_offset, end=self.log.size)
        finally:
            del buf

    def ensure_indexes_trusted(self, layout=None) -> None:
        """Check the offset and time indexes against the batches of the ``.log`` (index_check) the
        first time they are used; rebuild them from the batches when they lie (on disk for a
        writer, in memory when read-only) and report it. New entries appended later are right by
        construction."""
        if self._indexes_trusted:
            return
        self._indexes_trusted = True
        if layout is None:          # ``layout``: the caller walked the unchanged .log already
            layout = self.layout()
        raw_offsets = self.offset_index.entry_bytes()
        raw_times = self.time_index.entry_bytes()
        problem = (check_offset_index(raw_offsets, layout, path=self.offset_index.path)
                   or check_time_index(raw_times, layout, closed=not self.is_active(),
                                       path=self.time_index.path))
        if problem is None:
            for index in (self.offset_index, self.time_index):
                if index.untrimmed_slots:
                    # zero slots read from disk: Kafka reads each as a (base offset, 0) entry, which
                    # fails its sanity check (a crash's untrimmed index, or zeros written over one)
                    problem = IndexProblem(index.path, index.entries, "size", index.length,
                                           f"{index.untrimmed_slots} zero-filled slots after the entries")
                    break
        if problem is None:
            return
        self._rebuild_indexes(layout)
        if self.report is not None:
            self.report(DataEvent(REBUILT, "", problem.file, f"index entry {problem.entry}: {problem.field} "
                                  f"{problem.value}: {problem.why}; rebuilt from the batches of "
                                  f"{os.path.basename(self.log.path)}" + (" (in memory)" if self.read_only else "")))

    def _rebuild_indexes(self, layout) -> None:
        """Offset and time index entries as Kafka's LogSegment.recover writes them, from the batch
        headers (the .log itself is not touched)."""
        max_index = self.offset_index.length
        self.offset_index.reset()
        self.time_index.reset()
        valid_bytes = 0
        last_entry = 0
        max_ts, max_off = -1, -1
        for i in range(layout.batches):
            last = int(layout.last[i])
            ts = int(layout.max_ts[i])
            if ts > max_ts:
                max_ts, max_off = ts, last
            if valid_bytes - last_entry > self.index_interval_bytes:
                self.offset_index.append(last, valid_bytes)
                self.time_index.maybe_append(max_ts, max_off)
                last_entry = valid_bytes
            valid_bytes += int(layout.size[i])
        self._max_ts_offset = (max_ts, max_off)
        self.time_index.maybe_append(max_ts, max_off, skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        if max_index > self.offset_index.length:     # an active segment keeps its room to grow
            self.reserve_indexes(max_index)

    # -- reading
    def translate_offset(self, offset: int, starting_position: int = 0):
        """(position, header) of the first batch at/after ``starting_position`` with last offset >= offset."""
        for pos, h in self.log.batch_headers(starting_position):
            last = h.last_offset if h is not None else self._legacy_last_offset(pos)
            if last >= offset:
                return pos, h
        return None

    def _legacy_last_offset(self, pos: int) -> int:
        (off,) = INT64.unpack_from(self.log.read(pos, INT64.size), BASE_OFFSET_OFFSET)
        return off

    def lookup_position(self, offset: int) -> int:
        """The position to scan from for ``offset`` (the offset index's floor entry), trusted."""
        self.ensure_indexes_trusted()
        return self.offset_index.lookup(offset)[1]

    def read_position(self, start_offset: int) -> int | None:
        """Position of the batch holding ``start_offset`` (or the next one), None past the end."""
        pos = self.lookup_position(start_offset)
        found = self.translate_offset(start_offset, pos)
        return None if found is None else found[0]

    def cut_short_at(self) -> int | None:
        """Position of the incomplete batch this segment's bytes end with (a truncated copy, a
        torn block), None when they end with a whole batch. A walk from the last index entry."""
        start = self.lookup_position(self.offset_index.last_offset)
        end = start
        for pos, h in self.log.batch_headers(start):
            if h is not None:
                end = pos + h.size
            else:                   # a legacy entry: its size field read apart
                prefix = self.log.read(pos, LOG_OVERHEAD)
                end = pos + LOG_OVERHEAD + int.from_bytes(prefix[LENGTH_OFFSET:LOG_OVERHEAD], "big", signed=True)
        return end if end < self.log.size else None

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch, or the base offset when empty."""
        self.ensure_indexes_trusted()
        start = self.read_position(self.offset_index.last_offset)
        if start is None:
            return self.base_offset
        last = None
        for pos, h in self.log.batch_headers(start):
            last = h.next_offset if h is not None else self._legacy_last_offset(pos) + 1
        return last if last is not None else self.base_offset

    def batches(self, start_position: int = 0):
        """Batches (RecordBatch/legacy) of the segment from ``start_position``, over a mapping."""
        buf = self.log.map()
        try:
            yield from iter_batches(buf, start_position, self.log.size)
        except CorruptRecordError as e:
            # name the file, as Kafka's FileLogInputStream does ("... in file <path>")
            raise e.located(file=self.log.path) from None

    # -- recovery and truncation
    def recover(self, producer_state=None, leader_epochs=None, apply_batch=None) -> int:
        """Rebuild the indexes from the batches; truncate the invalid tail; bytes truncated.

        ``apply_batch(batch)`` replays each valid v2 batch into producer state / txn index.
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()
        valid_bytes = 0
        last_index_entry = 0
        self._max_ts_offset = (-1, -1)
        buf = self.log.map()
        try:
            for batch in iter_batches(buf, 0, self.log.size):
                batch.ensure_valid()
                last = batch.last_offset
                if not self.can_convert_to_relative_offset(last):
                    raise CorruptRecordError(f"offset {last} overflows the segment's relative range",
                                             file=self.log.path, position=valid_bytes)
                max_ts = batch.max_timestamp
                if max_ts > self.max_timestamp_so_far:
                    self._max_ts_offset = (max_ts, last)
                if valid_bytes - last_index_entry > self.index_interval_bytes:
                    self.offset_index.append(last, valid_bytes)
                    self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
                    last_index_entry = valid_bytes
                valid_bytes += batch.size
                if batch.magic == MAGIC_V2:
                    if leader_epochs is not None:
                        leader_epochs.assign(batch.header.partition_leader_epoch, batch.header.base_offset)
                    if apply_batch is not None:
                        apply_batch(batch)
        except CorruptRecordError:
            pass
        del buf
        truncated = self.log.size - valid_bytes
        self.log.truncate_to(valid_bytes)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.time_index.trim_to_valid_size()
        return truncated

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at/after ``offset``; bytes removed."""
        found = self.translate_offset(offset, self.lookup_position(offset))
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        if found is None:
            return 0
        pos = found[0]
        removed = self.log.truncate_to(pos)
        if pos == 0:
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._max_ts_offset = self.time_index.last_entry()
        return removed

    # -- files
    def file_paths(self) -> list[str]:
        return [self.log.path, self.offset_index.path, self.time_index.path, self.txn_index.path]

    def change_suffix(self, old: str, new: str) -> None:
        """Rename the segment's files from suffix ``old`` to ``new`` (e.g. .cleaned -> .swap)."""
        self.log._writable()
        def renamed(p: str) -> str:
            if old and not p.endswith(old):
                raise StorageError(f"{p} does not end with {old}")
            return (p[:-len(old)] if old else p) + new

        self.log.rename(renamed(self.log.path))
        self.offset_index.rename(renamed(self.offset_index.path))
        self.time_index.rename(renamed(self.time_index.path))
        self.txn_index.rename(renamed(self.txn_index.path))
        self.suffix = new

    def delete_files(self) -> None:
        self.log._writable()
        self.close_handles()
        for p in self.file_paths():
            try:
                os.remove(p)
            except FileNotFoundError:
                pass
