"""Compaction of the remote tier on a local-directory store (tiered-storage.md §5): the cleaner's
round over both tiers, the commit (journal, manifest CAS, grace period), the equality with an
all-local clean of the same records, and a crash (an injected kill) at every commit step."""

from __future__ import annotations

import time

import pytest

import compactlog.settings  # noqa: F401 - every owner registered
from compactlog.cleaner.cleaner import Cleaner
from compactlog.record import remote_log_metadata as rlm
from compactlog.record.batch import iter_batches
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir
from compactlog.storage.remote import keys
from compactlog.storage.remote.manager import RemoteLogManager
from compactlog.storage.remote.store import LocalDirectoryStore, StoreConfig

# the wall clock: the orphan sweep compares the store's modification times with the manager's clock
T0 = int(time.time() * 1000)
DELAY = 60_000


class Clock:
    def __init__(self):
        # the wall clock when made: the orphan sweep compares it with the store's modification times
        self.now = int(time.time() * 1000)

    def __call__(self):
        return self.now


class Tier:
    """A data dir with a tiered compacted topic ``c`` and its remote log manager."""

    def __init__(self, path, *, tiered=True, configs=None, store_props=None):
        """``store_props``: another store's settings (an S3 API) instead of a local directory."""
        self.clock = Clock()
        self.bucket = str(path / "bucket")
        self.props = {"remote.log.storage.system.enable": "true",
                      "rsm.config.storage.backend.class":
                          "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage",
                      "rsm.config.storage.root": self.bucket, "rsm.config.key.prefix": "tiered/",
                      "rsm.config.chunk.size": "512", "rlmm.config.remote.log.metadata.topic.num.partitions": "3",
                      "compactlog.remote.compaction.delete.delay.ms": str(DELAY),
                      "compactlog.remote.orphan.min.age.ms": "0"}
        if store_props:
            self.props = {k: v for k, v in self.props.items() if not k.startswith("rsm.config.storage.")}
            self.props.update(store_props)
        self.dd = DataDir(str(path / "data"), broker=BrokerConfig(self.props), clock=self.clock, create=True,
                          writable=True)
        self.rm = self.build()
        c = {"cleanup.policy": "compact", "segment.bytes": "400", "delete.retention.ms": "1000",
             "min.cleanable.dirty.ratio": "0.01"}
        if tiered:
            c.update({"remote.storage.enable": "true", "local.retention.bytes": "0"})
        c.update(configs or {})
        self.dd.create_topic("c", 1, c)
        self.log = self.dd.open_log("c", 0)

    def build(self) -> RemoteLogManager:
        dd = self.dd
        config = StoreConfig.from_properties(self.props)
        store = LocalDirectoryStore(self.bucket, config) if config.backend == "filesystem" else None
        rm = RemoteLogManager(dd, broker_id=1, cluster_id="c", clock=self.clock,
                              open_log=lambda t, p: dd.open_log(t, p),
                              create_topic=lambda t, n, c: dd.create_topic(t, n, c), store=store)
        rm.start()
        return rm

    def tier(self, upto: int | None = None) -> None:
        """Copy the rolled segments (those starting below ``upto``) and trim them locally."""
        if upto is None:
            self.rm.copy_partition(self.log)
        else:
            rp = self.rm.partition(self.log)
            for seg in list(self.log.segments)[:-1]:
                if seg.base_offset >= upto:
                    break
                c = self.rm._next_candidate(self.log, rp)
                if c is None:
                    break
                import os
                try:
                    self.rm._copy_segment(self.log, rp, c)
                finally:
                    os.close(c["fd"])
        self.dd.delete_old_segments(self.log)

    @property
    def rp(self):
        return self.rm.partition(self.log)

    def objects(self) -> set[str]:
        part = keys.partition_prefix("tiered/", "c", self.rp.topic_id, 0)
        return {keys.parse_segment_key(m.key, part)[1] for m in self.rm.store.list(part)
                if keys.parse_segment_key(m.key, part)}

    def remote_bytes(self) -> bytes:
        rp = self.rp
        out = []
        for s in rp.manifest.segments:
            k = keys.SegmentKey("tiered/", "c", rp.topic_id, 0, s.start_offset, s.id)
            out.append(self.rm.store.get(k.key("log")).data if s.size_in_bytes else b"")
        return b"".join(out)

    def batches(self) -> list[bytes]:
        """Every batch of the logical log, as a consumer from the log start reads it: the remote
        tier below the local log start, then the local segments."""
        local_start = self.log.local_log_start_offset
        out = []
        for b in iter_batches(self.remote_bytes()):
            if b.last_offset < local_start:
                out.append(bytes(b.raw()))
        for s in self.log.segments:
            for b in iter_batches(open(s.log.path, "rb").read()):
                if b.last_offset >= local_start:
                    out.append(bytes(b.raw()))
        return out

    def records(self) -> list[tuple[int, bytes | None, bytes | None]]:
        out = []
        for raw in self.batches():
            for b in iter_batches(raw):
                out.extend((r.offset, r.key, r.value) for r in b.records())
        return out

    def journal_states(self) -> dict[str, list]:
        got: dict[str, list] = {}
        for p in range(3):
            for r in self.dd.open_log(rlm.TOPIC, p).records():
                e = rlm.decode(bytes(r.value))
                got.setdefault(e.segment_id.id, []).append(e.state)
        return got

    def close(self):
        self.rm.close()
        self.dd.close()


def produce(log, n, clock, start=0, keys_mod=None):
    for i in range(start, start + n):
        k = b"k%d" % (i % keys_mod if keys_mod else i)
        log.append_records([k], [b"value-%05d" % i + b"." * 40], timestamps=[clock.now + i])


@pytest.fixture
def tier(tmp_path):
    t = Tier(tmp_path)
    yield t
    t.close()


def test_a_round_rewrites_the_remote_tier_and_deletes_the_old_objects_after_the_grace(tier):
    log, clock = tier.log, tier.clock
    produce(log, 40, clock, keys_mod=5)
    tier.tier()
    produce(log, 10, clock, start=40, keys_mod=5)
    before_ids = {s.id for s in tier.rp.manifest.segments}
    before_bytes = sum(s.size_in_bytes for s in tier.rp.manifest.segments)
    assert log.log_start_offset == 0 < log.local_log_start_offset
    [out] = Cleaner(tier.dd).run(clock.now, topic="c", force=True)
    assert out.cleaned and not out.error, out.error
    m = tier.rp.manifest
    assert {p.id for p in m.pending_deletion} == before_ids                 # replaced, still readable
    assert sum(s.size_in_bytes for s in m.segments) < before_bytes
    assert all(p.delete_after_ms == clock.now + DELAY for p in m.pending_deletion)
    # one value per key across both tiers, the latest
    recs = tier.records()
    latest = {}
    for off, k, v in recs:
        latest[k] = v
    assert len(latest) == 5
    cleaned = [k for o, k, _ in recs if o < log.active_segment.base_offset]     # Kafka never cleans the active one
    assert len(cleaned) == len(set(cleaned))
    assert all(v.startswith(b"value-0004") for v in latest.values())
    # Kafka's state order: new ids STARTED, FINISHED; old ones DELETE_STARTED (then FINISHED after G)
    states = tier.journal_states()
    S = rlm.SegmentState
    for s in m.segments:
        assert states[s.id] == [S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED]
    for i in before_ids:
        assert states[i] == [S.COPY_SEGMENT_STARTED, S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_STARTED]
    assert tier.objects() == {s.id for s in m.segments} | before_ids
    # within the grace period nothing goes; after it the old objects do, and the bucket shrinks
    assert tier.rm.run_expiration(clock.now + DELAY - 1) == 0
    assert tier.rm.run_expiration(clock.now + DELAY) == len(before_ids)
    assert tier.objects() == {s.id for s in tier.rp.manifest.segments}
    assert not tier.rp.manifest.pending_deletion
    for i in before_ids:
        assert tier.journal_states()[i][-1] == S.DELETE_SEGMENT_FINISHED
    # the remote log manager serves the compacted tier
    r = tier.rm.read(log, 0, 1 << 20, True, False)
    assert r.records or r.continue_local
    # a restart replays the journal to the same state, with nothing to roll back
    tier.rm.close()
    tier.rm = tier.build()
    assert tier.objects() == {s.id for s in tier.rp.manifest.segments}


def test_an_unchanged_remote_segment_is_not_rewritten(tier):
    log, clock = tier.log, tier.clock
    produce(log, 30, clock)                    # distinct keys: nothing to remove
    tier.tier()
    produce(log, 10, clock, start=30)
    ids = [s.id for s in tier.rp.manifest.segments]
    Cleaner(tier.dd).run(clock.now, topic="c", force=True)
    assert [s.id for s in tier.rp.manifest.segments] == ids
    assert not tier.rp.manifest.pending_deletion


def test_a_tombstone_goes_once_the_remote_tier_is_compacted_through_it(tier):
    """k's value only in the bucket, then k deleted: the value is gone from the bucket at the first
    round, the tombstone after delete.retention.ms; at no point does k's value come back."""
    log, clock = tier.log, tier.clock
    log.append_records([b"k"], [b"old value" + b"." * 60], timestamps=[clock.now])
    produce(log, 12, clock, start=100)
    tier.tier()
    assert log.log_start_offset == 0 and log.first_local_offset > 0
    log.append_records([b"k"], [None], timestamps=[clock.now])
    produce(log, 12, clock, start=200)
    cleaner = Cleaner(tier.dd)
    seen = []
    for step in range(3):
        clock.now += 5000
        produce(log, 12, clock, start=300 + 20 * step)
        cleaner.run(clock.now, topic="c", force=True)
        tier.tier()                               # what was cleaned locally goes up, and off the disk
        kept = [(o, v) for o, k, v in tier.records() if k == b"k"]
        assert all(v is None for _, v in kept), kept
        seen.append(kept)
    assert seen[0] and seen[-1] == []


# two splits in the fast lane, every segment boundary in the slow one
@pytest.mark.parametrize("split", [s if s in (0, 3) else pytest.param(s, marks=pytest.mark.slow) for s in range(9)])
def test_remote_and_local_clean_equals_the_all_local_clean(tmp_path, split):
    """The same records cleaned all-local and with the first ``split`` segments in the bucket (and
    gone from the disk): byte for byte the same batches kept, at every segment boundary."""
    def append(log, lo, hi):
        for i in range(lo, hi):
            k = b"k%d" % (i % 7)
            v = None if i % 11 == 3 else b"value-%05d" % i + b"." * 30
            log.append_records([k], [v], timestamps=[T0 + i])

    def build(path, tiered):
        t = Tier(path, tiered=tiered)
        append(t.log, 0, 60)
        return t
    local = build(tmp_path / "local", False)
    remote = build(tmp_path / "remote", True)
    try:
        bases = [s.base_offset for s in remote.log.segments]
        assert len(bases) > 8
        remote.rm.partition(remote.log)          # reconciled, as the copy task does first in a broker
        if split:
            remote.tier(upto=bases[split])
        for t in (local, remote):
            for step in range(2):
                # the second round: more records, past the horizon the first one stamped
                append(t.log, 60 + 10 * step, 70 + 10 * step)
                t.clock.now = T0 + 10_000 * (step + 1)
                [out] = Cleaner(t.dd).run(t.clock.now, topic="c", force=True)
                assert out.cleaned and not out.error, out.error
        assert remote.batches() == local.batches()
        assert remote.records()
    finally:
        local.close()
        remote.close()


class Crash(BaseException):
    """An injected kill: nothing below it runs its handlers for it (BaseException)."""


@pytest.mark.parametrize("step", [pytest.param("compaction-objects", marks=pytest.mark.slow),
                                  pytest.param("compaction-started", marks=pytest.mark.slow), "compaction-manifest",
                                  pytest.param("compaction-deleted", marks=pytest.mark.slow)])
def test_a_crash_at_each_commit_step(tier, monkeypatch, step):
    from compactlog.storage.remote import faults
    log, clock = tier.log, tier.clock
    produce(log, 40, clock, keys_mod=5)
    tier.tier()
    produce(log, 10, clock, start=40, keys_mod=5)
    expected = {}
    for _, k, v in tier.records():
        expected[k] = v
    old_ids = {s.id for s in tier.rp.manifest.segments}

    def die(at):
        if at == step:
            raise Crash(at)
    monkeypatch.setattr(faults, "maybe_die", die)
    try:
        Cleaner(tier.dd).run(clock.now, topic="c", force=True)
        tier.rm.run_expiration(clock.now + DELAY)
        pytest.fail("no crash")
    except Crash:
        pass
    monkeypatch.setattr(faults, "maybe_die", lambda at: None)
    # "restart": a new remote log manager replays the journal and reconciles with the manifest
    tier.rm.close()
    tier.rm = tier.build()
    rp = tier.rp
    committed = step in ("compaction-manifest", "compaction-deleted")
    live = {s.id for s in rp.manifest.segments}
    assert (live == old_ids) != committed
    # the latest value of every key is still there, once: nothing acknowledged lost or doubled
    recs = tier.records()
    offsets = [o for o, _, _ in recs]
    assert offsets == sorted(set(offsets))
    got = {}
    for _, k, v in recs:
        got[k] = v
    assert got == expected
    # the journal agrees with the manifest (Kafka's transitions, each valid)
    states = tier.journal_states()
    S = rlm.SegmentState
    for i in live:
        assert states[i][-1] == S.COPY_SEGMENT_FINISHED
    for p in rp.manifest.pending_deletion:
        assert states[p.id][-1] == S.DELETE_SEGMENT_STARTED
    # after the grace period (and the sweep) the bucket holds exactly the live segments
    clock.now += 2 * DELAY
    tier.rm.run_expiration(clock.now)
    assert tier.objects() == {s.id for s in tier.rp.manifest.segments}
    for i, st in tier.journal_states().items():
        assert st[-1] in (S.COPY_SEGMENT_FINISHED, S.DELETE_SEGMENT_FINISHED), (i, st)
        if i not in live:
            assert st[-1] == S.DELETE_SEGMENT_FINISHED
    # and the next round finishes the job
    Cleaner(tier.dd).run(clock.now, topic="c", force=True)
    got = {}
    recs = tier.records()
    for _, k, v in recs:
        got[k] = v
    assert got == expected
    cleaned = [k for o, k, _ in recs if o < log.active_segment.base_offset]
    assert len(cleaned) == len(set(cleaned))


def test_a_remote_retention_during_the_round_aborts_it(tier, monkeypatch):
    from compactlog.storage.remote import compaction
    log, clock = tier.log, tier.clock
    produce(log, 40, clock, keys_mod=5)
    tier.tier()
    produce(log, 10, clock, start=40, keys_mod=5)
    real = compaction._commit_remote

    def expire_first(rm, rp, source, changed, new):
        first = rp.manifest.segments[0]
        rm._delete_segments(rp, [compaction._meta(rp, first)], log_start=first.end_offset + 1)
        return real(rm, rp, source, changed, new)
    monkeypatch.setattr(compaction, "_commit_remote", expire_first)
    [out] = Cleaner(tier.dd).run(clock.now, topic="c", force=True)
    assert out.aborted and not out.cleaned and not out.error
    assert "changed while it was cleaned" in out.status.reason
    # the round's new objects are gone; only the manifest's remain
    assert tier.objects() == {s.id for s in tier.rp.manifest.segments}


def test_a_log_whose_rolled_segments_are_all_remote_is_cleaned(tier):
    # found by the benchmark: the dirty ratio counted local segments only, so a log trimmed to
    # its active segment never looked cleanable
    log, clock = tier.log, tier.clock
    produce(log, 40, clock, keys_mod=5)
    tier.tier()
    assert len(log.segments) == 1
    [out] = Cleaner(tier.dd).run(clock.now, topic="c")
    assert out.status.eligible and out.cleaned and not out.error, out.status.reason
    assert tier.rp.manifest.pending_deletion


class ProcessExecutor:
    """Each task in a fresh process from the pickled plan, as a Spark executor runs it: the remote
    segments are read, and the new objects written, by the task itself (the store reopened there
    from its settings), never through the driver."""

    def run(self, plans):
        import multiprocessing
        from compactlog.cleaner.executor import run_guarded
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            return pool.map(run_guarded, plans)


@pytest.mark.slow
def test_a_task_in_another_process_reads_and_writes_the_bucket(tier):
    import pickle
    log, clock = tier.log, tier.clock
    produce(log, 40, clock, keys_mod=5)
    tier.tier()
    produce(log, 10, clock, start=40, keys_mod=5)
    expected = {k: v for _, k, v in tier.records()}
    old = {s.id for s in tier.rp.manifest.segments}
    from compactlog.storage.remote.compaction import end_round, tiered_source
    src = tiered_source(log)
    clone = pickle.loads(pickle.dumps(src))
    end_round(src)
    assert clone.remote.store is None and clone.read_segment(0, clone.remote.segment(0).size_in_bytes)
    [out] = Cleaner(tier.dd, ProcessExecutor()).run(clock.now, topic="c", force=True)
    assert out.cleaned and not out.error, out.error
    assert {p.id for p in tier.rp.manifest.pending_deletion} == old
    assert {k: v for _, k, v in tier.records()} == expected


@pytest.mark.spark
def test_a_round_on_spark_reads_the_bucket_from_its_tasks(tier):
    """The Spark engine (local[2]): the tasks open the store from the plan's settings, read the
    remote segments by ranged GETs and write the new objects; the driver commits them."""
    from compactlog.spark.executor import SparkExecutor
    from compactlog.spark.session import session
    log, clock = tier.log, tier.clock
    produce(log, 40, clock, keys_mod=5)
    tier.tier()
    produce(log, 10, clock, start=40, keys_mod=5)
    expected = {k: v for _, k, v in tier.records()}
    old = {s.id for s in tier.rp.manifest.segments}
    [out] = Cleaner(tier.dd, SparkExecutor(spark=session("local[2]"))).run(clock.now, topic="c", force=True)
    assert out.cleaned and not out.error, out.error
    assert {p.id for p in tier.rp.manifest.pending_deletion} == old
    assert {k: v for _, k, v in tier.records()} == expected


def test_max_compaction_lag_forces_a_round_over_dirty_segments_only_remote(tmp_path):
    # dirty records uploaded and trimmed locally before a round: Kafka's max.compaction.lag.ms
    # rule (the first batch timestamp of the dirty segments) must see them, or a slow topic whose
    # dirty ratio stays low would never be cleaned
    t = Tier(tmp_path, configs={"min.cleanable.dirty.ratio": "0.9", "max.compaction.lag.ms": "5000"})
    try:
        log, clock = t.log, t.clock
        produce(log, 60, clock)                         # distinct keys: a first round keeps them all
        t.tier()
        [out] = Cleaner(t.dd).run(clock.now, topic="c")
        assert out.cleaned, out.status.reason
        produce(log, 6, clock, start=60, keys_mod=3)    # a little dirty data, then only remote
        log.roll()
        t.tier()
        assert len(log.segments) == 1
        checkpoint = t.dd.cleaner_checkpoint.read()[("c", 0)]
        [dirty] = [s for s in t.rp.manifest.segments if s.start_offset <= checkpoint <= s.end_offset]
        first = dirty.first_batch_timestamp_ms
        assert first == clock.now + dirty.start_offset      # recorded at upload: its first record's
        from compactlog.cleaner.plan import partition_status
        st = partition_status(log, checkpoint, clock.now + 1000)
        assert not st.eligible and st.dirty_ratio < 0.9 and st.next_eligible_ms == first + 5000 + 1
        clock.now = first + 5001
        st = partition_status(log, checkpoint, clock.now)
        assert st.eligible and st.reason == "max.compaction.lag.ms exceeded", st.reason
        assert st.max_compaction_delay_ms == 1
    finally:
        t.close()


def test_a_manifest_segment_without_a_first_batch_timestamp_reads_as_before():
    from compactlog.storage.remote.partition_manifest import ManifestSegment
    s = ManifestSegment("id", 0, 9, 1234, 100, ((0, 0),), 99, 1)
    d = s.to_dict()
    assert "firstBatchTimestampMs" not in d             # what earlier manifests hold
    assert ManifestSegment.from_dict(d) == s and s.first_batch_timestamp_ms == -1
    s2 = ManifestSegment("id", 0, 9, 1234, 100, ((0, 0),), 99, 1, first_batch_timestamp_ms=1000)
    assert ManifestSegment.from_dict(s2.to_dict()) == s2
