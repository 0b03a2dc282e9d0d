"""The group APIs without sockets: kio requests of every advertised version in, kio responses out,
each encoded as the wire would carry it; the batched forms (FindCoordinator v4, OffsetFetch v8,
LeaveGroup v3+); KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe, OffsetCommit and
OffsetFetch v9 with member epochs, and UNSUPPORTED_VERSION without the consumer protocol."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import consumer_offsets as R
from compactlog.server.apis.groups import (GROUP_HANDLERS, handle_delete_groups, handle_describe_groups,
                                               handle_find_coordinator, handle_heartbeat, handle_join_group,
                                               handle_leave_group, handle_list_groups, handle_offset_commit,
                                               handle_offset_delete, handle_offset_fetch, handle_sync_group)
from compactlog.server.conftest import FakeTransactions
from compactlog.coordinator.group.service import for_broker
from compactlog.server.dispatch import advertised_apis, dispatch_table, error_response
from compactlog.server.messages import build, nested
from compactlog.server.protocol import Request, encode_response
from compactlog.server.state import CLIENT_HOST, BrokerState, Listener, ProducerIdManager, load_identity
from compactlog.server.versions import request_schema
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

S = datetime.timedelta(seconds=1)
SUB = R.encode_subscription(["t"])


@pytest.fixture
def state(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({"group.initial.rebalance.delay.ms": "0",
                                                     "offsets.topic.num.partitions": "5"}),
                 writable=True, command="test")
    node, cluster = load_identity(dd.path, None)
    st = BrokerState(dd, node, cluster, Listener("PLAINTEXT", "127.0.0.1", 9092),
                     producer_ids=ProducerIdManager(dd.path))
    st.apis = advertised_apis(dispatch_table())
    svc = for_broker(st)
    svc.load_now()
    st.create_topic("t", 3)
    yield st
    dd.close()


def req(api_key, version, client_id="cli", **fields):
    body = build(request_schema(api_key, version), **fields)
    return Request(api_key, version, 7, client_id, None, body, 0, version, True)


def call(state, request):
    """Run a handler (sync or async) and check that its answer encodes."""
    fn, mode = GROUP_HANDLERS[request.api_key]
    if mode == "async":
        async def go():
            loop = asyncio.get_running_loop()
            CLIENT_HOST.set("/10.1.2.3")
            return await fn(state, request, lambda f, *a: loop.run_in_executor(None, f, *a))
        resp = asyncio.run(go())
    else:
        resp = fn(state, request)
    encode_response(request, resp)
    return resp


def protocols(version):
    cls = nested(request_schema(11, version), "JoinGroupRequestProtocol")
    return (build(cls, name="range", metadata=SUB),)


def join(state, version=7, member="", group="g", instance=None):
    kw = dict(group_id=group, session_timeout=10 * S, rebalance_timeout=30 * S, member_id=member,
              group_instance_id=instance, protocol_type="consumer", protocols=protocols(version))
    return call(state, req(11, version, **kw))


def join_pumped(state, version=7, member="", group="g"):
    """A JoinGroup parked until the coordinator's timers (run here, as its thread would) answer it."""
    svc = state.groups

    async def go():
        loop = asyncio.get_running_loop()
        CLIENT_HOST.set("/10.1.2.3")
        task = asyncio.ensure_future(handle_join_group(
            state, req(11, version, group_id=group, session_timeout=10 * S, rebalance_timeout=30 * S,
                       member_id=member, group_instance_id=None, protocol_type="consumer",
                       protocols=protocols(version)), lambda f, *a: loop.run_in_executor(None, f, *a)))
        for _ in range(200):
            await asyncio.sleep(0.01)
            await loop.run_in_executor(None, svc.run_due)
            if task.done():
                return task.result()
        raise AssertionError("JoinGroup was not answered")
    return asyncio.run(go())


def joined_member(state, version=7, group="g"):
    first = join_pumped(state, version, group=group)
    if version < 4:
        return first                    # before KIP-394 the member is added at once
    assert first.error_code == ErrorCode.member_id_required
    return join_pumped(state, version, first.member_id, group)


def test_find_coordinator_every_version_and_batched(state):
    assert not state.has_topic(R.OFFSETS_TOPIC)
    for version in range(0, 4):
        r = call(state, req(10, version, key="g", key_type=0))
        assert (r.error_code, r.node_id, r.host, r.port) == (ErrorCode.none, state.node_id, "127.0.0.1", 9092)
    # created on the first lookup, with offsets.topic.num.partitions partitions
    assert state.partitions(R.OFFSETS_TOPIC) == list(range(5))
    r = call(state, req(10, 4, key_type=0, coordinator_keys=("a", "b")))
    assert [(c.key, c.error_code, c.port) for c in r.coordinators] == [("a", ErrorCode.none, 9092),
                                                                        ("b", ErrorCode.none, 9092)]
    # key type 1 is the transaction coordinator's (apis/transactions_test.py); none runs here
    r = call(state, req(10, 4, key_type=1, coordinator_keys=("txn",)))
    assert r.coordinators[0].error_code == ErrorCode.coordinator_not_available
    r = call(state, req(10, 3, key="x", key_type=2))
    assert r.error_code == ErrorCode.invalid_request and r.node_id == -1


def test_join_sync_heartbeat_leave_through_the_handlers(state):
    r = joined_member(state)
    assert r.error_code == ErrorCode.none and r.generation_id == 1 and r.protocol_name == "range"
    assert [m.member_id for m in r.members] == [r.member_id]
    g = state.groups.coordinator.groups["g"]
    assert g.members[r.member_id].client_host == "/10.1.2.3" and g.members[r.member_id].client_id == "cli"
    cls = request_schema(14, 5)
    a = build(nested(cls, "SyncGroupRequestAssignment"), member_id=r.member_id,
              assignment=R.encode_assignment([("t", [0, 1, 2])]))
    s = call(state, req(14, 5, group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None,
                        protocol_type="consumer", protocol_name="range", assignments=(a,)))
    assert s.error_code == ErrorCode.none and R.decode_assignment(s.assignment).partitions == [("t", [0, 1, 2])]
    assert call(state, req(12, 4, group_id="g", generation_id=1, member_id=r.member_id,
                           group_instance_id=None)).error_code == ErrorCode.none
    assert call(state, req(12, 0, group_id="g", generation_id=2, member_id=r.member_id)).error_code \
        == ErrorCode.illegal_generation
    # LeaveGroup v3+: the members array, one answer per member
    cls = request_schema(13, 4)
    mi = nested(cls, "MemberIdentity")
    lv = call(state, req(13, 4, group_id="g", members=(build(mi, member_id=r.member_id, group_instance_id=None),
                                                        build(mi, member_id="ghost", group_instance_id=None))))
    assert [(m.member_id, m.error_code) for m in lv.members] == [(r.member_id, ErrorCode.none),
                                                                ("ghost", ErrorCode.unknown_member_id)]
    # v0-2: the one member's error is the top-level error
    assert call(state, req(13, 1, group_id="g", member_id="ghost")).error_code == ErrorCode.unknown_member_id
    assert g.state == "Empty"


def test_join_v0_and_error_answers_encode(state):
    r = joined_member(state, version=0, group="old")
    assert r.error_code == ErrorCode.none and r.generation_id == 1    # v0: no MEMBER_ID_REQUIRED round
    bad = call(state, req(11, 0, group_id="old", session_timeout=1 * S, member_id="", protocol_type="consumer",
                          protocols=protocols(0)))
    assert bad.error_code == ErrorCode.invalid_session_timeout and bad.protocol_name == ""
    bad7 = call(state, req(11, 7, group_id="", session_timeout=10 * S, rebalance_timeout=10 * S, member_id="",
                           group_instance_id=None, protocol_type="consumer", protocols=protocols(7)))
    assert bad7.error_code == ErrorCode.invalid_group_id and bad7.protocol_name is None


def commit_req(version, group, offsets, generation=-1, member=""):
    cls = request_schema(8, version)
    t_cls, p_cls = nested(cls, "OffsetCommitRequestTopic"), nested(cls, "OffsetCommitRequestPartition")
    by_topic = {}
    for t, p, o in offsets:
        by_topic.setdefault(t, []).append(build(p_cls, partition_index=p, committed_offset=o,
                                                committed_leader_epoch=-1, committed_metadata=None))
    return req(8, version, group_id=group, generation_id_or_member_epoch=generation, member_id=member,
               group_instance_id=None, retention_time=datetime.timedelta(milliseconds=-1),
               topics=tuple(build(t_cls, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))


def test_offset_commit_and_fetch_every_form(state):
    r = call(state, commit_req(8, "m", [("t", 0, 10), ("t", 1, 11), ("nope", 0, 1), ("t", 9, 1)]))
    codes = [(t.name, p.partition_index, p.error_code) for t in r.topics for p in t.partitions]
    assert codes == [("t", 0, ErrorCode.none), ("t", 1, ErrorCode.none), ("t", 9, ErrorCode.unknown_topic_or_partition),
                     ("nope", 0, ErrorCode.unknown_topic_or_partition)]
    r = call(state, commit_req(2, "m", [("t", 2, 12)]))
    assert r.topics[0].partitions[0].error_code == ErrorCode.none
    # v1: explicit partitions; v7: null = every committed offset; v8: several groups at once
    cls = request_schema(9, 1)
    f = call(state, req(9, 1, group_id="m", topics=(build(nested(cls, "OffsetFetchRequestTopic"), name="t",
                                                          partition_indexes=(0, 1, 2, 5)),)))
    assert [(p.partition_index, p.committed_offset) for p in f.topics[0].partitions] == \
        [(0, 10), (1, 11), (2, 12), (5, -1)]
    f = call(state, req(9, 7, group_id="m", topics=None, require_stable=True))
    assert f.error_code == ErrorCode.none
    assert sorted((p.partition_index, p.committed_offset) for p in f.topics[0].partitions) == \
        [(0, 10), (1, 11), (2, 12)]
    cls = request_schema(9, 8)
    g_cls, t_cls = nested(cls, "OffsetFetchRequestGroup"), nested(cls, "OffsetFetchRequestTopics")
    f = call(state, req(9, 8, require_stable=False, groups=(
        build(g_cls, group_id="m", topics=(build(t_cls, name="t", partition_indexes=(1,)),)),
        build(g_cls, group_id="other", topics=None))))
    assert [g.group_id for g in f.groups] == ["m", "other"]
    assert f.groups[0].topics[0].partitions[0].committed_offset == 11 and f.groups[1].topics == ()


def test_offset_fetch_while_loading(state):
    svc = state.groups
    svc.coordinator.start_loading(svc.coordinator.partition_for("m"))
    cls = request_schema(9, 1)
    f = call(state, req(9, 1, group_id="m", topics=(build(nested(cls, "OffsetFetchRequestTopic"), name="t",
                                                          partition_indexes=(0,)),)))
    # no top-level error before v2: the partitions carry it
    assert f.topics[0].partitions[0].error_code == ErrorCode.coordinator_load_in_progress
    f = call(state, req(9, 5, group_id="m", topics=None))
    assert f.error_code == ErrorCode.coordinator_load_in_progress


def test_list_groups_while_a_partition_loads(state):
    """A partition still loading may hold groups: ListGroups answers COORDINATOR_LOAD_IN_PROGRESS
    (every version) until all are loaded, never a short list with no error (it answered the groups
    of the loaded partitions alone: a tool listed none, exit 0, right after a broker's start)."""
    assert joined_member(state).error_code == ErrorCode.none
    svc = state.groups
    other = next(p for p in range(svc.coordinator.partitions.num_partitions) if p != svc.coordinator.partition_for("g"))
    svc.coordinator.start_loading(other)
    for version in (0, 5):
        lg = call(state, req(16, version) if version < 4 else req(16, version, states_filter=(), types_filter=()))
        assert lg.error_code == ErrorCode.coordinator_load_in_progress and lg.groups == ()
    svc.coordinator.on_loaded(other)
    assert [g.group_id for g in call(state, req(16, 0)).groups] == ["g"]


def txn_commit_req(version, offsets, group="m", pid=7, epoch=0, generation=-1, member=""):
    cls = request_schema(28, version)
    t_cls, p_cls = nested(cls, "TxnOffsetCommitRequestTopic"), nested(cls, "TxnOffsetCommitRequestPartition")
    by_topic: dict = {}
    for t, p, o in offsets:
        by_topic.setdefault(t, []).append(build(p_cls, partition_index=p, committed_offset=o,
                                                committed_leader_epoch=-1, committed_metadata=None))
    return req(28, version, transactional_id="tx", group_id=group, producer_id=pid, producer_epoch=epoch,
               generation_id=generation, member_id=member, group_instance_id=None,
               topics=tuple(build(t_cls, name=t, partitions=tuple(ps)) for t, ps in by_topic.items()))


def txn_codes(resp):
    return [(t.name, p.partition_index, p.error_code) for t in resp.topics for p in t.partitions]


def test_txn_offset_commit_every_version(state):
    svc = state.groups
    fake = state.transactions = FakeTransactions()
    fake.add("tx", 7, 0, (R.OFFSETS_TOPIC, svc.coordinator.partition_for("m")))
    for version in range(5):
        r = call(state, txn_commit_req(version, [("t", 0, 10 + version), ("nope", 0, 1), ("t", 9, 1)]))
        assert txn_codes(r) == [("t", 0, ErrorCode.none), ("t", 9, ErrorCode.unknown_topic_or_partition),
                                ("nope", 0, ErrorCode.unknown_topic_or_partition)], version
    cls = request_schema(9, 7)
    fetch = req(9, 7, group_id="m", require_stable=True,
                topics=(build(nested(cls, "OffsetFetchRequestTopic"), name="t", partition_indexes=(0,)),))
    assert call(state, fetch).topics[0].partitions[0].error_code == ErrorCode.unstable_offset_commit
    assert svc.write_txn_marker(svc.coordinator.partition_for("m"), 7, 0, 0, True) == ErrorCode.none
    p = call(state, fetch).topics[0].partitions[0]
    assert (p.error_code, p.committed_offset) == (ErrorCode.none, 14)
    # only unknown partitions: the coordinator is not asked
    asked = len(fake.calls)
    assert txn_codes(call(state, txn_commit_req(3, [("nope", 1, 1)]))) == \
        [("nope", 1, ErrorCode.unknown_topic_or_partition)] and len(fake.calls) == asked


def test_txn_offset_commit_errors_per_version(state):
    """Without AddOffsetsToTxn: 48 up to v3, 120 from v4; a loading coordinator is 15 for v0/v1
    (KAFKA-7296), 14 after; a member of another generation is ILLEGAL_GENERATION (v3+)."""
    svc = state.groups
    state.transactions = FakeTransactions()
    state.transactions.add("tx", 7, 0)
    [(_, _, code)] = txn_codes(call(state, txn_commit_req(3, [("t", 0, 1)])))
    assert code == ErrorCode.invalid_txn_state
    [(_, _, code)] = txn_codes(call(state, txn_commit_req(4, [("t", 0, 1)])))
    assert code == ErrorCode.transaction_abortable
    state.transactions.add("tx", 7, 0, (R.OFFSETS_TOPIC, svc.coordinator.partition_for("m")))
    svc.coordinator.start_loading(svc.coordinator.partition_for("m"))
    for version, expected in ((0, ErrorCode.coordinator_not_available), (1, ErrorCode.coordinator_not_available),
                              (2, ErrorCode.coordinator_load_in_progress), (4, ErrorCode.coordinator_load_in_progress)):
        [(_, _, code)] = txn_codes(call(state, txn_commit_req(version, [("t", 0, 1)])))
        assert code == expected, version
    svc.coordinator.on_loaded(svc.coordinator.partition_for("m"))
    [(_, _, code)] = txn_codes(call(state, txn_commit_req(3, [("t", 0, 1)], generation=3, member="x")))
    assert code == ErrorCode.illegal_generation
    r = error_response(txn_commit_req(0, [("t", 0, 1)]), ErrorCode.not_coordinator)
    assert txn_codes(r) == [("t", 0, ErrorCode.not_coordinator)]


def test_describe_list_delete_and_offset_delete(state):
    assert joined_member(state).error_code == ErrorCode.none
    call(state, commit_req(8, "m", [("t", 0, 10)]))
    d = call(state, req(15, 5, groups=("g", "m", "nobody"), include_authorized_operations=True))
    assert [(x.group_id, x.group_state, x.protocol_type) for x in d.groups] == [
        ("g", "CompletingRebalance", "consumer"), ("m", "Empty", ""), ("nobody", "Dead", "")]
    assert d.groups[0].authorized_operations == (1 << 3) | (1 << 6) | (1 << 8)
    assert d.groups[0].members[0].client_host == "/10.1.2.3"
    lg = call(state, req(16, 5, states_filter=("empty",), types_filter=()))
    assert [(g.group_id, g.group_state, g.group_type) for g in lg.groups] == [("m", "Empty", "classic")]
    assert {g.group_id for g in call(state, req(16, 0)).groups} == {"g", "m"}
    cls = request_schema(47, 0)
    od = call(state, req(47, 0, group_id="m", topics=(build(nested(cls, "OffsetDeleteRequestTopic"), name="t",
        partitions=(build(nested(cls, "OffsetDeleteRequestPartition"), partition_index=0),
                    build(nested(cls, "OffsetDeleteRequestPartition"), partition_index=7))),)))
    assert od.error_code == ErrorCode.none
    assert [p.error_code for p in od.topics[0].partitions] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert call(state, req(47, 0, group_id="zz", topics=())).error_code == ErrorCode.group_id_not_found
    dg = call(state, req(42, 2, groups_names=("m", "g", "zz")))
    assert [(x.group_id, x.error_code) for x in dg.results] == [
        ("m", ErrorCode.none), ("g", ErrorCode.non_empty_group), ("zz", ErrorCode.group_id_not_found)]


def test_kip_848_refused_when_the_protocols_lack_consumer(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({"group.coordinator.rebalance.protocols": "classic"}),
                 writable=True, command="test")
    node, cluster = load_identity(dd.path, None)
    st = BrokerState(dd, node, cluster, Listener("PLAINTEXT", "127.0.0.1", 9092))
    st.apis = advertised_apis(dispatch_table())
    for_broker(st).load_now()
    try:
        for version in (0, 1):
            r = call(st, req(68, version, group_id="g", member_id="m", member_epoch=0, rebalance_timeout=S,
                             subscribed_topic_names=("t",), topic_partitions=()))
            assert (r.error_code, r.member_epoch, r.member_id) == (ErrorCode.unsupported_version, 0, None)
            assert "group.protocol=classic" in r.error_message
            d = call(st, req(69, version, group_ids=("g",), include_authorized_operations=False))
            assert d.groups[0].error_code == ErrorCode.unsupported_version
    finally:
        dd.close()


def cg_heartbeat(state, version=1, **fields):
    kw = dict(group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout=300 * S,
              subscribed_topic_names=("t",), topic_partitions=())
    kw.update(fields)
    return call(state, req(68, version, client_id="rdkafka", **kw))


def test_kip_848_heartbeat_join_describe_commit_fetch(state):
    tid = state.topic_id("t")
    r = cg_heartbeat(state)
    assert (r.error_code, r.member_id, r.member_epoch, r.heartbeat_interval) == \
        (ErrorCode.none, "m1", 1, datetime.timedelta(milliseconds=5000))
    assert [(tp.topic_id, tp.partitions) for tp in r.assignment.topic_partitions] == [(tid, (0, 1, 2))]
    # a plain heartbeat, acknowledged or not (nothing to revoke): no assignment, as Kafka
    plain = dict(member_epoch=1, rebalance_timeout=datetime.timedelta(milliseconds=-1),
                 subscribed_topic_names=None, topic_partitions=None)
    r = cg_heartbeat(state, **plain)
    assert (r.error_code, r.member_epoch, r.assignment) == (ErrorCode.none, 1, None)
    tps = nested(request_schema(68, 1), "TopicPartitions")
    r = cg_heartbeat(state, **{**plain, "topic_partitions": (tps(topic_id=tid, partitions=(0, 1, 2)),)})
    assert (r.error_code, r.member_epoch, r.assignment) == (ErrorCode.none, 1, None)
    r = cg_heartbeat(state, **plain)
    assert (r.error_code, r.member_epoch, r.assignment) == (ErrorCode.none, 1, None)
    for version in (0, 1):
        d = call(state, req(69, version, group_ids=("cg", "g-missing"), include_authorized_operations=True))
        # in the coordinator's order (by partition: test_acl_consumer_protocol checks it), so by id
        by_id = {x.group_id: x for x in d.groups}
        g, missing = by_id["cg"], by_id["g-missing"]
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == \
            (ErrorCode.none, "Stable", 1, 1, "uniform")
        [m] = g.members
        assert (m.member_id, m.member_epoch, m.client_id, m.client_host, m.subscribed_topic_names) == \
            ("m1", 1, "rdkafka", CLIENT_HOST.get(), ("t",))
        assert [(tp.topic_name, tp.partitions) for tp in m.target_assignment.topic_partitions] == [("t", (0, 1, 2))]
        assert getattr(m, "member_type", None) == (1 if version >= 1 else None)
        assert missing.error_code == ErrorCode.group_id_not_found
    # OffsetCommit v9 with the member epoch; stale epoch; v8 from a KIP-848 member
    def commit(version, epoch):
        t_cls = nested(request_schema(8, version), "OffsetCommitRequestTopic")
        p_cls = nested(request_schema(8, version), "OffsetCommitRequestPartition")
        topics = (build(t_cls, name="t", partitions=(build(p_cls, partition_index=0, committed_offset=4,
                                                           committed_leader_epoch=-1, committed_metadata=""),)),)
        r = call(state, req(8, version, group_id="cg", generation_id_or_member_epoch=epoch, member_id="m1",
                            group_instance_id=None, topics=topics))
        return r.topics[0].partitions[0].error_code
    assert commit(9, 1) == ErrorCode.none
    assert commit(9, 0) == ErrorCode.stale_member_epoch
    assert commit(8, 1) == ErrorCode.unsupported_version

    def fetch(member_id, epoch):
        g_cls = nested(request_schema(9, 9), "OffsetFetchRequestGroup")
        t_cls = nested(request_schema(9, 9), "OffsetFetchRequestTopics")
        r = call(state, req(9, 9, groups=(build(g_cls, group_id="cg", member_id=member_id, member_epoch=epoch,
                                                topics=(build(t_cls, name="t", partition_indexes=(0,)),)),),
                            require_stable=False))
        return r.groups[0]
    assert fetch("m1", 1).topics[0].partitions[0].committed_offset == 4
    assert fetch(None, -1).topics[0].partitions[0].committed_offset == 4
    assert fetch("m1", 7).error_code == ErrorCode.stale_member_epoch
    # ListGroups v5 with the type; DescribeGroups sees no classic group
    lg = call(state, req(16, 5, states_filter=(), types_filter=("consumer",)))
    assert [(g.group_id, g.group_type, g.group_state, g.protocol_type) for g in lg.groups] == \
        [("cg", "consumer", "Stable", "consumer")]
    dg = call(state, req(15, 5, groups=("cg",), include_authorized_operations=False))
    assert dg.groups[0].group_state == "Dead"
    # leave, then DeleteGroups takes it
    r = cg_heartbeat(state, member_epoch=-1, rebalance_timeout=datetime.timedelta(milliseconds=-1),
                     subscribed_topic_names=None, topic_partitions=None)
    assert (r.error_code, r.member_epoch) == (ErrorCode.none, -1)
    dr = call(state, req(42, 2, groups_names=("cg",)))
    assert dr.results[0].error_code == ErrorCode.none


@pytest.mark.parametrize("fields,code", [
    ({"member_id": ""}, ErrorCode.invalid_request),
    ({"member_id": "  "}, ErrorCode.invalid_request),
    ({"group_id": " "}, ErrorCode.invalid_request),
    ({"instance_id": ""}, ErrorCode.invalid_request),
    ({"rack_id": " "}, ErrorCode.invalid_request),
    ({"rebalance_timeout": datetime.timedelta(milliseconds=-1)}, ErrorCode.invalid_request),
    ({"topic_partitions": None}, ErrorCode.invalid_request),
    ({"subscribed_topic_names": None}, ErrorCode.invalid_request),
    ({"member_epoch": -2}, ErrorCode.invalid_request),
    ({"member_epoch": -3}, ErrorCode.invalid_request),
    ({"server_assignor": "foo"}, ErrorCode.unsupported_assignor),
    ({"member_epoch": 4}, ErrorCode.group_id_not_found),
    ({"subscribed_topic_names": None, "subscribed_topic_regex": "(("}, ErrorCode.invalid_regular_expression),
])
def test_kip_848_heartbeat_gatekeeping(state, fields, code):
    r = cg_heartbeat(state, **fields)
    assert (r.error_code, r.member_epoch, r.member_id) == (code, 0, None)
    assert r.error_message


def test_kip_848_v0_join_gets_a_member_id(state):
    r = cg_heartbeat(state, version=0, member_id="")
    assert r.error_code == ErrorCode.none and len(r.member_id) == 22


def test_every_handler_is_wired_and_advertised(state):
    table = dispatch_table()
    for key, (fn, mode) in GROUP_HANDLERS.items():
        assert table[key].handler is fn and table[key].mode == mode
        assert key in state.apis
    assert (state.apis.get(10).max_version, state.apis.get(9).max_version) == (4, 9)
    assert (state.apis.get(68).max_version, state.apis.get(69).max_version) == (1, 1)
    assert handle_find_coordinator and handle_sync_group and handle_heartbeat and handle_leave_group
    assert handle_offset_commit and handle_offset_fetch and handle_describe_groups and handle_list_groups
    assert handle_delete_groups and handle_offset_delete


def test_kip_848_acls(state):
    """Spec §2.2 rules 2-3 and §10 (KAFKA-18813): READ on the group, DESCRIBE on the named topics,
    and ConsumerGroupDescribe hiding a group whose assignment names a topic the caller may not see."""
    from compactlog.server.apis.acls_test import ALLOW, DESCRIBE, GROUP, LITERAL, READ, TOPIC, create
    from compactlog.server.authorizer.standard import StandardAuthorizer
    from compactlog.server.authorizer.store import AclStore
    state.authorizer = StandardAuthorizer({"User:admin"}, store=AclStore(state.datadir.path))
    create(state, 1, (GROUP, "cg", LITERAL, "User:alice", READ, ALLOW), (TOPIC, "t", LITERAL, "User:alice", DESCRIBE, ALLOW),
           (GROUP, "cg", LITERAL, "User:bob", READ, ALLOW))

    import dataclasses

    def as_(principal, api_key, **fields):
        r = dataclasses.replace(req(api_key, 1, client_id="rdkafka", **fields), principal=principal)
        fn, _ = GROUP_HANDLERS[api_key]
        resp = fn(state, r)
        encode_response(r, resp)
        return resp
    hb = dict(group_id="cg", member_id="m1", member_epoch=0, rebalance_timeout=300 * S,
              subscribed_topic_names=("t",), topic_partitions=())
    assert as_("User:carol", 68, **hb).error_code == ErrorCode.group_authorization_failed
    assert as_("User:bob", 68, **hb).error_code == ErrorCode.topic_authorization_failed
    assert as_("User:alice", 68, **hb).error_code == ErrorCode.none
    d = as_("User:bob", 69, group_ids=("cg",), include_authorized_operations=False).groups[0]
    assert (d.error_code, d.members) == (ErrorCode.topic_authorization_failed, ())
    d = as_("User:alice", 69, group_ids=("cg",), include_authorized_operations=False).groups[0]
    assert d.error_code == ErrorCode.none and len(d.members) == 1
    assert as_("User:carol", 69, group_ids=("cg",), include_authorized_operations=False).groups[0].error_code == \
        ErrorCode.group_authorization_failed


INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")


def test_find_coordinator_errors_carry_kafkas_messages(state):
    """KafkaApis: before v4 an error is answered through getErrorResponse (prepareOldResponse:
    the error's own message, Errors.message()); from v4 a key's error from getCoordinator has no
    message, while an unknown key type throws in CoordinatorType.forId and every key gets
    prepareErrorResponse's (INVALID_REQUEST and its message, no node)."""
    for key_type in (2, 3, 9):
        r = call(state, req(10, 3, key="x", key_type=key_type))
        assert (r.error_code, r.error_message, r.node_id, r.host, r.port) == \
            (ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE, -1, "", -1), key_type
    r = call(state, req(10, 4, key_type=9, coordinator_keys=("a", "b")))
    assert [(c.key, c.error_code, c.error_message, c.node_id) for c in r.coordinators] == \
        [(k, ErrorCode.invalid_request, INVALID_REQUEST_MESSAGE, -1) for k in ("a", "b")]
    r = call(state, req(10, 4, key_type=2, coordinator_keys=("s",)))        # a share key below v6: no exception
    assert (r.coordinators[0].error_code, r.coordinators[0].error_message) == (ErrorCode.invalid_request, None)
    r = call(state, req(10, 4, key_type=1, coordinator_keys=("txn",)))      # no transaction coordinator here
    assert (r.coordinators[0].error_code, r.coordinators[0].error_message) == \
        (ErrorCode.coordinator_not_available, None)
