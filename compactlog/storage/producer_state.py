"""Producer state: idempotent/transactional producers of a partition, and their snapshots.

Follows Kafka's ProducerStateManager: per producer id the epoch, the last (up to 5) batches'
sequence ranges, the coordinator epoch and the first offset of an open transaction. The log's last
stable offset and the cleaner's rule "keep each active producer's last batch" both read it, and
DescribeProducers reports it (``active_producer_states``).

Also the verification state of KIP-890 (Kafka's ``VerificationStateEntry``): before a producer's
first transactional batch of a transaction is appended, the partition hands out a guard
(``maybe_create_verification_entry``) and asks the transaction coordinator whether the partition
is in the producer's transaction; the batch is appended only with that same guard, and any
transactional append of the producer (its data or a marker) consumes the guard. A marker written
between the answer and the append so makes the append fail instead of opening a transaction the
coordinator does not know (a hanging transaction).
"""

from __future__ import annotations

import os
import struct
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

from ..record import crc as crc32c

from ..errors import (InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError, StorageError,
                      TransactionCoordinatorFencedError)
from . import files
from .fsutil import atomic_write, open_regular

NO_SEQUENCE = -1
NO_EPOCH = -1
BATCHES_TO_RETAIN = 5

CLIENT = "client"
REPLICATION = "replication"
COORDINATOR = "coordinator"

_SNAP_HEADER = struct.Struct(">hI")
_SNAP_COUNT = struct.Struct(">i")
_SNAP_ENTRY = struct.Struct(">qhiqiqiq")
SNAPSHOT_VERSION = 1


def decrement_sequence(seq: int, delta: int) -> int:
    if seq - delta < 0:
        return 0x7FFFFFFF - (delta - seq) + 1
    return seq - delta


class BatchMetadata(NamedTuple):
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None
    batches: deque = field(default_factory=deque)

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def copy_without_batches(self) -> "ProducerStateEntry":
        return ProducerStateEntry(self.producer_id, self.producer_epoch, self.coordinator_epoch,
                                  self.last_timestamp, self.current_txn_first_offset, deque())

    def maybe_update_epoch(self, epoch: int) -> bool:
        if self.producer_epoch != epoch:
            self.batches.clear()
            self.producer_epoch = epoch
            return True
        return False

    def _add_metadata(self, meta: BatchMetadata) -> None:
        if len(self.batches) == BATCHES_TO_RETAIN:
            self.batches.popleft()
        self.batches.append(meta)

    def add_batch(self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int) -> None:
        self.maybe_update_epoch(epoch)
        self._add_metadata(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update_from(self, other: "ProducerStateEntry") -> None:
        self.maybe_update_epoch(other.producer_epoch)
        for meta in other.batches:
            self._add_metadata(meta)
        self.coordinator_epoch = other.coordinator_epoch
        self.current_txn_first_offset = other.current_txn_first_offset
        self.last_timestamp = other.last_timestamp

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None


class ActiveProducer(NamedTuple):
    """One producer as DescribeProducers reports it (Kafka's ``UnifiedLog.activeProducers``)."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int        # -1: no open transaction


class VerificationGuard:
    """An identity: the one token a verified first transactional append must present."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "SENTINEL" if self is SENTINEL else f"<VerificationGuard {id(self):#x}>"


# the guard of "no verification was started" (the producer's transaction was already open): it
# never matches an entry, so an append carrying it passes only while that transaction is open
SENTINEL = VerificationGuard()


@dataclass
class VerificationStateEntry:
    """A verification in flight for a producer (Kafka's ``VerificationStateEntry``): its guard and
    the lowest sequence and latest epoch seen while verifying, so that a higher sequence cannot
    be written before the lower one that started the verification (an out-of-order loop)."""
    timestamp: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        if epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
        if epoch > self.epoch:
            self.epoch = epoch
            self.lowest_sequence = sequence


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerAppendInfo:
    """The changes one append makes to one producer, validated before they are applied."""

    def __init__(self, partition: str, producer_id: int, current: ProducerStateEntry, origin: str,
                 verification: VerificationStateEntry | None = None):
        self.partition = partition
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        # the verification in flight, until a transactional batch of this append consumes it
        self.verification = verification
        self.consumes_verification = False
        self.updated = current.copy_without_batches()
        self.started_txn_first_offsets: list[int] = []

    def _check_epoch(self, epoch: int, offset: int, *, strict: bool = False) -> None:
        """Kafka's checkProducerEpoch: an older epoch is fenced; ``strict`` (a TV2 marker, KIP-1228)
        refuses the current epoch too, since every TV2 transaction ends with a bumped epoch."""
        current = self.updated.producer_epoch
        if (epoch <= current if strict else epoch < current) and self.origin != REPLICATION:
            raise InvalidProducerEpochError(
                f"{self.partition}: epoch {epoch} of producer {self.producer_id} at offset {offset} is "
                f"{'not above' if strict else 'smaller than'} the last seen epoch {current}")

    def _check_sequence(self, epoch: int, first_seq: int, offset: int) -> None:
        if self.verification is not None and first_seq > self.verification.lowest_sequence:
            raise OutOfOrderSequenceError(
                f"{self.partition}: out of order sequence {first_seq} for producer {self.producer_id} at "
                f"offset {offset}: the verification of its transaction started at sequence "
                f"{self.verification.lowest_sequence}")
        if epoch != self.updated.producer_epoch:
            if first_seq != 0 and self.updated.producer_epoch != NO_EPOCH:
                raise OutOfOrderSequenceError(
                    f"{self.partition}: invalid sequence {first_seq} for new epoch {epoch} of producer "
                    f"{self.producer_id} at offset {offset} (current epoch {self.updated.producer_epoch})")
            return
        if not self.updated.is_empty:
            current_last = self.updated.last_seq
        elif epoch == self.current.producer_epoch:
            current_last = self.current.last_seq
        else:
            current_last = NO_SEQUENCE
        in_sequence = first_seq == current_last + 1 or (first_seq == 0 and current_last == 0x7FFFFFFF)
        if not (self.current.producer_epoch == NO_EPOCH or in_sequence):
            raise OutOfOrderSequenceError(
                f"{self.partition}: out of order sequence {first_seq} for producer {self.producer_id} at "
                f"offset {offset} (last sequence {current_last})")

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, last_timestamp: int,
                          first_offset: int, last_offset: int, transactional: bool) -> None:
        self._check_epoch(epoch, first_offset)
        if self.origin == CLIENT:
            self._check_sequence(epoch, first_seq, first_offset)
        self.updated.add_batch(epoch, last_seq, last_offset, last_offset - first_offset, last_timestamp)
        if self.updated.current_txn_first_offset is not None and not transactional:
            raise InvalidTxnStateError(
                f"{self.partition}: expected a transactional write from producer {self.producer_id} at offset {first_offset}")
        if self.updated.current_txn_first_offset is None and transactional:
            self.updated.current_txn_first_offset = first_offset
            self.started_txn_first_offsets.append(first_offset)
        if transactional:
            self._consume_verification()

    def _consume_verification(self) -> None:
        """A transactional batch (data or marker) ends the verification: the transaction is now
        open in the partition, or over (UnifiedLog.updateProducers)."""
        self.verification = None
        self.consumes_verification = True

    def append_end_txn_marker(self, commit: bool, epoch: int, coordinator_epoch: int, offset: int,
                              timestamp: int, transaction_version: int = 0) -> CompletedTxn | None:
        self._check_epoch(epoch, offset, strict=transaction_version >= 2)
        if self.updated.coordinator_epoch > coordinator_epoch and self.origin != REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"{self.partition}: coordinator epoch {coordinator_epoch} of the marker of producer "
                f"{self.producer_id} at offset {offset} is older than {self.updated.coordinator_epoch} "
                f"(a fenced coordinator)")
        self._consume_verification()
        completed = None
        if self.updated.current_txn_first_offset is not None:
            completed = CompletedTxn(self.producer_id, self.updated.current_txn_first_offset, offset, not commit)
        self.updated.maybe_update_epoch(epoch)
        self.updated.coordinator_epoch = coordinator_epoch
        self.updated.current_txn_first_offset = None
        self.updated.last_timestamp = timestamp
        return completed


class ProducerStateManager:
    """Kafka's ProducerStateManager.

    ``read_only``: snapshots are read from disk but taken and deleted in memory only (an overlay
    over the directory), so a read-only open rebuilds the same state without writing.
    """

    def __init__(self, log_dir: str, partition: str, producer_id_expiration_ms: int = 86400000, *,
                 read_only: bool = False):
        self.log_dir = log_dir
        self.partition = partition
        self.expiration_ms = producer_id_expiration_ms
        self.read_only = read_only
        self._taken: dict[int, bytes] = {}      # read-only: snapshots taken in memory
        self._deleted: set[int] = set()        # read-only: snapshots deleted in memory
        # a writer's snapshot offsets on disk: listed once, then kept current by its own takes and
        # deletes (only this manager and its siblings change them; a load asks several times)
        self._on_disk: list[set[int] | None] = [None]
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, int] = {}   # first offset -> producer id
        # producer id -> the verification in flight (in memory only, as Kafka's)
        self.verifications: dict[int, VerificationStateEntry] = {}
        self.last_map_offset = 0
        self.last_snap_offset = 0

    # -- snapshots on disk
    def _listed_offsets(self) -> list[int]:
        out = []
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            names = []
        for name in names:
            if name.endswith(files.SNAPSHOT_SUFFIX) and name[:-len(files.SNAPSHOT_SUFFIX)].isdecimal():
                out.append(files.offset_from_filename(name))
        return out

    def snapshot_offsets(self) -> list[int]:
        if not self.read_only:
            listed = self._on_disk[0]
            if listed is None:
                listed = self._on_disk[0] = set(self._listed_offsets())
            return sorted(listed)
        out = self._listed_offsets()
        if self.read_only:
            out = [o for o in out if o not in self._deleted]
            out.extend(o for o in self._taken if o not in out)
        return sorted(out)

    def sibling(self) -> "ProducerStateManager":
        """An empty manager of the same partition; read-only ones share the in-memory snapshots,
        as writable ones share the directory."""
        other = ProducerStateManager(self.log_dir, self.partition, self.expiration_ms, read_only=self.read_only)
        if self.read_only:
            other._taken, other._deleted = self._taken, self._deleted
        else:
            other._on_disk = self._on_disk
        return other

    def _read_snapshot_at(self, offset: int) -> list:
        if offset in self._taken:
            # decoded afresh each time: loaded entries are mutated by later appends
            return decode_snapshot(self._taken[offset], self.snapshot_path(offset))
        return read_snapshot(self.snapshot_path(offset))

    def snapshot_path(self, offset: int) -> str:
        return files.segment_file(self.log_dir, offset, files.SNAPSHOT_SUFFIX)

    def latest_snapshot_offset(self) -> int | None:
        offs = self.snapshot_offsets()
        return offs[-1] if offs else None

    def take_snapshot(self, sync: bool = True, *, sync_dir: bool = True) -> str | None:
        """Write a snapshot at ``last_map_offset`` when it is past the last one; its path, or None.
        ``sync_dir=False``: the caller fsyncs the log directory afterwards (``atomic_write``)."""
        if self.last_map_offset > self.last_snap_offset:
            path = self.snapshot_path(self.last_map_offset)
            if self.read_only:
                self._taken[self.last_map_offset] = encode_snapshot(self.producers.values())
                self._deleted.discard(self.last_map_offset)
                self.last_snap_offset = self.last_map_offset
                return None
            write_snapshot(path, self.producers.values(), sync=sync, sync_dir=sync_dir)
            if self._on_disk[0] is not None:
                self._on_disk[0].add(self.last_map_offset)
            self.last_snap_offset = self.last_map_offset
            return path
        return None

    def delete_snapshot(self, offset: int) -> None:
        if self.read_only:
            self._taken.pop(offset, None)
            self._deleted.add(offset)
            return
        try:
            os.remove(self.snapshot_path(offset))
        except FileNotFoundError:
            pass
        if self._on_disk[0] is not None:
            self._on_disk[0].discard(offset)

    def delete_snapshots_before(self, offset: int) -> None:
        for o in self.snapshot_offsets():
            if o < offset:
                self.delete_snapshot(o)

    def remove_stray_snapshots(self, segment_bases: list[int]) -> None:
        """Kafka's removeStraySnapshots: keep snapshots at segment bases and the latest stray one."""
        bases = set(segment_bases)
        latest_stray = None
        for o in self.snapshot_offsets():
            if o not in bases:
                if latest_stray is not None:
                    self.delete_snapshot(latest_stray)
                latest_stray = o
        if latest_stray is not None and segment_bases and latest_stray < max(segment_bases):
            self.delete_snapshot(latest_stray)

    # -- state
    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= self.expiration_ms

    def remove_expired(self, now_ms: int) -> None:
        """Kafka's removeExpiredProducers: idle producers without an open transaction, and
        verifications that never led to an append."""
        for pid in [p for p, e in self.producers.items() if self.is_expired(e, now_ms)]:
            del self.producers[pid]
        for pid in [p for p, v in self.verifications.items() if now_ms - v.timestamp >= self.expiration_ms]:
            del self.verifications[pid]

    def clear(self) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()

    def load_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self.ongoing_txns[entry.current_txn_first_offset] = entry.producer_id

    def load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self.last_snap_offset = self.last_map_offset = log_start_offset
                return
            try:
                entries = self._read_snapshot_at(latest)
            except StorageError:
                self.delete_snapshot(latest)
                continue
            for e in entries:
                if not self.is_expired(e, now_ms):
                    self.load_entry(e)
            self.last_snap_offset = self.last_map_offset = latest
            return

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        for o in self.snapshot_offsets():
            if o > log_end_offset or o <= log_start_offset:
                self.delete_snapshot(o)
        if log_end_offset != self.last_map_offset:
            self.clear()
            self.load_from_snapshot(log_start_offset, now_ms)
        else:
            if self.last_map_offset < log_start_offset:
                self.last_map_offset = log_start_offset
            latest = self.latest_snapshot_offset()
            self.last_snap_offset = latest if latest is not None else log_start_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.clear()
        for o in self.snapshot_offsets():
            self.delete_snapshot(o)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    def prepare_update(self, producer_id: int, origin: str) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.partition, producer_id, current, origin,
                                  self.verifications.get(producer_id))

    def update(self, info: ProducerAppendInfo) -> None:
        current = self.producers.get(info.producer_id)
        if current is not None:
            current.update_from(info.updated)
        else:
            self.producers[info.producer_id] = info.updated
        for first in info.started_txn_first_offsets:
            self.ongoing_txns[first] = info.producer_id
        if info.consumes_verification:
            self.verifications.pop(info.producer_id, None)

    # -- transaction verification (KIP-890)
    def has_ongoing_txn(self, producer_id: int, producer_epoch: int) -> bool:
        """The producer has a transaction open here, of this epoch (UnifiedLog.hasOngoingTransaction)."""
        e = self.producers.get(producer_id)
        return e is not None and e.current_txn_first_offset is not None and e.producer_epoch == producer_epoch

    def maybe_create_verification_entry(self, producer_id: int, sequence: int, epoch: int,
                                        now_ms: int) -> VerificationStateEntry:
        entry = self.verifications.get(producer_id)
        if entry is None:
            entry = self.verifications[producer_id] = VerificationStateEntry(now_ms, sequence, epoch)
        entry.maybe_update_lowest_sequence_and_epoch(sequence, epoch)
        return entry

    def verification_entry(self, producer_id: int) -> VerificationStateEntry | None:
        return self.verifications.get(producer_id)

    def complete_txn(self, txn: CompletedTxn) -> None:
        if self.ongoing_txns.pop(txn.first_offset, None) is None:
            raise StorageError(f"{self.partition}: completing transaction {txn} which was not started")

    def last_stable_offset_after(self, txn: CompletedTxn) -> int:
        """LSO right after ``txn`` completes: the earliest other open transaction, or marker + 1."""
        for first in sorted(self.ongoing_txns):
            if self.ongoing_txns[first] != txn.producer_id:
                return first
        return txn.last_offset + 1

    def first_unstable_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def active_producers(self) -> dict[int, ProducerStateEntry]:
        return self.producers

    def active_producer_states(self) -> list[ActiveProducer]:
        """Every producer with state here, as DescribeProducers reports them."""
        return [ActiveProducer(pid, e.producer_epoch, e.last_seq, e.last_timestamp, e.coordinator_epoch,
                               -1 if e.current_txn_first_offset is None else e.current_txn_first_offset)
                for pid, e in self.producers.items()]


def write_snapshot(path: str, entries, *, sync: bool = True, sync_dir: bool = True) -> None:
    atomic_write(path, encode_snapshot(entries), sync=sync, sync_dir=sync_dir)


def encode_snapshot(entries) -> bytes:
    """A ``.snapshot`` file's bytes (Kafka's ProducerStateManager.writeSnapshot, version 1)."""
    entries = sorted(entries, key=lambda e: e.producer_id)
    body = [_SNAP_COUNT.pack(len(entries))]
    for e in entries:
        body.append(_SNAP_ENTRY.pack(
            e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
            e.last_timestamp, e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset))
    payload = b"".join(body)
    return _SNAP_HEADER.pack(SNAPSHOT_VERSION, crc32c.crc32c(payload)) + payload


def read_snapshot(path: str) -> list[ProducerStateEntry]:
    """Entries of a ``.snapshot`` file; StorageError naming the file when corrupt."""
    with open_regular(path) as f:
        data = f.read()
    return decode_snapshot(data, path)


def decode_snapshot(data: bytes, path: str = "<snapshot>") -> list[ProducerStateEntry]:
    if len(data) < 10:
        raise StorageError(f"{path}: snapshot of {len(data)} bytes is shorter than its 10-byte header")
    version, crc = _SNAP_HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise StorageError(f"{path}: position 0: unknown snapshot version {version}")
    computed = crc32c.crc32c(data[6:])
    if computed != crc:
        raise StorageError(f"{path}: position 2: stored CRC {crc:#010x} does not match computed {computed:#010x}")
    (count,) = _SNAP_COUNT.unpack_from(data, 6)
    if count < 0 or 10 + count * _SNAP_ENTRY.size != len(data):
        raise StorageError(f"{path}: position 6: {count} entries do not fit {len(data)} bytes")
    out = []
    for i in range(count):
        pid, epoch, last_seq, last_off, delta, ts, coord, txn_first = _SNAP_ENTRY.unpack_from(
            data, 10 + i * _SNAP_ENTRY.size)
        batches = deque()
        if last_off >= 0:
            batches.append(BatchMetadata(last_seq, last_off, delta, ts))
        out.append(ProducerStateEntry(pid, epoch, coord, ts, txn_first if txn_first >= 0 else None, batches))
    return out
