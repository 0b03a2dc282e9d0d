"""One rolled segment as objects in the bucket, in the layout of Aiven's RemoteStorageManager.

Follows Aiven's ``KafkaRemoteStorageManager.copyLogSegmentData`` (``uploadSegmentLog``,
``uploadIndexes``, ``uploadManifest``), ``SegmentManifestV1``, ``SegmentIndexesV1``,
``FixedSizeChunkIndex`` and ``KafkaTypeSerdeModule`` (the manifest JSON, checked against
``SegmentManifestV1SerdeTest``), and Kafka's ``LogSegmentData`` (what an upload carries). Three
objects under one main path (``keys.SegmentKey``):

* ``.log``: the segment file byte for byte (no compression, no encryption), read by ranged GET;
* ``.indexes``: offset index, time index, producer snapshot, leader-epoch checkpoint text and, if
  the segment has one, transaction index, concatenated in that order;
* ``.rsm-manifest``: the JSON locating each index in ``.indexes`` and describing ``.log`` as
  fixed-size chunks of ``rsm.config.chunk.size`` (all of one size but the last), plus the
  segment's ``RemoteLogSegmentMetadata``.

Crash safety (tiered-storage.md §3.4 rules 1-2): every upload uses a fresh segment id (the caller's
``RemoteLogSegmentMetadata``, drawn by ``keys.new_uuid`` for each attempt, never reused), every
object is created with create-only puts, large ``.log`` objects go multipart (aborted on failure
by the store), and ``.rsm-manifest`` is written last, so its presence says the rest is complete.
A create-only put answering "exists" for this fresh id means an earlier attempt of the same put
landed (its answer was lost): accepted when the object has the size written. A failed upload
deletes what it wrote where it still can (as Aiven does) and re-raises; what it cannot delete is
an orphan for the sweep (§3.4 rule 7), never referenced by any manifest.

The upload does not write ``.compactlog-keys`` itself unless given its bytes (built by the cleaner
layer); it is then written before ``.rsm-manifest``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ...record.remote_log_metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition
from ...record.schema_fields import to_json
from .. import files
from . import keys
from .store import ObjectStore, PreconditionFailed, RemoteStorageError

# the concatenation order of .indexes and the manifest's names for them (SegmentIndexesV1)
INDEX_ORDER = ("offset", "timestamp", "producerSnapshot", "leaderEpoch", "transaction")


class SegmentObjectError(RemoteStorageError):
    """Segment objects that do not read as Aiven's layout (a bad manifest, sizes that disagree)."""


def leader_epoch_checkpoint(entries) -> bytes:
    """The leader-epoch checkpoint text (format 0) Kafka uploads (``epochEntriesAsByteBuffer``):
    the entries starting below the next segment's base."""
    entries = list(entries)
    return (f"0\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries)).encode("ascii")


@dataclass(frozen=True)
class SegmentFiles:
    """What one segment upload carries (Kafka's ``LogSegmentData``): the ``.log`` file by path (it
    is streamed, never held whole), the rest as bytes."""

    log_path: str
    offset_index: bytes
    time_index: bytes
    producer_snapshot: bytes
    leader_epoch: bytes
    transaction_index: bytes | None = None

    @classmethod
    def from_log_dir(cls, log_dir: str, base_offset: int, next_offset: int,
                     epoch_entries) -> "SegmentFiles":
        """The files of the segment at ``base_offset`` of a partition directory, the producer
        snapshot ``<next_offset>.snapshot`` (taken at roll) and the epoch entries below
        ``next_offset``; the indexes as trimmed at roll."""
        def read(path: str) -> bytes:
            with open(path, "rb") as f:
                return f.read()

        txn = files.segment_file(log_dir, base_offset, files.TXN_INDEX_SUFFIX)
        snapshot = files.segment_file(log_dir, next_offset, files.SNAPSHOT_SUFFIX)
        if not os.path.exists(snapshot):
            raise FileNotFoundError(f"{snapshot}: the producer snapshot of the segment at {base_offset} is missing "
                                    f"(taken when the segment rolled); the segment cannot be uploaded without it")
        return cls(
            log_path=files.segment_file(log_dir, base_offset, files.LOG_SUFFIX),
            offset_index=read(files.segment_file(log_dir, base_offset, files.INDEX_SUFFIX)),
            time_index=read(files.segment_file(log_dir, base_offset, files.TIME_INDEX_SUFFIX)),
            producer_snapshot=read(snapshot),
            leader_epoch=leader_epoch_checkpoint(e for e in epoch_entries if e[1] < next_offset),
            transaction_index=read(txn) if os.path.exists(txn) else None,
        )

    def indexes(self) -> list[tuple[str, bytes | None]]:
        return list(zip(INDEX_ORDER, (self.offset_index, self.time_index, self.producer_snapshot,
                                      self.leader_epoch, self.transaction_index)))


# -- the manifest -----------------------------------------------------------------------------------

def chunk_index(file_size: int, chunk_size: int) -> dict:
    """``FixedSizeChunkIndex`` of an untransformed file, as Aiven's ``TransformFinisher`` computes it
    from the file size: chunks of ``chunk_size``, the last one what remains (0 for an empty file,
    a whole chunk when the size is a multiple)."""
    if chunk_size <= 0:
        raise ValueError(f"chunk size must be positive, not {chunk_size}")
    final = file_size
    while final > chunk_size:
        final -= chunk_size
    return {"type": "fixed", "originalChunkSize": chunk_size, "originalFileSize": file_size,
            "transformedChunkSize": chunk_size, "finalTransformedChunkSize": final}


def index_positions(indexes: list[tuple[str, bytes | None]]) -> dict:
    out, position = {}, 0
    for name, data in indexes:
        if data is None:
            out[name] = None
            continue
        out[name] = {"position": position, "size": len(data)}
        position += len(data)
    return out


def metadata_json(m: RemoteLogSegmentMetadata) -> dict:
    """``RemoteLogSegmentMetadata`` through ``KafkaTypeSerdeModule``: seven fields, no size, state or
    custom metadata; epochs as a JSON object keyed by the epoch's decimal text."""
    tip = m.segment_id.topic_id_partition
    return {
        "remoteLogSegmentId": {"topicIdPartition": {"topicId": tip.topic_id,
                                                    "topicPartition": {"topic": tip.topic, "partition": tip.partition}},
                               "id": m.segment_id.id},
        "startOffset": m.start_offset, "endOffset": m.end_offset, "maxTimestampMs": m.max_timestamp_ms,
        "brokerId": m.broker_id, "eventTimestampMs": m.event_timestamp_ms,
        "segmentLeaderEpochs": {str(e): o for e, o in m.segment_leader_epochs},
    }


def manifest_json(m: RemoteLogSegmentMetadata, indexes: list[tuple[str, bytes | None]], chunk_size: int) -> str:
    """The ``.rsm-manifest`` text exactly as Aiven's Jackson mapper writes ``SegmentManifestV1``
    (no spaces, fields in its order, ``transaction`` null when absent, no ``encryption``)."""
    return to_json({"version": "1", "chunkIndex": chunk_index(m.segment_size_in_bytes, chunk_size),
                    "segmentIndexes": index_positions(indexes), "compression": False,
                    "remoteLogSegmentMetadata": metadata_json(m)})


@dataclass(frozen=True)
class SegmentManifest:
    """A parsed ``.rsm-manifest``."""

    chunk_size: int
    file_size: int
    indexes: dict            # name -> (position, size) or None
    compression: bool
    metadata: RemoteLogSegmentMetadata | None     # absent in manifests older than the field

    @classmethod
    def parse(cls, text: bytes | str, key: str = ".rsm-manifest") -> "SegmentManifest":
        try:
            doc = json.loads(text)
            if doc.get("version") != "1":
                raise SegmentObjectError(f"{key}: manifest version {doc.get('version')!r} is not 1", key=key)
            if doc.get("encryption") is not None:
                raise SegmentObjectError(f"{key}: the segment is encrypted; compactlog reads no encrypted "
                                         f"segments (rsm.config.encryption.enabled)", key=key)
            ci = doc["chunkIndex"]
            idx = {}
            for name in INDEX_ORDER:
                v = doc["segmentIndexes"].get(name)
                idx[name] = None if v is None else (int(v["position"]), int(v["size"]))
            meta = doc.get("remoteLogSegmentMetadata")
            metadata = None
            if meta is not None:
                sid = meta["remoteLogSegmentId"]
                tp = sid["topicIdPartition"]
                metadata = RemoteLogSegmentMetadata(
                    RemoteLogSegmentId(TopicIdPartition(tp["topicId"], tp["topicPartition"]["topic"],
                                                        int(tp["topicPartition"]["partition"])), sid["id"]),
                    int(meta["startOffset"]), int(meta["endOffset"]), int(meta["brokerId"]),
                    int(meta["maxTimestampMs"]), int(meta["eventTimestampMs"]),
                    {int(e): int(o) for e, o in meta["segmentLeaderEpochs"].items()},
                    int(ci["originalFileSize"]))
            return cls(int(ci["originalChunkSize"]), int(ci["originalFileSize"]), idx, bool(doc["compression"]),
                       metadata)
        except SegmentObjectError:
            raise
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise SegmentObjectError(f"{key}: not an RSM segment manifest: {type(e).__name__}: {e}", key=key) from None


# -- upload -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class UploadedSegment:
    key: keys.SegmentKey
    log_size: int
    indexes_size: int
    manifest: str


def segment_key(prefix: str, m: RemoteLogSegmentMetadata) -> keys.SegmentKey:
    tip = m.segment_id.topic_id_partition
    return keys.SegmentKey(prefix, tip.topic, tip.topic_id, tip.partition, m.start_offset, m.segment_id.id)


def _put_new(store: ObjectStore, key: str, data, size: int) -> None:
    """Create-only; "exists" with the size written is an earlier attempt of this put that landed
    (the key's id is fresh, so nobody else writes it)."""
    try:
        store.put_if_absent(key, data, size=size)
    except PreconditionFailed:
        if store.head(key).size != size:
            raise
        # else: the first attempt landed and its answer was lost


def upload_segment(store: ObjectStore, prefix: str, m: RemoteLogSegmentMetadata, seg: SegmentFiles, *,
                   chunk_size: int, keys_sidecar: bytes | None = None) -> UploadedSegment:
    """Write the segment's objects, ``.rsm-manifest`` last; on failure delete what was written
    (where the store still answers) and re-raise."""
    key = segment_key(prefix, m)
    size = os.path.getsize(seg.log_path)
    if size != m.segment_size_in_bytes:
        raise ValueError(f"{seg.log_path}: {size} bytes, but the segment metadata says {m.segment_size_in_bytes}")
    indexes = seg.indexes()
    blob = b"".join(d for _, d in indexes if d is not None)
    manifest = manifest_json(m, indexes, chunk_size)
    try:
        with open(seg.log_path, "rb") as f:
            _put_new(store, key.key(keys.LOG), f, size)
        _put_new(store, key.key(keys.INDEXES), blob, len(blob))
        if keys_sidecar is not None:
            _put_new(store, key.key(keys.COMPACTLOG_KEYS), keys_sidecar, len(keys_sidecar))
        _put_new(store, key.key(keys.RSM_MANIFEST), manifest.encode("utf-8"), len(manifest))
    except BaseException:
        delete_segment(store, key, quiet=True)
        raise
    return UploadedSegment(key, size, len(blob), manifest)


def delete_segment(store: ObjectStore, key: keys.SegmentKey, *, quiet: bool = False) -> None:
    """Delete every object of the segment, ``.rsm-manifest`` first (so a half-deleted segment never
    looks complete); missing objects are fine. ``quiet``: swallow store errors (cleanup after a
    failure: what stays is an orphan for the sweep)."""
    try:
        store.delete(key.key(keys.RSM_MANIFEST))
        store.delete_many([key.key(s) for s in keys.SEGMENT_SUFFIXES if s != keys.RSM_MANIFEST])
    except RemoteStorageError:
        if not quiet:
            raise


# -- reading back -----------------------------------------------------------------------------------

def read_manifest(store: ObjectStore, key: keys.SegmentKey) -> SegmentManifest:
    k = key.key(keys.RSM_MANIFEST)
    manifest = SegmentManifest.parse(store.get(k).data, k)
    if manifest.compression:
        raise SegmentObjectError(f"{k}: the segment was uploaded compressed (rsm.config.compression.enabled); "
                                 f"reading compressed chunks is not supported yet", key=k)
    return manifest


def read_log(store: ObjectStore, key: keys.SegmentKey, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of the segment's ``.log`` (one ranged GET)."""
    return store.get_range(key.key(keys.LOG), start, end)


def read_indexes(store: ObjectStore, key: keys.SegmentKey, manifest: SegmentManifest,
                 names=INDEX_ORDER) -> dict[str, bytes | None]:
    """The named indexes, split out of ``.indexes`` (one ranged GET spanning them); an index the
    segment has none of (the transaction index) is None."""
    wanted = [(n, manifest.indexes[n]) for n in names]
    present = [(n, pos) for n, pos in wanted if pos is not None]
    out: dict[str, bytes | None] = {n: None for n, _ in wanted}
    if not present:
        return out
    lo = min(p for _, (p, _s) in present)
    hi = max(p + s for _, (p, s) in present)
    k = key.key(keys.INDEXES)
    blob = store.get_range(k, lo, hi) if hi > lo else b""
    if len(blob) != hi - lo:
        raise SegmentObjectError(f"{k}: {lo + len(blob)} bytes, the manifest places indexes up to byte {hi}", key=k)
    for n, (p, s) in present:
        out[n] = blob[p - lo:p - lo + s]
    return out
