"""The coordinator service on a real data dir, without sockets: ``__transaction_state`` created and
written (Prepare* before any marker, all markers before Complete*), markers in data partitions
(LSO, aborted-transaction index) and through the group coordinator's hook, the loader's replay
and re-drive after a crash at each test-hook point, the timers, and what the loader refuses."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import transaction_log as TL
from compactlog.record.control import COMMIT, parse_control_key, parse_marker_value
from compactlog.coordinator.txn import service as service_mod
from compactlog.coordinator.txn.coordinator import TxnResult
from compactlog.coordinator.txn.markers import run_job
from compactlog.coordinator.txn.metadata import TxnState
from compactlog.coordinator.txn.service import TransactionCoordinatorService
from compactlog.coordinator.txn.state_log import TRANSACTION_STATE_TOPIC

from .conftest import Broker, Clock

E = ErrorCode
S = TxnState


class Crashed(Exception):
    pass


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def broker(tmp_path, clock):
    b = Broker(tmp_path / "data", clock)
    b.state.create_topic("t", 2)
    yield b
    b.close()


def produce(state, topic, partition, pid, epoch, seq=0, n=1):
    lg = state.log(topic, partition)
    return lg.append_records([b"k%d" % i for i in range(n)], [b"v"] * n, producer_id=pid, producer_epoch=epoch,
                             base_sequence=seq, transactional=True)


def state_log(state) -> list[tuple[str, str | None, int]]:
    """(id, state name or None for a tombstone, epoch) of every __transaction_state record."""
    out = []
    for p in state.partitions(TRANSACTION_STATE_TOPIC):
        for r in state.log(TRANSACTION_STATE_TOPIC, p).records():
            tid = TL.read_key(r.key)
            if r.value is None:
                out.append((tid, None, -1))
            else:
                v = TL.read_value(r.value)
                out.append((tid, S(v.transaction_status).display, v.producer_epoch))
    return out


def markers(state, topic, partition):
    """(commit?, producer id, epoch, coordinator epoch) of the partition's control batches."""
    out = []
    for b in state.log(topic, partition).batches():
        if b.is_control:
            r = b.records()[0]
            out.append((parse_control_key(r.key).type == COMMIT, b.header.producer_id, b.header.producer_epoch,
                        parse_marker_value(r.value)))
    return out


def begin(svc, tid="t", *parts, timeout=60000):
    r = svc.init_producer_id(tid, timeout)
    assert r.error == E.none
    assert svc.add_partitions(tid, r.producer_id, r.producer_epoch, set(parts) or {("t", 0)}) == E.none
    return r.producer_id, r.producer_epoch


# -- the topic ----------------------------------------------------------------------------------

def test_the_first_write_creates_the_topic_with_one_node_configs(broker):
    st = broker.state
    assert not st.has_topic(TRANSACTION_STATE_TOPIC)        # nothing until a transaction needs it
    assert broker.svc.init_producer_id("t", 1000).error == E.none
    assert st.partitions(TRANSACTION_STATE_TOPIC) == [0, 1, 2, 3]
    cfg = st.datadir.topic_config(TRANSACTION_STATE_TOPIC)
    assert (cfg.get("cleanup.policy"), cfg.get("compression.type"), cfg.get("min.insync.replicas"),
            cfg.get("segment.bytes"), cfg.get("unclean.leader.election.enable")) == \
        (["compact"], "uncompressed", 1, 104857600, False)
    assert broker.svc.is_available() and broker.svc.loaded.is_set()


def test_a_replication_factor_one_node_cannot_meet_leaves_the_coordinator_unavailable(tmp_path, clock):
    b = Broker(tmp_path / "d", clock, **{"transaction.state.log.replication.factor": "3"})
    try:
        assert not b.svc.ensure_topic() and not b.state.has_topic(TRANSACTION_STATE_TOPIC)
        assert b.svc.init_producer_id("t", 1000).error == E.coordinator_not_available
    finally:
        b.close()


# -- commit and abort ---------------------------------------------------------------------------

def test_commit_writes_the_log_in_order_and_markers_in_every_partition(broker):
    st, svc = broker.state, broker.svc
    pid, e = begin(svc, "t", ("t", 0), ("t", 1))
    produce(st, "t", 0, pid, e, n=2)
    produce(st, "t", 1, pid, e)
    assert st.log("t", 0).last_stable_offset == 0
    assert svc.end_txn("t", pid, e, True) == TxnResult(E.none, pid, e)
    assert [s for _, s, _ in state_log(st)] == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit"]
    assert markers(st, "t", 0) == [(True, pid, e, 0)] and markers(st, "t", 1) == [(True, pid, e, 0)]
    assert st.log("t", 0).last_stable_offset == 3 == st.log("t", 0).log_end_offset
    code, md = svc.describe("t")
    assert md.state == S.COMPLETE_COMMIT and md.partitions == set()
    # the record of each transition is a v1 value (transaction.version 2)
    lg = st.log(TRANSACTION_STATE_TOPIC, svc.coordinator.partition_for("t"))
    assert {r.value[:2] for r in lg.records()} == {b"\x00\x01"}


def test_abort_indexes_the_aborted_transaction(broker):
    st, svc = broker.state, broker.svc
    pid, e = begin(svc)
    produce(st, "t", 0, pid, e, n=3)
    assert svc.end_txn("t", pid, e, False).error == E.none
    lg = st.log("t", 0)
    aborted = lg.collect_aborted_transactions(0, lg.log_end_offset)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(pid, 0)]
    assert markers(st, "t", 0) == [(False, pid, e, 0)] and lg.last_stable_offset == 4


def test_fencing_aborts_the_running_transaction_with_the_bumped_epoch(broker):
    st, svc = broker.state, broker.svc
    pid, e = begin(svc)
    produce(st, "t", 0, pid, e)
    assert svc.init_producer_id("t", 60000).error == E.concurrent_transactions
    assert markers(st, "t", 0) == [(False, pid, e + 1, 0)]
    assert svc.init_producer_id("t", 60000) == TxnResult(E.none, pid, e + 2)
    # the fenced instance's data is refused by the partition
    with pytest.raises(Exception) as err:
        produce(st, "t", 0, pid, e, seq=1)
    assert err.value.kafka_error == E.invalid_producer_epoch


# -- the marker phase ----------------------------------------------------------------------------

def test_offsets_partition_marker_goes_through_the_group_hook_and_is_retried_without_it(broker, clock):
    st, svc = broker.state, broker.svc
    st.groups.ensure_topic()                    # (a group's FindCoordinator creates it)
    pid, e = begin(svc, "t", ("__consumer_offsets", 1), ("t", 0))
    produce(st, "t", 0, pid, e)
    # the group coordinator answers retriably (its partition still loading): the decision stands
    st.groups.write_txn_marker = lambda *a: E.coordinator_load_in_progress
    assert svc.end_txn("t", pid, e, True).error == E.none
    assert svc.describe("t")[1].state == S.PREPARE_COMMIT
    assert svc.describe("t")[1].partitions == {("__consumer_offsets", 1)}      # t-0 is done
    assert svc.end_txn("t", pid, e, True).error == E.concurrent_transactions
    calls = []
    st.groups.write_txn_marker = lambda *a: calls.append(a) or E.none
    clock.now += 50
    svc.run_due()
    assert calls == [] and svc.describe("t")[1].state == S.PREPARE_COMMIT      # backoff not over
    clock.now += 100
    svc.run_due()
    assert calls == [(1, pid, e, 0, True)]
    assert svc.describe("t")[1].state == S.COMPLETE_COMMIT
    assert svc.end_txn("t", pid, e, True).error == E.none


def test_a_deleted_topic_is_dropped_and_a_newer_epoch_stops_the_markers(broker):
    st, svc = broker.state, broker.svc
    st.create_topic("gone", 1)
    pid, e = begin(svc, "t", ("gone", 0), ("t", 0))
    with st.metadata_lock:
        st.datadir.delete_topic("gone")
    assert svc.end_txn("t", pid, e, False).error == E.none
    assert svc.describe("t")[1].state == S.COMPLETE_ABORT
    # a partition whose producer moved past the marker's epoch: the transaction is superseded
    pid2, e2 = begin(svc, "u", ("t", 1))
    st.log("t", 1).append_control(commit=False, producer_id=pid2, producer_epoch=e2 + 5)
    assert svc.end_txn("u", pid2, e2, True).error == E.none
    assert svc.describe("u")[1].state == S.PREPARE_COMMIT and "u" not in svc.coordinator.jobs


def test_tv2_markers_already_written_count_as_done(broker):
    st, svc = broker.state, broker.svc
    pid, e = begin(svc)
    produce(st, "t", 0, pid, e)
    svc.init_producer_id("t", 60000)                       # fence: TV2 abort, markers at e+1
    job_state = markers(st, "t", 0)
    assert job_state == [(False, pid, e + 1, 0)]
    # the same job again (a crash after the first marker): nothing is appended twice
    from compactlog.coordinator.txn.coordinator import MarkerJob
    md = svc.coordinator.txns["t"]
    md.state = S.PREPARE_ABORT
    job = MarkerJob("t", pid, e + 1, 0, False, 2, {("t", 0)}, md.prepare_complete(0))
    assert run_job(st, svc.coordinator, job, 0) is not None
    assert markers(st, "t", 0) == job_state


# -- loading and crash points ------------------------------------------------------------------------

@pytest.mark.parametrize("point", ["prepare", "first-marker"])
def test_a_crash_point_then_restart_completes_the_decision(tmp_path, clock, monkeypatch, point):
    def crash(code):
        raise Crashed(code)
    monkeypatch.setattr(service_mod.os, "_exit", crash)
    b = Broker(tmp_path / "data", clock, crash_after=point)
    b.state.create_topic("t", 2)
    pid, e = begin(b.svc, "t", ("t", 0), ("t", 1))
    produce(b.state, "t", 0, pid, e)
    produce(b.state, "t", 1, pid, e)
    with pytest.raises(Crashed):
        b.svc.end_txn("t", pid, e, True)
    assert [s for _, s, _ in state_log(b.state)][-1] == "PrepareCommit"
    assert len(markers(b.state, "t", 0)) + len(markers(b.state, "t", 1)) == (0 if point == "prepare" else 1)
    b.dd.close()                           # what survives a kill -9: every write made
    b2 = Broker(tmp_path / "data", clock)
    try:
        assert [s for _, s, _ in state_log(b2.state)][-1] == "CompleteCommit"
        for p in (0, 1):
            ms = markers(b2.state, "t", p)
            assert ms and all(m == (True, pid, e, 0) for m in ms)        # a duplicate is harmless
            assert b2.state.log("t", p).last_stable_offset == b2.state.log("t", p).log_end_offset
        # a client retrying its EndTxn gets NONE (TV1: CompleteCommit + commit)
        assert b2.svc.end_txn("t", pid, e, True).error == E.none
    finally:
        b2.close()


def test_ongoing_survives_a_restart_and_times_out_from_its_stored_start(tmp_path, clock):
    b = Broker(tmp_path / "data", clock)
    b.state.create_topic("t", 1)
    pid, e = begin(b.svc, "t", timeout=5000)
    produce(b.state, "t", 0, pid, e)
    b.close()
    clock.now += 4000
    b2 = Broker(tmp_path / "data", clock, **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"})
    try:
        assert b2.svc.describe("t")[1].state == S.ONGOING
        assert b2.svc.verify_partition("t", pid, e, "t", 0) == E.none
        clock.now += 500
        b2.svc.run_due()
        assert b2.svc.describe("t")[1].state == S.ONGOING          # 4500 ms since the start
        clock.now += 600
        b2.svc.run_due()
        md = b2.svc.describe("t")[1]
        assert (md.state, md.producer_epoch) == (S.COMPLETE_ABORT, e + 1)
        assert markers(b2.state, "t", 0) == [(False, pid, e + 1, 0)]
    finally:
        b2.close()


def test_expiry_timer_writes_tombstones(tmp_path, clock):
    b = Broker(tmp_path / "data", clock, **{"transactional.id.expiration.ms": "1000",
                                           "transaction.remove.expired.transaction.cleanup.interval.ms": "100"})
    try:
        pid = b.svc.init_producer_id("t", 1000).producer_id
        clock.now += 1000
        b.svc.run_due()
        assert state_log(b.state)[-1] == ("t", None, -1)
        assert b.svc.describe("t")[0] == E.transactional_id_not_found
        assert b.svc.init_producer_id("t", 1000).producer_id != pid
    finally:
        b.close()


def test_the_loader_skips_unknown_key_versions_and_refuses_what_it_cannot_read(tmp_path, clock):
    b = Broker(tmp_path / "data", clock)
    svc = b.svc
    svc.init_producer_id("t", 1000)
    p = svc.coordinator.partition_for("t")
    lg = b.state.log(TRANSACTION_STATE_TOPIC, p)
    lg.append_records([b"\x00\x07junk"], [b"whatever"])              # a future key version
    b.close()
    b = Broker(tmp_path / "data", clock)
    assert b.svc.describe("t")[1].state == S.EMPTY
    b.state.log(TRANSACTION_STATE_TOPIC, p).append_records([TL.encode_key("x")], [b"\x00\x09garbage"])
    b.close()
    b = Broker(tmp_path / "data", clock)
    try:
        assert b.svc.init_producer_id("t", 1000).error == E.coordinator_not_available
        assert b.svc.list_transactions()[0] == E.coordinator_not_available
        other = next(t for t in ("a", "b", "c", "d", "e") if b.svc.coordinator.partition_for(t) != p)
        assert b.svc.init_producer_id(other, 1000).error == E.none
    finally:
        b.close()


def test_the_coordinator_epoch_starts_from_the_producer_state(tmp_path, clock):
    b = Broker(tmp_path / "data", clock)
    b.state.create_topic("t", 1)
    b.state.log("t", 0).append_control(commit=True, producer_id=5, producer_epoch=0, coordinator_epoch=7)
    b.close()
    b = Broker(tmp_path / "data", clock)
    try:
        assert b.svc.coordinator.coordinator_epoch == 7
        pid, e = begin(b.svc)
        assert b.svc.end_txn("t", pid, e, True).error == E.none
        assert markers(b.state, "t", 0)[-1] == (True, pid, e, 7)
    finally:
        b.close()


def test_loading_waits_for_the_group_coordinator(tmp_path, clock):
    b = Broker(tmp_path / "data", clock)
    try:
        assert b.svc.init_producer_id("x", 1000).error == E.none           # the topic exists now
        svc = TransactionCoordinatorService(b.state, clock=clock, crash_after="")
        import threading
        b.state.groups.loaded = threading.Event()
        svc.start()
        assert svc.init_producer_id("t", 1000).error == E.coordinator_load_in_progress
        b.state.groups.loaded.set()
        assert svc.loaded.wait(10)
        assert svc.init_producer_id("t", 1000).error == E.none
        svc.stop()
    finally:
        b.close()
