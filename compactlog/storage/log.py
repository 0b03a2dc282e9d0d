"""A partition's log: appends, producer state, high watermark and last stable offset, retention.
Kafka's UnifiedLog for a single replica (the high watermark is the log end offset).

Built as ``UnifiedLog.apply`` builds it: the collaborators (an empty ``LogSegments``, the producer
state manager, the leader-epoch cache), then ``loader.LogLoader`` fills the segments and returns
the loaded offsets, then a ``LocalLog`` (segment files, roll, flush, reads, truncation, swaps) is
made from them. Append rules are ``validator.py``'s, retention's rules ``retention.py``'s.

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

import functools
import os
import threading
import time as _time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from ..errors import (InvalidProducerEpochError, InvalidRecordError, LogOfflineError, OffsetOutOfRangeError,
                      ReadOnlyError, StorageError, TopicError)
from ..record import compression as codecs
from ..record.batch import (SMALL_BATCH_RECORDS, BatchHeader, BatchSpec, Record, RecordBatch, columnar_records,
                            encode_columnar_batch, encode_marker, encode_plain_small_batch, encode_small_batch)
from ..record.layout import MAGIC_V2
from . import files, producer_append, retention
from .checkpoint import LeaderEpochCache, LeaderEpochCheckpointFile
from .config import LogConfig
from .events import OFFLINE, QUARANTINE, RETENTION, DataEvent
from .fsutil import fsync_dir
from .isolation import last_fetchable_offset
from .loader import LogLoader, rebuild_producer_state, repair_segments, replay_producer_state_from
from .local_log import LocalLog, ReadSpan
from .producer_append import Pending, ProducerUpdates
from .producer_state import (CLIENT, COORDINATOR, REPLICATION, SENTINEL, ActiveProducer, ProducerStateManager,
                             VerificationGuard)
from .segment import LogSegment
from .segment_source import LocalDirSource, SegmentSource
from .segments import NO_UPPER_BOUND, LogSegments
from .timestamp_lookup import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, fetchable_answer
from .txn_index import AbortedTxn
from .validator import (assign_offsets, conform_batch, own_batch, parse_batches, validate_follower_batches,
                        validated_batch)

Clock = Callable[[], int]


def system_clock() -> int:
    return int(_time.time() * 1000)


class _MemoryCheckpoint(LeaderEpochCheckpointFile):
    """A read-only log's leader-epoch checkpoint: read from disk, never written."""

    def write(self, entries, *, sync: bool = True, sync_dir: bool = True) -> None:
        pass


def _reason(error: Exception) -> str:
    """An I/O failure in a few words (the strerror, or the message), for logs and answers."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error)


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
            if self.offline is not None:
                self.check_online()         # refused, saying why
            return method(self, *args, **kwargs)
    return locked


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
    # why the log was taken offline (``take_offline``), None while it is online
    offline: str | None = None

    def __init__(self, dir_path: str, config: LogConfig, *, clock: Clock = system_clock,
                 recovery_point: int = 0, log_start_offset: int = 0, had_clean_shutdown: bool = False,
                 producer_id_expiration_ms: int = 86400000, leader_epoch: int = 0,
                 read_only: bool = False):
        path = os.path.abspath(dir_path)
        self.topic, self.partition = files.parse_partition_dir(path)
        self.name = f"{self.topic}-{self.partition}"        # fixed for the log's life
        self.clock = clock
        self.leader_epoch = leader_epoch
        self.read_only = read_only
        self.lock = threading.RLock()
        self.structure_epoch = 0
        self.events: list[DataEvent] = []    # what recovery and retention removed or set aside
        self.producer_state = ProducerStateManager(path, self.name, producer_id_expiration_ms,
                                                   read_only=read_only)
        checkpoint_cls = _MemoryCheckpoint if read_only else LeaderEpochCheckpointFile
        self.leader_epochs = LeaderEpochCache(checkpoint_cls(os.path.join(path, files.LEADER_EPOCH_CHECKPOINT)))
        segments = LogSegments(report=self._report_index_rebuild)
        offsets = LogLoader(path, config, segments, self.producer_state, self.leader_epochs, clock=clock,
                            name=self.name, recovery_point=recovery_point, log_start_offset=log_start_offset,
                            had_clean_shutdown=had_clean_shutdown, read_only=read_only,
                            events=self.events, leader_epoch=leader_epoch,
                            remote_log_enabled=config.remote_log_enabled).load()
        self._local = LocalLog(path, config, segments, recovery_point=offsets.recovery_point,
                               log_end_offset=offsets.log_end_offset, clock=clock, read_only=read_only,
                               name=self.name, lock=self.lock, events=self.events)
        self.log_start_offset = offsets.log_start_offset
        # UnifiedLog._localLogStartOffset: the first local offset; below it (down to the log
        # start) a tiered log's records are only in the remote tier
        self.local_log_start_offset = max(self.log_start_offset, segments.first.base_offset)
        # UnifiedLog.highestOffsetInRemoteStorage: set by the remote log manager (-1: nothing copied)
        self.highest_remote_offset = -1
        self.closed = False

    def _report_index_rebuild(self, event) -> None:
        event.partition = self.name
        self.events.append(event)

    # -- the local log's state, as callers read it
    @property
    def dir(self) -> str:
        return self._local.dir

    @property
    def segment_source(self) -> SegmentSource:
        """Where the segments are for code that does not hold this log (a cleaning task, a
        reader): its partition directory."""
        return LocalDirSource(self._local.dir)

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @config.setter
    def config(self, config: LogConfig) -> None:   # a topic's configs altered (DataDir)
        self._local.config = config

    @property
    def segments(self) -> LogSegments:
        return self._local.segments

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def recovery_point(self) -> int:
        return self._local.recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        self._local.recovery_point = offset

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active

    def floor_segment(self, offset: int) -> LogSegment | None:
        return self.segments.floor(offset)

    def segments_in_range(self, start: int, end: int) -> list[LogSegment]:
        """Kafka's LogSegments.values(from, to): the segment containing ``start`` and later ones below ``end``."""
        return self.segments.in_range(start, end)

    def segment_bases(self) -> list[int]:
        return self.segments.bases()

    def size(self) -> int:
        return self._local.size()

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
    def first_local_offset(self) -> int:
        """Where local reads start: the local log start, never below the log start."""
        return max(self.log_start_offset, self.local_log_start_offset)

    @property
    def remote_log_enabled(self) -> bool:
        """UnifiedLog.remoteLogEnabled: the topic is tiered and the broker's tiered storage is on."""
        return self.config.remote_log_enabled

    # -- appending
    @_writer
    def append_records(self, keys: Sequence, values: Sequence, *, timestamps=None, headers=None,
                       producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                       transactional: bool = False, compression: str | int = "none", origin: str = CLIENT,
                       verification_guard: VerificationGuard | None = None, trusted: bool = False) -> AppendInfo:
        """Encode one batch and append it as a client produce would (or, with ``origin``
        COORDINATOR, as the group coordinator writes: no sequence check, no duplicate lookup).
        ``trusted``: the caller's records need no client checks (a coordinator's own keys and
        timestamps, ``validator.own_batch``); the size limits still apply.

        ``keys``/``values``: Python sequences of bytes/str/None, pyarrow binary/string arrays, or
        2-D uint8 numpy arrays (see ``record.batch.columnar_records``).
        """
        n = len(keys)
        if n == 0:
            raise InvalidRecordError("no records to append")
        if timestamps is None:
            timestamps = np.full(n, self.clock(), dtype=np.int64)
        codec = codecs.CODEC_BY_NAME[compression] if isinstance(compression, str) else compression
        small = n <= SMALL_BATCH_RECORDS and isinstance(keys, (list, tuple)) and isinstance(values, (list, tuple)) \
            and not (headers is not None and any(headers))
        if small and trusted and producer_id < 0 and not transactional:
            return self._append_own_small(codec, [int(t) for t in timestamps], keys, values)
        spec = BatchSpec(base_offset=0, compression=codec, transactional=transactional,
                         producer_id=producer_id, producer_epoch=producer_epoch,
                         base_sequence=base_sequence)
        if small:
            batch = encode_small_batch(spec, range(n), [int(t) for t in timestamps], keys, values)
        else:
            batch = encode_columnar_batch(spec, columnar_records(keys, values, headers), timestamps)
        return self.append_as_leader(batch, origin, verification_guard=verification_guard, _own=trusted)

    def _append_own_small(self, codec: int, timestamps: list, keys, values) -> AppendInfo:
        """A coordinator's own few records without a producer (``__transaction_state``), encoded
        at their final offset and leader epoch: the bytes ``append_as_leader`` would store (neither
        field is under the CRC, ``assign_offsets`` only writes them), without the copy, the re-parse
        and the header rewrite of a client's batch. Under the lock (``append_records``)."""
        now = self.clock()
        if codec == codecs.NONE:        # the coordinators' records: encoded with their header in one call
            raw, header = encode_plain_small_batch(self.log_end_offset, self.leader_epoch, timestamps, keys, values)
        else:
            spec = BatchSpec(base_offset=self.log_end_offset, partition_leader_epoch=self.leader_epoch,
                             compression=codec)
            raw = encode_small_batch(spec, range(len(keys)), timestamps, keys, values)
            header = BatchHeader.unpack(raw, 0)
        b = own_batch(RecordBatch(header, raw, 0), self.config, now, partition=self.name)
        data = raw if b.buffer is raw else memoryview(b.buffer)[b.position:b.position + b.size]
        return self._append_batches([b], data, ProducerUpdates(), now)

    @_writer
    def append_as_leader(self, data, origin: str = CLIENT, *,
                         verification_guard: VerificationGuard | None = None, _own: bool = False) -> AppendInfo:
        """Validate batches from a producer, assign offsets from the log end and append them.

        All or nothing, as Kafka's UnifiedLog.append: every batch is validated and conformed, and
        the producer state it changes (epochs, sequences, duplicates) checked, before the first
        byte is written; a request with one refused batch leaves the log as it was.

        ``verification_guard``: what ``maybe_start_transaction_verification`` returned for the
        producer of a transactional batch; such a batch is then appended only if it continues the
        producer's open transaction or its verification is still the one in flight (KIP-890).
        None: no verification required."""
        buf = bytearray(data)
        batches = parse_batches(buf, self.name)
        now = self.clock()
        planned = self._validate_leader_batches(batches, now, origin, verification_guard, _own)
        infos = [p if isinstance(p, AppendInfo) else self._append_batches([p[0]], p[1], p[2], now)
                 for p in planned]
        if len(infos) == 1:
            return infos[0]             # a client's request: one batch
        first, last = infos[0], infos[-1]
        return AppendInfo(first.first_offset, last.last_offset,
                          max(i.max_timestamp for i in infos),
                          max(infos, key=lambda i: i.max_timestamp).offset_of_max_timestamp,
                          sum(i.records for i in infos), sum(i.bytes for i in infos),
                          all(i.duplicate for i in infos))

    def _validate_leader_batches(self, batches: list, now: int, origin: str,
                                 verification_guard: VerificationGuard | None = None, own: bool = False) -> list:
        """Each batch validated (a client's), conformed, then answered as a duplicate (an
        AppendInfo) or given its offsets and checked producer-state changes (batch, bytes,
        ProducerUpdates), against the state the batches before it leave. Nothing is written."""
        pending = Pending()
        next_offset = self.log_end_offset
        out = []
        last = batches[-1]
        for b in batches:
            # a coordinator's data (transactional offset commits) is validated as a client's:
            # LogValidator runs for both, only markers are the coordinator's own
            if own:
                b = own_batch(b, self.config, now, partition=self.name)
            elif origin == CLIENT or not b.header.is_control:
                b = validated_batch(b, self.config, now, partition=self.name, client=origin == CLIENT)
            else:
                b = conform_batch(b, self.config, now)
            h = b.header
            # only a client retries a batch (a coordinator's transactional offsets all start at
            # sequence 0 and are never duplicates: analyzeAndValidateProducerState)
            if origin == CLIENT and h.producer_id >= 0 and not h.is_control:
                dup = producer_append.find_duplicate(self.producer_state, h, pending)
                if dup is not None:
                    out.append(AppendInfo(dup.first_offset, dup.last_offset, h.max_timestamp, dup.last_offset,
                                          0, 0, duplicate=True))
                    continue
            is_last = b is last
            b = assign_offsets(b, next_offset, self.leader_epoch)
            updates = producer_append.analyze(self.producer_state, [b], origin, pending,
                                              verification_guard=verification_guard, record=not is_last)
            out.append((b, memoryview(b.buffer)[b.position:b.position + b.size], updates))
            next_offset = b.last_offset + 1
        return out

    @_writer
    def append_as_follower(self, data) -> AppendInfo:
        """Append batches that already carry their offsets (replication, tools, tests)."""
        buf = bytes(data)
        batches = validate_follower_batches(buf, self.log_end_offset, self.config, partition=self.name)
        updates = producer_append.analyze(self.producer_state, batches, REPLICATION)
        return self._append_batches(batches, buf[:batches[-1].position + batches[-1].size], updates)

    @_writer
    def append_control(self, *, commit: bool, producer_id: int, producer_epoch: int,
                       coordinator_epoch: int = 0, timestamp: int | None = None,
                       transaction_version: int = 0) -> AppendInfo:
        """Write a COMMIT/ABORT marker as the transaction coordinator would.

        Refused (nothing written) with InvalidProducerEpochError when ``producer_epoch`` is older
        than the producer's here (not newer, for a ``transaction_version`` 2 marker), and with
        TransactionCoordinatorFencedError when ``coordinator_epoch`` is older than the last one
        seen for the producer (ProducerAppendInfo.appendEndTxnMarker)."""
        ts = self.clock() if timestamp is None else timestamp
        offset = self.log_end_offset
        data = encode_marker(offset=offset, commit=commit, producer_id=producer_id,
                             producer_epoch=producer_epoch, coordinator_epoch=coordinator_epoch,
                             timestamp=ts, partition_leader_epoch=self.leader_epoch)
        # the fields the marker was made of go to the producer state as they are: reading its
        # record back (``producer_append.analyze``) would find the same ones
        updates = producer_append.analyze_marker(self.producer_state, producer_id, producer_epoch, commit,
                                                 coordinator_epoch, offset, ts, transaction_version)
        return self._append_batches([RecordBatch(BatchHeader.unpack(data, 0), data, 0)], data, updates,
                                    ts if timestamp is None else None)

    def maybe_start_transaction_verification(self, producer_id: int, sequence: int,
                                             producer_epoch: int) -> VerificationGuard:
        """The first step of KIP-890's verification (UnifiedLog.maybeStartTransactionVerification):
        InvalidProducerEpochError for an epoch older than the producer's here; SENTINEL when the
        producer's transaction of this epoch is already open here (no need to ask the
        coordinator); else the guard of a verification in flight, which the append must carry."""
        with self.lock:
            state = self.producer_state
            entry = state.producers.get(producer_id)
            if entry is not None and producer_epoch < entry.producer_epoch:
                raise InvalidProducerEpochError(
                    f"{self.name}: epoch {producer_epoch} of producer {producer_id} is smaller than "
                    f"the last seen epoch {entry.producer_epoch}")
            if state.has_ongoing_txn(producer_id, producer_epoch):
                return SENTINEL
            return state.maybe_create_verification_entry(producer_id, sequence, producer_epoch,
                                                         self.clock()).guard

    def active_producers(self) -> list[ActiveProducer]:
        """The producers with state in this partition (UnifiedLog.activeProducers), for
        DescribeProducers."""
        with self.lock:
            return self.producer_state.active_producer_states()

    def _append_batches(self, batches: list, data, updates: ProducerUpdates, now: int | None = None) -> AppendInfo:
        """Write validated batches (their producer-state changes already checked) and apply them.
        ``now``: the clock as the caller read it for this append (None: read here), for the roll
        check.

        All or nothing on disk too: every file an append writes (the ``.log``, its indexes, the
        ``.txnindex``, the leader-epoch checkpoint) is written before anything changes in memory,
        and a write that fails (a full disk, a short write, EIO) is undone: the segment cut back
        to where it was, fsynced, the epochs restored, and the append refused with a
        StorageError (KAFKA_STORAGE_ERROR), so that no torn bytes stay behind to lie under the
        next append and nothing unacknowledged is ever served. A log whose undo fails too goes
        offline (``take_offline``)."""
        if len(batches) == 1 and batches[0].__class__ is RecordBatch:     # a leader's append: one header
            h = batches[0].header
            first, last, records = h.base_offset, h.last_offset, h.records_count
            max_ts = h.max_timestamp
            max_ts, offset_of_max = (max_ts, last) if max_ts > -1 else (-1, -1)
        else:
            first = batches[0].base_offset
            last = batches[-1].last_offset
            max_ts = -1
            offset_of_max = -1
            records = 0
            for b in batches:
                if b.max_timestamp > max_ts:
                    max_ts, offset_of_max = b.max_timestamp, b.last_offset
                records += b.records_count
        # the local log's fields read directly, the roll check inline: five
        # appends a single-record transaction (issue 28)
        local = self._local
        seg = local.segments.active
        if seg.should_roll(now_ms=self.clock() if now is None else now, max_timestamp=max_ts, max_offset=last,
                           messages_size=len(data)):
            self.roll(first)
            seg = local.segments.active
        mark = seg.append_mark()
        leader_epochs = self.leader_epochs
        epochs = list(leader_epochs.entries)
        latest = epochs[-1][0] if epochs else -1
        log_end = local.log_end_offset
        try:
            local.append(last, max_ts, offset_of_max, data)
            changed = False
            for b in batches:
                # only a newer epoch changes the cache (LeaderEpochCache.assign)
                if b.magic == MAGIC_V2 and b.header.partition_leader_epoch > latest:
                    changed |= leader_epochs.assign(b.header.partition_leader_epoch, b.base_offset)
            if changed:
                leader_epochs.flush()
            if updates.completed:       # only a marker completes a transaction (an abort: index entries)
                for entry in producer_append.aborted_entries(self.producer_state, updates):
                    seg.txn_index.append(entry)
        except (OSError, StorageError) as e:
            self._undo_append(seg, mark, log_end, epochs, e)
        if updates.infos or updates.completed:
            producer_append.apply(self.producer_state, updates)
        self.producer_state.last_map_offset = last + 1
        if local.log_end_offset - local.recovery_point >= local.config.flush_messages:
            self.flush()
        return AppendInfo(first, last, max_ts, offset_of_max, records, len(data))

    def _undo_append(self, seg: LogSegment, mark: tuple, log_end: int, epochs: list, error: Exception):
        """Put the segment and the epochs back as they were before a failed append, then refuse
        it; offline when even that fails."""
        reason = _reason(error)
        try:
            seg.undo_append(mark)
            self._local.log_end_offset = log_end
            if self.leader_epochs.entries != epochs:
                self.leader_epochs.entries = epochs
                self.leader_epochs.flush()
        except (OSError, StorageError) as undo:
            self.take_offline(f"an append failed ({reason}) and could not be undone ({_reason(undo)})")
            raise LogOfflineError(f"{self.name} is offline: {self.offline}") from None
        # undone: the caller sees the write's own error (an I/O error names its file), as before
        if isinstance(error, OSError) and error.filename is None:
            raise OSError(error.errno, error.strerror, seg.log.path) from None
        raise error

    def check_online(self) -> None:
        if self.offline is not None:
            raise LogOfflineError(f"{self.name} is offline: {self.offline}")

    def take_offline(self, why: str) -> None:
        """Refuse every later read and write of this log (KAFKA_STORAGE_ERROR) until the writer
        restarts: its files may not be what memory says (an undo that failed, a failed fsync, a
        swap cut short), and recovery at the next start checks them. Kafka takes the whole log
        dir offline (its LogDirFailureChannel); one partition is all one failed file concerns."""
        if self.offline is None:
            self.offline = why
            self.events.append(DataEvent(OFFLINE, self.name, self.dir,
                                         f"{why}; every request for it is refused (KAFKA_STORAGE_ERROR) "
                                         f"until the next start recovers it"))

    def append_is_quick(self, size: int, max_timestamp: int, records: int) -> bool:
        """Whether appending one batch of ``size`` bytes (``records`` records, its max timestamp)
        would only write to the page cache: no roll (a roll fsyncs the old segment), no flush due
        (``flush.messages``), no new leader epoch to checkpoint, nobody holding the lock now, the
        log open and writable. A guess made before the append (the broker answers such a
        produce on its event loop, see ``server/apis/produce.py``); it never changes the log."""
        if self.read_only or self.closed or self.offline is not None or self.deleted:
            return False
        if not self.lock.acquire(blocking=False):
            return False
        try:
            # the local log's fields read directly: asked four times a single-record transaction
            local = self._local
            config = local.config
            epochs = self.leader_epochs.entries
            if self.leader_epoch >= 0 and (not epochs or epochs[-1][0] != self.leader_epoch):
                return False
            log_end = local.log_end_offset
            if log_end + records - local.recovery_point >= config.flush_messages:
                return False
            now = self.clock()
            if config.message_timestamp_type == "LogAppendTime":
                max_timestamp = now         # what the append stamps the batch with
            last = log_end + records - 1 if records > 0 else log_end
            return not local.segments.active.should_roll(now_ms=now, max_timestamp=max_timestamp, max_offset=last,
                                                         messages_size=size)
        finally:
            self.lock.release()

    @_writer
    def roll(self, expected_next_offset: int | None = None) -> LogSegment:
        """Close the active segment and start a new one at max(expected, log end offset), with a
        producer snapshot at its base (UnifiedLog.roll)."""
        active = self.active_segment
        seg = self._local.roll(expected_next_offset)
        if seg is active:
            return seg
        self.producer_state.last_map_offset = seg.base_offset
        self._snapshot_and_flush(seg.base_offset)
        return seg

    def _snapshot_and_flush(self, offset: int | None = None) -> None:
        """A producer snapshot at ``last_map_offset`` and the flush up to ``offset`` (roll, close),
        with one fsync of the directory for the snapshot's rename and a new segment's files."""
        snapshot = self.producer_state.take_snapshot(sync_dir=False)
        if not self.flush(offset) and snapshot is not None:
            fsync_dir(self.dir)

    # -- flushing and closing
    @_writer
    def flush(self, offset: int | None = None) -> bool:
        """fsync every segment below ``offset`` (default: the log end) and advance the recovery
        point; whether the directory was fsynced too. A failed fsync takes the log offline: the
        kernel may have dropped the pages it could not write, so what it still serves from
        memory may not be on disk."""
        try:
            return self._local.flush(offset)
        except OSError as e:
            self.take_offline(f"fsync failed: {_reason(e)}")
            raise LogOfflineError(f"{self.name} is offline: {self.offline}") from None

    def close(self, *, abandon: bool = False) -> None:
        """Clean close as Kafka's: producer snapshot at the log end, trimmed active indexes, flushed.

        A read-only log only lets go of its files; so does an offline one, and one ``abandon``ed
        (its clean close failed): the next start recovers them as after a crash."""
        if self.closed:
            return
        if self.read_only or self.offline is not None or abandon:
            # an offline log is left as it is on disk for the next start's recovery
            self._local.close_handles()
            self.closed = True
            return
        with self.lock:
            if self.closed:
                return
            self.producer_state.last_map_offset = self.log_end_offset
            self._snapshot_and_flush()
            self._local.close()
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
            self.check_online()
            return self._local.read_span(start_offset, max_bytes, min_one_batch,
                                         NO_UPPER_BOUND if max_offset is None else max_offset,
                                         log_start_offset=self.first_local_offset)

    def read(self, start_offset: int, max_bytes: int = 1 << 20, *, min_one_batch: bool = True,
             max_offset: int | None = None) -> tuple[int, bytes]:
        """Bytes of whole batches from the one holding ``start_offset`` (Kafka's fetch, ``read_span``);
        (position in the segment file, bytes)."""
        with self.lock:
            span = self.read_span(start_offset, max_bytes, min_one_batch=min_one_batch,
                                  max_offset=max_offset)
            return span.position, span.read()

    def batches(self, start_offset: int | None = None, end_offset: int | None = None) -> Iterator:
        """Every batch (RecordBatch or legacy entry) holding offsets >= start_offset, in order;
        a writer is never held up by the reading (``LocalLog.batches``)."""
        self.check_online()
        start = self.first_local_offset if start_offset is None else start_offset
        return self._local.batches(start, NO_UPPER_BOUND if end_offset is None else end_offset)

    def records(self, start_offset: int | None = None, *, include_control: bool = False,
                validate: bool = True) -> Iterator[Record]:
        """Records from ``start_offset`` (Python objects: for tools and small reads)."""
        self.check_online()
        start = self.first_local_offset if start_offset is None else start_offset
        return self._local.records(start, include_control=include_control, validate=validate)

    def offset_for_timestamp(self, target: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= target (Kafka's ListOffsets)."""
        if target == EARLIEST_TIMESTAMP:
            return self.log_start_offset, -1
        return self._local.offset_for_timestamp(target, self.first_local_offset)

    def fetch_offset_for_timestamp(self, target: int, read_committed: bool = False) -> tuple[int, int] | None:
        """Partition.fetchOffsetForTimestamp: (offset, timestamp) as ListOffsets answers it. LATEST
        is the fetchable bound (the LSO for read_committed, else the high watermark), EARLIEST the
        log start even when it equals the bound; a record found at or past the fetchable bound is not
        answered (None)."""
        with self.lock:     # a cleaner swap or retention must not close a segment under the lookup
            self.check_online()
            fetchable = last_fetchable_offset(self, read_committed)
            if target == LATEST_TIMESTAMP:
                return fetchable, -1
            found = self.offset_for_timestamp(target)
        return fetchable_answer(found, fetchable, target=target)

    def collect_aborted_transactions(self, start: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start, upper_bound), walking txn indexes forward."""
        return self._local.collect_aborted_transactions(start, upper_bound)

    # -- truncation, retention, replacement, repair
    @_writer
    def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end_offset:
            return
        self.structure_epoch += 1
        self._local.truncate_to(offset)
        self.leader_epochs.truncate_from_end(offset)
        self.producer_state.truncate_and_reload(self.log_start_offset, offset, self.clock())
        self.rebuild_producer_state(offset)

    @_writer
    def truncate_fully_and_start_at(self, offset: int, *, producers=(), leader_epochs=(),
                                    reason: str = "") -> list[DataEvent]:
        """Kafka's ``UnifiedLog.truncateFullyAndStartAt`` for a tiered log whose local copy ends
        below its remote tier (a directory restored from an older copy, emptied, or cut by
        recovery): every local segment removed, an empty one started at ``offset`` (the remote
        tier's end + 1), so that the next append does not reuse offsets the remote tier holds. The
        log start offset stays (the remote tier serves below ``offset``). ``producers``: the
        producer state as of ``offset`` (the remote tier's last producer snapshot), ``leader_epochs``:
        (epoch, start offset) entries up to it. A non-empty segment's bytes are kept beside it
        (``.quarantined``) and reported, never deleted. The events reported."""
        from .repair import numbered_path
        if offset < self.log_end_offset:
            raise StorageError(f"{self.name}: cannot start at {offset}, below the log end {self.log_end_offset}")
        events: list[DataEvent] = []

        def set_aside(seg: LogSegment) -> None:
            nxt = self.segments.next_base(seg)
            kept = numbered_path(seg.log.path, ".quarantined")
            seg.close_handles()
            os.link(seg.log.path, kept)      # the bytes stay under a new name; delete_files drops the old one
            events.append(DataEvent(QUARANTINE, self.name, seg.log.path, reason or f"the local log ends below "
                                    f"offset {offset}", first_offset=seg.base_offset,
                                    last_offset=(self.log_end_offset if nxt is None else nxt) - 1,
                                    bytes=seg.size, kept_at=kept))
        self.structure_epoch += 1
        try:
            self._local.truncate_fully_and_start_at(offset, set_aside)
            fsync_dir(self.dir)
        except (OSError, StorageError) as e:
            # part way (a segment kept aside and removed, the next not): the files and the segment
            # map disagree until the next start, whose reconciliation begins again from the files
            self.take_offline(f"starting afresh at offset {offset} failed part way: {_reason(e)}")
            raise LogOfflineError(f"{self.name} is offline: {self.offline}") from None
        self.local_log_start_offset = offset
        self.producer_state.truncate_fully_and_start_at(offset)
        for entry in producers:
            self.producer_state.load_entry(entry)
        self.producer_state.take_snapshot()
        merged = dict(self.leader_epochs.entries)
        for epoch, start in leader_epochs:
            if start < offset:
                merged[epoch] = min(start, merged.get(epoch, start))
        entries = sorted(merged.items())
        self.leader_epochs.entries = [e for i, e in enumerate(entries) if i == 0 or e[1] > entries[i - 1][1]]
        self.leader_epochs.flush()
        self.events.extend(events)
        return events

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
            # UnifiedLog.maybeIncrementLogStartOffset raises the local log start with it
            self.local_log_start_offset = max(self.local_log_start_offset, offset)
            self.leader_epochs.truncate_from_start(offset)
            # ProducerStateManager.onLogStartOffsetIncremented; a single replica has no
            # unreplicated transactions to drop
            self.producer_state.last_map_offset = max(self.producer_state.last_map_offset, offset)
        return self.log_start_offset

    def rebuild_producer_state(self, last_offset: int) -> None:
        rebuild_producer_state(self.segments, self.producer_state, last_offset, self.log_start_offset,
                               reload_from_clean_shutdown=False, now=self.clock())

    @_writer
    def delete_old_segments(self) -> int:
        """Kafka's deleteOldSegments: the rules of ``retention.rules`` (log start, size, time)
        applied one after the other; segments removed."""
        return sum(self._delete_segments(*rule(self.segments, self.log_end_offset, self.high_watermark))
                   for rule in self._retention_rules())

    def _retention_rules(self) -> list:
        if self.remote_log_enabled:
            return retention.tiered_rules(self.config, self.log_start_offset, self.highest_remote_offset,
                                          self.clock)
        return retention.rules(self.config, self.log_start_offset, self.clock)

    @_writer
    def has_segments_to_delete(self) -> bool:
        """Would ``delete_old_segments`` remove a segment now? (Only then is the cleaner paused.)
        The first rule that deletes answers yes."""
        return any(rule(self.segments, self.log_end_offset, self.high_watermark)[0]
                   for rule in self._retention_rules())

    def _delete_segments(self, deletable: list[LogSegment], reason: str = "") -> int:
        if not deletable:
            return 0
        self.structure_epoch += 1
        for seg in deletable:
            nxt = self.segments.next_base(seg)
            self.events.append(DataEvent(RETENTION, self.name, seg.log.path, reason,
                                         first_offset=seg.base_offset,
                                         last_offset=(self.log_end_offset if nxt is None else nxt) - 1,
                                         bytes=seg.size))
        if len(deletable) == len(self.segments):
            self.roll()
        for seg in deletable:
            self.segments.remove(seg.base_offset)
        first = self.segments.first.base_offset
        if self.config.remote_copy_enabled:
            # UnifiedLog.incrementStartOffset: deleting copied segments moves only the local log
            # start; the records stay readable from the remote tier
            self.local_log_start_offset = max(self.local_log_start_offset, first)
        else:
            self.log_start_offset = max(self.log_start_offset, first)
            self.local_log_start_offset = max(self.local_log_start_offset, self.log_start_offset)
            self.leader_epochs.truncate_from_start(self.log_start_offset)
        for seg in deletable:
            seg.delete_files()
            self.producer_state.delete_snapshot(seg.base_offset)
        self.producer_state.delete_snapshots_before(self.local_log_start_offset)
        return len(deletable)

    @_writer
    def increment_log_start_offset(self, offset: int) -> int:
        """Raise the log start offset to ``offset`` after remote retention deleted the remote
        segments below it (UnifiedLog.maybeIncrementLogStartOffset, reason SegmentDeletion); the
        local log start goes with it when below. The new log start offset."""
        if offset > self.log_start_offset:
            if offset > self.high_watermark:
                raise OffsetOutOfRangeError(f"{self.name}: log start {offset} above the high watermark "
                                            f"{self.high_watermark}")
            self.log_start_offset = offset
            self.local_log_start_offset = max(self.local_log_start_offset, offset)
            self.leader_epochs.truncate_from_start(offset)
            self.producer_state.last_map_offset = max(self.producer_state.last_map_offset, offset)
        return self.log_start_offset

    @_writer
    def replace_segments(self, new_segments: list[LogSegment], old_segments: list[LogSegment]) -> None:
        """Kafka's replaceSegments (``LocalLog.replace_segments``); the producer snapshot of each
        old segment whose base offset no new segment takes is deleted with it."""
        self.structure_epoch += 1
        try:
            self._local.replace_segments(new_segments, old_segments,
                                         on_dropped=self.producer_state.delete_snapshot)
        except (OSError, StorageError) as e:
            # renamed part way: the files and the segment map may disagree until the loader
            # finishes or rolls back the swap at the next start (as after a crash)
            self.take_offline(f"a segment swap failed part way: {_reason(e)}")
            raise LogOfflineError(f"{self.name} is offline: {self.offline}") from None

    def repair(self) -> list[DataEvent]:
        """``verify --repair`` (``loader.repair_segments``), then the offsets, producer state and
        leader epochs made to follow; the data events of the repair (empty when all was valid)."""
        with self.lock:
            first_events = len(self.events)
            first_repaired = repair_segments(self, self.segments, self.log_start_offset)
            if first_repaired is None:
                return []
            self._local.log_end_offset = self.active_segment.read_next_offset()
            self.recovery_point = min(self.recovery_point, first_repaired)
            replay_producer_state_from(self.segments, self.producer_state, first_repaired, self.log_end_offset,
                                       self.log_start_offset, now=self.clock())
            self.leader_epochs.truncate_from_end(self.log_end_offset)
            self.flush()
            return self.events[first_events:]

    # -- convenience for the cleaner and tools
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset()

    def last_records_of_active_producers(self) -> dict[int, tuple[int | None, int]]:
        """pid -> (last data offset or None, epoch): what the cleaner's rule R1 protects."""
        return {pid: (None if e.is_empty else e.last_data_offset, e.producer_epoch)
                for pid, e in self.producer_state.producers.items()}
