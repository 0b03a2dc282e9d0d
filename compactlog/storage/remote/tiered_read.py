"""A data dir's partitions read across both tiers, offline and read-only: what ``consume``,
``dump-log``, ``verify``, ``explain``, ``cleaner status`` and ``spark.read.format("kafka-log")`` see
of a tiered partition whose broker is not running (or is, beside them).

Kafka's UnifiedLog serves ``[logStartOffset, localLogStartOffset)`` from the remote tier (through
``RemoteLogManager.read``) and the rest from the local segments; this does the same for readers
that have no broker: ``TieredSource`` is a ``SegmentSource`` (``storage/segment_source.py``) whose
segments are the partition manifest's remote segments below the first local segment, then the
local directory's segments, so ``PartitionReader`` and everything above it read both tiers without
knowing. Remote segment objects are read where they are, through the store (whole ``.log`` GETs,
indexes split out of ``.indexes`` by one ranged GET), never copied to local disk.

Reads never write: only GET, HEAD and LIST reach the store (no manifest CAS, no ownership, no
journal record, no orphan sweep — all of which the broker's RemoteLogManager does); the data dir
is opened read-only. A source is plain data (picklable: a Spark split carries it); the store is
opened once per process per settings (``shared_store``).

Which partitions are tiered: the broker config has ``remote.log.storage.system.enable=true`` and
the topic ``remote.storage.enable=true`` (``LogConfig.remote_log_enabled``); the store settings are
the broker's ``rsm.config.*`` (``StoreConfig.from_properties``).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ...errors import CorruptRecordError, StorageError
from .. import files
from ..segment_source import LocalDirSource, ObjectPin, SegmentEntry, SegmentSource
from . import keys
from .partition_manifest import ManifestSegment, PartitionManifest
from .segment_objects import read_indexes, read_manifest
from .store import ObjectNotFound, ObjectStore, StoreConfig, open_store

# Kafka's local index suffixes -> the names inside Aiven's ``.indexes`` object
INDEX_NAMES = {files.INDEX_SUFFIX: "offset", files.TIME_INDEX_SUFFIX: "timestamp",
               files.TXN_INDEX_SUFFIX: "transaction"}

_stores: dict[StoreConfig, ObjectStore] = {}
_stores_lock = threading.Lock()
_indexes: dict[str, dict] = {}          # segment id -> its indexes (immutable objects: never stale)
INDEX_CACHE_SEGMENTS = 256


def shared_store(config: StoreConfig) -> ObjectStore:
    """One store per settings in this process (a Spark executor reads many splits)."""
    store = _stores.get(config)
    if store is None:
        with _stores_lock:
            store = _stores.get(config)
            if store is None:
                store = _stores[config] = open_store(config)
    return store


def store_config(broker) -> StoreConfig | None:
    """The data dir's store settings, None when its broker has no remote tier."""
    if not broker.get("remote.log.storage.system.enable"):
        return None
    return StoreConfig.from_properties(broker.props)


def read_partition_manifest(store: ObjectStore, prefix: str, topic: str, topic_id: str,
                            partition: int) -> PartitionManifest | None:
    """The partition's manifest as stored (one GET; None when there is none)."""
    key = keys.partition_manifest_key(prefix, topic, topic_id, partition)
    try:
        return PartitionManifest.parse(store.get(key).data, key)
    except ObjectNotFound:
        return None


@dataclass(frozen=True)
class PartitionTiers:
    """One tiered partition as the data dir and the bucket hold it now."""
    topic: str
    partition: int
    topic_id: str
    manifest: PartitionManifest | None
    log_start_offset: int            # the checkpointed log start, or the manifest's
    local_log_start_offset: int      # the first local segment's base (the log end when none)
    local_end: int | None = None

    @property
    def highest_remote_offset(self) -> int:
        return self.manifest.highest_offset if self.manifest is not None else -1

    def remote_only(self) -> tuple[ManifestSegment, ...]:
        """The remote segments a reader takes from the bucket: at or above the log start, below
        the first local segment (the ones also held locally are read locally)."""
        if self.manifest is None:
            return ()
        return tuple(s for s in self.manifest.segments
                     if s.end_offset >= self.log_start_offset and s.start_offset < self.local_log_start_offset)

    def to_dict(self) -> dict:
        segs = self.manifest.segments if self.manifest is not None else ()
        return {"remoteSegmentCount": len(segs), "remoteSizeBytes": sum(s.size_in_bytes for s in segs),
                "remoteStartOffset": segs[0].start_offset if segs else None,
                "highestRemoteOffset": self.highest_remote_offset,
                "localLogStartOffset": self.local_log_start_offset, "logStartOffset": self.log_start_offset,
                "generation": self.manifest.generation if self.manifest is not None else None}


class RemoteTier:
    """The remote tier of a data dir opened read-only (``DataDir``), for offline commands."""

    def __init__(self, datadir, config: StoreConfig):
        self.datadir = datadir
        self.config = config
        self.store = shared_store(config)
        self.prefix = config.key_prefix

    @classmethod
    def of(cls, datadir) -> "RemoteTier | None":
        config = store_config(datadir.broker)
        return cls(datadir, config) if config is not None else None

    def tiered(self, topic: str) -> bool:
        return self.datadir.topic_config(topic).remote_log_enabled

    def tiers(self, topic: str, partition: int) -> PartitionTiers | None:
        """The partition's two tiers; None when the topic is not tiered or has no id (never
        uploaded: Kafka's keys name the topic id)."""
        if not self.tiered(topic):
            return None
        topic_id = self.datadir.topic_id(topic)
        if topic_id is None:
            return None
        manifest = read_partition_manifest(self.store, self.prefix, topic, topic_id, partition)
        local = LocalDirSource(_partition_dir(self.datadir.path, topic, partition))
        bases = [e.base_offset for e in local.list_segments()] if local.exists() else []
        checkpoint = local.log_start_checkpoint() if local.exists() else None
        remote_start = manifest.segments[0].start_offset if manifest is not None and manifest.segments else None
        first_local = bases[0] if bases else (manifest.highest_offset + 1 if manifest is not None else 0)
        if checkpoint is not None:
            log_start = checkpoint
        elif remote_start is not None:
            log_start = max(remote_start, manifest.log_start_offset)
        else:
            log_start = first_local
        return PartitionTiers(topic, partition, topic_id, manifest, log_start, first_local)

    def describe(self, topic: str, partition: int) -> dict | None:
        """The partition's tiers as ``cleaner status``, ``explain`` and the status page name them:
        remote segment count and bytes, the highest remote offset, the local log start, the copy
        lag (rolled local segments above the highest remote offset) and each segment with its
        tier (``remote``: in the bucket only; ``both``: copied, still local; ``local``); None when
        the topic is not tiered."""
        tiers = self.tiers(topic, partition)
        if tiers is None:
            return None
        d = tiers.to_dict()
        hro = tiers.highest_remote_offset
        local = LocalDirSource(_partition_dir(self.datadir.path, topic, partition))
        entries = local.list_segments() if local.exists() else []
        segs = [{"baseOffset": s.start_offset, "endOffset": s.end_offset + 1, "size": s.size_in_bytes,
                 "tier": "remote"} for s in tiers.remote_only()]
        for i, e in enumerate(entries):
            end = entries[i + 1].base_offset if i + 1 < len(entries) else None
            copied = end is not None and end - 1 <= hro
            segs.append({"baseOffset": e.base_offset, "endOffset": end, "size": e.size,
                         "tier": "both" if copied else "local"})
        lag = [s for s in segs[:-1] if s["tier"] == "local"] if entries else []
        d.update(copyLagBytes=sum(s["size"] for s in lag), copyLagSegments=len(lag), segments=segs)
        return d

    def source(self, topic: str, partition: int, tiers: PartitionTiers | None = None) -> SegmentSource:
        """The partition's segments across both tiers (the local directory alone when untiered)."""
        pdir = _partition_dir(self.datadir.path, topic, partition)
        tiers = tiers if tiers is not None else self.tiers(topic, partition)
        if tiers is None or not tiers.remote_only():
            return LocalDirSource(pdir)
        return TieredSource(pdir, self.config, topic, tiers.topic_id, partition, tiers.remote_only(),
                            tiers.log_start_offset)


def partition_source(pdir: str) -> SegmentSource:
    """The source a reader of the partition directory ``pdir`` uses: across both tiers when it is
    a tiered partition of a data dir whose ``server.properties`` names a store (the Spark source
    plans with it), else the directory alone. Only the data dir's metadata and the bucket's
    partition manifest are read."""
    import os
    local = LocalDirSource(os.path.abspath(pdir))
    root = os.path.dirname(local.dir)
    broker = _tiered_broker(root)
    if broker is None:
        return local
    from ..datadir import DataDir
    topic, partition = files.parse_partition_dir(local.dir)
    dd = DataDir(root, broker=broker)
    if not dd.has_topic(topic):
        return local
    tier = RemoteTier.of(dd)
    return tier.source(topic, partition) if tier.tiered(topic) else local


_brokers: dict[str, tuple] = {}


def _tiered_broker(root: str):
    """The broker config of the data dir ``root`` when it names a remote tier, else None; read
    once per version of its ``server.properties`` (a plan asks once per partition)."""
    import os
    path = os.path.join(root, "server.properties")
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError:
        return None
    known = _brokers.get(root)
    if known is None or known[0] != stamp:
        from ..datadir import load_broker_config
        broker = load_broker_config(root)
        known = _brokers[root] = (stamp, broker if broker.get("remote.log.storage.system.enable") else None)
    return known[1]


def _partition_dir(root: str, topic: str, partition: int) -> str:
    import os
    return os.path.join(os.path.abspath(root), files.partition_dir_name(topic, partition))


class TieredPin:
    """The pin of a ``TieredSource``: the remote segments (immutable objects: an ``ObjectPin``)
    followed by the local segments pinned as ``PinnedSegments`` pins them."""

    def __init__(self, remote: ObjectPin, local):
        self.remote, self.local = remote, local
        self.dir = local.dir if local is not None else remote.dir
        self.segments = list(remote.segments) + (list(local.segments) if local is not None else [])
        self._n = len(remote.segments)

    def __len__(self) -> int:
        return len(self.segments)

    def files(self) -> list:
        return [s.file for s in self.segments]

    def location(self, i: int, suffix: str) -> str:
        return self.remote.location(i, suffix) if i < self._n else self.local.location(i - self._n, suffix)

    def sidecar(self, i: int, suffix: str) -> bytes | None:
        return self.remote.sidecar(i, suffix) if i < self._n else self.local.sidecar(i - self._n, suffix)

    def close(self) -> None:
        self.remote.close()
        if self.local is not None:
            self.local.close()


@dataclass(frozen=True)
class TieredSource(SegmentSource):
    """A tiered partition's remote segments (from ``remote``) then its local directory's; read-only."""
    dir: str
    store_config: StoreConfig
    topic: str
    topic_id: str
    partition: int
    remote: tuple            # of ManifestSegment, in offset order, all below the first local segment
    log_start: int
    local: bool = True       # False: the remote segments alone (``verify`` checks them one by one)

    # -- names
    def _remote(self, base_offset: int) -> ManifestSegment | None:
        for s in self.remote:
            if s.start_offset == base_offset:
                return s
        return None

    def _key(self, seg: ManifestSegment) -> keys.SegmentKey:
        return keys.SegmentKey(self.store_config.key_prefix, self.topic, self.topic_id, self.partition,
                               seg.start_offset, seg.id)

    def location(self, base_offset: int | None = None, suffix: str = files.LOG_SUFFIX) -> str:
        seg = self._remote(base_offset) if base_offset is not None else None
        if seg is None:
            return LocalDirSource(self.dir).location(base_offset, suffix)
        name = keys.INDEXES if suffix in INDEX_NAMES else keys.LOG
        where = self.store_config.bucket if self.store_config.backend == "s3" else self.store_config.root
        scheme = "s3" if self.store_config.backend == "s3" else "file"
        return f"{scheme}://{where}/{self._key(seg).key(name)}"

    def __str__(self) -> str:
        return self.dir

    def exists(self) -> bool:
        return bool(self.remote) or LocalDirSource(self.dir).exists()

    @property
    def store(self) -> ObjectStore:
        return shared_store(self.store_config)

    # -- listing and reading
    def _remote_entries(self) -> list[SegmentEntry]:
        out = []
        for s in self.remote:
            present = {files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX}
            if s.txn_index:
                present.add(files.TXN_INDEX_SUFFIX)
            out.append(SegmentEntry(s.start_offset, s.size_in_bytes, frozenset(present), ("remote", s.id)))
        return out

    def _local(self) -> LocalDirSource | None:
        local = LocalDirSource(self.dir)
        return local if self.local and local.exists() else None

    def list_segments(self) -> list[SegmentEntry]:
        local = self._local()
        return self._remote_entries() + (local.list_segments() if local is not None else [])

    def read_segment(self, base_offset: int, size: int):
        seg = self._remote(base_offset)
        if seg is None:
            return LocalDirSource(self.dir).read_segment(base_offset, size)
        if size == 0:
            return b""
        data = self.store.get_range(self._key(seg).key(keys.LOG), 0, size)
        if len(data) < size:
            raise CorruptRecordError(f"remote segment holds {len(data)} bytes, its manifest says {size}",
                                     file=self.location(base_offset))
        return data

    def read_range(self, base_offset: int, start: int, end: int, suffix: str = files.LOG_SUFFIX) -> bytes:
        seg = self._remote(base_offset)
        if seg is None:
            return LocalDirSource(self.dir).read_range(base_offset, start, end, suffix)
        if suffix != files.LOG_SUFFIX:
            data = self.read_index(base_offset, suffix) or b""
            return data[start:end]
        end = min(end, seg.size_in_bytes)
        return self.store.get_range(self._key(seg).key(keys.LOG), start, end) if end > start else b""

    def read_index(self, base_offset: int, suffix: str) -> bytes | None:
        seg = self._remote(base_offset)
        if seg is None:
            return LocalDirSource(self.dir).read_index(base_offset, suffix)
        if suffix not in INDEX_NAMES:
            return None
        got = _indexes.get(seg.id)
        if got is None:
            key = self._key(seg)
            got = read_indexes(self.store, key, read_manifest(self.store, key), tuple(INDEX_NAMES.values()))
            if len(_indexes) >= INDEX_CACHE_SEGMENTS:
                _indexes.clear()
            _indexes[seg.id] = got
        return got[INDEX_NAMES[suffix]]

    def pin(self):
        from ..pinned import changed, pin_live_segments
        local = pin_live_segments(self.dir) if self._local() is not None else None
        if local is not None and local.segments:
            # the remote segments were taken from the manifest read before the local directory was
            # pinned: a broker that copied a segment and trimmed it meanwhile leaves it in neither
            # list, and the read would go from the remote tier's end to the next local segment,
            # its records skipped without a word
            first_local = local.segments[0].base_offset
            covered = self.remote[-1].end_offset + 1 if self.remote else self.log_start
            if first_local > covered:
                local.close()
                raise changed(self.dir, f"the local log starts at offset {first_local}, past the remote tier's "
                                        f"end {covered - 1} as read before it: a segment moved to the remote tier")
        return TieredPin(ObjectPin(self, self._remote_entries()), local)

    # -- the partition's own metadata
    def log_start_checkpoint(self) -> int | None:
        return self.log_start

    def clean_shutdown(self) -> bool:
        # remote segments alone are whole objects: no torn tail to expect (a short one is corrupt)
        local = self._local()
        return local.clean_shutdown() if local is not None else True

    def producer_snapshot_offsets(self) -> list[int]:
        local = self._local()
        return local.producer_snapshot_offsets() if local is not None else []

    def producer_snapshot(self, offset: int) -> bytes:
        return LocalDirSource(self.dir).producer_snapshot(offset)

    # -- never written through
    def create_replacement(self, base_offset: int):
        raise StorageError(f"{self.dir}: the tiered read view is read-only")

    def discard_replacements(self) -> None:
        raise StorageError(f"{self.dir}: the tiered read view is read-only")

    def commit_swap(self, groups, log=None) -> None:
        raise StorageError(f"{self.dir}: the tiered read view is read-only")
