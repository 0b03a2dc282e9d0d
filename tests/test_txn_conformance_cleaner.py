"""Transaction conformance, the broker's own cleaner on transactional logs (transactions.md §6.3
scenario 14, log-cleaner.md §10): on a compacted topic of committed and aborted transactions,
aborted records are removed, committed ones compacted as any record, markers kept while their
transaction's data is still there and removed only once their delete horizon
(``delete.retention.ms`` from the cleaning that stamped it) has passed, the last batch of a
producer that wrote nothing since kept (as an empty batch); a read_committed consumer sees the same
latest value of every key before and after cleaning. ``__transaction_state`` itself compacts to
the last value of each transactional id, and an expired id's tombstone goes after its horizon.

The cleaner is the broker's own (in-process engine, ``log.cleaner.backoff.ms`` small, small
segments); the test holds it off the topic with ``min.compaction.lag.ms`` until the first phase is
written and read, then lets it go and keeps writing other keys so that rounds follow each other."""

from __future__ import annotations

import os
import time

import pytest

from broker_support import Broker
from compactlog.record.consumer_offsets import partition_for
from compactlog.storage.checkpoint import OffsetCheckpointFile
from txn_support import (BROKER_CONFIG, E, Raw, TxnProducer, batches, create_topics, read, state_records, uid,
                         wait_until)

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource  # noqa: E402

RETENTION_MS = 1000
CLEANER_BROKER = {**BROKER_CONFIG, "log.cleaner.backoff.ms": "50", "log.cleaner.min.cleanable.ratio": "0.01",
                  "log.cleaner.delete.retention.ms": str(RETENTION_MS),
                  "transaction.state.log.segment.bytes": "1024",
                  "transactional.id.expiration.ms": "2000",
                  "transaction.remove.expired.transaction.cleanup.interval.ms": "200"}
PHASE_ONE = [  # (who, commit?, {key: value}) per transaction, written to both partitions
    ("q", True, {b"k0": b"q"}),
    ("p", True, {b"k%d" % i: b"v1-%d" % i for i in range(5)}),
    ("p", False, {b"k%d" % i: b"x2-%d" % i for i in range(5)}),
    ("p", True, {b"k%d" % i: b"v3-%d" % i for i in range(3)}),
    ("p", False, {b"k3": b"x4-3", b"k4": b"x4-4"}),
    ("p", True, {b"k3": b"v5-3", b"k4": b"v5-4"}),
    ("p", False, {b"k0": b"x6-0"}),
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with Broker(tmp_path_factory.mktemp("txn-cleaner") / "data", CLEANER_BROKER,
                extra_args=["--engine", "local"]) as b:
        yield b


def same_state_partition(tid: str, prefix: str) -> str:
    """An id of ``prefix`` in the ``__transaction_state`` partition of ``tid``."""
    want = partition_for(tid, 50)
    while True:
        cand = uid(prefix)
        if partition_for(cand, 50) == want:
            return cand


def cleaned_up_to(data_dir: str, topic: str, partition: int) -> int:
    return OffsetCheckpointFile(os.path.join(data_dir, "cleaner-offset-checkpoint")).read().get((topic, partition), 0)


def stable_batches(data_dir, topic, partition):
    """The partition's batches in a consistent view (txn_support.batches waits out segment swaps;
    offsets must increase)."""
    bs = batches(data_dir, topic, partition)
    offsets = [b.base_offset for b in bs]
    assert offsets == sorted(set(offsets)), f"{topic}-{partition}: offsets out of order {offsets}"
    return bs


def latest_per_key(records) -> dict:
    out = {}
    for part, _, key, value in sorted(records):
        out[(part, key)] = value
    return out


def test_the_cleaner_on_transactional_logs(broker):
    topic = uid("clean")
    create_topics(broker.bootstrap, compacted=topic, segment_bytes=1024, min_cleanable_dirty_ratio=0.01,
                  delete_retention_ms=RETENTION_MS, min_compaction_lag_ms=3_600_000)
    ptid = uid("tx-p")
    qtid, gone = same_state_partition(ptid, "tx-q"), same_state_partition(ptid, "tx-gone")
    p = TxnProducer("confluent", broker.bootstrap, ptid).init()
    q = TxnProducer("confluent", broker.bootstrap, qtid).init()
    with Raw(broker.port) as raw:
        assert raw.init_producer_id(gone)[0] == E.none           # an id that will expire
    try:
        # -- phase 1: the transactions whose cleaning is checked, the cleaner held off ------------
        for who, commit, kv in PHASE_ONE:
            prod = p if who == "p" else q
            prod.begin()
            for part in (0, 1):
                for k, v in kv.items():
                    prod.send(topic, v, key=k, partition=part)
            prod.commit() if commit else (prod.flush(), prod.abort())
        q.close()
        end_one = {part: stable_batches(broker.data_dir, topic, part)[-1].last_offset + 1 for part in (0, 1)}
        assert end_one == {0: 26, 1: 26}
        before = read("confluent", broker.bootstrap, topic, "read_committed")
        assert not any(v.startswith(b"x") for *_, v in before)
        written = {part: stable_batches(broker.data_dir, topic, part) for part in (0, 1)}
        q_pid = written[0][0].producer_id
        marker_offsets = {part: {b.base_offset: b.control for b in bs if b.is_control} for part, bs in written.items()}
        assert marker_offsets[0] == {1: 1, 7: 1, 13: 0, 17: 1, 20: 0, 23: 1, 25: 0}

        # -- phase 2: the cleaner let go; other keys keep segments rolling and rounds coming ------
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        res = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        horizons: dict = {}          # (partition, marker offset) -> the delete horizon seen stamped on it
        gone_marker_early = []

        def observe() -> bool:
            done = True
            for part in (0, 1):
                bs = stable_batches(broker.data_dir, topic, part)
                now = time.time() * 1000
                present = {b.base_offset: b for b in bs if b.is_control and b.control is not None}
                for off in marker_offsets[part]:
                    if off in present and present[off].delete_horizon_ms is not None:
                        horizons.setdefault((part, off), present[off].delete_horizon_ms)
                    if off not in present and now < horizons.get((part, off), float("inf")):
                        gone_marker_early.append((part, off, now, horizons.get((part, off))))
                region = [b for b in bs if b.last_offset < end_one[part]]
                recs = [r for b in region if not b.is_control for r in b.records]
                # aborted records gone; every key once; the markers of T1 (all its keys superseded)
                # and of the three aborts gone; Q's (its data batch is its last) and T3's, T5's kept
                if any(v.startswith(b"x") for _, _, v in recs) or len({k for _, k, _ in recs}) != len(recs):
                    done = False
                if sorted(o for o in present if o < end_one[part]) != [1, 17, 23]:
                    done = False
            return done
        i = 0
        # at least two rounds a delete retention apart (stamp, then remove): 30 s was short at load 15-20
        deadline = time.monotonic() + 90
        while not observe():
            assert time.monotonic() < deadline, "the cleaner did not finish the transactional region in 90 s"
            p.begin()
            for part in (0, 1):
                for k in range(3):
                    p.send(topic, b"pad-%d" % i, key=b"pad%d" % k, partition=part)
            p.commit() if i % 3 else (p.flush(), p.abort())
            i += 1
            time.sleep(0.05)
        assert not gone_marker_early, f"markers removed before their horizon: {gone_marker_early}"
        assert {(part, off) for part, off in horizons} >= {(part, off) for part in (0, 1) for off in (7, 13, 20, 25)}

        # what stays of phase 1: the latest committed value of each key, Q's batch emptied
        for part in (0, 1):
            bs = [b for b in stable_batches(broker.data_dir, topic, part) if b.last_offset < end_one[part]]
            kept = [(r[0], r[1], r[2]) for b in bs if not b.is_control for r in b.records]
            assert kept == [(14, b"k0", b"v3-0"), (15, b"k1", b"v3-1"), (16, b"k2", b"v3-2"),
                            (21, b"k3", b"v5-3"), (22, b"k4", b"v5-4")], kept
            q_batch = [b for b in bs if b.producer_id == q_pid and not b.is_control]
            assert [(b.base_offset, b.records) for b in q_batch] == [(0, [])]    # the producer's last batch
        after = read("confluent", broker.bootstrap, topic, "read_committed")
        phase_one_after = [r for r in after if r[1] < end_one[r[0]]]
        assert latest_per_key(phase_one_after) == latest_per_key(before)
        assert set(phase_one_after) <= set(before)
        assert not any(v.startswith(b"x") for *_, v in after)

        # -- __transaction_state: the last value per id, the expired id's tombstone gone ----------
        sp = partition_for(ptid, 50)

        def state_compacted() -> bool:
            upto = cleaned_up_to(broker.data_dir, "__transaction_state", sp)
            bs = stable_batches(broker.data_dir, "__transaction_state", sp)
            keys = [r[1] for b in bs if b.last_offset < upto for r in b.records]
            return upto > 0 and len(keys) == len(set(keys)) and \
                not [r for b in bs for r in b.records if r[1] is not None and gone.encode() in r[1]]

        def pump():
            p.begin()
            p.send(topic, b"pad", key=b"pad0", partition=0)
            p.commit()
            return state_compacted()
        wait_until(pump, timeout=20, interval=0.05, what="__transaction_state to compact and drop the tombstone")
        # the ids still there: their latest state, and P's last record is its current one
        recs = state_records(broker.data_dir, ptid)
        assert recs[-1][0] == "CompleteCommit"
        # Q, idle since phase 1, expired too: its tombstone, or nothing once that went as well
        assert [s for s, *_ in state_records(broker.data_dir, qtid)] in (["<tombstone>"], [])
    finally:
        p.close()
