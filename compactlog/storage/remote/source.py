"""Segment sources over the remote tier (tiered-storage.md §5.2-§5.4): the seam of
``storage/segment_source.py`` on an object store, so the cleaner's plan and tasks run unchanged
over segments that live in the bucket.

* ``RemoteSegmentSource``: one partition's remote segments as one pinned generation of its
  partition manifest lists them (Kafka's ``RemoteStorageManager.fetchLogSegment`` /
  ``fetchIndex`` by ranged GETs of Aiven's ``.log`` and ``.indexes`` objects). Its replacements
  (``RemoteReplacement``) are new segment objects under a fresh segment id, written create-only,
  never live until the partition's owner commits them by one manifest CAS (``compaction.py``).
* ``TieredSource``: one logical log, the remote segments (every offset up to the highest remote
  offset) then the local segments above it; reads, replacements and the commit are routed to the
  tier that holds the segment. Cleaning groups never straddle the boundary (``zone_cuts``).

Both are plain data (frozen dataclasses; the store is opened again from its settings in whatever
process unpickles them), so a Spark task reads the remote objects directly, never through the
broker's disk. Kafka has no counterpart: its tiered storage refuses compacted topics.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from dataclasses import dataclass, field

from ...errors import CorruptRecordError
from ...record.remote_log_metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition
from .. import files
from ..segment_source import LocalDirSource, ObjectPin, ReplacementWriter, SegmentEntry, SegmentSource
from . import faults, keys
from .partition_manifest import ManifestSegment, PartitionManifest
from .segment_objects import SegmentFiles, delete_segment, read_indexes, read_manifest, upload_segment
from .store import ObjectStore, StoreConfig, open_store

# the cleaner's index suffixes -> the names of Aiven's .indexes parts
INDEX_NAMES = {files.INDEX_SUFFIX: "offset", files.TIME_INDEX_SUFFIX: "timestamp",
               files.TXN_INDEX_SUFFIX: "transaction"}

_stores: dict[StoreConfig, ObjectStore] = {}
_stores_lock = threading.Lock()
# segment keys this process staged and nobody committed yet: removed by discard_replacements
_staged: dict[tuple[str, int], set] = {}
_staged_lock = threading.Lock()


def store_for(config: StoreConfig) -> ObjectStore:
    """One store per settings per process (a Spark executor opens its own)."""
    with _stores_lock:
        s = _stores.get(config)
        if s is None:
            s = _stores[config] = open_store(config)
        return s


def _digest(data) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


@dataclass(frozen=True, eq=False)
class RemoteSegmentSource(SegmentSource):
    """The segments one manifest generation lists (``manifest``, pinned: their objects are
    immutable and stay at least ``compactlog.remote.compaction.delete.delay.ms`` after a swap)."""
    store_config: StoreConfig
    topic: str
    topic_id: str
    partition: int
    manifest: PartitionManifest
    broker_id: int = -1
    store: ObjectStore | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "_by_start", {s.start_offset: s for s in self.manifest.segments})
        object.__setattr__(self, "_indexes", {})
        object.__setattr__(self, "_digests", {})

    def __getstate__(self):
        # the store is a connection: reopened from its settings where the source lands
        return {k: getattr(self, k) for k in ("store_config", "topic", "topic_id", "partition", "manifest",
                                              "broker_id")}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)
        object.__setattr__(self, "store", None)
        self.__post_init__()

    # -- names
    @property
    def prefix(self) -> str:
        return self.store_config.key_prefix

    @property
    def objects(self) -> ObjectStore:
        return self.store if self.store is not None else store_for(self.store_config)

    @property
    def tip(self) -> TopicIdPartition:
        return TopicIdPartition(self.topic_id, self.topic, self.partition)

    def segment(self, base_offset: int) -> ManifestSegment:
        try:
            return self._by_start[base_offset]
        except KeyError:
            raise CorruptRecordError(f"{self.location()}: no remote segment starts at {base_offset} in manifest "
                                     f"generation {self.manifest.generation}") from None

    def key_of(self, seg: ManifestSegment) -> keys.SegmentKey:
        return keys.SegmentKey(self.prefix, self.topic, self.topic_id, self.partition, seg.start_offset, seg.id)

    def location(self, base_offset: int | None = None, suffix: str = files.LOG_SUFFIX) -> str:
        part = keys.partition_prefix(self.prefix, self.topic, self.topic_id, self.partition)
        where = f"{self.store_config.bucket or self.store_config.root}/{part}"
        if base_offset is None or base_offset not in self._by_start:
            return where
        k = self.key_of(self._by_start[base_offset])
        if suffix == files.LOG_SUFFIX:
            return f"{where}{k.key(keys.LOG)[len(part):]}"
        return f"{where}{k.key(keys.INDEXES)[len(part):]}#{INDEX_NAMES.get(suffix, suffix)}"

    def exists(self) -> bool:
        return True

    # -- reading
    def list_segments(self) -> list[SegmentEntry]:
        return [SegmentEntry(s.start_offset, s.size_in_bytes,
                             frozenset((files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX)
                                       + ((files.TXN_INDEX_SUFFIX,) if s.txn_index else ())),
                             ("remote", s.id)) for s in self.manifest.segments]

    def read_segment(self, base_offset: int, size: int):
        if size == 0:
            return b""
        seg = self.segment(base_offset)
        data = self.objects.get_range(self.key_of(seg).key(keys.LOG), 0, size)
        if len(data) < size:
            raise CorruptRecordError(f"remote segment holds {len(data)} bytes, its manifest says {size}",
                                     file=self.location(base_offset))
        # what the replacement of a single segment compares its output with (unchanged: not written)
        self._digests[seg.id] = (size, _digest(data))
        return data

    def read_range(self, base_offset: int, start: int, end: int, suffix: str = files.LOG_SUFFIX) -> bytes:
        if end <= start:
            return b""
        if suffix == files.LOG_SUFFIX:
            seg = self.segment(base_offset)
            return self.objects.get_range(self.key_of(seg).key(keys.LOG), start, min(end, seg.size_in_bytes))
        return (self.read_index(base_offset, suffix) or b"")[start:end]

    def segment_indexes(self, base_offset: int) -> dict:
        """Every part of the segment's ``.indexes`` (one GET of the manifest, one ranged GET), cached."""
        seg = self.segment(base_offset)
        got = self._indexes.get(seg.id)
        if got is None:
            key = self.key_of(seg)
            got = self._indexes[seg.id] = read_indexes(self.objects, key, read_manifest(self.objects, key))
        return got

    def read_index(self, base_offset: int, suffix: str) -> bytes | None:
        name = INDEX_NAMES.get(suffix)
        if name is None:
            return None
        return self.segment_indexes(base_offset).get(name)

    def pin(self):
        return ObjectPin(self, self.list_segments())

    def digest_of(self, seg_id: str):
        return self._digests.get(seg_id)

    # -- replacing
    def create_replacement(self, base_offset: int, members=None) -> "RemoteReplacement":
        return RemoteReplacement(self, list(members) if members else [base_offset])

    def discard_replacements(self) -> None:
        with _staged_lock:
            doomed = _staged.pop((self.topic_id, self.partition), set())
        for k in doomed:
            delete_segment(self.objects, k, quiet=True)

    def commit_swap(self, groups, log=None, staged=None) -> None:
        from ...errors import StorageError
        raise StorageError(f"{self.location()}: remote segments are committed by the partition's owner "
                           f"(storage/remote/compaction.py), not by the source")


def forget_staged(topic_id: str, partition: int, seg_ids) -> None:
    """Committed (or rolled back by the owner): no longer this process's to discard."""
    ids = set(seg_ids)
    with _staged_lock:
        s = _staged.get((topic_id, partition))
        if s:
            s.difference_update({k for k in s if k.segment_id in ids})


class RemoteReplacement(ReplacementWriter):
    """The cleaned segment of a group of remote segments (tiered-storage.md §5.4): start = the
    first member's start, end = the last member's end (ranges stay contiguous; readers skip the
    gaps), epochs = the union of the members' (smallest start per epoch), the producer snapshot
    and leader-epoch checkpoint the last member's (both "as of its end + 1"), written under a
    fresh segment id, create-only, ``.rsm-manifest`` last. A single-segment group whose output is
    the input byte for byte is not written at all (no PUT, no metadata: ``descriptor`` None)."""

    def __init__(self, source: RemoteSegmentSource, members: list[int]):
        self.source = source
        self.members = [source.segment(b) for b in members]
        # a file with no name (unlinked at once, read back through its descriptor): a process
        # killed while it exists leaves nothing behind (a named temp file stayed for good)
        fd, path = tempfile.mkstemp(prefix="compactlog-remote-", suffix=".log")
        os.unlink(path)
        self._log = os.fdopen(fd, "w+b")
        self.path = f"/proc/self/fd/{fd}"
        self._hash = hashlib.blake2b(digest_size=16)
        self.size = 0
        self.key: keys.SegmentKey | None = None
        self.descriptor: dict | None = None

    def append(self, data: bytes) -> None:
        self._log.write(data)
        self._hash.update(data)
        self.size += len(data)

    def finish(self, indexes, mtime_ms: int | None = None) -> None:
        self._log.flush()
        faults.maybe_die("compaction-segment-written")
        try:
            olds = self.members
            if len(olds) == 1 and self.source.digest_of(olds[0].id) == (self.size, self._hash.digest()):
                return                      # byte-identical: the old object stays (§5.3)
            idx = dict(indexes)
            time_index = idx.get(files.TIME_INDEX_SUFFIX) or b""
            max_ts = int.from_bytes(time_index[-12:-4], "big", signed=True) if len(time_index) >= 12 else -1
            epochs: dict[int, int] = {}
            for o in olds:
                for e, off in o.segment_leader_epochs:
                    epochs[e] = min(off, epochs.get(e, off))
            last = self.source.segment_indexes(olds[-1].start_offset)
            seg_id = keys.new_uuid()
            start, end = olds[0].start_offset, olds[-1].end_offset
            now = int(time.time() * 1000)
            broker_id = self.source.broker_id if self.source.broker_id >= 0 else olds[-1].broker_id
            ep = tuple(sorted(epochs.items()))
            meta = RemoteLogSegmentMetadata(RemoteLogSegmentId(self.source.tip, seg_id), start, end, broker_id,
                                            max_ts, now, ep, self.size)
            txn = idx.get(files.TXN_INDEX_SUFFIX)
            seg_files = SegmentFiles(log_path=self.path, offset_index=idx.get(files.INDEX_SUFFIX) or b"",
                                     time_index=time_index, producer_snapshot=last.get("producerSnapshot") or b"",
                                     leader_epoch=last.get("leaderEpoch") or b"", transaction_index=txn or None)
            self.key = self.source.key_of(ManifestSegment(seg_id, start, end, max_ts, self.size, ep, now, broker_id))
            with _staged_lock:
                _staged.setdefault((self.source.topic_id, self.source.partition), set()).add(self.key)
            upload_segment(self.source.objects, self.source.prefix, meta, seg_files,
                           chunk_size=self.source.store_config.chunk_size)
            # the first batch kept is at or after the first member's first batch: its timestamp is
            # a bound (the output is below the new cleaner checkpoint, so max.compaction.lag.ms
            # does not look at it until a later round's dirty range reaches it, which it cannot)
            new = ManifestSegment(seg_id, start, end, max_ts, self.size, ep, now, broker_id, txn_index=bool(txn),
                                  first_batch_timestamp_ms=olds[0].first_batch_timestamp_ms)
            self.descriptor = {"segment": new.to_dict(), "replaced": [o.id for o in olds]}
        finally:
            self._log.close()

    def abort(self) -> None:
        try:
            self._log.close()
        except Exception:
            pass
        if self.key is not None:
            delete_segment(self.source.objects, self.key, quiet=True)
            forget_staged(self.source.topic_id, self.source.partition, [self.key.segment_id])


def _unlink(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


@dataclass(frozen=True, eq=False)
class TieredSource(SegmentSource):
    """One logical log over both tiers (§5.2): the remote segments for every offset below
    ``boundary`` (the highest remote offset + 1), the local directory's segments from it on.
    Local segments below the boundary (uploaded, still on disk until local retention) are not
    listed: the remote copy is the one compacted, the local one is a cache at most as clean."""
    remote: RemoteSegmentSource
    local: LocalDirSource
    boundary: int

    def _at(self, base_offset: int | None) -> SegmentSource:
        return self.remote if base_offset is not None and base_offset < self.boundary else self.local

    def location(self, base_offset: int | None = None, suffix: str = files.LOG_SUFFIX) -> str:
        if base_offset is None:
            return self.local.location()
        return self._at(base_offset).location(base_offset, suffix)

    def __str__(self) -> str:
        return self.local.location()

    def exists(self) -> bool:
        return self.local.exists()

    def list_segments(self) -> list[SegmentEntry]:
        return self.remote.list_segments() + [e for e in self.local.list_segments() if e.base_offset >= self.boundary]

    def read_segment(self, base_offset: int, size: int):
        return self._at(base_offset).read_segment(base_offset, size)

    def read_range(self, base_offset: int, start: int, end: int, suffix: str = files.LOG_SUFFIX) -> bytes:
        return self._at(base_offset).read_range(base_offset, start, end, suffix)

    def read_index(self, base_offset: int, suffix: str) -> bytes | None:
        return self._at(base_offset).read_index(base_offset, suffix)

    def pin(self):
        return ObjectPin(self, self.list_segments())

    def log_start_checkpoint(self) -> int | None:
        return self.local.log_start_checkpoint()

    def clean_shutdown(self) -> bool:
        return self.local.clean_shutdown()

    def producer_snapshot_offsets(self) -> list[int]:
        return self.local.producer_snapshot_offsets()

    def producer_snapshot(self, offset: int) -> bytes:
        return self.local.producer_snapshot(offset)

    def create_replacement(self, base_offset: int, members=None):
        if base_offset < self.boundary:
            return self.remote.create_replacement(base_offset, members)
        return self.local.create_replacement(base_offset)

    def discard_replacements(self) -> None:
        self.local.discard_replacements()
        self.remote.discard_replacements()

    def commit_swap(self, groups, log=None, staged=None) -> None:
        """The local groups by Kafka's renames (§5.5 D4), after the remote groups were committed
        by one manifest CAS (``compaction.commit_remote``, D1-D3)."""
        local = [g for g in groups if g[0] >= self.boundary]
        if local:
            self.local.commit_swap(local, log)


__all__ = ["RemoteSegmentSource", "RemoteReplacement", "TieredSource", "store_for", "forget_staged"]
