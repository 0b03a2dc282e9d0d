"""A partition's log: its segments, appends, reads, rolls, flushes and retention.

Kafka's LocalLog + UnifiedLog in one class for a single replica (the high watermark is the log end
offset). Opening a log runs the loader (``loader.py``): leftover ``.cleaned``/``.swap``/``.deleted``
files are resolved and unflushed segments recovered, exactly as Kafka's LogLoader does.

Concurrency, as UnifiedLog's ``lock``: every method that changes the log (appends, rolls, flushes,
truncation, retention, segment replacement) holds the partition's re-entrant ``lock``, so threads
of one process (the broker's request handlers, its cleaner and retention) never see a
half-applied change. ``structure_epoch`` counts the changes that invalidate a clean planned
earlier (truncation, segment deletion, replacement); the cleaner swaps its result in only if the
epoch it planned at is still current (Kafka aborts the cleaning of a log being truncated).

Opened ``read_only`` (a reader process beside a writer, a read-only mount), nothing is written:
leftovers are resolved in memory, recovery truncates in memory, snapshots and rebuilt indexes live
in memory, and every write method raises ReadOnlyError.
"""

from __future__ import annotations

import bisect
import functools
import os
import struct
import threading
import time as _time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from ..errors import (CorruptRecordError, InvalidRecordError, InvalidTimestampError,
                      OffsetOutOfRangeError, ReadOnlyError, RecordListTooLargeError,
                      RecordTooLargeError, StorageError, TopicError)
from ..record import compression as codecs
from ..record.batch import (BatchHeader, BatchSpec, CREATE_TIME, LOG_APPEND_TIME, LOG_OVERHEAD, MAGIC_V2,
                            Record, RecordBatch, TIMESTAMP_TYPE_MASK,
                            columnar_records, encode_columnar_batch, iter_batches)
from ..record.control import ABORT, COMMIT, encode_marker, parse_control_key, parse_marker_value
from . import files
from .checkpoint import LeaderEpochCache, LeaderEpochCheckpointFile
from .config import LogConfig
from .events import REBUILT, RETENTION, DataEvent
from .fsutil import fsync_dir
from .producer_state import CLIENT, COORDINATOR, REPLICATION, CompletedTxn, ProducerStateManager
from .segment import FileRecords, LogSegment
from .txn_index import AbortedTxn, collect_aborted

Clock = Callable[[], int]


def system_clock() -> int:
    return int(_time.time() * 1000)


class _MemoryCheckpoint(LeaderEpochCheckpointFile):
    """A read-only log's leader-epoch checkpoint: read from disk, never written."""

    def write(self, entries, *, sync: bool = True) -> None:
        pass


def _writer(method):
    """A method that changes the log: refused when read-only, run under the partition lock."""
    @functools.wraps(method)
    def locked(self, *args, **kwargs):
        if self.read_only:
            raise ReadOnlyError(f"{self.name}: opened read-only; {method.__name__} needs a writer")
        with self.lock:
            if self.deleted:
                # a thread that held this Log across a topic deletion (a produce, the cleaner)
                raise TopicError(f"partition {self.name} was deleted; {method.__name__} refused")
            return method(self, *args, **kwargs)
    return locked


_PREFIX = struct.Struct(">qi")      # a batch's base offset and length field
_NO_BOUND = 2**63 - 1


@dataclass(slots=True)
class ReadSpan:
    """Whole batches of one segment file, as ``Log.read_span`` found them: ``length`` bytes from
    ``position`` of ``file`` (None when nothing is readable), the last of them at ``last_offset``."""
    file: FileRecords | None
    position: int
    length: int
    last_offset: int

    def read(self) -> bytes:
        return self.file.read(self.position, self.length) if self.length else b""


@dataclass
class AppendInfo:
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records: int
    bytes: int
    duplicate: bool = False


class Log:
    """One partition directory ``<topic>-<partition>``."""

    # set (under the lock) when the partition's topic is deleted: every later change is refused
    deleted = False

    def __init__(self, dir_path: str, config: LogConfig, *, clock: Clock = system_clock,
                 recovery_point: int = 0, log_start_offset: int = 0, had_clean_shutdown: bool = False,
                 producer_id_expiration_ms: int = 86400000, leader_epoch: int = 0,
                 read_only: bool = False):
        self.dir = os.path.abspath(dir_path)
        self.topic, self.partition = files.parse_partition_dir(self.dir)
        self.config = config
        self.clock = clock
        self.leader_epoch = leader_epoch
        self.read_only = read_only
        self.lock = threading.RLock()
        self.structure_epoch = 0
        self._txn_indexes_trusted = False
        self.events: list[DataEvent] = []    # what recovery and retention removed or set aside
        self.segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.producer_state = ProducerStateManager(self.dir, f"{self.topic}-{self.partition}",
                                                   producer_id_expiration_ms, read_only=read_only)
        checkpoint_cls = _MemoryCheckpoint if read_only else LeaderEpochCheckpointFile
        self.leader_epochs = LeaderEpochCache(
            checkpoint_cls(os.path.join(self.dir, files.LEADER_EPOCH_CHECKPOINT)))
        from .loader import load_log
        offsets = load_log(self, recovery_point=recovery_point, log_start_offset=log_start_offset,
                           had_clean_shutdown=had_clean_shutdown)
        self.log_start_offset = offsets.log_start_offset
        self.recovery_point = offsets.recovery_point
        self.log_end_offset = offsets.log_end_offset
        self.closed = False
        if getattr(self.leader_epochs, "load_error", None) is not None:
            self._rebuild_leader_epochs(self.leader_epochs.load_error)

    def _rebuild_leader_epochs(self, error) -> None:
        """An unreadable leader-epoch-checkpoint: rebuilt from the batches' partition leader epochs
        (a writer writes it back), and reported."""
        self.leader_epochs.entries = []
        for b in self.batches(self.log_start_offset):
            if b.magic == MAGIC_V2:
                self.leader_epochs.assign(b.header.partition_leader_epoch, b.base_offset)
        if not self.read_only:
            self.leader_epochs.flush()
        what = "rebuilt from the batches" if not self.read_only else "a writer rebuilds it from the batches"
        self.events.append(DataEvent(REBUILT, self.name, self.leader_epochs.checkpoint.path,
                                     f"{error}; {what}"))

    # -- segment bookkeeping
    def _add_segment(self, seg: LogSegment) -> None:
        seg.report = self._report_index_rebuild
        seg.is_active = lambda: bool(self.segments) and self.segments[-1] is seg
        i = bisect.bisect_left(self._bases, seg.base_offset)
        if i < len(self._bases) and self._bases[i] == seg.base_offset:
            self.segments[i] = seg
        else:
            self._bases.insert(i, seg.base_offset)
            self.segments.insert(i, seg)

    def _report_index_rebuild(self, event) -> None:
        event.partition = self.name
        self.events.append(event)

    def _remove_segment(self, base_offset: int) -> LogSegment | None:
        i = bisect.bisect_left(self._bases, base_offset)
        if i < len(self._bases) and self._bases[i] == base_offset:
            del self._bases[i]
            return self.segments.pop(i)
        return None

    @property
    def active_segment(self) -> LogSegment:
        return self.segments[-1]

    def floor_segment(self, offset: int) -> LogSegment | None:
        i = bisect.bisect_right(self._bases, offset) - 1
        return self.segments[i] if i >= 0 else None

    def segments_in_range(self, start: int, end: int) -> list[LogSegment]:
        """Kafka's LogSegments.values(from, to): the segment containing ``start`` and later ones below ``end``."""
        if start == end:
            return []
        if start > end:
            raise StorageError(f"invalid segment range [{start}, {end})")
        i = max(bisect.bisect_right(self._bases, start) - 1, 0)
        j = bisect.bisect_left(self._bases, end)
        return self.segments[i:j]

    def segment_bases(self) -> list[int]:
        return list(self._bases)

    def size(self) -> int:
        return sum(s.size for s in self.segments)

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        first = self.producer_state.first_unstable_offset()
        if first is not None and first < self.high_watermark:
            # UnifiedLog.maybeIncrementFirstUnstableOffset: never below the log start offset
            # (DeleteRecords may move it past the start of an open transaction)
            return max(first, self.log_start_offset)
        return self.high_watermark

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    # -- appending
    @_writer
    def append_records(self, keys: Sequence, values: Sequence, *, timestamps=None, headers=None,
                       producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                       transactional: bool = False, compression: str | int = "none") -> AppendInfo:
        """Encode one batch and append it as a client produce would.

        ``keys``/``values``: Python sequences of bytes/str/None, pyarrow binary/string arrays, or
        2-D uint8 numpy arrays (see ``record.batch.columnar_records``).
        """
        n = len(keys)
        if n == 0:
            raise InvalidRecordError("no records to append")
        if timestamps is None:
            timestamps = np.full(n, self.clock(), dtype=np.int64)
        codec = codecs.CODEC_BY_NAME[compression] if isinstance(compression, str) else compression
        spec = BatchSpec(base_offset=0, compression=codec, transactional=transactional,
                         producer_id=producer_id, producer_epoch=producer_epoch,
                         base_sequence=base_sequence)
        batch = encode_columnar_batch(spec, columnar_records(keys, values, headers), timestamps)
        return self.append_as_leader(batch)

    @_writer
    def append_as_leader(self, data, origin: str = CLIENT) -> AppendInfo:
        """Validate batches from a producer, assign offsets from the log end and append them."""
        buf = bytearray(data)
        batches = self._parse_incoming(buf)
        now = self.clock()
        infos = []
        for pos, batch in batches:
            infos.append(self._append_leader_batch(buf, pos, batch, now, origin))
        first, last = infos[0], infos[-1]
        return AppendInfo(first.first_offset, last.last_offset,
                          max(i.max_timestamp for i in infos),
                          max(infos, key=lambda i: i.max_timestamp).offset_of_max_timestamp,
                          sum(i.records for i in infos), sum(i.bytes for i in infos),
                          all(i.duplicate for i in infos))

    def _parse_incoming(self, buf: bytearray) -> list[tuple[int, RecordBatch]]:
        out = []
        end = 0
        for b in iter_batches(buf):
            if b.magic != MAGIC_V2:
                raise InvalidRecordError(f"{self.name}: produce with magic {b.magic} is not supported; "
                                         f"only RecordBatch v2 is accepted")
            out.append((b.position, b))
            end = b.position + b.size
        if not out:
            raise InvalidRecordError(f"{self.name}: no complete record batch in {len(buf)} bytes")
        if end != len(buf):
            raise CorruptRecordError(f"{len(buf) - end} trailing bytes after the last complete batch",
                                     position=end)
        return out

    def _validate_client_batch(self, b: RecordBatch, now: int) -> None:
        h = b.header
        where = f"{self.name}: batch at position {b.position}"
        if h.size > self.config.max_message_size:
            raise RecordTooLargeError(f"{where}: size {h.size} exceeds max.message.bytes "
                                      f"({self.config.max_message_size})")
        try:
            b.ensure_valid()
        except CorruptRecordError as e:
            raise e.located(position=b.position) from None
        if h.is_control:
            raise InvalidRecordError(f"{where}: clients may not write control batches")
        if h.is_transactional and h.producer_id < 0:
            raise InvalidRecordError(f"{where}: transactional batch without a producer id")
        if h.producer_id >= 0 and h.base_sequence < 0:
            raise InvalidRecordError(f"{where}: producer id {h.producer_id} with sequence {h.base_sequence}")
        if h.records_count != h.last_offset_delta + 1:
            raise InvalidRecordError(f"{where}: {h.records_count} records but last offset delta "
                                     f"{h.last_offset_delta}")
        cols = b.columns()
        if len(cols) and (cols.off_delta != np.arange(len(cols))).any():
            raise InvalidRecordError(f"{where}: record offset deltas must be 0..{len(cols) - 1}")
        if self.config.compact:
            keyless = np.flatnonzero(cols.key_len < 0)
            if keyless.size:
                # Kafka's LogValidator.validateKey: one RecordError per keyless record
                why = f"Compacted topic cannot accept message without key in topic partition {self.name}."
                raise InvalidRecordError(
                    f"{where}: compacted topic cannot accept a record without a key "
                    f"(record {int(keyless[0])} of the batch"
                    + (f", {keyless.size} keyless in all)" if keyless.size > 1 else ")"),
                    record_errors=[(int(i), why) for i in keyless])
        if h.timestamp_type == CREATE_TIME and self.config.get("message.timestamp.type") == "CreateTime":
            ts = b.record_timestamps()
            before = self.config.get("message.timestamp.before.max.ms")
            after = self.config.get("message.timestamp.after.max.ms")
            # as Kafka's LogValidator: records without a timestamp (-1) are not range-checked
            bad = np.flatnonzero((ts != -1) & ((now - ts > before) | (ts - now > after)))
            if bad.size:
                i = int(bad[0])
                raise InvalidTimestampError(
                    f"{where}: record {i} timestamp {int(ts[i])} is out of range "
                    f"(message.timestamp.before.max.ms={before}, after.max.ms={after}, now={now})",
                    record_errors=[(int(j), f"Timestamp {int(ts[j])} of record {int(j)} is out of range.")
                                   for j in bad])
        elif h.timestamp_type == LOG_APPEND_TIME:
            # LogValidator.validateTimestamp: only the broker may set LogAppendTime
            raise InvalidTimestampError(
                f"{where}: the producer set the timestamp type to LogAppendTime; only the broker may",
                record_errors=[(i, "Invalid timestamp type LogAppendTime set by the producer.")
                               for i in range(h.records_count)])
        # Kafka checks the size against segment.bytes last, on the validated batch
        # (UnifiedLog.append: RecordBatchTooLargeException)
        if h.size > self.config.segment_bytes:
            raise RecordListTooLargeError(f"{where}: size {h.size} exceeds segment.bytes "
                                          f"({self.config.segment_bytes})")

    def _conform_to_topic(self, buf: bytearray, pos: int, b: RecordBatch, now: int) -> tuple[bytearray, int, RecordBatch]:
        """Re-encode for compression.type / LogAppendTime as Kafka's LogValidator does."""
        h = b.header
        target = self.config.get("compression.type")
        codec = h.compression if target == "producer" else codecs.CODEC_BY_NAME[target]
        append_time = self.config.get("message.timestamp.type") == "LogAppendTime"
        if codec == h.compression and not append_time:
            return buf, pos, b
        spec = BatchSpec(base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                         compression=codec, timestamp_type=LOG_APPEND_TIME if append_time else CREATE_TIME,
                         transactional=h.is_transactional, producer_id=h.producer_id,
                         producer_epoch=h.producer_epoch, base_sequence=h.base_sequence)
        recs = b.records()
        if codec != h.compression:
            from ..record.batch import encode_batch
            raw = encode_batch(spec, [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in recs],
                               last_offset_delta=h.last_offset_delta)
        else:
            raw = bytes(buf[pos:pos + h.size])
        if append_time:
            raw = bytearray(raw)
            attrs = struct.unpack_from(">h", raw, 21)[0] | TIMESTAMP_TYPE_MASK
            struct.pack_into(">h", raw, 21, attrs)
            struct.pack_into(">q", raw, 35, now)
            from ..record.batch import crc32c
            struct.pack_into(">I", raw, 17, crc32c(bytes(raw[21:])))
        nb = bytearray(raw)
        return nb, 0, RecordBatch(BatchHeader.unpack(nb, 0), nb, 0)

    def _append_leader_batch(self, buf: bytearray, pos: int, b: RecordBatch, now: int, origin: str) -> AppendInfo:
        if origin == CLIENT:
            self._validate_client_batch(b, now)
        buf, pos, b = self._conform_to_topic(buf, pos, b, now)
        h = b.header
        if h.producer_id >= 0 and not h.is_control:
            entry = self.producer_state.producers.get(h.producer_id)
            dup = entry.find_duplicate(h.producer_epoch, h.base_sequence, h.last_sequence) if entry else None
            if dup is not None:
                return AppendInfo(dup.first_offset, dup.last_offset, h.max_timestamp, dup.last_offset,
                                  0, 0, duplicate=True)
        base = self.log_end_offset
        struct.pack_into(">qiib", buf, pos, base, h.length, self.leader_epoch, MAGIC_V2)
        nb = RecordBatch(BatchHeader.unpack(buf, pos), buf, pos)
        return self._append_batches([nb], memoryview(buf)[pos:pos + h.size], origin)

    @_writer
    def append_as_follower(self, data) -> AppendInfo:
        """Append batches that already carry their offsets (replication, tools, tests)."""
        buf = bytes(data)
        batches = [b for b in iter_batches(buf)]
        if not batches:
            raise InvalidRecordError(f"{self.name}: no complete record batch in {len(buf)} bytes")
        prev = self.log_end_offset - 1
        for b in batches:
            if b.magic == MAGIC_V2:
                try:
                    b.ensure_valid()
                except CorruptRecordError as e:
                    raise e.located(position=b.position) from None
            if b.base_offset <= prev or b.base_offset < self.log_end_offset:
                raise InvalidRecordError(
                    f"{self.name}: batch at position {b.position} has base offset {b.base_offset}, "
                    f"not above the log end {self.log_end_offset - 1 if prev < self.log_end_offset else prev}"
                    f" (offsets must increase)")
            if b.size > self.config.segment_bytes:
                raise RecordTooLargeError(f"{self.name}: batch of {b.size} bytes exceeds segment.bytes")
            prev = b.last_offset
        end = batches[-1].position + batches[-1].size
        return self._append_batches(batches, buf[:end], REPLICATION)

    @_writer
    def append_control(self, *, commit: bool, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int = 0, timestamp: int | None = None) -> AppendInfo:
        """Write a COMMIT/ABORT marker as the transaction coordinator would."""
        ts = self.clock() if timestamp is None else timestamp
        data = encode_marker(offset=self.log_end_offset, commit=commit, producer_id=producer_id,
                             producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                             timestamp=ts, partition_leader_epoch=self.leader_epoch)
        b = next(iter_batches(data))
        return self._append_batches([b], data, COORDINATOR)

    def _append_batches(self, batches: list, data: bytes, origin: str) -> AppendInfo:
        first = batches[0].base_offset
        last = batches[-1].last_offset
        max_ts = -1
        offset_of_max = -1
        records = 0
        for b in batches:
            if b.max_timestamp > max_ts:
                max_ts, offset_of_max = b.max_timestamp, b.last_offset
            records += b.records_count
        # validate producer state before anything is written
        infos, completed = self._producer_updates(batches, origin)
        seg = self._maybe_roll(len(data), max_ts, first, last)
        seg.append(last, max_ts, offset_of_max, data)
        for b in batches:
            if b.magic == MAGIC_V2:
                if self.leader_epochs.assign(b.header.partition_leader_epoch, b.base_offset):
                    self.leader_epochs.flush()
        for info in infos.values():
            self.producer_state.update(info)
        for txn in completed:
            if txn.is_aborted:
                lso = self.producer_state.last_stable_offset_after(txn)
                seg.txn_index.append(AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso))
            self.producer_state.complete_txn(txn)
        self.producer_state.last_map_offset = last + 1
        self.log_end_offset = last + 1
        self._maybe_flush_after_append(records)
        return AppendInfo(first, last, max_ts, offset_of_max, records, len(data))

    def _producer_updates(self, batches, origin: str):
        infos = {}
        completed = []
        for b in batches:
            if b.magic != MAGIC_V2 or b.producer_id < 0:
                continue
            h = b.header
            info = infos.get(h.producer_id)
            if info is None:
                info = self.producer_state.prepare_update(h.producer_id, origin)
                infos[h.producer_id] = info
            done = apply_batch_to_producer(info, b)
            if done is not None:
                completed.append(done)
        return infos, completed

    def _maybe_flush_after_append(self, records: int) -> None:
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed >= self.config.get("flush.messages"):
            self.flush()

    def _maybe_roll(self, size: int, max_ts: int, first_offset: int, last_offset: int) -> LogSegment:
        seg = self.active_segment
        now = self.clock()
        if seg.should_roll(now_ms=now, max_timestamp=max_ts, max_offset=last_offset, messages_size=size):
            return self.roll(first_offset)
        return seg

    @_writer
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Close the active segment and start a new one at max(expected, log end offset)."""
        new_base = max(expected_next_offset or 0, self.log_end_offset)
        active = self.active_segment
        if active.base_offset == new_base:
            if active.size == 0:
                return active
            raise StorageError(f"{self.name}: trying to roll a new segment at {new_base} which already exists")
        if new_base < active.base_offset:
            raise StorageError(f"{self.name}: roll offset {new_base} below the active segment {active.base_offset}")
        for suffix in files.SEGMENT_SUFFIXES:
            stale = files.segment_file(self.dir, new_base, suffix)
            if os.path.exists(stale):
                os.remove(stale)
        active.on_become_inactive()
        seg = LogSegment(self.dir, new_base, self.config, now_ms=self.clock(), preallocate_indexes=True,
                         new=True)
        self._add_segment(seg)
        self.producer_state.last_map_offset = new_base
        self.producer_state.take_snapshot()
        self.flush(new_base)
        return seg

    # -- flushing and closing
    @_writer
    def flush(self, offset: int | None = None) -> None:
        """fsync every segment below ``offset`` (default: the log end) and advance the recovery point."""
        upto = self.log_end_offset if offset is None else offset
        if upto <= self.recovery_point:
            return
        for seg in self.segments_in_range(self.recovery_point, upto):
            seg.flush()
        fsync_dir(self.dir)
        self.recovery_point = upto

    def close(self) -> None:
        """Clean close as Kafka's: producer snapshot at the log end, trimmed active indexes, flushed.

        A read-only log only lets go of its files."""
        if self.closed:
            return
        if self.read_only:
            for seg in self.segments:
                seg.close_handles()
            self.closed = True
            return
        with self.lock:
            self._close_locked()

    def _close_locked(self) -> None:
        if self.closed:
            return
        self.producer_state.last_map_offset = self.log_end_offset
        self.producer_state.take_snapshot()
        self.flush()
        for seg in self.segments[:-1]:
            seg.close_handles()
        self.active_segment.close()
        self.closed = True

    # -- reading
    def read_span(self, start_offset: int, max_bytes: int = 1 << 20, *, min_one_batch: bool = True,
                  max_offset: int | None = None) -> ReadSpan:
        """Where Kafka's fetch reads: the whole batches from the one holding ``start_offset``,
        within ``max_bytes`` (at least one batch when ``min_one_batch``), stopping at the first
        batch whose base offset is ``max_offset`` or more (the high watermark or last stable
        offset). Found under the partition lock; ``span.file`` is only safe to read while the
        caller still holds ``self.lock`` (a cleaner swap or retention may close it after)."""
        with self.lock:
            if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
                raise OffsetOutOfRangeError(
                    f"{self.name}: offset {start_offset} is outside "
                    f"[{self.log_start_offset}, {self.log_end_offset}]")
            bound = _NO_BOUND if max_offset is None else max_offset
            if start_offset >= bound:
                return ReadSpan(None, 0, 0, -1)
            i = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
            for seg in self.segments[i:]:
                if seg.base_offset >= bound:
                    break
                pos = seg.read_position(start_offset)
                if pos is None:
                    continue            # the offset is past this segment's last batch (a compaction gap)
                f = seg.log
                length = 0
                last = -1
                for p, h in f.batch_headers(pos):
                    if h is None:
                        # a message-format v0/v1 entry: its offset is its last one (a compressed
                        # wrapper carries its last inner record's)
                        last_offset, size_field = _PREFIX.unpack(f.read(p, LOG_OVERHEAD))
                        base_offset, size = last_offset, size_field + LOG_OVERHEAD
                    else:
                        base_offset, last_offset, size = h.base_offset, h.last_offset, h.size
                    if base_offset >= bound:
                        break
                    if length + size > max_bytes and (length > 0 or not min_one_batch):
                        break
                    length += size
                    last = last_offset
                return ReadSpan(f, pos, length, last)
            return ReadSpan(None, 0, 0, -1)

    def read(self, start_offset: int, max_bytes: int = 1 << 20, *, min_one_batch: bool = True,
             max_offset: int | None = None) -> tuple[int, bytes]:
        """Bytes of whole batches from the one holding ``start_offset`` (Kafka's fetch, ``read_span``);
        (position in the segment file, bytes)."""
        with self.lock:
            span = self.read_span(start_offset, max_bytes, min_one_batch=min_one_batch,
                                  max_offset=max_offset)
            return span.position, span.read()

    def batches(self, start_offset: int | None = None, end_offset: int | None = None) -> Iterator:
        """Every batch (RecordBatch or legacy entry) holding offsets >= start_offset, in order.

        Each segment is mapped under the lock and read outside it, so a writer is never held up;
        a segment replaced or deleted meanwhile is found again from the next offset needed.
        """
        start = self.log_start_offset if start_offset is None else start_offset
        end = 2**63 - 1 if end_offset is None else end_offset
        needed = start
        while needed < end:
            with self.lock:
                i = bisect.bisect_right(self._bases, needed) - 1
                if i < 0:
                    if not self.segments or self.segments[0].base_offset >= end:
                        return
                    i = 0
                seg = self.segments[i]
                nxt = self._bases[i + 1] if i + 1 < len(self._bases) else None
                if seg.base_offset >= end:
                    return
                pos = seg.lookup_position(needed)
                buf, size = seg.log.map(), seg.log.size
            try:
                for b in iter_batches(buf, pos, size):
                    if b.last_offset < needed:
                        continue
                    if b.base_offset >= end:
                        return
                    needed = b.last_offset + 1
                    yield b
            except CorruptRecordError as e:
                raise e.located(file=seg.log.path) from None
            if nxt is None:
                return
            needed = max(needed, nxt)

    def records(self, start_offset: int | None = None, *, include_control: bool = False,
                validate: bool = True) -> Iterator[Record]:
        """Records from ``start_offset`` (Python objects: for tools and small reads)."""
        start = self.log_start_offset if start_offset is None else start_offset
        for b in self.batches(start):
            if validate:
                try:
                    b.ensure_valid()
                except CorruptRecordError as e:
                    seg = self.floor_segment(b.base_offset)
                    raise e.located(file=seg.log.path if seg else None, position=b.position) from None
            if b.is_control and not include_control:
                continue
            for r in b.records():
                if r.offset >= start:
                    yield r

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= target (Kafka's ListOffsets)."""
        if target in (-2, -4):         # EARLIEST, EARLIEST_LOCAL (no tiered storage)
            return self.log_start_offset, -1
        if target == -1:
            return self.log_end_offset, -1
        if target == -3:               # MAX_TIMESTAMP
            return self._offset_of_max_timestamp()
        for seg in self.segments:
            if seg.largest_timestamp() < target:
                continue
            seg.ensure_indexes_trusted()
            _, ts_off = seg.time_index.lookup(target)
            pos = seg.lookup_position(max(ts_off, self.log_start_offset))
            for b in seg.batches(pos):
                if b.max_timestamp < target:
                    continue
                for r in b.records():
                    if r.timestamp >= target and r.offset >= self.log_start_offset:
                        return r.offset, r.timestamp
        return None

    def fetch_offset_for_timestamp(self, target: int, read_committed: bool = False) -> tuple[int, int] | None:
        """Partition.fetchOffsetForTimestamp: (offset, timestamp) as ListOffsets answers it. LATEST
        is the fetchable bound (the LSO for read_committed, else the high watermark), EARLIEST the
        log start even when it equals the bound; a record found at or past the fetchable bound is not
        answered (None)."""
        with self.lock:     # a cleaner swap or retention must not close a segment under the lookup
            fetchable = self.last_stable_offset if read_committed else self.high_watermark
            if target == -1:
                return fetchable, -1
            found = self.offset_for_timestamp(target)
        if target in (-2, -4):          # EARLIEST, EARLIEST_LOCAL: the log start, never filtered
            return found
        if found is None or found[0] >= fetchable:
            return None
        return found

    def _offset_of_max_timestamp(self) -> tuple[int, int] | None:
        """Kafka's MAX_TIMESTAMP lookup: the first record carrying the largest timestamp of the
        (first) segment with the largest maxTimestampSoFar."""
        seg = max(self.segments, key=lambda s: s.max_timestamp_so_far)
        ts, off = seg.max_timestamp_so_far, seg.offset_of_max_timestamp_so_far
        pos = seg.lookup_position(off)
        for b in seg.batches(pos):
            if b.max_timestamp == ts:
                for r in b.records():
                    if r.timestamp == ts:
                        return r.offset, ts
                return None
        return None

    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper_bound), walking txn indexes forward."""
        with self.lock:
            self._ensure_txn_indexes_trusted()
            i = bisect.bisect_right(self._bases, start) - 1
            if i < 0:
                return []
            indexes = [s.txn_index for s in self.segments[i:]]
        return collect_aborted(indexes, start, upper_bound)

    def _ensure_txn_indexes_trusted(self) -> None:
        """The ``.txnindex`` files checked against the log's markers (index_check) before the first
        read_committed read; when one lies they are all rebuilt from the markers (on disk for a
        writer) and that is reported: a wrong entry would serve aborted records."""
        if self._txn_indexes_trusted:
            return
        self._txn_indexes_trusted = True
        from .index_check import TxnCarry, check_txn_index
        from .txn_index import aborted_from_markers
        layouts = [seg.layout() for seg in self.segments]
        carry = TxnCarry()
        problem = None
        for i, seg in enumerate(self.segments):
            nxt = self._bases[i + 1] if i + 1 < len(self._bases) else None
            try:
                raw = b"".join(t.encode() for t in seg.txn_index.entries())
            except StorageError as e:
                problem = str(e)
                break
            found = check_txn_index(raw, layouts[i], next_base=nxt, path=seg.txn_index.path, carry=carry)
            if found is not None:
                problem = str(found)
                break
        if problem is None:
            return
        for seg, txns in zip(self.segments, aborted_from_markers(layouts)):
            seg.txn_index._rewrite(txns)
        where = "rebuilt from the log's markers" + (" (in memory)" if self.read_only else "")
        self.events.append(DataEvent(REBUILT, self.name, self.dir, f"{problem}; every .txnindex {where}"))

    # -- truncation, retention, replacement
    @_writer
    def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            return
        self.structure_epoch += 1
        for seg in [s for s in self.segments if s.base_offset > offset]:
            if seg is self.segments[0]:
                break
            self._remove_segment(seg.base_offset)
            seg.delete_files()
        if not self.segments or self.segments[0].base_offset > offset:
            raise StorageError(f"{self.name}: cannot truncate below the first segment")
        self.active_segment.truncate_to(offset)
        self.active_segment.resize_indexes(self.config.max_index_size)
        if self.active_segment.size == 0:
            self.active_segment.created_ms = self.clock()   # as Kafka's LogSegment.truncateTo
        self.log_end_offset = offset
        self.recovery_point = min(self.recovery_point, offset)
        self.leader_epochs.truncate_from_end(offset)
        self.producer_state.truncate_and_reload(self.log_start_offset, offset, self.clock())
        self.rebuild_producer_state(offset)

    @_writer
    def delete_records_before(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` (Kafka's UnifiedLog.maybeIncrementLogStartOffset
        for DeleteRecords); the new log start offset (the partition's low watermark).

        Nothing is removed here: reads below the new start are out of range at once, and the
        segments wholly below it go at the next retention check (``delete_old_segments``), as in
        Kafka. An offset at or below the current start changes nothing. The caller checkpoints it
        (``DataDir.delete_records``)."""
        if offset < 0:
            raise OffsetOutOfRangeError(f"The offset {offset} for partition {self.name} is not valid")
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {offset} of partition {self.name} "
                f"since it is larger than the high watermark {self.high_watermark}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self.leader_epochs.truncate_from_start(offset)
            # ProducerStateManager.onLogStartOffsetIncremented; a single replica has no
            # unreplicated transactions to drop
            self.producer_state.last_map_offset = max(self.producer_state.last_map_offset, offset)
        return self.log_start_offset

    def rebuild_producer_state(self, last_offset: int) -> None:
        from .loader import rebuild_producer_state
        rebuild_producer_state(self, last_offset, reload_from_clean_shutdown=False)

    @_writer
    def delete_old_segments(self) -> int:
        """Kafka's deleteOldSegments: log start, size and time retention; segments removed."""
        return sum(self._delete_segments(*rule()) for rule in self._retention_rules())

    @_writer
    def has_segments_to_delete(self) -> bool:
        """Would ``delete_old_segments`` remove a segment now? (Only then is the cleaner paused.)
        A later rule sees the log an earlier one left; the first that deletes answers yes."""
        return any(rule()[0] for rule in self._retention_rules())

    def _retention_rules(self):
        """deleteOldSegments' rules in Kafka's order, each giving (segments it deletes, why). A
        topic whose configs are unknown (a copied Kafka dir) gets none: its retention would be a
        guess."""
        if not getattr(self.config, "known", True):
            return []
        if self.config.delete:
            return [self._log_start_offset_breached, self._retention_size_breached,
                    self._retention_ms_breached]
        return [self._log_start_offset_breached]

    def _deletable(self, predicate) -> list[LogSegment]:
        out = []
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = nxt.base_offset if nxt else self.log_end_offset
            if self.high_watermark >= upper and predicate(seg, nxt) and not (nxt is None and seg.size == 0):
                out.append(seg)
            else:
                break
        return out

    def _delete_segments(self, deletable: list[LogSegment], reason: str = "") -> int:
        if not deletable:
            return 0
        self.structure_epoch += 1
        for seg in deletable:
            nxt = next((s.base_offset for s in self.segments if s.base_offset > seg.base_offset),
                       self.log_end_offset)
            self.events.append(DataEvent(RETENTION, self.name, seg.log.path, reason,
                                         first_offset=seg.base_offset, last_offset=nxt - 1,
                                         bytes=seg.size))
        if len(deletable) == len(self.segments):
            self.roll()
        for seg in deletable:
            self._remove_segment(seg.base_offset)
        self.log_start_offset = max(self.log_start_offset, self.segments[0].base_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        for seg in deletable:
            seg.delete_files()
            self.producer_state.delete_snapshot(seg.base_offset)
        self.producer_state.delete_snapshots_before(self.log_start_offset)
        return len(deletable)

    def _log_start_offset_breached(self) -> tuple[list[LogSegment], str]:
        return (self._deletable(lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset),
                f"below the log start offset {self.log_start_offset}")

    def _retention_size_breached(self) -> tuple[list[LogSegment], str]:
        limit = self.config.get("retention.bytes")
        size = self.size()
        if limit < 0 or size < limit:
            return [], ""
        diff = [size - limit]

        def pred(seg, nxt):
            if diff[0] - seg.size >= 0:
                diff[0] -= seg.size
                return True
            return False
        return self._deletable(pred), f"retention.bytes={limit} exceeded (log size {size})"

    def _retention_ms_breached(self) -> tuple[list[LogSegment], str]:
        retention = self.config.get("retention.ms")
        if retention < 0:
            return [], ""
        now = self.clock()
        return (self._deletable(lambda seg, nxt: now - seg.largest_timestamp() > retention),
                f"retention.ms={retention}: newest record older than that at {now}")

    @_writer
    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Kafka's replaceSegments: ``.cleaned`` -> ``.swap`` -> live, old ones -> ``.deleted`` -> gone.

        Every step is a rename; the loader finishes or rolls back a crash between any two of them.
        """
        self.structure_epoch += 1
        new_segments = sorted(new_segments, key=lambda s: s.base_offset)
        live = {s.base_offset for s in self.segments}
        old_segments = [s for s in old_segments if s.base_offset in live]
        for seg in reversed(new_segments):
            seg.change_suffix(files.CLEANED_SUFFIX, files.SWAP_SUFFIX)
        fsync_dir(self.dir)
        for seg in reversed(new_segments):
            self._add_segment(seg)
        new_bases = {s.base_offset for s in new_segments}
        for seg in old_segments:
            if seg.base_offset not in new_bases:
                self._remove_segment(seg.base_offset)
                self.producer_state.delete_snapshot(seg.base_offset)
            seg.close_handles()
            for p in seg.file_paths():
                if os.path.exists(p):
                    os.replace(p, p + files.DELETED_SUFFIX)
        fsync_dir(self.dir)
        for seg in new_segments:
            seg.change_suffix(files.SWAP_SUFFIX, "")
        fsync_dir(self.dir)
        for seg in old_segments:
            for p in seg.file_paths():
                try:
                    os.remove(p + files.DELETED_SUFFIX)
                except FileNotFoundError:
                    pass

    # -- convenience for the cleaner and tools
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset()

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """pid -> (last data offset or None, epoch): what the cleaner's rule R1 protects."""
        return {pid: (None if e.is_empty else e.last_data_offset, e.producer_epoch)
                for pid, e in self.producer_state.producers.items()}


def apply_batch_to_producer(info, b) -> CompletedTxn | None:
    """Replay one v2 batch into a ProducerAppendInfo (data batch or transaction marker)."""
    h = b.header
    if h.is_control:
        if h.records_count == 0:
            return None
        rec = b.records()[0]
        key = parse_control_key(rec.key)
        if key.type not in (ABORT, COMMIT):
            return None
        coordinator_epoch = parse_marker_value(rec.value)
        return info.append_end_txn_marker(key.type == COMMIT, h.producer_epoch, coordinator_epoch,
                                          h.base_offset, rec.timestamp)
    info.append_data_batch(h.producer_epoch, h.base_sequence, h.last_sequence, h.max_timestamp,
                           h.base_offset, h.last_offset, h.is_transactional)
    return None
