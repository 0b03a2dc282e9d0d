"""compactlog's partition manifest: the commit point of a partition's remote tier (tiered-storage.md
§3.3-3.4), replaced only by compare-and-swap, with fencing of a stale owner.

Kafka has no counterpart object (its remote metadata lives only in ``__remote_log_metadata``,
replayed by ``RemoteLogMetadataCache``); the segment entries carry the fields of Kafka's
``RemoteLogSegmentMetadata``, so the journal can be rebuilt from the manifest. One JSON object per
partition, ``<prefix><topic>-<topicId>/<partition>/compactlog-partition.json``::

    {"version":1,"topic":…,"topicId":…,"partition":…,"generation":…,
     "owner":{"clusterId":…,"brokerId":…,"incarnation":…},"logStartOffset":…,"cleanerCheckpoint":…,
     "segments":[{"id","startOffset","endOffset","maxTimestampMs","sizeInBytes","segmentLeaderEpochs",
                  "eventTimestampMs","brokerId","txnIndex","keys"}…],
     "pendingDeletion":[{"id","startOffset","endOffset","deleteAfterMs"}…]}

segments sorted by start and contiguous (each ``endOffset + 1`` the next ``startOffset``).

Rules (§3.4): the manifest is created with a create-only put and replaced only with ``If-Match`` on
the ETag last read or written (rule 3); every replacement adds 1 to ``generation``. On 412 the
writer re-reads: a manifest equal to the one it tried to write is its own write whose answer was
lost (success); one owned by another incarnation means this writer is **fenced** (``Fenced``:
it must stop writing the partition); one of its own incarnation that differs (its own earlier
write, landed after a timeout) is re-based: the change is applied again to what is there.
Ownership is taken by a CAS that sets ``owner``. ``probe_conditional_writes`` is rule 8's
capability probe.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Callable

from . import keys
from .store import ObjectNotFound, ObjectStore, PreconditionFailed, RemoteStorageError

VERSION = 1


class Fenced(RemoteStorageError):
    """Another owner (a newer incarnation) holds the partition's manifest: stop writing it, delete
    only this writer's own uncommitted objects."""


class ManifestError(RemoteStorageError):
    """A partition manifest that does not read, or a change that would break its invariants."""


@dataclass(frozen=True)
class Owner:
    cluster_id: str
    broker_id: int
    incarnation: str            # a fresh id per broker start (keys.new_uuid)


@dataclass(frozen=True)
class ManifestSegment:
    id: str
    start_offset: int
    end_offset: int             # inclusive, as Kafka's RemoteLogSegmentMetadata.endOffset
    max_timestamp_ms: int
    size_in_bytes: int
    segment_leader_epochs: tuple[tuple[int, int], ...]
    event_timestamp_ms: int
    broker_id: int
    txn_index: bool = False
    keys: bool = False
    # the first batch's max timestamp (Kafka's LogSegment.getFirstBatchTimestamp), for
    # max.compaction.lag.ms once the segment is only remote; -1: not recorded (a manifest written
    # before it was, where the planner falls back to max_timestamp_ms, a later bound)
    first_batch_timestamp_ms: int = -1

    def to_dict(self) -> dict:
        d = {"id": self.id, "startOffset": self.start_offset, "endOffset": self.end_offset,
             "maxTimestampMs": self.max_timestamp_ms, "sizeInBytes": self.size_in_bytes,
             "segmentLeaderEpochs": {str(e): o for e, o in self.segment_leader_epochs},
             "eventTimestampMs": self.event_timestamp_ms, "brokerId": self.broker_id,
             "txnIndex": self.txn_index, "keys": self.keys}
        if self.first_batch_timestamp_ms >= 0:
            d["firstBatchTimestampMs"] = self.first_batch_timestamp_ms
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "ManifestSegment":
        return cls(d["id"], int(d["startOffset"]), int(d["endOffset"]), int(d["maxTimestampMs"]),
                   int(d["sizeInBytes"]),
                   tuple(sorted((int(e), int(o)) for e, o in d["segmentLeaderEpochs"].items())),
                   int(d["eventTimestampMs"]), int(d["brokerId"]), bool(d.get("txnIndex", False)),
                   bool(d.get("keys", False)), int(d.get("firstBatchTimestampMs", -1)))


@dataclass(frozen=True)
class PendingDeletion:
    id: str
    start_offset: int
    end_offset: int
    delete_after_ms: int

    def to_dict(self) -> dict:
        return {"id": self.id, "startOffset": self.start_offset, "endOffset": self.end_offset,
                "deleteAfterMs": self.delete_after_ms}

    @classmethod
    def from_dict(cls, d: dict) -> "PendingDeletion":
        return cls(d["id"], int(d["startOffset"]), int(d["endOffset"]), int(d["deleteAfterMs"]))


@dataclass(frozen=True)
class PartitionManifest:
    topic: str
    topic_id: str
    partition: int
    generation: int = 0
    owner: Owner | None = None
    log_start_offset: int = 0
    cleaner_checkpoint: int | None = None
    segments: tuple[ManifestSegment, ...] = ()
    pending_deletion: tuple[PendingDeletion, ...] = field(default=())

    def __post_init__(self):
        object.__setattr__(self, "segments", tuple(self.segments))
        object.__setattr__(self, "pending_deletion", tuple(self.pending_deletion))
        self.check()

    def check(self) -> None:
        """Segments sorted and contiguous, ids unique across both lists."""
        prev = None
        for s in self.segments:
            if s.end_offset < s.start_offset:
                raise ManifestError(f"{self.where()}: segment {s.id} ends ({s.end_offset}) before it starts "
                                    f"({s.start_offset})")
            if prev is not None and s.start_offset != prev.end_offset + 1:
                raise ManifestError(f"{self.where()}: segment {s.id} starts at {s.start_offset}, the one before "
                                    f"({prev.id}) ends at {prev.end_offset}: segments must be contiguous")
            prev = s
        ids = [s.id for s in self.segments] + [p.id for p in self.pending_deletion]
        if len(ids) != len(set(ids)):
            raise ManifestError(f"{self.where()}: a segment id is listed twice")

    def where(self) -> str:
        return f"{self.topic}-{self.partition} remote manifest (generation {self.generation})"

    @property
    def highest_offset(self) -> int:
        """Kafka's highestOffsetInRemoteStorage: the last segment's end, -1 without one."""
        return self.segments[-1].end_offset if self.segments else -1

    def segment_ids(self) -> set[str]:
        return {s.id for s in self.segments} | {p.id for p in self.pending_deletion}

    # -- changes (pure) ----------------------------------------------------------------------------

    def with_segment(self, seg: ManifestSegment) -> "PartitionManifest":
        """The manifest with ``seg`` appended after the last segment (an upload's commit)."""
        return replace(self, segments=self.segments + (seg,))

    def without_segments(self, ids, delete_after_ms: int | None = None) -> "PartitionManifest":
        """The manifest without the segments ``ids``; with ``delete_after_ms`` they move to
        ``pendingDeletion`` (readers get a grace period), else they are forgotten."""
        ids = set(ids)
        gone = [s for s in self.segments if s.id in ids]
        kept = tuple(s for s in self.segments if s.id not in ids)
        pending = self.pending_deletion
        if delete_after_ms is not None:
            pending += tuple(PendingDeletion(s.id, s.start_offset, s.end_offset, delete_after_ms) for s in gone)
        return replace(self, segments=kept, pending_deletion=pending)

    def without_pending(self, ids) -> "PartitionManifest":
        ids = set(ids)
        return replace(self, pending_deletion=tuple(p for p in self.pending_deletion if p.id not in ids))

    # -- JSON --------------------------------------------------------------------------------------

    def to_json(self) -> bytes:
        doc = {"version": VERSION, "topic": self.topic, "topicId": self.topic_id, "partition": self.partition,
               "generation": self.generation,
               "owner": None if self.owner is None else {"clusterId": self.owner.cluster_id,
                                                         "brokerId": self.owner.broker_id,
                                                         "incarnation": self.owner.incarnation},
               "logStartOffset": self.log_start_offset, "cleanerCheckpoint": self.cleaner_checkpoint,
               "segments": [s.to_dict() for s in self.segments],
               "pendingDeletion": [p.to_dict() for p in self.pending_deletion]}
        return json.dumps(doc, separators=(",", ":")).encode("utf-8")

    @classmethod
    def parse(cls, data: bytes, key: str = keys.PARTITION_MANIFEST) -> "PartitionManifest":
        try:
            doc = json.loads(data)
            if doc.get("version") != VERSION:
                raise ManifestError(f"{key}: version {doc.get('version')!r} is not {VERSION}", key=key)
            o = doc.get("owner")
            return cls(doc["topic"], doc["topicId"], int(doc["partition"]), int(doc["generation"]),
                       None if o is None else Owner(o["clusterId"], int(o["brokerId"]), o["incarnation"]),
                       int(doc["logStartOffset"]),
                       None if doc.get("cleanerCheckpoint") is None else int(doc["cleanerCheckpoint"]),
                       tuple(ManifestSegment.from_dict(s) for s in doc["segments"]),
                       tuple(PendingDeletion.from_dict(p) for p in doc.get("pendingDeletion", [])))
        except ManifestError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ManifestError(f"{key}: not a compactlog partition manifest: {type(e).__name__}: {e}",
                                key=key) from None


class PartitionManifestWriter:
    """The single writer of one partition's manifest (its owner). Not thread-safe: the partition's
    owner serializes its commits."""

    MAX_REBASES = 8

    def __init__(self, store: ObjectStore, prefix: str, topic: str, topic_id: str, partition: int, owner: Owner):
        self.store = store
        self.key = keys.partition_manifest_key(prefix, topic, topic_id, partition)
        self.topic, self.topic_id, self.partition = topic, topic_id, partition
        self.owner = owner
        self.current: PartitionManifest | None = None
        self.etag: str | None = None
        self.fenced = False

    def read(self) -> tuple[PartitionManifest | None, str | None]:
        """The stored manifest and its ETag (None, None when there is none)."""
        try:
            got = self.store.get(self.key)
        except ObjectNotFound:
            return None, None
        return PartitionManifest.parse(got.data, self.key), got.etag

    def take_ownership(self) -> PartitionManifest:
        """Create the manifest (generation 0) or CAS ``owner`` to this writer (generation + 1);
        a previous owner's next CAS then fails and fences it. A writer that held the partition and
        lost it (fenced) does not take it back: another incarnation took it after this one, so
        this one is the stale one (a second broker on a cloned data dir, or one its successor
        replaced); taking it back ping-ponged ownership between two live writers. Fenced."""
        for _ in range(self.MAX_REBASES):
            m, etag = self.read()
            if self.current is not None and m is not None and m.owner != self.owner:
                self.fenced = True
                holder = m.owner
                raise Fenced(f"{self.key}: this writer was fenced by broker "
                             f"{holder.broker_id if holder else '?'} (incarnation "
                             f"{holder.incarnation if holder else '?'}); it no longer owns the partition and "
                             f"does not take it back (restart to take it)", key=self.key)
            if m is None:
                m = PartitionManifest(self.topic, self.topic_id, self.partition, owner=self.owner)
                try:
                    self.etag = self.store.put_if_absent(self.key, m.to_json())
                    self.current = m
                    return m
                except PreconditionFailed:
                    continue            # created meanwhile: take it over by CAS
            self._check_identity(m)
            if m.owner == self.owner:
                self.current, self.etag = m, etag
                return m
            new = replace(m, owner=self.owner, generation=m.generation + 1)
            try:
                self.etag = self.store.put_if_match(self.key, new.to_json(), etag)
                self.current = new
                return new
            except PreconditionFailed:
                continue
        raise ManifestError(f"{self.key}: the manifest kept changing while taking ownership "
                            f"({self.MAX_REBASES} tries)", key=self.key)

    def _check_identity(self, m: PartitionManifest) -> None:
        if (m.topic, m.topic_id, m.partition) != (self.topic, self.topic_id, self.partition):
            raise ManifestError(f"{self.key}: holds {m.topic}-{m.partition} of topic id {m.topic_id}", key=self.key)

    def update(self, change: Callable[[PartitionManifest], PartitionManifest]) -> PartitionManifest:
        """Apply ``change`` to the current manifest and CAS it in (generation + 1). Raises Fenced
        when another owner took the partition, StoreUnavailable when the store does not answer
        (then the write may or may not have landed: calling ``update`` again with the same change
        finds out)."""
        if self.fenced:
            raise Fenced(f"{self.key}: this writer was fenced; it no longer owns the partition", key=self.key)
        if self.current is None:
            raise ManifestError(f"{self.key}: take ownership before updating", key=self.key)
        base = self.current
        for _ in range(self.MAX_REBASES):
            new = replace(change(base), generation=base.generation + 1, owner=self.owner)
            try:
                self.etag = self.store.put_if_match(self.key, new.to_json(), self.etag)
                self.current = new
                return new
            except PreconditionFailed:
                there, etag = self.read()
                if there is None:
                    raise ManifestError(f"{self.key}: the partition manifest was deleted under its owner",
                                        key=self.key) from None
                if there.owner != self.owner:
                    self.fenced = True
                    raise Fenced(f"{self.key}: fenced by broker {there.owner.broker_id if there.owner else '?'} "
                                 f"(incarnation {there.owner.incarnation if there.owner else '?'}, "
                                 f"generation {there.generation})", key=self.key) from None
                if there == new:
                    # our own write landed and its answer was lost
                    self.current, self.etag = there, etag
                    return there
                base, self.current, self.etag = there, there, etag       # re-base on what is there
        raise ManifestError(f"{self.key}: the manifest kept changing under its owner ({self.MAX_REBASES} tries)",
                            key=self.key)


# -- rule 8 -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Capabilities:
    create_only: bool
    compare_and_swap: bool

    @property
    def remote_compaction(self) -> bool:
        """Remote compaction needs both; upload and fetch need neither."""
        return self.create_only and self.compare_and_swap


def probe_conditional_writes(store: ObjectStore, prefix: str) -> Capabilities:
    """Create a probe key twice with create-only (the second must fail), CAS it with a wrong ETag
    (must fail) and the right one (must succeed); then delete it. Store errors propagate."""
    key = f"{prefix}compactlog-probe/{keys.new_uuid()}"
    try:
        etag = store.put_if_absent(key, b"1")
        try:
            store.put_if_absent(key, b"2")
            create_only = False
        except PreconditionFailed:
            create_only = True
        wrong = '"' + "0" * 32 + '"'
        try:
            if etag == wrong:
                wrong = '"' + "1" * 32 + '"'
            store.put_if_match(key, b"3", wrong)
            cas = False
        except PreconditionFailed:
            current = store.head(key).etag
            try:
                store.put_if_match(key, b"4", current)
                cas = store.get(key).data == b"4"
            except PreconditionFailed:
                cas = False
        return Capabilities(create_only, cas)
    finally:
        store.delete(key)
