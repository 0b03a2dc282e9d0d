"""Segment objects in Aiven's layout, on the local-directory store: the manifest JSON of Aiven's
SegmentManifestV1SerdeTest, the chunk index TransformFinisher computes, the concatenated indexes,
ranged reads back, and crash safety of an upload (rsm-manifest last, cleanup on failure)."""

from __future__ import annotations

import os

import pytest

from compactlog.record.remote_log_metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition
from compactlog.storage.remote import keys
from compactlog.storage.remote.segment_objects import (
    SegmentFiles, SegmentManifest, SegmentObjectError, chunk_index, leader_epoch_checkpoint, manifest_json,
    read_indexes, read_log, read_manifest, segment_key, upload_segment)
from compactlog.storage.remote.store import LocalDirectoryStore, StoreUnavailable

TIP = TopicIdPartition("lZ6vvmajTWKDBUTV6SQAtQ", "topic1", 42)


def metadata(size: int, seg_id: str = "adh9f8BMS4anaUnD8KWfWg", start: int = 0, end: int = 1000):
    return RemoteLogSegmentMetadata(RemoteLogSegmentId(TIP, seg_id), start, end, 2, 1000000000, 2000000000,
                                    {0: 100, 1: 200, 2: 300}, size)


def test_the_manifest_json_of_aivens_serde_test():
    # SegmentManifestV1SerdeTest.WITHOUT_ENCRYPTION_WITHOUT_TXN_INDEX_JSON, with the chunk index an
    # untransformed upload gets (transformed sizes = original sizes)
    expected = (
        '{"version":"1",'
        '"chunkIndex":{"type":"fixed","originalChunkSize":100,'
        '"originalFileSize":1000,"transformedChunkSize":100,"finalTransformedChunkSize":100},'
        '"segmentIndexes":{'
        '"offset":{"position":0,"size":1},'
        '"timestamp":{"position":1,"size":1},'
        '"producerSnapshot":{"position":2,"size":1},'
        '"leaderEpoch":{"position":3,"size":1},'
        '"transaction":null'
        '},'
        '"compression":false,"remoteLogSegmentMetadata":'
        '{"remoteLogSegmentId":{'
        '"topicIdPartition":{"topicId":"lZ6vvmajTWKDBUTV6SQAtQ","topicPartition":'
        '{"topic":"topic1","partition":42}},'
        '"id":"adh9f8BMS4anaUnD8KWfWg"},'
        '"startOffset":0,"endOffset":1000,'
        '"maxTimestampMs":1000000000,"brokerId":2,"eventTimestampMs":2000000000,'
        '"segmentLeaderEpochs":{"0":100,"1":200,"2":300}}'
        '}')
    indexes = [("offset", b"a"), ("timestamp", b"b"), ("producerSnapshot", b"c"), ("leaderEpoch", b"d"),
               ("transaction", None)]
    assert manifest_json(metadata(1000), indexes, 100) == expected
    parsed = SegmentManifest.parse(expected)
    assert parsed.metadata == metadata(1000)
    assert parsed.indexes["transaction"] is None and parsed.indexes["leaderEpoch"] == (3, 1)
    with_txn = manifest_json(metadata(1000), indexes[:4] + [("transaction", b"e")], 100)
    assert '"transaction":{"position":4,"size":1}' in with_txn


@pytest.mark.parametrize("size, chunk, final", [(1000, 100, 100), (1001, 100, 1), (0, 100, 0), (99, 100, 99),
                                                (4 << 20, 4 << 20, 4 << 20)])
def test_chunk_index_as_transform_finisher_computes_it(size, chunk, final):
    assert chunk_index(size, chunk)["finalTransformedChunkSize"] == final


def test_leader_epoch_checkpoint_text():
    assert leader_epoch_checkpoint([(0, 0), (3, 120)]) == b"0\n2\n0 0\n3 120\n"


def write_segment(d, base: int, next_offset: int, log: bytes, txn: bytes | None = None):
    from compactlog.storage import files
    os.makedirs(d, exist_ok=True)
    for suffix, data in ((files.LOG_SUFFIX, log), (files.INDEX_SUFFIX, b"I" * 24), (files.TIME_INDEX_SUFFIX, b"T" * 36)):
        with open(files.segment_file(d, base, suffix), "wb") as f:
            f.write(data)
    if txn is not None:
        with open(files.segment_file(d, base, files.TXN_INDEX_SUFFIX), "wb") as f:
            f.write(txn)
    with open(files.segment_file(d, next_offset, files.SNAPSHOT_SUFFIX), "wb") as f:
        f.write(b"S" * 10)


def test_upload_and_read_back(tmp_path):
    log = os.urandom(300_000)
    d = str(tmp_path / "topic1-42")
    write_segment(d, 500, 1001, log, txn=b"X" * 34)
    seg = SegmentFiles.from_log_dir(d, 500, 1001, [(0, 0), (1, 200), (2, 300), (3, 1001), (4, 2000)])
    assert seg.leader_epoch == b"0\n3\n0 0\n1 200\n2 300\n"       # entries below the next segment only
    store = LocalDirectoryStore(str(tmp_path / "bucket"))
    m = metadata(len(log), keys.new_uuid(), start=500)
    up = upload_segment(store, "tiered/", m, seg, chunk_size=65536)
    key = segment_key("tiered/", m)
    assert store.get(key.key(keys.LOG)).data == log                      # byte for byte
    blob = store.get(key.key(keys.INDEXES)).data
    assert blob == b"I" * 24 + b"T" * 36 + b"S" * 10 + seg.leader_epoch + b"X" * 34
    manifest = read_manifest(store, key)
    assert manifest.metadata == m and manifest.chunk_size == 65536 and manifest.file_size == len(log)
    assert store.get(key.key(keys.RSM_MANIFEST)).data.decode() == up.manifest
    assert read_log(store, key, 16384, 32768) == log[16384:32768]
    got = read_indexes(store, key, manifest)
    assert got == {"offset": b"I" * 24, "timestamp": b"T" * 36, "producerSnapshot": b"S" * 10,
                   "leaderEpoch": seg.leader_epoch, "transaction": b"X" * 34}
    assert read_indexes(store, key, manifest, ("timestamp",)) == {"timestamp": b"T" * 36}
    assert [o.key.rsplit(".", 1)[1] for o in store.list(keys.partition_prefix("tiered/", "topic1", TIP.topic_id, 42))] \
        == ["indexes", "log", "rsm-manifest"]


def test_an_empty_segment_and_no_transaction_index(tmp_path):
    d = str(tmp_path / "p")
    write_segment(d, 0, 10, b"")
    store = LocalDirectoryStore(str(tmp_path / "bucket"))
    m = metadata(0, keys.new_uuid(), start=0, end=9)
    upload_segment(store, "", m, SegmentFiles.from_log_dir(d, 0, 10, [(0, 0)]), chunk_size=4 << 20)
    manifest = read_manifest(store, segment_key("", m))
    assert manifest.indexes["transaction"] is None and manifest.file_size == 0
    assert read_indexes(store, segment_key("", m), manifest)["transaction"] is None


def test_a_missing_producer_snapshot_is_named(tmp_path):
    d = str(tmp_path / "p")
    write_segment(d, 0, 10, b"x")
    os.unlink(os.path.join(d, f"{10:020d}.snapshot"))
    with pytest.raises(FileNotFoundError, match="00000000000000000010.snapshot: the producer snapshot"):
        SegmentFiles.from_log_dir(d, 0, 10, [(0, 0)])


class FailingStore(LocalDirectoryStore):
    """Fails the create of keys ending with ``fail_suffix``; with ``land`` the object is written
    first (a lost answer)."""

    def __init__(self, root, fail_suffix, land=False):
        super().__init__(root)
        self.fail_suffix, self.land = fail_suffix, land

    def put_if_absent(self, key, data, size=None):
        if key.endswith(self.fail_suffix):
            if self.land:
                super().put_if_absent(key, data, size)
                self.land = False
            raise StoreUnavailable(f"put {key!r}: injected", key=key)
        return super().put_if_absent(key, data, size)


def test_a_failed_upload_leaves_no_manifest_and_cleans_up(tmp_path):
    d = str(tmp_path / "p")
    write_segment(d, 0, 10, b"payload")
    store = FailingStore(str(tmp_path / "bucket"), ".indexes")
    m = metadata(7, keys.new_uuid(), start=0, end=9)
    with pytest.raises(StoreUnavailable):
        upload_segment(store, "", m, SegmentFiles.from_log_dir(d, 0, 10, [(0, 0)]), chunk_size=100)
    assert store.list("") == []          # the .log written before the failure was deleted


def test_a_lost_answer_to_a_create_is_a_success_on_retry(tmp_path):
    d = str(tmp_path / "p")
    write_segment(d, 0, 10, b"payload")
    store = FailingStore(str(tmp_path / "bucket"), ".log", land=True)
    seg = SegmentFiles.from_log_dir(d, 0, 10, [(0, 0)])
    m = metadata(7, keys.new_uuid(), start=0, end=9)
    # the first attempt's .log landed but its answer was lost: the upload fails and cleans up...
    with pytest.raises(StoreUnavailable):
        upload_segment(store, "", m, seg, chunk_size=100)
    # ...a put that finds its own object (same fresh key, same size) takes it as written
    store2 = LocalDirectoryStore(str(tmp_path / "bucket"))
    store2.put_if_absent(segment_key("", m).key(keys.LOG), b"payload")
    upload_segment(store2, "", m, seg, chunk_size=100)
    assert read_manifest(store2, segment_key("", m)).metadata == m


def test_bad_manifests_are_named():
    for text, message in ((b"{", "not an RSM segment manifest"), (b'{"version":"2"}', "manifest version '2'"),
                          (b'{"version":"1","encryption":{"aad":"x"}}', "encrypted")):
        with pytest.raises(SegmentObjectError, match=message):
            SegmentManifest.parse(text, "k.rsm-manifest")
