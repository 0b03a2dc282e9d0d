"""The broker's remote tier: Kafka's ``RemoteLogManager`` (``RLMCopyTask``,
``RLMExpirationTask``, ``read``, ``findOffsetByTimestamp``), ``RemoteLogReader``, a small
``RemoteIndexCache``, and the ``TopicBasedRemoteLogMetadataManager`` side that writes and replays
``__remote_log_metadata``.

One ``RemotePartition`` per tiered partition holds its partition manifest (the commit point of
its remote tier, partition_manifest.py) and is reconciled with the journal the first time it is
used (tiered-storage.md §3.4 rule 6: the manifest wins). All of a partition's remote changes (a
copy, a deletion, the reconciliation) run under its ``lock``, one at a time; readers take the
manifest as it is (an immutable value) and never wait for them.

Copy (``copy_partition``, §1.3 and §3.4 rule 4): from ``max(HRO + 1, logStartOffset)``, each
non-active segment whose next segment's base is at or below the last stable offset (committed
data only) and the high watermark, in order: COPY_SEGMENT_STARTED appended to the journal (one
batch, flushed), the objects (``.log``, ``.indexes`` with the offset, time and transaction
indexes, the producer snapshot at the next base and the leader-epoch checkpoint, then
``.rsm-manifest``), the manifest CAS adding the segment (**the commit point**), then
COPY_SEGMENT_FINISHED and HRO = the segment's end. A failure leaves the partition to be
reconciled before its next copy: a STARTED id the manifest does not hold is deleted (DELETE_STARTED,
objects, DELETE_FINISHED), one it holds is FINISHED, so a copy that failed or a broker killed at
any step ends the same way. The segment's files are opened under the partition's lock and read
through those descriptors, so a cleaner swap or retention meanwhile changes nothing uploaded.

Expiration (``expire_partition``, §1.5, ``RLMExpirationTask.cleanupExpiredRemoteLogSegments``),
driven by the log manager's retention: remote segments wholly below the log start offset; for
policies with delete also those whose largest timestamp is older than ``retention.ms`` and, while
the log (local-only segments plus the remote tier) is larger than ``retention.bytes``, the oldest
ones whose removal keeps it at or above; stopping at the first segment kept. The new log start is
set (and checkpointed) first, then DELETE_STARTED for all, the manifest CAS, the objects, then
DELETE_FINISHED.

Reads (``read``, §4.2): the segment holding the offset, the offset index (``.indexes``, cached)
to the position, then the ``.log`` by ranged GETs of ``rsm.config.chunk.size`` chunks kept in an
LRU (``compactlog.remote.fetch.cache.bytes``); whole batches, at least one, never two segments in
one answer. A segment with no batch at or past the offset (compacted away) continues in the next
one and, past the last, in the local log (Kafka answers empty there, leaving a consumer stuck on a
compacted tail: compactlog's fix, spec §4.2 step 3). Reads run on ``remote.log.reader.threads``;
the caller waits ``remote.fetch.max.wait.ms`` at most (``DelayedRemoteFetch``).

Test hook: ``COMPACTLOG_TEST_REMOTE_KILL_FILE=path`` names a file holding a step (``objects``:
after a segment's objects, before the manifest CAS; ``manifest``: after the CAS, before
FINISHED); a copy reaching that step removes the file and kills the process with SIGKILL.
"""

from __future__ import annotations

import functools
import logging
import os
import struct
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Callable

from ...errors import CompactlogError, OffsetOutOfRangeError
from ...record import remote_log_metadata as rlm
from ...record.remote_log_metadata import (RemoteLogSegmentId, RemoteLogSegmentMetadata,
                                           RemoteLogSegmentMetadataUpdate, SegmentState, TopicIdPartition)
from ..txn_index import ENTRY, ENTRY_SIZE, AbortedTxn
from . import faults, keys
from .metadata_topic import metadata_partition
from .partition_manifest import ManifestSegment, Owner, PartitionManifest, PartitionManifestWriter
from .segment_objects import (SegmentFiles, SegmentObjectError, delete_segment, leader_epoch_checkpoint,
                              read_indexes, read_manifest, segment_key, upload_segment)
from .stats import TASKS_MS, RemoteStorageStats, counted_store
from .store import ObjectStore, RemoteStorageError, StoreConfig, StoreUnavailable, open_store

log = logging.getLogger("kafka.log.remote.RemoteLogManager")

TOPIC = rlm.TOPIC
KILL_FILE_ENV = faults.KILL_FILE_ENV
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_BATCH_HEAD = struct.Struct(">qiib")       # base offset, length, partition leader epoch, magic
_LAST_DELTA = struct.Struct(">i")          # lastOffsetDelta at byte 23 of a v2 batch
_MIN_HEAD = 27
_DOES_NOT_FIT = -2                         # _read_segment: a batch is there, larger than the room left


class RemoteFetchTimeout(CompactlogError):
    """A remote read slower than ``remote.fetch.max.wait.ms``: answered empty, no error."""


class ReaderQueueFull(RemoteStorageError):
    """More remote reads queued than ``remote.log.reader.max.pending.tasks``
    (Kafka's ``RejectedExecutionException``): UNKNOWN_SERVER_ERROR."""


def _maybe_die(step: str) -> None:
    faults.maybe_die(step)


def _timed_task(run):
    """The time a copy or expiration run takes, for RemoteLogManagerTasksAvgIdlePercent."""
    @functools.wraps(run)
    def timed(self, *args):
        started = time.perf_counter()
        try:
            return run(self, *args)
        finally:
            self.metrics.add(None, TASKS_MS, (time.perf_counter() - started) * 1000)
    return timed


# -- the journal's state, as Kafka's RemoteLogMetadataCache keeps it ---------------------------------

@dataclass
class JournalSegment:
    metadata: RemoteLogSegmentMetadata          # api 0's fields
    state: SegmentState


@dataclass
class RemoteIndexes:
    offsets: list            # [(absolute offset, position)]
    times: list              # [(timestamp, absolute offset)]
    aborted: list            # [AbortedTxn]


@dataclass
class RemoteRead:
    records: bytes = b""
    aborted: list | None = None
    continue_local: bool = False      # nothing remote at or past the offset: read the local log
    next_offset: int = -1             # ... from here (the remote tier's end + 1 when it was read)


@dataclass
class RemotePartition:
    topic: str
    partition: int
    topic_id: str
    writer: PartitionManifestWriter
    lock: threading.RLock = field(default_factory=threading.RLock)
    ready: bool = False                  # reconciled with the journal
    failed_copy: bool = False            # a copy failed: reconcile before the next
    round_open: bool = False             # a cleaning round over both tiers is planned (compaction.py)
    last_sweep_ms: int = -(1 << 62)      # the last orphan sweep (compaction.delete_due)

    @property
    def tip(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.topic, self.partition)

    @property
    def manifest(self) -> PartitionManifest:
        return self.writer.current

    def segment_for(self, offset: int) -> ManifestSegment | None:
        m = self.writer.current
        if m is None:
            return None
        for s in m.segments:
            if s.start_offset <= offset <= s.end_offset:
                return s
        return None

    def next_segment(self, seg: ManifestSegment) -> ManifestSegment | None:
        for s in self.writer.current.segments:
            if s.start_offset == seg.end_offset + 1:
                return s
        return None


class _LRU:
    """Bytes (or values with a size) by key, least recently used dropped past ``capacity``."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.items: OrderedDict = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key):
        with self.lock:
            v = self.items.get(key)
            if v is None:
                self.misses += 1
                return None
            self.hits += 1
            self.items.move_to_end(key)
            return v[0]

    def put(self, key, value, size: int) -> None:
        with self.lock:
            if key in self.items:
                return
            self.items[key] = (value, size)
            self.size += size
            while self.size > self.capacity and self.items:
                _, (_, s) = self.items.popitem(last=False)
                self.size -= s


class RemoteLogManager:
    """The remote tier of one broker's data dir (see the module docstring).

    ``open_log(topic, partition)``: the partition's Log (None when gone); ``create_topic(name,
    partitions, configs)``: creates ``__remote_log_metadata``; ``partitions_of(topic)``: its
    partitions."""

    def __init__(self, datadir, *, broker_id: int, cluster_id: str, open_log: Callable, create_topic: Callable,
                 store: ObjectStore | None = None, clock: Callable[[], int] | None = None):
        self.datadir = datadir
        broker = datadir.broker
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.open_log = open_log
        self.create_topic = create_topic
        self.clock = clock or (lambda: int(time.time() * 1000))
        self.store_config = store.config if store is not None else StoreConfig.from_properties(broker.props)
        self.store = store if store is not None else open_store(self.store_config)
        self.metrics = RemoteStorageStats()     # Kafka's remote BrokerTopicMetrics (stats.py)
        self.store = counted_store(self.store, self.metrics)     # every request counted and timed
        self.prefix = self.store_config.key_prefix
        self.chunk_size = self.store_config.chunk_size
        self.owner = Owner(cluster_id, broker_id, keys.new_uuid())
        self.partitions: dict[tuple[str, int], RemotePartition] = {}
        self._disabled_done: set[tuple[str, int]] = set()
        self._guard = threading.Lock()
        self.journal: dict[tuple[str, int], dict[str, JournalSegment]] = {}
        self.num_partitions = broker.get("rlmm.config.remote.log.metadata.topic.num.partitions")
        self.chunks = _LRU(broker.get("compactlog.remote.fetch.cache.bytes"))
        self.indexes = _LRU(max(1, min(broker.get("remote.log.index.file.cache.total.size.bytes"), 1 << 30)))
        self.readers = ThreadPoolExecutor(broker.get("remote.log.reader.threads"),
                                          thread_name_prefix="remote-log-reader")
        self._pending = 0
        self._pending_lock = threading.Lock()
        self.stats = {"copied_segments": 0, "copied_bytes": 0, "copy_errors": 0, "deleted_segments": 0,
                      "fetch_bytes": 0, "fetch_errors": 0, "fetch_expired": 0, "compacted_segments": 0}
        from . import compaction
        compaction.register(datadir.path, self)     # the cleaner finds a tiered log's owner there

    # -- start: the metadata topic and its replay (TopicBasedRemoteLogMetadataManager) -------------
    def start(self) -> None:
        dd = self.datadir
        if not dd.has_topic(TOPIC):
            configs = {"cleanup.policy": "delete",
                       "retention.ms": str(dd.broker.get("rlmm.config.remote.log.metadata.topic.retention.ms")),
                       "remote.storage.enable": "false"}
            self.create_topic(TOPIC, self.num_partitions, configs)
            log.info(f"Created {TOPIC} with {self.num_partitions} partition(s)")
        # the partition count is fixed once the topic exists (the partitioner depends on it)
        self.num_partitions = max(dd.partitions(TOPIC)) + 1
        replayed = 0
        for p in range(self.num_partitions):
            mlog = self.open_log(TOPIC, p)
            if mlog is None:
                continue
            for r in mlog.records():
                if r.value is None:
                    continue
                try:
                    self._apply(rlm.decode(bytes(r.value)))
                    replayed += 1
                except (ValueError, CompactlogError) as e:
                    log.error(f"Skipping an unreadable record of {TOPIC}-{p} at offset {r.offset}: {e}")
        log.info(f"Replayed {replayed} record(s) of {TOPIC}: {sum(len(v) for v in self.journal.values())} "
                 f"remote segment(s) known")

    def reconcile_tiered_logs(self) -> None:
        """Every tiered partition reconciled with its manifest before the broker takes requests
        (a local log behind its remote tier must continue at the remote end before its first
        append, ``_continue_at_remote_end``). A store that does not answer is not waited for
        partition after partition (each may take the store's whole timeout): the rest are
        reconciled at their first use."""
        for plog in self.tiered_logs():
            try:
                self.partition(plog)
            except StoreUnavailable as e:
                log.error(f"The remote tiers could not be reconciled at start (the store does not answer: {e}); "
                          f"each is at its first use")
                return
            except (RemoteStorageError, OSError, CompactlogError) as e:
                log.error(f"{plog.name}: its remote tier could not be reconciled at start ({e}); retried at its "
                          f"first use")

    def _apply(self, m) -> None:
        """One journal event on the in-memory state (RemoteLogMetadataCache), transitions checked."""
        if isinstance(m, RemoteLogSegmentMetadata):
            tip = m.segment_id.topic_id_partition
            segs = self.journal.setdefault((tip.topic_id, tip.partition), {})
            if m.segment_id.id not in segs:
                segs[m.segment_id.id] = JournalSegment(m, m.state)
        elif isinstance(m, RemoteLogSegmentMetadataUpdate):
            tip = m.segment_id.topic_id_partition
            segs = self.journal.setdefault((tip.topic_id, tip.partition), {})
            js = segs.get(m.segment_id.id)
            if js is None or not rlm.is_valid_transition(js.state, m.state):
                return
            if m.state == SegmentState.DELETE_SEGMENT_FINISHED:
                del segs[m.segment_id.id]
            else:
                js.state = m.state
        # partition-delete records (ZooKeeper mode) and snapshots: accepted, nothing to do

    def _journal(self, rp: RemotePartition, events: list) -> None:
        """Append ``events`` as one batch to the partition's metadata partition, flushed (Kafka's
        producer writes with acks=all and waits), then apply them."""
        p = metadata_partition(rp.topic_id, rp.partition, self.num_partitions)
        mlog = self.open_log(TOPIC, p)
        if mlog is None:
            raise RemoteStorageError(f"{TOPIC}-{p} does not exist")
        mlog.append_records([None] * len(events), [rlm.encode(e) for e in events])
        mlog.flush()
        for e in events:
            self._apply(e)

    def _update(self, rp: RemotePartition, seg_id: str, state: SegmentState) -> RemoteLogSegmentMetadataUpdate:
        return RemoteLogSegmentMetadataUpdate(RemoteLogSegmentId(rp.tip, seg_id), self.broker_id, self.clock(), state)

    # -- partitions -------------------------------------------------------------------------------
    def partition(self, plog) -> RemotePartition:
        """The partition's remote state, reconciled on first use (may raise RemoteStorageError)."""
        key = (plog.topic, plog.partition)
        rp = self.partitions.get(key)
        if rp is None:
            with self._guard:
                rp = self.partitions.get(key)
                if rp is None:
                    topic_id = self.datadir.topic_id(plog.topic) or self.datadir.ensure_topic_id(plog.topic)
                    writer = PartitionManifestWriter(self.store, self.prefix, plog.topic, topic_id, plog.partition,
                                                     self.owner)
                    rp = RemotePartition(plog.topic, plog.partition, topic_id, writer)
                    self.partitions[key] = rp
        if not rp.ready or rp.failed_copy:
            with rp.lock:
                if not rp.ready or rp.failed_copy:
                    self._reconcile(rp, plog)
                    rp.ready, rp.failed_copy = True, False
        return rp

    def _reconcile(self, rp: RemotePartition, plog) -> None:
        """Rule 6 of §3.4: the journal made to agree with the manifest (the manifest wins), the
        orphans of this partition swept, the log's offsets taken from the manifest."""
        # ownership taken (or the manifest read again after a failure whose CAS may have landed)
        m = rp.writer.take_ownership()
        in_manifest = {s.id: s for s in m.segments}
        pending = {p.id for p in m.pending_deletion}
        known = self.journal.get((rp.topic_id, rp.partition), {})
        finish, delete, replaced = [], [], []
        for seg_id, js in list(known.items()):
            if seg_id in pending and js.state == SegmentState.COPY_SEGMENT_FINISHED:
                replaced.append(seg_id)             # swapped out by a compaction, DELETE_STARTED lost
            elif seg_id in in_manifest:
                if js.state == SegmentState.COPY_SEGMENT_STARTED:
                    finish.append(seg_id)           # committed, FINISHED lost: roll forward
                elif js.state == SegmentState.DELETE_SEGMENT_STARTED:
                    delete.append(js)               # a deletion cut short: finish it
            elif seg_id not in pending:
                delete.append(js)                   # never committed (or already removed): roll back
        rebuilt = []
        for s in m.segments:
            if s.id not in known:                   # a lost journal: rebuilt from the manifest
                rebuilt.append(RemoteLogSegmentMetadata(
                    RemoteLogSegmentId(rp.tip, s.id), s.start_offset, s.end_offset, s.broker_id,
                    s.max_timestamp_ms, s.event_timestamp_ms, s.segment_leader_epochs, s.size_in_bytes))
                rebuilt.append(self._update(rp, s.id, SegmentState.COPY_SEGMENT_FINISHED))
        events = rebuilt + [self._update(rp, i, SegmentState.COPY_SEGMENT_FINISHED) for i in finish]
        events += [self._update(rp, i, SegmentState.DELETE_SEGMENT_STARTED) for i in replaced]
        if events:
            self._journal(rp, events)
            log.info(f"{rp.topic}-{rp.partition}: {len(finish)} committed copy(ies) finished, "
                     f"{len(rebuilt) // 2} segment(s) written back to {TOPIC} from the manifest")
        if delete:
            self._delete_segments(rp, [js.metadata for js in delete], [js.state for js in delete])
            log.info(f"{rp.topic}-{rp.partition}: {len(delete)} uncommitted or half-deleted remote "
                     f"segment(s) deleted")
        self._sweep_orphans(rp)
        m = rp.manifest
        if m.segments and m.highest_offset >= plog.log_end_offset:
            self._continue_at_remote_end(rp, plog, m)
        plog.highest_remote_offset = m.highest_offset
        if m.log_start_offset > plog.log_start_offset:
            plog.increment_log_start_offset(min(m.log_start_offset, plog.high_watermark))

    def _continue_at_remote_end(self, rp: RemotePartition, plog, m: PartitionManifest) -> None:
        """A local log that ends at or below the remote tier's last offset (its directory emptied,
        restored from an older copy, or cut by recovery): appended to as it is, it would give new
        records offsets the remote tier already holds (two records at one offset, the remote one
        served below the local log start). It continues at the remote end + 1 instead, with the
        producer state of the remote tier's last segment and the manifest's leader epochs, as
        Kafka's follower does from a leader's remote tier (``truncateFullyAndStartAt``,
        ``buildRemoteLogAuxState``); what the local segments held is kept aside and reported."""
        from ..producer_state import decode_snapshot
        last = m.segments[-1]
        key = keys.SegmentKey(self.prefix, rp.topic, rp.topic_id, rp.partition, last.start_offset, last.id)
        producers = []
        try:
            raw = read_indexes(self.store, key, read_manifest(self.store, key), ("producerSnapshot",))
            if raw.get("producerSnapshot"):
                producers = decode_snapshot(raw["producerSnapshot"], key.key(keys.INDEXES))
        except (RemoteStorageError, CompactlogError) as e:
            log.warning(f"{plog.name}: the producer snapshot of remote segment {last.id} could not be read ({e}); "
                        f"producers start over at the remote tier's end")
        epochs: dict[int, int] = {}
        for s in m.segments:
            for epoch, start in s.segment_leader_epochs:
                epochs[epoch] = min(start, epochs.get(epoch, start))
        was = plog.log_end_offset
        events = plog.truncate_fully_and_start_at(
            m.highest_offset + 1, producers=producers, leader_epochs=sorted(epochs.items()),
            reason=f"the local log ended at {was}, below the remote tier's last offset {m.highest_offset}")
        self.datadir.checkpoint_logs()
        kept = "".join(f"; {e}" for e in events)
        log.warning(f"{plog.name}: the local log ended at offset {was}, at or below the remote tier's last offset "
                    f"{m.highest_offset}; it continues at {m.highest_offset + 1} (offsets below are read from the "
                    f"remote tier){kept}")

    def _delete_segments(self, rp: RemotePartition, metas: list, states: list | None = None,
                         *, in_manifest: bool = False, log_start: int | None = None) -> None:
        """Rule 5: DELETE_STARTED (for those not so already), the manifest CAS without them (and
        with ``log_start``), every object, DELETE_FINISHED."""
        states = states or [SegmentState.COPY_SEGMENT_FINISHED] * len(metas)
        started = [self._update(rp, m.segment_id.id, SegmentState.DELETE_SEGMENT_STARTED)
                   for m, st in zip(metas, states) if st != SegmentState.DELETE_SEGMENT_STARTED]
        if started:
            self._journal(rp, started)
        ids = {m.segment_id.id for m in metas}
        if any(s.id in ids for s in rp.manifest.segments) or log_start is not None:
            def change(man: PartitionManifest) -> PartitionManifest:
                from dataclasses import replace
                new = man.without_segments(ids)
                if log_start is not None and log_start > new.log_start_offset:
                    new = replace(new, log_start_offset=log_start)
                return new
            rp.writer.update(change)
        for m in metas:
            self.metrics.add(rp.topic, "delete_requests")
            try:
                delete_segment(self.store, segment_key(self.prefix, m))
            except BaseException:
                self.metrics.add(rp.topic, "delete_errors")
                raise
        self._journal(rp, [self._update(rp, m.segment_id.id, SegmentState.DELETE_SEGMENT_FINISHED) for m in metas])
        self.stats["deleted_segments"] += len(metas)

    def _sweep_orphans(self, rp: RemotePartition) -> None:
        """Rule 7: objects of the partition whose id no manifest list and no live journal entry
        names, older than ``compactlog.remote.orphan.min.age.ms``."""
        if rp.round_open:
            return          # a cleaning round's objects are not named anywhere until it commits
        min_age = self.datadir.broker.get("compactlog.remote.orphan.min.age.ms")
        part = keys.partition_prefix(self.prefix, rp.topic, rp.topic_id, rp.partition)
        live = rp.manifest.segment_ids() | set(self.journal.get((rp.topic_id, rp.partition), {}))
        now = self.clock()
        doomed = []
        for meta in self.store.list(part):
            parsed = keys.parse_segment_key(meta.key, part)
            if parsed is None or parsed[1] in live:
                continue
            if meta.last_modified_ms is None or now - meta.last_modified_ms >= min_age:
                doomed.append(meta.key)
        if doomed:
            self.store.delete_many(doomed)
            log.info(f"{rp.topic}-{rp.partition}: orphan sweep deleted {len(doomed)} object(s)")

    def tiered_logs(self) -> list:
        """The open-able logs of tiered topics."""
        out = []
        for topic, parts in self.datadir.partition_map().items():
            if topic == TOPIC or not self.datadir.topic_config(topic).remote_log_enabled:
                continue
            for p in parts:
                plog = self.open_log(topic, p)
                if plog is not None and not plog.closed and plog.offline is None:
                    out.append(plog)
        return out

    # -- copy (RLMCopyTask) -----------------------------------------------------------------------
    def copy_partition(self, plog) -> int:
        """Copy the eligible segments of one partition; how many were copied."""
        if not plog.config.remote_copy_enabled:
            return 0
        rp = self.partition(plog)
        copied = 0
        with rp.lock:
            while True:
                candidate = self._next_candidate(plog, rp)
                if candidate is None:
                    return copied
                self.metrics.add(plog.topic, "copy_requests")
                try:
                    self._copy_segment(plog, rp, candidate)
                except BaseException:
                    rp.failed_copy = True
                    self.stats["copy_errors"] += 1
                    self.metrics.add(plog.topic, "copy_errors")
                    raise
                finally:
                    os.close(candidate["fd"])
                self.metrics.add(plog.topic, "copy_bytes", candidate["size"])
                copied += 1

    def _next_candidate(self, plog, rp: RemotePartition) -> dict | None:
        """The next segment to copy, its files opened, under the log's lock (candidateLogSegments)."""
        if rp.round_open:
            return None     # a cleaning round over both tiers is planned: uploads wait for its end
        with plog.lock:
            hro = rp.manifest.highest_offset
            start = max(hro + 1, plog.log_start_offset)
            bound = min(plog.last_stable_offset, plog.high_watermark)
            segs = list(plog.segments)
            for i, seg in enumerate(segs[:-1]):
                nxt = segs[i + 1].base_offset
                if nxt <= start:
                    continue
                if nxt > bound:
                    return None
                if rp.manifest.segments and seg.base_offset != hro + 1:
                    log.warning(f"{plog.name}: segment {seg.base_offset} does not follow the remote tier's end "
                                f"{hro}; not copied")
                    return None
                snapshot = plog.producer_state.snapshot_path(nxt)
                try:
                    with open(snapshot, "rb") as f:
                        snapshot_bytes = f.read()
                except FileNotFoundError:
                    # Kafka takes one at every roll; a segment from a dir without them gets the
                    # snapshot of an empty producer state
                    from ..producer_state import encode_snapshot
                    snapshot_bytes = encode_snapshot([])
                txn = None
                if os.path.exists(seg.txn_index.path):
                    with open(seg.txn_index.path, "rb") as f:
                        txn = f.read() or None
                entries = list(plog.leader_epochs.entries)
                fd = os.open(seg.log.path, os.O_RDONLY)
                return {
                    "base": seg.base_offset, "next": nxt, "fd": fd, "size": os.fstat(fd).st_size,
                    "max_ts": seg.max_timestamp_so_far if seg.max_timestamp_so_far >= 0 else seg.largest_timestamp(),
                    "first_ts": seg.first_batch_timestamp(),
                    "offset_index": b"".join(seg.offset_index._encode(e) for e in seg.offset_index.all_entries()),
                    "time_index": b"".join(seg.time_index._encode(e) for e in seg.time_index.all_entries()),
                    "txn": txn, "snapshot": snapshot_bytes, "epochs": entries,
                }
        return None

    def _copy_segment(self, plog, rp: RemotePartition, c: dict) -> None:
        base, nxt = c["base"], c["next"]
        epochs = _epochs_in_range(c["epochs"], base, nxt, plog.leader_epoch)
        seg_id = keys.new_uuid()
        meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(rp.tip, seg_id), base, nxt - 1, self.broker_id,
                                        c["max_ts"], self.clock(), epochs, c["size"])
        files_ = SegmentFiles(log_path=f"/proc/self/fd/{c['fd']}", offset_index=c["offset_index"],
                              time_index=c["time_index"], producer_snapshot=c["snapshot"],
                              leader_epoch=leader_epoch_checkpoint(e for e in c["epochs"] if e[1] < nxt),
                              transaction_index=c["txn"])
        self._journal(rp, [meta])                                   # 1. COPY_SEGMENT_STARTED
        upload_segment(self.store, self.prefix, meta, files_, chunk_size=self.chunk_size)   # 2. objects
        _maybe_die("objects")
        entry = ManifestSegment(seg_id, base, nxt - 1, meta.max_timestamp_ms, c["size"], meta.segment_leader_epochs,
                                meta.event_timestamp_ms, self.broker_id, txn_index=c["txn"] is not None,
                                first_batch_timestamp_ms=-1 if c.get("first_ts") is None else c["first_ts"])
        rp.writer.update(lambda m: m.with_segment(entry))           # 3. the commit point
        _maybe_die("manifest")
        self._journal(rp, [self._update(rp, seg_id, SegmentState.COPY_SEGMENT_FINISHED)])   # 4.
        plog.highest_remote_offset = nxt - 1
        self.stats["copied_segments"] += 1
        self.stats["copied_bytes"] += c["size"]
        log.info(f"Copied {plog.name} segment {base}-{nxt - 1} ({c['size']} bytes) as {seg_id}")

    # -- expiration (RLMExpirationTask) -----------------------------------------------------------
    def expire_partition(self, plog, now: int) -> int:
        """Remote retention of one partition (module docstring); remote segments deleted."""
        rp = self.partition(plog)
        with rp.lock:
            m = rp.manifest
            if not m.segments:
                return 0
            cfg = plog.config
            doomed = []
            retention_ms = cfg.get("retention.ms") if cfg.delete else -1
            retention_bytes = cfg.get("retention.bytes") if cfg.delete else -1
            excess = -1
            if retention_bytes >= 0:
                with plog.lock:
                    local_only = sum(s.size for s in plog.segments if s.base_offset > m.highest_offset)
                excess = local_only + sum(s.size_in_bytes for s in m.segments) - retention_bytes
            for s in m.segments:
                if s.end_offset < plog.log_start_offset:
                    doomed.append(s)
                elif 0 <= retention_ms < now and s.max_timestamp_ms <= now - retention_ms:
                    doomed.append(s)
                elif excess > 0 and excess - s.size_in_bytes >= 0:
                    doomed.append(s)
                else:
                    break
                if excess > 0:
                    excess -= s.size_in_bytes
            if not doomed:
                return 0
            new_start = doomed[-1].end_offset + 1
            if new_start > plog.log_start_offset:
                plog.increment_log_start_offset(new_start)      # set before deleting (Kafka's order)
                self.datadir.checkpoint_logs()
            metas = [RemoteLogSegmentMetadata(RemoteLogSegmentId(rp.tip, s.id), s.start_offset, s.end_offset,
                                              s.broker_id, s.max_timestamp_ms, s.event_timestamp_ms,
                                              s.segment_leader_epochs, s.size_in_bytes) for s in doomed]
            known = self.journal.get((rp.topic_id, rp.partition), {})
            states = [known[s.id].state if s.id in known else SegmentState.COPY_SEGMENT_FINISHED for s in doomed]
            lag_key = (rp.topic, rp.partition)
            self.metrics.delete_lag[lag_key] = (sum(s.size_in_bytes for s in doomed), len(doomed))
            try:
                self._delete_segments(rp, metas, states, log_start=max(new_start, plog.log_start_offset))
            finally:
                self.metrics.delete_lag.pop(lag_key, None)
            log.info(f"Deleted {len(doomed)} remote segment(s) of {plog.name}; log start offset {plog.log_start_offset}")
            return len(doomed)

    # -- the background task ----------------------------------------------------------------------
    @_timed_task
    def run_copy_tasks(self) -> None:
        self.run_disable_deletions()
        for plog in self.tiered_logs():
            try:
                self.copy_partition(plog)
            except (RemoteStorageError, OSError, CompactlogError) as e:
                log.error(f"Copy of {plog.name} to the remote tier failed (retried at the next run): {e}")
            except Exception:
                log.exception(f"Error while copying {plog.name} to the remote tier")

    def run_disable_deletions(self) -> None:
        """Topics whose remote storage was turned off with ``remote.log.delete.on.disable=true``
        (KIP-950, ``RemoteLogManager.stopPartitions`` with deletion): every remote segment deleted
        and the log start raised to the local log start. Each partition is checked once per broker
        run (one manifest read), then again only if it was tiered in this run."""
        for topic, parts in self.datadir.partition_map().items():
            if topic == TOPIC:
                continue
            cfg = self.datadir.topic_config(topic)
            if cfg.remote_log_enabled or not cfg.get("remote.log.delete.on.disable") \
                    or not cfg.broker.get("remote.log.storage.system.enable"):
                continue
            for p in parts:
                key = (topic, p)
                if key in self._disabled_done:
                    continue
                plog = self.open_log(topic, p)
                if plog is None:
                    continue
                try:
                    rp = self.partition(plog)
                    with rp.lock:
                        segs = list(rp.manifest.segments)
                        if segs:
                            metas = [RemoteLogSegmentMetadata(
                                RemoteLogSegmentId(rp.tip, s.id), s.start_offset, s.end_offset, s.broker_id,
                                s.max_timestamp_ms, s.event_timestamp_ms, s.segment_leader_epochs, s.size_in_bytes)
                                for s in segs]
                            known = self.journal.get((rp.topic_id, rp.partition), {})
                            states = [known[s.id].state if s.id in known else SegmentState.COPY_SEGMENT_FINISHED
                                      for s in segs]
                            local_start = plog.local_log_start_offset
                            self._delete_segments(rp, metas, states, log_start=local_start)
                            plog.increment_log_start_offset(local_start)
                            self.datadir.checkpoint_logs()
                            log.info(f"Remote storage of {plog.name} turned off: {len(segs)} remote segment(s) "
                                     f"deleted, log start offset {plog.log_start_offset}")
                        plog.highest_remote_offset = -1
                    self._disabled_done.add(key)
                except (RemoteStorageError, OSError, CompactlogError) as e:
                    log.error(f"Deleting the remote data of {plog.name} failed (retried at the next run): {e}")

    @_timed_task
    def run_expiration(self, now: int) -> int:
        from .compaction import delete_due
        total = 0
        for plog in self.tiered_logs():
            try:
                total += self.expire_partition(plog, now)
                total += delete_due(self, plog, now)
            except (RemoteStorageError, OSError, CompactlogError) as e:
                log.error(f"Remote retention of {plog.name} failed (retried at the next run): {e}")
            except Exception:
                log.exception(f"Error in the remote retention of {plog.name}")
        return total

    # -- reads (RemoteLogManager.read, RemoteIndexCache) ------------------------------------------
    def _indexes(self, rp: RemotePartition, seg: ManifestSegment) -> RemoteIndexes:
        cached = self.indexes.get(seg.id)
        if cached is not None:
            return cached
        key = keys.SegmentKey(self.prefix, rp.topic, rp.topic_id, rp.partition, seg.start_offset, seg.id)
        manifest = read_manifest(self.store, key)
        raw = read_indexes(self.store, key, manifest, ("offset", "timestamp", "transaction"))
        o, t, x = raw["offset"] or b"", raw["timestamp"] or b"", raw["transaction"] or b""
        idx = RemoteIndexes(
            [(seg.start_offset + r, p) for r, p in _OFFSET_ENTRY.iter_unpack(o[:len(o) - len(o) % 8])],
            [(ts, seg.start_offset + r) for ts, r in _TIME_ENTRY.iter_unpack(t[:len(t) - len(t) % 12])],
            [AbortedTxn(*ENTRY.unpack_from(x, i)[1:]) for i in range(0, len(x) - len(x) % ENTRY_SIZE, ENTRY_SIZE)])
        self.indexes.put(seg.id, idx, len(o) + len(t) + len(x) + 64)
        return idx

    def _bytes(self, rp: RemotePartition, seg: ManifestSegment, start: int, end: int) -> bytes:
        """Bytes [start, end) of the segment's .log, through the chunk cache."""
        end = min(end, seg.size_in_bytes)
        if start >= end:
            return b""
        key = keys.SegmentKey(self.prefix, rp.topic, rp.topic_id, rp.partition, seg.start_offset, seg.id)
        size = self.chunk_size
        parts = []
        for c in range(start // size, (end - 1) // size + 1):
            chunk = self.chunks.get((seg.id, c))
            if chunk is None:
                lo_c, hi_c = c * size, min((c + 1) * size, seg.size_in_bytes)
                chunk = self.store.get_range(key.key(keys.LOG), lo_c, hi_c)
                if len(chunk) != hi_c - lo_c:
                    # the object is shorter than the manifest says (cut, or a short answer): the
                    # fetch fails (UNKNOWN_SERVER_ERROR) rather than end the segment early, which
                    # skipped its remaining records; nor is the short chunk cached
                    raise SegmentObjectError(f"{key.key(keys.LOG)}: {lo_c + len(chunk)} bytes where the partition "
                                             f"manifest says the segment has {seg.size_in_bytes}",
                                             key=key.key(keys.LOG))
                self.chunks.put((seg.id, c), chunk, len(chunk))
                self.stats["fetch_bytes"] += len(chunk)
            lo = max(start - c * size, 0)
            hi = min(end - c * size, len(chunk))
            parts.append(chunk[lo:hi])
        return b"".join(parts)

    def _read_segment(self, rp, seg, offset: int, max_bytes: int, min_one: bool) -> tuple[bytes, int]:
        """Whole batches of ``seg`` from the one holding ``offset``: (bytes, last offset), last -1
        when the segment has no batch at or past ``offset``, and (b"", _DOES_NOT_FIT) when it has
        one that does not fit in ``max_bytes``."""
        idx = self._indexes(rp, seg)
        pos = 0
        for off, p in idx.offsets:
            if off > offset:
                break
            pos = p
        out, total, last = [], 0, -1
        size = seg.size_in_bytes
        while pos + _MIN_HEAD <= size:
            head = self._bytes(rp, seg, pos, pos + _MIN_HEAD)
            if len(head) < _MIN_HEAD:
                break
            base, length, _epoch, magic = _BATCH_HEAD.unpack_from(head, 0)
            n = 12 + length
            batch_last = base + _LAST_DELTA.unpack_from(head, 23)[0] if magic >= 2 else base
            if batch_last >= offset:
                if total + n > max_bytes and not (min_one and not out):
                    if not out:
                        return b"", _DOES_NOT_FIT   # not "nothing here": the caller must not go past it
                    break
                if pos + n > size:
                    # a batch running past the segment's end: the object's bytes are not a whole
                    # segment (never a partial tail: remote segments are rolled ones)
                    raise SegmentObjectError(f"{rp.topic}-{rp.partition}: the batch at byte {pos} of remote segment "
                                             f"{seg.id} ({length} bytes) runs past the segment's {size} bytes")
                data = self._bytes(rp, seg, pos, pos + n)
                out.append(data)
                total += n
                last = batch_last
            pos += n
        return b"".join(out), last

    def read(self, plog, offset: int, max_bytes: int, min_one: bool, committed: bool) -> RemoteRead:
        """Records at ``offset`` from the remote tier (module docstring); OffsetOutOfRangeError
        when no remote segment holds it, RemoteStorageError when the store fails."""
        started = time.perf_counter()
        try:
            got = self._read(plog, offset, max_bytes, min_one, committed)
        except RemoteStorageError:
            self.metrics.add(plog.topic, "fetch_errors")
            raise
        finally:
            self.metrics.read_done((time.perf_counter() - started) * 1000)
        if got.records:
            self.metrics.add(plog.topic, "fetch_bytes", len(got.records))
        return got

    def _read(self, plog, offset: int, max_bytes: int, min_one: bool, committed: bool) -> RemoteRead:
        rp = self.partition(plog)
        seg = rp.segment_for(offset)
        if seg is None:
            raise OffsetOutOfRangeError(f"{plog.name}: no remote segment holds offset {offset}")
        while True:
            data, last = self._read_segment(rp, seg, offset, max_bytes, min_one)
            if data:
                break
            if last == _DOES_NOT_FIT:
                # the next batch does not fit what is left of the response (a later partition of a
                # fetch, min_one off): answered empty, read at the next fetch. Going on to the next
                # segment (or the local log) skipped the batch and every record up to there
                return RemoteRead(b"", [] if committed else None)
            nxt = rp.next_segment(seg)
            if nxt is None:
                return RemoteRead(continue_local=True, next_offset=max(offset, seg.end_offset + 1))
            seg, offset = nxt, max(offset, nxt.start_offset)
        aborted = None
        if committed:
            found = set()
            for s in rp.manifest.segments:
                if s.end_offset < seg.start_offset or not s.txn_index:
                    continue
                for t in self._indexes(rp, s).aborted:
                    if t.first_offset <= last and t.last_offset >= offset:
                        found.add(t)
            for t in plog.collect_aborted_transactions(plog.local_log_start_offset, last + 1):
                if t.first_offset <= last and t.last_offset >= offset:
                    found.add(t)
            aborted = sorted(found, key=lambda t: t.first_offset)
        return RemoteRead(data, aborted)

    def fetch(self, plog, offset: int, max_bytes: int, min_one: bool, committed: bool) -> RemoteRead:
        """``read`` on the reader pool, waited for ``remote.fetch.max.wait.ms`` at most
        (RemoteFetchTimeout past it; ReaderQueueFull past the queue's bound)."""
        broker = self.datadir.broker
        with self._pending_lock:
            if self._pending >= broker.get("remote.log.reader.max.pending.tasks"):
                raise ReaderQueueFull(f"{plog.name}: {self._pending} remote reads pending")
            self._pending += 1
        self.metrics.add(plog.topic, "fetch_requests")     # RemoteLogReader's constructor marks it
        try:
            fut = self.readers.submit(self.read, plog, offset, max_bytes, min_one, committed)
        except RuntimeError:
            with self._pending_lock:
                self._pending -= 1
            raise RemoteStorageError("the remote log reader is stopped") from None
        fut.add_done_callback(self._done)
        try:
            return fut.result(timeout=broker.get("remote.fetch.max.wait.ms") / 1000.0)
        except FutureTimeout:
            self.stats["fetch_expired"] += 1
            self.metrics.add(plog.topic, "fetch_expired")
            raise RemoteFetchTimeout(f"{plog.name}: the remote read took longer than remote.fetch.max.wait.ms") \
                from None
        except RemoteStorageError:
            self.stats["fetch_errors"] += 1
            raise

    def _done(self, _fut) -> None:
        with self._pending_lock:
            self._pending -= 1

    # -- ListOffsets (findOffsetByTimestamp) --------------------------------------------------------
    def find_offset_by_timestamp(self, plog, target: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after ``target`` in the remote segments
        below the local log start; None: not found remotely (search the local log)."""
        from ...record.batch import iter_batches
        from ..timestamp_lookup import find_offset_by_timestamp
        rp = self.partition(plog)
        for seg in rp.manifest.segments:
            if seg.max_timestamp_ms < target or seg.end_offset < plog.log_start_offset:
                continue
            if seg.start_offset >= plog.local_log_start_offset:
                return None
            idx = self._indexes(rp, seg)
            from_offset = seg.start_offset
            for ts, off in idx.times:
                if ts >= target:
                    break
                from_offset = off
            pos = 0
            for off, p in idx.offsets:
                if off > from_offset:
                    break
                pos = p
            data = self._bytes(rp, seg, pos, seg.size_in_bytes)
            found = find_offset_by_timestamp([(seg.max_timestamp_ms, lambda d=data: iter_batches(d))], target,
                                             max(plog.log_start_offset, seg.start_offset))
            if found is not None:
                return found
        return None

    def close(self) -> None:
        from . import compaction
        compaction.unregister(self.datadir.path, self)
        self.readers.shutdown(wait=False, cancel_futures=True)
        self.store.close()


def _epochs_in_range(entries, base: int, nxt: int, current_epoch: int) -> list[tuple[int, int]]:
    """LeaderEpochFileCache.epochEntriesInRange(base, nxt): the entries overlapping the segment,
    the first clamped to its base; never empty."""
    below = [(e, o) for e, o in entries if o <= base]
    out = [(below[-1][0], base)] if below else []
    out += [(e, o) for e, o in entries if base < o < nxt]
    return out or [(current_epoch, base)]
