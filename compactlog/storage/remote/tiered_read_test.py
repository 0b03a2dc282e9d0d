"""The offline read side of the remote tier on a local-directory store (Kafka's LocalTieredStorage):
a tiered partition read across both tiers through ``PartitionReader``, ``verify`` of its remote
segments (and what it finds when one is damaged), the tiers ``describe`` names, and the
lock-free counters of ``stats.py`` (no count lost from 8 threads)."""

from __future__ import annotations

import os
import sys
import threading

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.reader import PartitionReader
from compactlog.storage.remote import keys
from compactlog.storage.remote.manager import RemoteLogManager
from compactlog.storage.remote.stats import RemoteStorageStats
from compactlog.storage.remote.store import LocalDirectoryStore, StoreConfig
from compactlog.storage.remote.tiered_read import RemoteTier, TieredSource, partition_source
from compactlog.storage.remote.verify import journal_states, verify_remote_partition
from compactlog.storage.verify import VerifyCounts

T0 = 1_700_000_000_000
N = 60


@pytest.fixture(scope="module")
def tiered(tmp_path_factory):
    """A data dir with a tiered partition: every rolled segment copied, the local copies trimmed
    (the broker closed), its settings in server.properties. Shared by the module's tests, which
    only read it (the one that damages an object puts its bytes back)."""
    tmp_path = tmp_path_factory.mktemp("tiered-read")
    bucket = tmp_path / "bucket"
    props = {"remote.log.storage.system.enable": "true",
             "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
             "rsm.config.storage.root": str(bucket), "rsm.config.key.prefix": "tiered/",
             "rsm.config.chunk.size": "512", "rlmm.config.remote.log.metadata.topic.num.partitions": "1"}
    root = tmp_path / "data"
    dd = DataDir(str(root), broker=BrokerConfig(props), clock=lambda: T0, create=True, writable=True)
    dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "400", "local.retention.bytes": "0",
                             "retention.ms": "-1"})
    rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", clock=lambda: T0,
                          open_log=lambda t, p: dd.open_log(t, p), create_topic=lambda t, n, c: dd.create_topic(t, n, c),
                          store=LocalDirectoryStore(str(bucket), StoreConfig.from_properties(props)))
    rm.start()
    log = dd.open_log("t", 0)
    for i in range(N):
        log.append_records([b"k%d" % i], [b"value-%05d" % i + b"." * 40], timestamps=[T0 + i])
    copied = rm.copy_partition(log)
    dd.delete_old_segments(log)          # local retention: the copied segments leave the disk
    assert log.local_log_start_offset > 0 == log.log_start_offset
    dd.checkpoint_logs()
    stats = rm.metrics.totals()
    rm.close()
    dd.close()
    with open(root / "server.properties", "w") as f:
        f.write("".join(f"{k}={v}\n" for k, v in props.items()))
    return root, bucket, copied, stats


def _tier(root) -> RemoteTier:
    from compactlog.storage.datadir import load_broker_config
    return RemoteTier.of(DataDir(str(root), broker=load_broker_config(str(root))))


def test_copy_counters(tiered):
    root, bucket, copied, stats = tiered
    assert copied > 3
    assert stats["t"]["copy_requests"] == copied and stats["t"]["copy_errors"] == 0
    sizes = [os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(bucket) for f in fs if f.endswith(".log")]
    assert stats["t"]["copy_bytes"] == sum(sizes)


def test_read_across_both_tiers(tiered):
    root, bucket, copied, _ = tiered
    tier = _tier(root)
    tiers = tier.tiers("t", 0)
    assert tiers.manifest is not None and len(tiers.manifest.segments) == copied
    source = partition_source(str(root / "t-0"))
    assert isinstance(source, TieredSource) and len(source.remote) == copied
    with PartitionReader(source) as r:
        offsets = [rec.offset for rec in r.records()]
        values = [bytes(rec.value) for rec in r.records()]
    assert offsets == list(range(N))
    assert values == [b"value-%05d" % i + b"." * 40 for i in range(N)]


def test_read_remote_only(tiered):
    """With the local copies gone (local retention), the remote segments alone serve the range."""
    root, bucket, copied, _ = tiered
    tier = _tier(root)
    tiers = tier.tiers("t", 0)
    segs = tiers.manifest.segments
    source = TieredSource(str(root / "t-0"), tier.config, "t", tiers.topic_id, 0, segs, 0, local=False)
    with PartitionReader(source) as r:
        assert [rec.offset for rec in r.records()] == list(range(segs[-1].end_offset + 1))
        assert r.index_bytes(segs[1].start_offset, ".index") is not None
    assert source.location(segs[0].start_offset).startswith("file://")


def test_verify_remote_and_describe(tiered):
    root, bucket, copied, _ = tiered
    tier = _tier(root)
    journal = journal_states(tier.datadir)
    counts = VerifyCounts()
    problems = [p for p in verify_remote_partition(tier, "t", 0, journal, counts) if not p.note]
    assert problems == [] and counts.segments == copied and counts.records > 0
    d = tier.describe("t", 0)
    assert d["remoteSegmentCount"] == copied and d["copyLagSegments"] == 0
    assert d["segments"][-1]["tier"] == "local"
    # a damaged remote segment: one byte of a batch flipped, the CRC says so
    tiers = tier.tiers("t", 0)
    seg = tiers.manifest.segments[1]
    key = keys.SegmentKey("tiered/", "t", tiers.topic_id, 0, seg.start_offset, seg.id).key(keys.LOG)
    path = os.path.join(bucket, key)
    with open(path, "rb") as f:
        good = f.read()
    data = bytearray(good)
    data[70] ^= 0xFF
    mode = os.stat(path).st_mode
    os.chmod(path, 0o644)
    try:
        with open(path, "wb") as f:
            f.write(data)
        problems = [p for p in verify_remote_partition(tier, "t", 0, journal, VerifyCounts()) if not p.note]
    finally:
        with open(path, "wb") as f:
            f.write(good)
        os.chmod(path, mode)
    assert len(problems) == 1 and seg.id in problems[0].where and "CRC" in problems[0].message.upper()


def test_counters_lose_nothing_across_threads():
    stats = RemoteStorageStats()
    seen = []

    def work():
        for _ in range(5_000):
            stats.add("a", "fetch_requests")
            stats.add("b", "fetch_bytes", 3)
    threads = [threading.Thread(target=work) for _ in range(8)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)         # threads switched as often as Python allows
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            seen.append(stats.totals().get("a", {}).get("fetch_requests", 0))   # a scrape meanwhile
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    totals = stats.totals()
    assert totals["a"]["fetch_requests"] == 40_000 and totals["b"]["fetch_bytes"] == 120_000
    assert seen == sorted(seen)         # a scrape never goes back


def test_store_requests_counted_by_operation_and_result(tmp_path):
    import pickle
    from compactlog.storage.remote.stats import counted_store
    from compactlog.storage.remote.store import ObjectNotFound, PreconditionFailed
    stats = RemoteStorageStats()
    store = counted_store(LocalDirectoryStore(str(tmp_path), StoreConfig(backend="filesystem", root=str(tmp_path))),
                          stats)
    etag = store.put_if_absent("p/k", b"one")
    with pytest.raises(PreconditionFailed):
        store.put_if_absent("p/k", b"two")
    store.put_if_match("p/k", b"three", etag)
    with pytest.raises(ObjectNotFound):
        store.get("p/missing")
    assert store.get_range("p/k", 0, 2) == b"th"
    own = stats.totals()[None]
    assert {k[1:]: v for k, v in own.items() if isinstance(k, tuple) and k[0] == "store"} == {
        ("put_if_absent", "ok"): 1, ("put_if_absent", "precondition_failed"): 1, ("put_if_match", "ok"): 1,
        ("get", "not_found"): 1, ("get_range", "ok"): 1}
    assert sum(v for k, v in own.items() if isinstance(k, tuple) and k[:2] == ("store_le", "put_if_absent")) == 2
    # a plan carrying the store to a Spark task carries the plain store
    assert type(pickle.loads(pickle.dumps(store))) is LocalDirectoryStore


def test_verify_a_bucket_without_the_partition(tiered, tmp_path):
    """The data dir pointed at an empty bucket: the trimmed offsets are in neither tier."""
    root, bucket, copied, _ = tiered
    from compactlog.storage.datadir import load_broker_config
    empty = tmp_path / "empty-bucket"
    empty.mkdir()
    dd = DataDir(str(root), broker=load_broker_config(str(root), {"rsm.config.storage.root": str(empty)}))
    tier = RemoteTier.of(dd)
    problems = verify_remote_partition(tier, "t", 0, None, VerifyCounts())
    assert len(problems) == 1 and "in neither tier" in problems[0].message and not problems[0].note


def test_a_segment_moved_to_the_remote_tier_between_the_manifest_and_the_pin_is_an_error(tiered):
    """The remote list comes from the manifest read before the local directory is pinned: a broker
    that copied a segment and trimmed it meanwhile leaves it in neither; the reader says so (and a
    caller reads again) instead of going from the remote end to the next local segment."""
    import dataclasses

    from compactlog.errors import LogChangedError
    root, _bucket, _copied, _stats = tiered
    source = _tier(root).source("t", 0)
    assert isinstance(source, TieredSource) and len(source.remote) > 1
    whole = PartitionReader(source)
    assert [r.offset for r in whole.records()] == list(range(N))
    stale = dataclasses.replace(source, remote=source.remote[:-1])   # as read before the last copy
    with pytest.raises(LogChangedError, match="moved to the remote tier"):
        PartitionReader(stale)
