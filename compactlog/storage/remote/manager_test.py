"""The remote log manager on a local-directory store (Kafka's LocalTieredStorage): copy with its
journal and manifest, local and remote retention, reads and timestamp lookups below the local
log start, reconciliation after a copy cut short."""

from __future__ import annotations

import os

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.record import remote_log_metadata as rlm
from compactlog.record.batch import iter_batches
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.remote import keys
from compactlog.storage.remote.manager import RemoteLogManager
from compactlog.storage.remote.store import LocalDirectoryStore, StoreConfig, StoreUnavailable

T0 = 1_700_000_000_000


class Clock:
    def __init__(self):
        self.now = T0

    def __call__(self):
        return self.now


@pytest.fixture
def setup(tmp_path):
    clock = Clock()
    bucket = tmp_path / "bucket"
    props = {"remote.log.storage.system.enable": "true",
             "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
             "rsm.config.storage.root": str(bucket), "rsm.config.key.prefix": "tiered/",
             "rsm.config.chunk.size": "512",
             "rlmm.config.remote.log.metadata.topic.num.partitions": "3"}
    dd = DataDir(str(tmp_path / "data"), broker=BrokerConfig(props), clock=clock, create=True, writable=True)
    made = []

    def build():
        rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", clock=clock,
                              open_log=lambda t, p: dd.open_log(t, p),
                              create_topic=lambda t, n, c: dd.create_topic(t, n, c),
                              store=LocalDirectoryStore(str(bucket), StoreConfig.from_properties(props)))
        rm.start()
        made.append(rm)
        return rm
    dd.create_topic("t", 1, {"remote.storage.enable": "true", "segment.bytes": "400",
                             "local.retention.bytes": "0", "retention.ms": "-1"})
    yield dd, build, clock, bucket
    for rm in made:
        rm.close()
    dd.close()


def produce(log, n, clock, start=0):
    for i in range(start, start + n):
        log.append_records([b"k%d" % i], [b"value-%05d" % i + b"." * 40], timestamps=[clock.now + i])


def stream(data: bytes) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for b in iter_batches(data) for r in b.records()]


def test_copy_trim_read_and_journal(setup):
    dd, build, clock, bucket = setup
    rm = build()
    log = dd.open_log("t", 0)
    produce(log, 40, clock)
    before = b"".join(open(s.log.path, "rb").read() for s in log.segments)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) > 4
    copied = rm.copy_partition(log)
    assert copied == len(bases) - 1             # every rolled segment; the active one stays
    assert log.highest_remote_offset == bases[-1] - 1
    # objects in Aiven's layout, .log byte for byte the segment file
    topic_id = dd.topic_id("t")
    part = keys.partition_prefix("tiered/", "t", topic_id, 0)
    objs = [m.key for m in rm.store.list(part)]
    assert sum(k.endswith(".log") for k in objs) == copied
    assert sum(k.endswith(".rsm-manifest") for k in objs) == copied
    assert part + keys.PARTITION_MANIFEST in objs
    first = rm.partition(log).manifest.segments[0]
    key = keys.SegmentKey("tiered/", "t", topic_id, 0, first.start_offset, first.id)
    assert rm.store.get(key.key("log")).data == open(log.segments[0].log.path, "rb").read()
    # the journal: STARTED then FINISHED per segment, in the partition Kafka's partitioner picks
    from compactlog.storage.remote.metadata_topic import metadata_partition
    mp = metadata_partition(topic_id, 0, 3)
    events = [rlm.decode(bytes(r.value)) for r in dd.open_log(rlm.TOPIC, mp).records()]
    assert [getattr(e, "state") for e in events] == [rlm.SegmentState.COPY_SEGMENT_STARTED,
                                                     rlm.SegmentState.COPY_SEGMENT_FINISHED] * copied
    # local retention (local.retention.bytes=0): the copied segments leave the disk
    assert dd.delete_old_segments(log) == copied
    assert log.log_start_offset == 0 and log.local_log_start_offset == bases[-1]
    # reading from 0 through the remote tier then the local one gives the same bytes
    got, offset = [], 0
    while offset < log.log_end_offset:
        if offset < log.local_log_start_offset:
            r = rm.read(log, offset, 300, True, False)
            data = r.records
        else:
            data = log.read(offset, 300)[1]
        recs = stream(data)
        assert recs, offset
        got.extend(recs)
        offset = recs[-1][0] + 1
    assert got == stream(before)
    # a timestamp in the remote range is found there
    assert rm.find_offset_by_timestamp(log, T0 + 3) == (3, T0 + 3)
    # a restart rebuilds the same state from the journal and the manifest
    rm.close()
    rm2 = build()
    rp = rm2.partition(log)
    assert [s.id for s in rp.manifest.segments] == [s.id for s in rm.partition(log).manifest.segments]
    assert rm2.read(log, 0, 100, True, False).records[:50] == before[:50]


def test_remote_retention_moves_the_log_start(setup):
    dd, build, clock, _ = setup
    rm = build()
    dd.alter_topic("t", {"cleanup.policy": "compact,delete", "retention.ms": "1000", "local.retention.bytes": "0"})
    log = dd.open_log("t", 0)
    produce(log, 30, clock)
    n = rm.copy_partition(log)
    dd.delete_old_segments(log)
    clock.now += 5000
    produce(log, 10, clock, 30)
    deleted = rm.expire_partition(log, clock.now)
    assert deleted == n
    assert log.log_start_offset == rm.partition(log).manifest.log_start_offset > 0
    assert not rm.partition(log).manifest.segments
    # compact only: nothing by time
    dd.alter_topic("t", {"cleanup.policy": "compact"})
    rm.copy_partition(log)
    clock.now += 50000
    assert rm.expire_partition(log, clock.now) == 0


def test_copy_cut_short_is_rolled_back_and_retried(setup, monkeypatch):
    dd, build, clock, bucket = setup
    rm = build()
    log = dd.open_log("t", 0)
    produce(log, 20, clock)
    calls = {"n": 0}
    real = rm.store.put_if_match

    def failing(key, data, etag):
        calls["n"] += 1
        raise StoreUnavailable("the store went away")
    monkeypatch.setattr(rm.store, "put_if_match", failing)
    with pytest.raises(StoreUnavailable):
        rm.copy_partition(log)
    assert log.highest_remote_offset == -1
    monkeypatch.setattr(rm.store, "put_if_match", real)
    # the next run reconciles (the dead id deleted: DELETE_STARTED, objects, DELETE_FINISHED), then copies
    n = rm.copy_partition(log)
    assert n > 0
    rp = rm.partition(log)
    live = {s.id for s in rp.manifest.segments}
    on_store = {keys.parse_segment_key(m.key, keys.partition_prefix("tiered/", "t", rp.topic_id, 0))[1]
                for m in rm.store.list(keys.partition_prefix("tiered/", "t", rp.topic_id, 0))
                if not m.key.endswith(keys.PARTITION_MANIFEST)}
    assert on_store == live
    states = [e.state for e in (rlm.decode(bytes(r.value)) for p in range(3)
                                for r in dd.open_log(rlm.TOPIC, p).records())]
    assert states.count(rlm.SegmentState.DELETE_SEGMENT_FINISHED) == 1
    assert os.path.isdir(bucket)


def test_compacted_tiered_topic_cleans_its_local_part(setup):
    # beyond Kafka: a compacted topic is tiered; with its remote tier compacted along (spec §5.2)
    # the cleaner's range starts at the log start, in the remote-only range; with remote
    # compaction off, at the local log start
    from compactlog.cleaner.plan import cleanable_offsets
    dd, build, clock, _ = setup
    rm = build()
    dd.alter_topic("t", {"cleanup.policy": "compact"})
    log = dd.open_log("t", 0)
    produce(log, 30, clock)
    n = rm.copy_partition(log)
    assert dd.delete_old_segments(log) == n       # local.retention.* applies to compact-only tiered topics
    assert log.log_start_offset == 0 < log.local_log_start_offset
    rng = cleanable_offsets(log, None, clock.now)
    assert rng.first_dirty == log.log_start_offset == 0
    dd.broker.props["compactlog.remote.compaction.enable"] = "false"
    rng = cleanable_offsets(log, None, clock.now)
    assert rng.first_dirty == log.local_log_start_offset


def test_slow_remote_read_answers_after_the_wait(setup, monkeypatch):
    # DelayedRemoteFetch: a read slower than remote.fetch.max.wait.ms is answered empty (RemoteFetchTimeout)
    import threading
    from compactlog.storage.remote.manager import RemoteFetchTimeout
    dd, build, clock, _ = setup
    rm = build()
    log = dd.open_log("t", 0)
    produce(log, 20, clock)
    rm.copy_partition(log)
    dd.delete_old_segments(log)
    dd.broker.props["remote.fetch.max.wait.ms"] = "100"
    release = threading.Event()
    real = rm.store.get_range

    def slow(*a, **kw):
        release.wait(5)
        return real(*a, **kw)
    monkeypatch.setattr(rm.store, "get_range", slow)
    with pytest.raises(RemoteFetchTimeout):
        rm.fetch(log, 0, 1000, True, False)
    assert rm.stats["fetch_expired"] == 1
    release.set()
    monkeypatch.setattr(rm.store, "get_range", real)
    assert stream(rm.fetch(log, 0, 1000, True, False).records)[0][0] == 0


def test_turning_remote_storage_off_with_delete(setup):
    # KIP-950: remote.storage.enable=false needs remote.log.delete.on.disable=true, and deletes the remote data
    dd, build, clock, bucket = setup
    rm = build()
    log = dd.open_log("t", 0)
    produce(log, 20, clock)
    assert rm.copy_partition(log) > 0
    dd.delete_old_segments(log)
    local_start = log.local_log_start_offset
    with pytest.raises(Exception, match="invalid to disable remote storage"):
        dd.alter_topic("t", {"remote.storage.enable": "false"})
    dd.alter_topic("t", {"remote.storage.enable": "false", "remote.log.delete.on.disable": "true"})
    rm.run_copy_tasks()
    assert log.log_start_offset == local_start
    topic_id = dd.topic_id("t")
    left = [m.key for m in rm.store.list(keys.partition_prefix("tiered/", "t", topic_id, 0))]
    assert left == [keys.partition_manifest_key("tiered/", "t", topic_id, 0)]


@pytest.mark.parametrize("mode", ["tiered", "tiered-local-only", "untiered"])
def test_a_deleted_key_never_comes_back_from_the_remote_tier(tmp_path, mode):
    """A compacted tiered topic: k's value is copied to the remote tier and trimmed locally, then
    k is deleted. Whatever the cleaner does past delete.retention.ms, a reader from the log start
    never sees k's value again. With the remote tier compacted along (tiered-storage.md §5) the
    value leaves the bucket and then the tombstone goes, as Kafka's rule says; with remote
    compaction off the local cleaner keeps the tombstone (the bucket still holds the value); the
    untiered topic, as a control, loses its tombstone as Kafka's does."""
    from compactlog.cleaner.cleaner import Cleaner
    clock = Clock()
    bucket = tmp_path / "bucket"
    props = {"remote.log.storage.system.enable": "true",
             "rsm.config.storage.backend.class": "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
             "rsm.config.storage.root": str(bucket), "rsm.config.key.prefix": "tiered/",
             "rsm.config.chunk.size": "512", "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
             "compactlog.remote.compaction.enable": str(mode != "tiered-local-only").lower()}
    dd = DataDir(str(tmp_path / "data"), broker=BrokerConfig(props), clock=clock, create=True, writable=True)
    rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", clock=clock, open_log=lambda t, p: dd.open_log(t, p),
                          create_topic=lambda t, n, c: dd.create_topic(t, n, c),
                          store=LocalDirectoryStore(str(bucket), StoreConfig.from_properties(props)))
    rm.start()
    tiered = mode != "untiered"
    try:
        configs = {"cleanup.policy": "compact", "segment.bytes": "400", "delete.retention.ms": "1000",
                   "min.cleanable.dirty.ratio": "0.01"}
        if tiered:
            configs.update({"remote.storage.enable": "true", "local.retention.bytes": "0"})
        dd.create_topic("c", 1, configs)
        log = dd.open_log("c", 0)
        log.append_records([b"k"], [b"old value" + b"." * 60], timestamps=[clock.now])
        produce(log, 12, clock, start=100)
        if tiered:
            rm.copy_partition(log)
            log.delete_old_segments()
            assert log.log_start_offset == 0 and log.first_local_offset > 0      # k's value only remote now
        log.append_records([b"k"], [None], timestamps=[clock.now])
        produce(log, 12, clock, start=200)
        tombstone = log.log_end_offset - 13

        def kept_of_k():
            """k's records as a consumer from the log start reads them: remote, then local."""
            out = []
            if tiered:
                rp = rm.partition(log)
                for s in rp.manifest.segments:
                    k = keys.SegmentKey("tiered/", "c", rp.topic_id, 0, s.start_offset, s.id)
                    data = rm.store.get(k.key("log")).data if s.size_in_bytes else b""
                    out += [(r.offset, r.value) for b in iter_batches(data) for r in b.records()
                            if r.key == b"k" and r.offset < log.local_log_start_offset]
            out += [(r.offset, r.value) for s in log.segments for b in iter_batches(open(s.log.path, "rb").read())
                    for r in b.records() if r.key == b"k" and r.offset >= log.local_log_start_offset]
            return out
        cleaner = Cleaner(dd)
        for step in range(3):                    # the first clean sets the horizon, a later one passes it
            clock.now += 5000
            produce(log, 12, clock, start=300 + 20 * step)      # dirty records for the next round
            cleaner.run(clock.now, topic="c", force=True)
            if tiered:
                rm.copy_partition(log)
                log.delete_old_segments()
            kept = kept_of_k()
            assert not kept or kept[-1][1] is None, kept         # the latest of k is its deletion
            if mode == "tiered":
                assert all(v is None for _, v in kept), kept     # the value left the bucket too
        if mode == "tiered-local-only":
            assert kept_of_k() == [(0, b"old value" + b"." * 60), (tombstone, None)]
        else:
            assert kept_of_k() == []
    finally:
        rm.close()
        dd.close()


def test_a_batch_that_does_not_fit_is_not_skipped(setup):
    """A later partition of a fetch (min_one off) with less room left than its next remote batch:
    answered empty, to be read at the next fetch; it went on to the next segments and then the
    local log, and the consumer's position jumped past every remote record in between."""
    dd, build, clock, _ = setup
    rm = build()
    log = dd.open_log("t", 0)
    produce(log, 40, clock)
    rm.copy_partition(log)
    dd.delete_old_segments(log)
    assert log.local_log_start_offset > 10
    for offset in (0, 5):
        r = rm.read(log, offset, 20, False, True)
        assert r.records == b"" and not r.continue_local and r.aborted == []
    # with room for it, the same read gives the batch at the offset
    assert stream(rm.read(log, 5, 20, True, False).records)[0][0] == 5
