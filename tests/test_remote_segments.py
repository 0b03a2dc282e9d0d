"""Segment uploads and the partition manifest against a real S3 API (moto on loopback, obstore):
the upload commit of tiered-storage.md §3.4 rule 4 without the journal (objects, then the manifest
CAS), the store going away mid-upload and mid-read with nothing half-committed (no manifest entry
points at a missing object), racing owners, the capability probe, and a bucket shared with other
users' objects that listing and deletion leave alone.

Broker-free but seconds long: marked slow.
"""

from __future__ import annotations

import os
import threading

import pytest

from compactlog.record.remote_log_metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition
from compactlog.storage import files
from compactlog.storage.remote import keys
from compactlog.storage.remote.partition_manifest import (
    Fenced, ManifestSegment, Owner, PartitionManifestWriter, probe_conditional_writes)
from compactlog.storage.remote.segment_objects import (
    SegmentFiles, delete_segment, read_indexes, read_log, read_manifest, segment_key, upload_segment)
from compactlog.storage.remote.store import StoreUnavailable, open_store
from s3_support import FaultProxy, bucket, moto  # noqa: F401 - the fixtures

pytestmark = pytest.mark.slow

TOPIC, TOPIC_ID, PARTITION = "foo", "MWJ6FHTfRYy67jzwZdeqSQ", 0
PREFIX = "tiered/"
MiB = 1 << 20


def make_segment(d: str, base: int, next_offset: int, size: int) -> tuple[SegmentFiles, bytes]:
    os.makedirs(d, exist_ok=True)
    log = os.urandom(size)
    for suffix, data in ((files.LOG_SUFFIX, log), (files.INDEX_SUFFIX, os.urandom(80)),
                         (files.TIME_INDEX_SUFFIX, os.urandom(120))):
        with open(files.segment_file(d, base, suffix), "wb") as f:
            f.write(data)
    with open(files.segment_file(d, next_offset, files.SNAPSHOT_SUFFIX), "wb") as f:
        f.write(os.urandom(30))
    return SegmentFiles.from_log_dir(d, base, next_offset, [(0, 0)]), log


def meta(start: int, end: int, size: int) -> RemoteLogSegmentMetadata:
    tip = TopicIdPartition(TOPIC_ID, TOPIC, PARTITION)
    return RemoteLogSegmentMetadata(RemoteLogSegmentId(tip, keys.new_uuid()), start, end, 1, 1700000000000,
                                    1700000000123, {0: start}, size)


def commit_upload(store, writer, m, seg, chunk_size=1 * MiB):
    """Rule 4 without the journal: the objects, then the manifest CAS adding the segment."""
    upload_segment(store, PREFIX, m, seg, chunk_size=chunk_size)
    entry = ManifestSegment(m.segment_id.id, m.start_offset, m.end_offset, m.max_timestamp_ms,
                            m.segment_size_in_bytes, m.segment_leader_epochs, m.event_timestamp_ms, m.broker_id)
    return writer.update(lambda p: p.with_segment(entry))


def assert_every_entry_is_complete(store, writer):
    """Nothing half-committed: each segment the manifest lists has all its objects."""
    manifest, _ = writer.read()
    for s in manifest.segments:
        key = keys.SegmentKey(PREFIX, TOPIC, TOPIC_ID, PARTITION, s.start_offset, s.id)
        assert read_manifest(store, key).metadata.segment_id.id == s.id
        assert store.head(key.key(keys.LOG)).size == s.size_in_bytes
        store.head(key.key(keys.INDEXES))
    return manifest


def new_writer(store, broker=1):
    return PartitionManifestWriter(store, PREFIX, TOPIC, TOPIC_ID, PARTITION, Owner("c", broker, keys.new_uuid()))


def test_upload_commit_and_ranged_reads(moto, bucket, tmp_path):
    store = open_store(moto.properties(bucket))
    w = new_writer(store)
    w.take_ownership()
    seg0, log0 = make_segment(str(tmp_path), 0, 100, 3 * MiB + 5)
    seg1, log1 = make_segment(str(tmp_path), 100, 250, 1000)
    m0, m1 = meta(0, 99, len(log0)), meta(100, 249, len(log1))
    commit_upload(store, w, m0, seg0)
    manifest = commit_upload(store, w, m1, seg1)
    assert manifest.highest_offset == 249 and manifest.generation == 2
    assert_every_entry_is_complete(store, w)
    k0 = segment_key(PREFIX, m0)
    assert read_log(store, k0, 2 * MiB, 2 * MiB + 16384) == log0[2 * MiB:2 * MiB + 16384]
    assert store.get(k0.key(keys.LOG)).data == log0
    assert read_indexes(store, k0, read_manifest(store, k0))["producerSnapshot"] == seg0.producer_snapshot
    assert read_manifest(store, k0).chunk_size == 1 * MiB


def test_the_store_going_away_mid_upload_commits_nothing(moto, bucket, tmp_path):
    proxy = FaultProxy(moto.endpoint)
    try:
        store = open_store(moto.properties(bucket, proxy.endpoint))
        w = new_writer(store)
        w.take_ownership()
        seg0, log0 = make_segment(str(tmp_path), 0, 100, 200_000)
        commit_upload(store, w, meta(0, 99, len(log0)), seg0)
        seg1, log1 = make_segment(str(tmp_path), 100, 200, 200_000)
        m1 = meta(100, 199, len(log1))

        def gone(method, path, query):            # the .indexes PUT finds the store gone for good
            if method == "PUT" and path.endswith(".indexes"):
                threading.Thread(target=proxy.refuse).start()
                return True
            return False
        proxy.drop(gone)
        with pytest.raises(StoreUnavailable):
            commit_upload(store, w, m1, seg1)
        proxy.clear()
        proxy.accept()
        manifest = assert_every_entry_is_complete(store, w)
        assert [s.start_offset for s in manifest.segments] == [0] and manifest.generation == 1
        # whatever of segment 1 is left has no .rsm-manifest: it never looks complete, and the
        # sweep may take it
        left = [o.key for o in store.list(keys.partition_prefix(PREFIX, TOPIC, TOPIC_ID, PARTITION))
                if m1.segment_id.id in o.key]
        assert not any(k.endswith(".rsm-manifest") for k in left)
        # the retry uploads under a new id and commits
        commit_upload(store, w, meta(100, 199, len(log1)), seg1)
        assert [s.start_offset for s in assert_every_entry_is_complete(store, w).segments] == [0, 100]
    finally:
        proxy.close()


def test_the_store_going_away_mid_read(moto, bucket, tmp_path):
    proxy = FaultProxy(moto.endpoint)
    try:
        store = open_store(moto.properties(bucket, proxy.endpoint))
        w = new_writer(store)
        w.take_ownership()
        seg0, log0 = make_segment(str(tmp_path), 0, 100, 500_000)
        m0 = meta(0, 99, len(log0))
        commit_upload(store, w, m0, seg0)
        key = segment_key(PREFIX, m0)
        proxy.cut(lambda m, p, q: m == "GET" and p.endswith(".log"), after=4096)
        with pytest.raises(StoreUnavailable, match=r"\.log"):
            read_log(store, key, 0, 400_000)
        proxy.clear()
        proxy.refuse()
        with pytest.raises(StoreUnavailable):
            read_manifest(store, key)
        proxy.accept()
        assert read_log(store, key, 1000, 2000) == log0[1000:2000]
    finally:
        proxy.close()


def test_racing_owners_lose_no_committed_update(moto, bucket):
    """Four brokers take the partition over one another and each appends a segment: a writer
    either commits (its segment stays in the manifest) or is fenced (its segment never appears);
    the last owner always commits."""
    store = open_store(moto.properties(bucket))
    writers = [new_writer(store, b) for b in range(4)]
    barrier = threading.Barrier(4)
    outcome: dict = {}
    ids = {w.owner.broker_id: keys.new_uuid() for w in writers}

    def run(w):
        barrier.wait()
        try:
            w.take_ownership()
            b = w.owner.broker_id
            w.update(lambda p: p.with_segment(ManifestSegment(ids[b], p.highest_offset + 1, p.highest_offset + 10,
                                                              0, 1, ((0, 0),), 0, b)))
            outcome[b] = "committed"
        except Fenced:
            outcome[w.owner.broker_id] = "fenced"
        except Exception as e:          # reported by the assertion below
            outcome[w.owner.broker_id] = repr(e)

    threads = [threading.Thread(target=run, args=(w,)) for w in writers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    final, _ = writers[0].read()
    assert set(outcome.values()) <= {"committed", "fenced"}, outcome
    present = {s.id for s in final.segments}
    for b, what in outcome.items():
        assert (ids[b] in present) == (what == "committed"), (b, outcome)
    assert outcome[final.owner.broker_id] == "committed"
    final.check()           # still contiguous


def test_the_probe_on_s3(moto, bucket):
    caps = probe_conditional_writes(open_store(moto.properties(bucket)), PREFIX)
    assert caps.create_only and caps.compare_and_swap
    assert moto.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0


def test_other_users_objects_survive_a_partition_cleanup(moto, bucket, tmp_path):
    s3 = moto.client()
    theirs = ["tiered/foo-MWJ6FHTfRYy67jzwZdeqSQ/0/README", "tiered/foo-MWJ6FHTfRYy67jzwZdeqSQ/00/x.log",
              "tiered/foo-MWJ6FHTfRYy67jzwZdeqSQ/1/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ.log",
              "tiered/foo-AAAAAAAAAAAAAAAAAAAAAQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ.log",
              "other/tiered/foo-MWJ6FHTfRYy67jzwZdeqSQ/0/00000000000000000000-tqimKeZwStOEOwRzT3L5oQ.log"]
    for k in theirs:
        s3.put_object(Bucket=bucket, Key=k, Body=b"not yours")
    store = open_store(moto.properties(bucket))
    w = new_writer(store)
    w.take_ownership()
    seg0, log0 = make_segment(str(tmp_path), 0, 100, 1000)
    m0 = meta(0, 99, len(log0))
    commit_upload(store, w, m0, seg0)
    part = keys.partition_prefix(PREFIX, TOPIC, TOPIC_ID, PARTITION)
    segment_keys = [o.key for o in store.list(part) if keys.parse_segment_key(o.key, part)]
    assert sorted(k.rsplit(".", 1)[1] for k in segment_keys) == ["indexes", "log", "rsm-manifest"]
    delete_segment(store, segment_key(PREFIX, m0))
    w.update(lambda p: p.without_segments([m0.segment_id.id]))
    left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"])
    assert left == sorted(theirs + [keys.partition_manifest_key(PREFIX, TOPIC, TOPIC_ID, PARTITION)])
