"""compactlog's Python API: a data dir as a compacted changelog, for services and scripts.

::

    import compactlog

    with compactlog.open("data", write=True) as log:           # the writer: holds DIR/.lock
        log.create_topic("prices", partitions=3, configs={"cleanup.policy": "compact"},
                         if_not_exists=True)
        log.send("prices", b"p3", b"10")                        # routed by Kafka's partitioner
        log.send_arrow("prices", keys=pa.array([...]), values=pa.array([...]))

    with compactlog.open("data") as log:                        # a reader: never writes
        for rec in log.read("prices", offset="earliest"):
            ...
        log.latest("prices", b"p3")                             # the key's current record
        table = log.latest_state("prices")                      # pyarrow.Table, no Spark

One writer per data dir (``write=True`` takes the data-dir lock, as the CLI's writers and the
broker do: a second writer gets ``DataDirLockedError`` naming the holder); any number of readers,
which open everything read-only and work beside a writer. Records are written in Kafka's format,
so the CLI, the broker, the Spark source and Kafka itself read them.

The CLI commands are thin adapters over the same storage calls; names here are stable.
"""

from __future__ import annotations

import os
import time
from typing import Iterable, Iterator, NamedTuple, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401 - pa.compute

from .errors import CompactlogError, ReadOnlyError, TopicError
from .producer import BatchRefused, Producer, RecordRefused, outgoing_records
from .record.batch import LOG_APPEND_TIME
from .storage import files
from .storage.datadir import DataDir, load_broker_config
from .storage.isolation import READ_COMMITTED, READ_UNCOMMITTED, is_read_committed
from .storage.partitioner import partitions_for_keys
from .storage.reader import PartitionReader
from .storage.visible import EARLIEST, LATEST, OFFSET, TIMESTAMP, StartSpec, VisibleRecords

__all__ = ["open", "DataDirectory", "ConsumerRecord", "RecordMetadata", "READ_COMMITTED", "READ_UNCOMMITTED"]

MAX_BATCH_RECORDS = 10_000
Bytes = bytes | bytearray | memoryview | str | None


class ConsumerRecord(NamedTuple):
    """One record as a consumer sees it."""
    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: str          # "CreateTime" or "LogAppendTime"
    key: bytes | None
    value: bytes | None
    headers: tuple               # ((name, bytes | None), ...)


class RecordMetadata(NamedTuple):
    """Where an appended batch went: its partition and the offsets it was given."""
    topic: str
    partition: int
    first_offset: int
    last_offset: int


def open(path: str | os.PathLike, *, write: bool = False, create: bool = False,
         overrides: dict[str, str] | None = None) -> "DataDirectory":
    """Open a data dir. ``write``: take the data-dir lock (one writer at a time); ``create``: make the
    directory when missing (writers only); ``overrides``: broker settings with Kafka's names, over
    ``DIR/server.properties``."""
    return DataDirectory(os.fspath(path), write=write, create=create, overrides=overrides)


def _as_bytes(value: Bytes, what: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"{what} must be bytes, str or None, not {type(value).__name__}")


class DataDirectory:
    """A data directory: topics of Kafka partition logs. Use ``compactlog.open``."""

    def __init__(self, path: str, *, write: bool = False, create: bool = False,
                 overrides: dict[str, str] | None = None):
        path = os.path.abspath(path)
        if create and not write:
            raise CompactlogError("create=True needs write=True (a reader never writes)")
        if os.path.exists(path) and not os.path.isdir(path):
            raise CompactlogError(f"{path}: not a directory")
        if not os.path.isdir(path):
            if not create:
                raise CompactlogError(f"{path}: data directory does not exist")
            os.makedirs(path)
        from . import settings  # noqa: F401 - every owner's settings, checked in server.properties
        broker = load_broker_config(path, dict(overrides or {}))
        self._dd = DataDir(path, broker=broker, writable=write, command="compactlog (Python API)")
        self._producer = Producer(self._dd, batch_records=MAX_BATCH_RECORDS)

    @property
    def _partitioner(self):
        """The sticky partitioner every send shares (tests steer its draws)."""
        return self._producer.partitioner

    # -- the directory
    @property
    def path(self) -> str:
        return self._dd.path

    @property
    def writable(self) -> bool:
        return self._dd.writable

    def topics(self) -> list[str]:
        return self._dd.topics()

    def partitions(self, topic: str) -> list[int]:
        return self._dd.partitions(topic)

    def create_topic(self, topic: str, partitions: int = 1, configs: dict[str, str] | None = None, *,
                     if_not_exists: bool = False) -> bool:
        """Create a topic (Kafka's config names and validation); False when it exists and
        ``if_not_exists``."""
        if if_not_exists and self._dd.has_topic(topic):
            return False
        self._dd.create_topic(topic, partitions, dict(configs or {}))
        return True

    def delete_topic(self, topic: str) -> None:
        self._dd.delete_topic(topic)

    def alter_topic(self, topic: str, set_configs: dict[str, str] | None = None,
                    delete_configs: Sequence[str] = ()) -> None:
        self._dd.alter_topic(topic, dict(set_configs or {}), list(delete_configs))

    def topic_config(self, topic: str) -> dict:
        """The topic's effective configs (overrides, else broker defaults, else Kafka's)."""
        return self._dd.topic_config(topic).to_dict()

    # -- writing
    def send(self, topic: str, key: Bytes, value: Bytes, headers: Iterable[tuple[str, Bytes]] | None = None,
             partition: int | None = None, timestamp: int | None = None) -> RecordMetadata:
        """Append one record now (a batch of one) and return where it went.

        The partition is Kafka's: ``partition`` if given, else murmur2 of the key, else the
        sticky partition of keyless records (Kafka's built-in partitioner). For many records at
        once use ``send_many`` or ``send_arrow``: one batch per partition is much faster.
        """
        return self.send_many(topic, [(key, value, headers, partition, timestamp)])[0]

    def send_many(self, topic: str, records: Iterable[tuple]) -> list[RecordMetadata]:
        """Append (key, value[, headers[, partition[, timestamp]]]) tuples, batched per partition in
        arrival order; one RecordMetadata per appended batch. Every record is checked against the
        topic before the first append (the broker's rules: a refused one appends nothing)."""
        now = self._dd.clock()
        keys, values, headers, partitions, stamps = [], [], [], [], []
        for rec in records:
            key, value, hdrs, partition, ts = (tuple(rec) + (None, None, None))[:5]
            keys.append(_as_bytes(key, "key"))
            values.append(_as_bytes(value, "value"))
            headers.append([(str(h), _as_bytes(v, "header value")) for h, v in hdrs] if hdrs else None)
            partitions.append(partition)
            stamps.append(now if ts is None else int(ts))
        return self._send(topic, outgoing_records(keys, values, np.array(stamps, dtype=np.int64),
                                                  headers=headers, partitions=partitions), now)

    def send_arrow(self, topic: str, keys, values, *, partition: int | None = None,
                   timestamps=None, compression: str = "none") -> list[RecordMetadata]:
        """Append records from pyarrow arrays (binary or string; nulls are null keys / tombstones),
        partitioned by Kafka's partitioner in one numba pass (``partition`` forces one), encoded by
        the columnar batch encoder: the fast path for bulk loads."""
        keys = pa.array(keys) if not isinstance(keys, (pa.Array, pa.ChunkedArray)) else keys
        values = pa.array(values) if not isinstance(values, (pa.Array, pa.ChunkedArray)) else values
        now = self._dd.clock()
        stamps = now if timestamps is None else np.asarray(timestamps, dtype=np.int64)
        return self._send(topic, outgoing_records(keys, values, stamps, partitions=partition), now,
                          compression=compression)

    def _send(self, topic: str, records, now: int, compression: str = "none") -> list[RecordMetadata]:
        """Check every record, then append: the broker's error for the first refused one (nothing
        appended), or the log's for a batch it refuses."""
        target = self._producer.target(topic)
        try:
            self._producer.check(target, records, now)
            sent = self._producer.send(target, records, compression=compression)
        except (RecordRefused, BatchRefused) as e:
            raise e.error from None
        return [RecordMetadata(a.topic, a.partition, a.first_offset, a.last_offset) for a in sent]

    def flush(self) -> None:
        """fsync every open partition (appends are written at once; this makes them durable)."""
        for log in list(self._dd.logs.values()):
            log.flush()
        self._dd.checkpoint_logs()

    # -- reading
    def _pdir(self, topic: str, partition: int) -> str:
        return os.path.join(self.path, files.partition_dir_name(topic, partition))

    def _reader(self, topic: str, partition: int) -> PartitionReader:
        if not self._dd.has_topic(topic):
            raise TopicError(f"topic {topic!r} does not exist in {self.path}")
        pdir = self._pdir(topic, partition)
        if not os.path.isdir(pdir):
            raise TopicError(f"partition {topic}-{partition} does not exist in {self.path}")
        return PartitionReader(pdir)

    def _selected(self, topic: str, partition: int | None) -> list[int]:
        return [partition] if partition is not None else self.partitions(topic)

    def end_offsets(self, topic: str) -> dict[int, int]:
        """partition -> log end offset (the next offset to be written)."""
        return {p: self._reader(topic, p).log_end_offset for p in self.partitions(topic)}

    def start_offsets(self, topic: str) -> dict[int, int]:
        """partition -> log start offset."""
        return {p: self._reader(topic, p).log_start_offset for p in self.partitions(topic)}

    def offset_for_timestamp(self, topic: str, partition: int, timestamp: int) -> int | None:
        """Kafka's ListOffsets: the first offset whose record has a timestamp >= ``timestamp``."""
        return self._reader(topic, partition).offset_for_timestamp(timestamp)

    @staticmethod
    def _start(offset, timestamp) -> StartSpec:
        if timestamp is not None:
            return StartSpec(TIMESTAMP, int(timestamp))
        if offset in (EARLIEST, LATEST):
            return StartSpec(offset)
        if isinstance(offset, int) and not isinstance(offset, bool):
            return StartSpec(OFFSET, offset)
        raise ValueError(f"offset must be 'earliest', 'latest' or an int, not {offset!r}")

    def read(self, topic: str, partition: int | None = None, *, offset: int | str = "earliest",
             timestamp: int | None = None, end_offset: int | None = None,
             isolation_level: str = READ_UNCOMMITTED) -> Iterator[ConsumerRecord]:
        """Records from ``offset`` ('earliest', 'latest' or a number; with no ``partition`` the
        named start applies to every partition) or from the first record at/after ``timestamp``,
        to the log end (or ``end_offset``), partition by partition. ``read_committed`` hides aborted
        transactions and stops at the last stable offset, as a Kafka consumer does."""
        is_read_committed(isolation_level)      # anything else is a ValueError before the first read
        start = self._start(offset, timestamp)
        if start.kind == OFFSET and partition is None:
            raise ValueError("a numeric offset needs a partition")
        for p in self._selected(topic, partition):
            view = self._reader(topic, p).visible(isolation_level)
            first = view.start_offset(start, f"{topic}-{p}")
            if first is None:
                continue
            yield from self._records(view, topic, p, first, end_offset)

    @staticmethod
    def _records(view: VisibleRecords, topic: str, partition: int, first: int,
                 end_offset: int | None) -> Iterator[ConsumerRecord]:
        end = view.end if end_offset is None else min(view.end, end_offset)
        for b, records in view.batches(first, end):
            ts_type = "LogAppendTime" if b.timestamp_type == LOG_APPEND_TIME else "CreateTime"
            for r in records:
                yield ConsumerRecord(topic, partition, r.offset, r.timestamp, ts_type, r.key, r.value,
                                     tuple((h[0], h[1]) for h in r.headers))

    def follow(self, topic: str, partition: int | None = None, *, offset: int | str = "latest",
               timestamp: int | None = None, poll_interval: float = 0.1, timeout: float | None = None,
               isolation_level: str = READ_UNCOMMITTED, stop=None) -> Iterator[ConsumerRecord]:
        """``read`` that does not end at the log end: it waits for new records (polling every
        ``poll_interval`` seconds) until ``timeout`` seconds pass without one or ``stop`` (a
        threading.Event) is set."""
        start = self._start(offset, timestamp)
        positions: dict[int, int] = {}
        idle_since = time.monotonic()
        while stop is None or not stop.is_set():
            got = False
            for p in self._selected(topic, partition):
                view = self._reader(topic, p).visible(isolation_level)
                log_start, log_end = view.reader.log_start_offset, view.reader.log_end_offset
                if p not in positions:
                    first = view.start_offset(start, f"{topic}-{p}")
                    positions[p] = log_end if first is None else first
                if positions[p] < log_start:
                    positions[p] = log_start      # deleted by retention meanwhile
                for rec in self._records(view, topic, p, positions[p], None):
                    positions[p] = rec.offset + 1
                    got = True
                    yield rec
            if got:
                idle_since = time.monotonic()
            elif timeout is not None and time.monotonic() - idle_since >= timeout:
                return
            else:
                time.sleep(poll_interval)

    def read_arrow(self, topic: str, partition: int, start_offset: int | None = None,
                   end_offset: int | None = None, *, with_headers: bool = False) -> pa.Table:
        """The records of one partition in [start, end) as a pyarrow Table (columnar, numba-built)."""
        return self._reader(topic, partition).read_columns(start_offset, end_offset, with_headers=with_headers)

    def latest(self, topic: str, key: Bytes, *, partition: int | None = None) -> ConsumerRecord | None:
        """The key's current record (the last one committed; None when absent or deleted by a
        tombstone), looked up in the partition Kafka's partitioner maps it to: the read committed
        view of ``latest_state``, a chunk of columns at a time."""
        k = _as_bytes(key, "key")
        if k is None:
            raise ValueError("latest() needs a key")
        if partition is None:
            partition = partitions_for_keys(pa.array([k], pa.binary()), max(self.partitions(topic)) + 1)[0]
        from .cleaner.strategy import CompactionStrategy, rank
        strategy = CompactionStrategy.of(self._dd.topic_config(topic))    # which record is the key's latest
        view = self._reader(topic, int(partition)).visible(READ_COMMITTED)
        row, best = None, None
        for batch in view.columns(**({"with_headers": True} if strategy.name == "header" else {})):
            mask = pa.compute.equal(batch.column("key"), pa.scalar(k, batch.schema.field("key").type))
            hits = pa.compute.fill_null(mask, False).to_numpy(zero_copy_only=False)
            if hits.any() and not strategy.versioned:
                row = batch.slice(int(np.flatnonzero(hits)[-1]), 1).to_pylist()[0]
            elif hits.any():
                sub = batch.take(pa.array(np.flatnonzero(hits)))
                ver, has = strategy.arrow_versions(sub)
                tie = rank(sub.column("offset").to_numpy(), has)
                j = int(np.lexsort((tie, ver))[-1])
                if best is None or (int(ver[j]), int(tie[j])) > best:
                    best, row = (int(ver[j]), int(tie[j])), sub.slice(j, 1).to_pylist()[0]
        if row is None or row["value"] is None:
            return None
        return ConsumerRecord(topic, int(partition), row["offset"], row["timestamp"],
                              "LogAppendTime" if row["timestamp_type"] else "CreateTime",
                              row["key"], row["value"], ())

    def latest_state(self, topic: str, partitions: Sequence[int] | None = None) -> pa.Table:
        """The last value of every key (tombstoned keys and keyless records left out), read
        committed: a pyarrow Table (key, value, partition, offset, timestamp ms), computed with
        Arrow in this process (storage.latest: what ``compactlog snapshot`` writes)."""
        from .cleaner.strategy import CompactionStrategy
        from .storage.latest import latest_values
        strategy = CompactionStrategy.of(self._dd.topic_config(topic))    # the topic's compaction.strategy
        tables = []
        for p in (list(partitions) if partitions is not None else self.partitions(topic)):
            t = latest_values(self._reader(topic, p), strategy=strategy)
            tables.append(t.append_column("partition", pa.array(np.full(t.num_rows, p, dtype=np.int32)))
                          .select(["key", "value", "partition", "offset", "timestamp"]))
        if not tables:
            return pa.table({"key": pa.array([], pa.binary()), "value": pa.array([], pa.binary()),
                             "partition": pa.array([], pa.int32()), "offset": pa.array([], pa.int64()),
                             "timestamp": pa.array([], pa.int64())})
        return pa.concat_tables(tables)

    def iter_latest_state(self, topic: str) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) of every live key, partition by partition."""
        table = self.latest_state(topic)
        for batch in table.to_batches():
            yield from zip(batch.column(0).to_pylist(), batch.column(1).to_pylist())

    # -- consumer groups
    def consumer_groups(self) -> "ConsumerGroups":
        """The data dir's consumer groups, offline (written only when opened with ``write=True``)."""
        return ConsumerGroups(self._dd)

    # -- transactions
    def transactions(self) -> "Transactions":
        """The data dir's transactions, offline: ``__transaction_state`` and the partitions'
        producer state (the admin's abort writes only when opened with ``write=True``)."""
        return Transactions(self._dd)

    # -- lifetime
    def close(self) -> None:
        """Close the logs (a writer writes its checkpoints and the clean-shutdown marker and lets
        go of the lock)."""
        self._dd.close()

    def __enter__(self) -> "DataDirectory":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# -- consumer groups, offline --------------------------------------------------------------------

class GroupMember(NamedTuple):
    """A member of a consumer group, with the partitions its assignment names."""
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    partitions: tuple            # ((topic, partition), ...); () unless a "consumer" group assigned some
    # KIP-848 consumer groups only (None otherwise): the member's epoch and its target assignment
    member_epoch: int | None = None
    target: tuple | None = None  # ((topic, partition), ...)


class GroupDescription(NamedTuple):
    group_id: str
    state: str                   # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str           # "consumer" for consumers, "" for offsets committed without a group
    protocol: str                # the partition assignor a consumer group chose ("" when none)
    members: tuple               # (GroupMember, ...)
    # "classic", or "consumer" for a KIP-848 group (state Empty, Assigning, Reconciling or Stable),
    # which also has a group epoch and the epoch of its target assignment
    group_type: str = "classic"
    group_epoch: int | None = None
    assignment_epoch: int | None = None


class ConsumerGroups:
    """A data dir's consumer groups and committed offsets, as ``__consumer_offsets`` holds them:
    loaded as a starting broker loads them, and written (a data dir opened for writing) exactly as
    the broker's group coordinator writes, so that a broker started later finds them. What
    ``kafka-consumer-groups.sh`` does through a broker, without one. Errors are Kafka's codes
    (kio's ``ErrorCode``). ``datadir`` is a storage ``DataDir``; from the API use
    ``DataDirectory.consumer_groups()``."""

    def __init__(self, datadir):
        # imported here: the group coordinator loads kio's tables, which only groups need
        from .coordinator import load_groups
        self._dd = datadir
        self._service = load_groups(datadir)
        self._shard = self._service.coordinator

    def list_groups(self, states: Iterable[str] = ()) -> list[tuple[str, str]]:
        """(group id, state) of every group, only those in ``states`` when given (any case)."""
        return [(g.group_id, g.state) for g in self._shard.list_groups(states)]

    def describe_group(self, group: str) -> GroupDescription:
        """The group and its members; state "Dead" when there is no such group."""
        from .record import consumer_offsets as R
        if group in self._shard.consumer.groups:
            return self._describe_consumer_group(group)
        g = self._shard.groups.get(group)
        if g is None:
            return GroupDescription(group, "Dead", "", "", ())
        members = []
        for m in g.members.values():
            parts = ()
            if g.protocol_type == R.CONSUMER_PROTOCOL_TYPE and m.assignment:
                try:
                    parts = tuple((t, p) for t, ps in R.decode_assignment(m.assignment).partitions for p in ps)
                except R.RecordFormatError:
                    parts = ()
            members.append(GroupMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, parts))
        return GroupDescription(group, g.state, g.protocol_type or "", g.protocol_name or "", tuple(members))

    def _describe_consumer_group(self, group: str) -> GroupDescription:
        """A KIP-848 group as ConsumerGroupDescribe answers it (topics named, deleted ones left out)."""
        with self._service.lock:
            [d] = self._shard.consumer_group_describe([group])

        def tps(a):
            return tuple((name, p) for _, name, ps in a for p in ps)
        members = tuple(GroupMember(m.member_id, m.instance_id, m.client_id, m.client_host, tps(m.assignment),
                                    m.member_epoch, tps(m.target_assignment)) for m in d.members)
        return GroupDescription(group, d.state, "consumer", d.assignor_name, members, "consumer", d.group_epoch,
                                d.assignment_epoch)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the group's committed offset."""
        return {k: o.offset for k, o in self._shard.committed(group).items()}

    def commit_offsets(self, group: str, offsets: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """Commit offsets as an admin does (no member, no generation); the error code of each."""
        from .coordinator import CommitPartition
        parts = [CommitPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        errors = self._service.commit_offsets(group, -1, "", None, parts)
        return {(c.topic, c.partition): e for c, e in zip(parts, errors)}

    @property
    def last_commit_failure(self) -> Exception | None:
        """Why the last ``commit_offsets`` could not write its records (None when it could)."""
        return getattr(self._service, "last_commit_failure", None)

    def delete_groups(self, groups: Sequence[str]) -> dict[str, int]:
        """DeleteGroups: each group's error code (0: its offsets and the group are gone)."""
        return dict(self._service.call(self._shard.delete_groups, list(groups)))

    def delete_offsets(self, group: str, partitions: Iterable[tuple[str, int]]) -> tuple[int, dict]:
        """OffsetDelete, as the broker answers it: (the request's error code, {(topic, partition):
        error code}); partitions this data dir does not have are UNKNOWN_TOPIC_OR_PARTITION without
        asking the coordinator."""
        from kio.schema.errors import ErrorCode
        wanted: dict[str, list[int]] = {}
        per: dict = {}
        known: dict = {}
        for t, p in partitions:
            if t not in known:
                known[t] = set(self._dd.partitions(t)) if self._dd.has_topic(t) else set()
            parts = wanted.setdefault(t, [])
            if p in known[t]:
                parts.append(p)
            else:
                per[(t, p)] = ErrorCode.unknown_topic_or_partition
        top, results = self._service.call(self._shard.delete_offsets, group, list(wanted.items()))
        if top != ErrorCode.none:
            return top, {}
        for t, res in results:
            for p, code in res:
                per[(t, p)] = code
        return ErrorCode.none, per

    def close(self) -> None:
        """Answer what is parked and stop (the data dir itself stays open)."""
        self._service.stop()


# -- transactions, offline ---------------------------------------------------------------------------

class TransactionListing(NamedTuple):
    """One transactional id, as ListTransactions lists it."""
    transactional_id: str
    producer_id: int
    state: str                   # Kafka's names: Empty, Ongoing, PrepareCommit, ..., CompleteAbort


class TransactionDescription(NamedTuple):
    """One transactional id, as DescribeTransactions describes it."""
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_start_time_ms: int     # -1: no transaction started since the last one completed
    partitions: tuple                  # ((topic, partition), ...) of the transaction, sorted


class ProducerState(NamedTuple):
    """A producer with state in a partition, as DescribeProducers reports it."""
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int             # -1: no marker written for it here yet
    current_transaction_start_offset: int   # -1: no open transaction here


class Transactions:
    """A data dir's transactions, without a broker: what ``kafka-transactions.sh`` asks a broker.

    ``__transaction_state`` is replayed when first asked about, as a starting coordinator loads it
    (``coordinator/txn``'s loader and its answers to DescribeTransactions / ListTransactions, filters and errors alike)
    but nothing is written: a transaction left between its decision and its markers shows as
    PrepareCommit/PrepareAbort until a broker starts on the directory and finishes it. Producers
    are each partition's producer state (DescribeProducers). ``abort`` is the admin's abort of a
    hanging transaction (WriteTxnMarkers): an ABORT marker appended by the broker's own marker
    function, so it needs a data dir opened for writing. Errors are Kafka's codes (kio's
    ``ErrorCode``). ``datadir`` is a storage ``DataDir``; from the API use
    ``DataDirectory.transactions()``."""

    def __init__(self, datadir, clock=None):
        self._dd = datadir
        self._clock = clock or (lambda: int(time.time() * 1000))
        self._coordinator = None          # __transaction_state, loaded when first asked about
        self._marker_target = None

    def _loaded(self):
        """The coordinator's cache as a starting broker loads it (without re-driving anything)."""
        if self._coordinator is None:
            # imported here: the coordinator's modules load kio's tables, which only transactions need
            from .coordinator import load_transactions
            self._coordinator = load_transactions(self._dd, self._clock)
        return self._coordinator

    @property
    def unreadable(self) -> dict[int, str]:
        """``__transaction_state`` partitions that could not be loaded: why (their ids answer
        COORDINATOR_NOT_AVAILABLE, as a broker answers them)."""
        return dict(self._loaded().failed)

    def list_transactions(self, states: Iterable[str] = (), producer_ids: Iterable[int] = (),
                          duration_ms: int = -1, pattern: str | None = None
                          ) -> tuple[int, list[str], list[TransactionListing]]:
        """ListTransactions: (error code, state names not known, the ids passing every filter)."""
        from .coordinator import answered
        code, listed = answered(self._loaded().list_transactions, tuple(states), tuple(producer_ids),
                                duration_ms, pattern)
        unknown, found = listed or ([], [])
        return code, unknown, [TransactionListing(m.transactional_id, m.producer_id, m.state.display) for m in found]

    def describe(self, transactional_id: str) -> tuple[int, TransactionDescription | None]:
        """DescribeTransactions of one id: (error code, its description or None)."""
        from .coordinator import answered
        code, md = answered(self._loaded().describe, transactional_id)
        if md is None:
            return code, None
        return code, TransactionDescription(transactional_id, md.state.display, md.producer_id, md.producer_epoch,
                                            md.txn_timeout_ms, md.txn_start_ms, tuple(sorted(md.partitions)))

    def describe_producers(self, topic: str, partition: int) -> tuple[int, str | None, list[ProducerState]]:
        """DescribeProducers of one partition: (error code, error message, its producers by id)."""
        from kio.schema.errors import ErrorCode
        if not self._dd.has_topic(topic):
            return ErrorCode.unknown_topic_or_partition, "This server does not host this topic-partition.", []
        if partition not in self._dd.partitions(topic):
            return ErrorCode.unknown_topic_or_partition, None, []
        producers = self._dd.open_log(topic, partition).active_producers()
        return ErrorCode.none, None, [ProducerState(*p) for p in sorted(producers)]

    def abort(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
              coordinator_epoch: int) -> int:
        """WriteTxnMarkers with one ABORT marker (the admin's abort of a hanging transaction):
        appended to the partition by the broker's marker function (``__consumer_offsets``
        partitions through the group coordinator, which drops the producer's pending offsets);
        the append's error code (INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED,
        UNKNOWN_TOPIC_OR_PARTITION ...), nothing written unless NONE."""
        from .coordinator import OfflineBroker, write_marker
        if not self._dd.writable:
            raise ReadOnlyError(f"{self._dd.path}: opened read-only; aborting a transaction needs a writer")
        if self._marker_target is None:
            self._marker_target = OfflineBroker(self._dd)
        return write_marker(self._marker_target, topic, partition, producer_id, producer_epoch,
                            coordinator_epoch, False)

    def close(self) -> None:
        """Stop the group coordinator an abort on ``__consumer_offsets`` started (the data dir
        itself stays open)."""
        if self._marker_target is not None:
            self._marker_target.close()
            self._marker_target = None

