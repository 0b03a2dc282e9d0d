"""The transaction APIs without sockets: kio requests of every advertised version in, kio
responses out (each encoded as the wire would carry it), with Kafka's version mapping of
PRODUCER_FENCED (transactions.md §2.0) and the per-partition checks before the coordinator."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record.consumer_offsets import partition_for
from compactlog.server.apis.init_producer_id import handle_init_producer_id
from compactlog.server.dispatch import advertised_apis, dispatch_table, error_response
from compactlog.server.apis.groups import handle_find_coordinator
from compactlog.server.messages import build, nested
from compactlog.server.protocol import Request, encode_response
from compactlog.server.apis.transactions import (handle_add_offsets_to_txn, handle_add_partitions_to_txn,
                                            handle_describe_transactions, handle_end_txn, handle_list_transactions,
                                            handle_write_txn_markers)
from compactlog.server.versions import request_schema

from compactlog.coordinator.txn.conftest import Broker, Clock

E = ErrorCode
MS = datetime.timedelta(milliseconds=1)
HANDLERS = {22: handle_init_producer_id, 24: handle_add_partitions_to_txn, 25: handle_add_offsets_to_txn,
            26: handle_end_txn, 27: handle_write_txn_markers, 65: handle_describe_transactions,
            66: handle_list_transactions, 10: handle_find_coordinator}


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path / "data", Clock())
    b.state.apis = advertised_apis(dispatch_table())
    b.state.create_topic("t", 2)
    yield b
    b.close()


def req(api_key, version, **fields):
    body = build(request_schema(api_key, version), **fields)
    return Request(api_key, version, 7, "cli", None, body, 0, version, True)


def call(state, request):
    resp = HANDLERS[request.api_key](state, request)
    encode_response(request, resp)
    return resp


def init(state, version=4, tid="tx", timeout=60000, pid=-1, epoch=-1):
    return call(state, req(22, version, transactional_id=tid, transaction_timeout=timeout * MS, producer_id=pid,
                           producer_epoch=epoch))


def add(state, version, tid, pid, epoch, *parts):
    cls = request_schema(24, version)
    t_cls = nested(cls, "AddPartitionsToTxnTopic")
    topics = {}
    for t, p in parts:
        topics.setdefault(t, []).append(p)
    r = call(state, req(24, version, v3_and_below_transactional_id=tid, v3_and_below_producer_id=pid,
                        v3_and_below_producer_epoch=epoch,
                        v3_and_below_topics=tuple(build(t_cls, name=t, partitions=tuple(ps))
                                                  for t, ps in topics.items())))
    return {(t.name, p.partition_index): p.partition_error_code for t in r.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def end(state, version, tid, pid, epoch, commit=True):
    return call(state, req(26, version, transactional_id=tid, producer_id=pid, producer_epoch=epoch,
                           committed=commit)).error_code


def test_find_coordinator_key_type_1_every_version(broker):
    st = broker.state
    assert not st.has_topic("__transaction_state")
    for version in range(1, 4):
        r = call(st, req(10, version, key="tx", key_type=1))
        assert (r.error_code, r.node_id, r.host, r.port) == (E.none, st.node_id, "127.0.0.1", 9092)
    assert st.partitions("__transaction_state") == [0, 1, 2, 3]        # created by the first lookup
    r = call(st, req(10, 4, key_type=1, coordinator_keys=("a", "b")))
    assert [(c.key, c.error_code, c.port) for c in r.coordinators] == [("a", E.none, 9092), ("b", E.none, 9092)]
    st.transactions.coordinator.active = False
    r = call(st, req(10, 3, key="tx", key_type=1))
    assert (r.error_code, r.node_id, r.host, r.port) == (E.coordinator_not_available, -1, "", -1)


def test_init_producer_id_versions_and_mapping(broker):
    st = broker.state
    for version in range(0, 6):
        r = init(st, version, tid=f"tx{version}")
        assert (r.error_code, r.producer_epoch) == (E.none, 0)
    r = init(st, 4, tid="tx4", pid=123, epoch=7)                # not tx4's id: fenced
    assert (r.error_code, r.producer_id, r.producer_epoch) == (E.producer_fenced, -1, -1)
    assert init(st, 3, tid="tx3", pid=123, epoch=7).error_code == E.invalid_producer_epoch
    assert init(st, 4, tid="tx", timeout=0).error_code == E.invalid_transaction_timeout
    assert init(st, 4, tid="tx", timeout=900001).error_code == E.invalid_transaction_timeout
    assert init(st, 4, tid="").error_code == E.invalid_request
    assert init(st, 4, tid="tx", pid=5).error_code == E.invalid_request       # one of the pair
    # the idempotent path is unchanged
    r = init(st, 4, tid=None)
    assert (r.error_code, r.producer_epoch) == (E.none, 0)
    st.transactions = None
    assert init(st, 4, tid="tx").error_code == E.coordinator_not_available


def test_add_partitions_refuses_internal_and_unknown_partitions_before_the_coordinator(broker):
    st = broker.state
    r = init(st, tid="tx")
    pid, e = r.producer_id, r.producer_epoch
    codes = add(st, 3, "tx", pid, e, ("t", 0), ("__consumer_offsets", 0), ("nope", 1), ("t", 5))
    assert codes == {("t", 0): E.operation_not_attempted, ("__consumer_offsets", 0): E.topic_authorization_failed,
                     ("nope", 1): E.unknown_topic_or_partition, ("t", 5): E.unknown_topic_or_partition}
    assert st.transactions.describe("tx")[1].state.display == "Empty"
    for version in range(0, 4):
        assert add(st, version, "tx", pid, e, ("t", 0), ("t", 1), ("t", 0)) == {("t", 0): E.none, ("t", 1): E.none}
    assert add(st, 1, "tx", pid, e + 1, ("t", 0)) == {("t", 0): E.invalid_producer_epoch}
    assert add(st, 2, "tx", pid, e + 1, ("t", 0)) == {("t", 0): E.producer_fenced}
    assert add(st, 2, "nope", pid, e, ("t", 0)) == {("t", 0): E.invalid_producer_id_mapping}
    assert add(st, 2, "", pid, e, ("t", 0)) == {("t", 0): E.invalid_request}


def test_add_offsets_adds_the_groups_offsets_partition(broker):
    st = broker.state
    r = init(st, tid="tx")
    for version in range(0, 5):
        resp = call(st, req(25, version, transactional_id="tx", producer_id=r.producer_id,
                            producer_epoch=r.producer_epoch, group_id="g"))
        assert resp.error_code == E.none
    n = st.groups.config.num_partitions
    assert st.transactions.describe("tx")[1].partitions == {("__consumer_offsets", partition_for("g", n))}
    for version, code in ((1, E.invalid_producer_epoch), (2, E.producer_fenced)):
        resp = call(st, req(25, version, transactional_id="tx", producer_id=r.producer_id, producer_epoch=9,
                            group_id="g"))
        assert resp.error_code == code


def test_end_txn_versions(broker):
    st = broker.state
    for version in range(0, 5):
        tid = f"tx{version}"
        r = init(st, tid=tid)
        assert end(st, version, tid, r.producer_id, r.producer_epoch) == E.invalid_txn_state     # Empty
        add(st, 3, tid, r.producer_id, r.producer_epoch, ("t", 0))
        expected = E.invalid_producer_epoch if version < 2 else E.producer_fenced
        assert end(st, version, tid, r.producer_id, r.producer_epoch + 1) == expected
        assert end(st, version, tid, r.producer_id, r.producer_epoch, commit=version % 2 == 0) == E.none
        assert end(st, version, tid, r.producer_id, r.producer_epoch, commit=version % 2 == 0) == E.none   # retry
    assert end(st, 3, "unknown", 1, 0) == E.invalid_producer_id_mapping


def test_describe_and_list_transactions(broker):
    st = broker.state
    r = init(st, tid="tx")
    add(st, 3, "tx", r.producer_id, r.producer_epoch, ("t", 1), ("t", 0))
    init(st, tid="other")
    resp = call(st, req(65, 0, transactional_ids=("tx", "missing", "")))
    a, b, c = resp.transaction_states
    assert (a.error_code, a.transactional_id, a.transaction_state, a.transaction_timeout, a.producer_id,
            a.producer_epoch) == (E.none, "tx", "Ongoing", 60000 * MS, r.producer_id, 0)
    assert a.transaction_start_time.timestamp() * 1000 == pytest.approx(1_700_000_000_000)
    assert [(x.topic, x.partitions) for x in a.topics] == [("t", (0, 1))]
    assert (b.error_code, c.error_code) == (E.transactional_id_not_found, E.invalid_request)
    for version in range(0, 3):
        resp = call(st, req(66, version, state_filters=("Ongoing", "Nope"), producer_id_filters=()))
        assert resp.error_code == E.none and resp.unknown_state_filters == ("Nope",)
        assert [(x.transactional_id, x.transaction_state) for x in resp.transaction_states] == [("tx", "Ongoing")]
    resp = call(st, req(66, 2, state_filters=(), producer_id_filters=(), duration_filter=-1,
                        transactional_id_pattern="oth.*"))
    assert [x.transactional_id for x in resp.transaction_states] == ["other"]
    resp = call(st, req(66, 2, state_filters=(), producer_id_filters=(), duration_filter=-1,
                        transactional_id_pattern="["))
    assert resp.error_code == E.invalid_regular_expression
    # an Empty id: start time -1 on the wire
    resp = call(st, req(65, 0, transactional_ids=("other",)))
    assert round(resp.transaction_states[0].transaction_start_time.timestamp() * 1000) == -1


def test_write_txn_markers_admin_abort(broker):
    st = broker.state
    lg = st.log("t", 0)
    lg.append_records([b"k"], [b"v"], producer_id=77, producer_epoch=3, base_sequence=0, transactional=True)
    assert lg.last_stable_offset == 0
    cls = request_schema(27, 1)
    m_cls, t_cls = nested(cls, "WritableTxnMarker"), nested(cls, "WritableTxnMarkerTopic")

    def markers(epoch, coordinator_epoch, *topics):
        r = call(st, req(27, 1, markers=(build(m_cls, producer_id=77, producer_epoch=epoch, transaction_result=False,
                                               coordinator_epoch=coordinator_epoch,
                                               topics=tuple(build(t_cls, name=n, partition_indexes=ps)
                                                            for n, ps in topics)),)))
        return {(t.name, p.partition_index): p.error_code for t in r.markers[0].topics for p in t.partitions}
    st.groups.ensure_topic()
    assert markers(2, 0, ("t", (0,))) == {("t", 0): E.invalid_producer_epoch}
    assert markers(3, 0, ("t", (0,)), ("nope", (0,)), ("__consumer_offsets", (0,))) == {
        ("t", 0): E.none, ("nope", 0): E.unknown_topic_or_partition, ("__consumer_offsets", 0): E.none}
    # the group coordinator not ready (loading) is answered as Kafka does: NOT_LEADER_OR_FOLLOWER
    ready = st.groups.write_txn_marker
    st.groups.write_txn_marker = lambda *a: E.coordinator_load_in_progress
    assert markers(3, 0, ("__consumer_offsets", (0,))) == {("__consumer_offsets", 0): E.not_leader_or_follower}
    st.groups.write_txn_marker = ready
    assert lg.last_stable_offset == lg.log_end_offset == 2
    assert [(a.producer_id, a.first_offset) for a in lg.collect_aborted_transactions(0, 2)] == [(77, 0)]


@pytest.mark.parametrize("key, version", [(24, 3), (25, 4), (26, 4), (27, 1), (65, 0), (66, 2)])
def test_error_responses_encode(broker, key, version):
    fields = {24: dict(v3_and_below_transactional_id="x", v3_and_below_producer_id=1, v3_and_below_producer_epoch=0,
                       v3_and_below_topics=(build(nested(request_schema(24, 3), "AddPartitionsToTxnTopic"), name="t",
                                                  partitions=(0, 1)),)),
              25: dict(transactional_id="x", producer_id=1, producer_epoch=0, group_id="g"),
              26: dict(transactional_id="x", producer_id=1, producer_epoch=0, committed=True),
              27: dict(markers=()), 65: dict(transactional_ids=("a",)),
              66: dict(state_filters=(), producer_id_filters=())}
    r = req(key, version, **fields[key])
    encode_response(r, error_response(r, E.coordinator_not_available))


def test_advertised_versions_are_the_spec_table():
    table = advertised_apis(dispatch_table())
    got = {k: (table.get(k).min_version, table.get(k).max_version) for k in (10, 22, 24, 25, 26, 27, 65, 66)}
    # spec §0 item 4 (FindCoordinator stays at the group coordinator's 0-4)
    assert got == {10: (0, 4), 22: (0, 5), 24: (0, 3), 25: (0, 4), 26: (0, 4), 27: (1, 1), 65: (0, 0), 66: (0, 2)}


# -- on the event loop when nothing can wait (issue 28) ----------------------------------------------

def test_add_partitions_and_end_txn_run_quick_only_when_nothing_can_wait(broker, monkeypatch):
    import threading

    from compactlog.record import jit
    from compactlog.server.apis.transactions import quick_add_partitions_to_txn, quick_end_txn
    monkeypatch.setattr(jit, "_warm", True)
    st = broker.state
    r = init(st, 4, tid="tx")
    pid, epoch = r.producer_id, r.producer_epoch
    cls = request_schema(24, 3)
    add_req = req(24, 3, v3_and_below_transactional_id="tx", v3_and_below_producer_id=pid,
                  v3_and_below_producer_epoch=epoch, v3_and_below_topics=(
                      build(nested(cls, "AddPartitionsToTxnTopic"), name="t", partitions=(0,)),))
    end_req = req(26, 3, transactional_id="tx", producer_id=pid, producer_epoch=epoch, committed=True)
    state_log = st.log("__transaction_state", st.transactions.coordinator.partition_for("tx"))
    # the coordinator's lock held by another thread (its timer, another request): a worker thread's job
    held, release = threading.Event(), threading.Event()

    def hold():
        with st.transactions.lock:
            held.set()
            release.wait(10)
    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        assert quick_add_partitions_to_txn(st, add_req) is None
    finally:
        release.set()
        t.join()
    end_before = state_log.log_end_offset
    resp = quick_add_partitions_to_txn(st, add_req)
    assert [p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition] \
        == [E.none]
    assert state_log.log_end_offset == end_before + 1                   # Ongoing written, on this thread
    # a marker to write where an append would flush: not on the loop
    st.datadir.alter_topic("t", {"flush.messages": "1"})
    assert quick_end_txn(st, end_req) is None
    st.datadir.alter_topic("t", {"flush.messages": str(2 ** 63 - 1)})
    assert quick_end_txn(st, end_req).error_code == E.none
    assert st.log("t", 0).last_stable_offset == st.log("t", 0).log_end_offset == 1     # the marker
    assert broker.svc.coordinator.txns["tx"].state.display == "CompleteCommit"
    # kernels not loaded: never on the loop
    monkeypatch.setattr(jit, "_warm", False)
    assert quick_add_partitions_to_txn(st, add_req) is None and quick_end_txn(st, end_req) is None
