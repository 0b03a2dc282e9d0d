"""The questions of Kafka's AuthHelper (``auth_helper.py``) as every API's handler asks them
(security.md §7.4), on raw requests, without sockets: the question each handler asks, and Kafka's
error code in Kafka's place when the answer is no. One file for all the APIs, beside the module
they ask through, so that the authorization rules read as one table as security.md gives them.

A broker state with both coordinators and a StandardAuthorizer (super user ``User:admin``); each
request carries the principal the transport would put on it."""

from __future__ import annotations

import asyncio
import datetime

import pytest
from kio.schema.errors import ErrorCode as E
from kio.schema.fetch.v12.response import FetchResponse
from kio.serial import entity_reader

from compactlog.record.batch import BatchSpec, encode_batch
from compactlog.server.authorizer.acl import AclBinding, AclOperation as O, AclPermissionType as P
from compactlog.server.authorizer.acl import PatternType as PT, ResourceType as RT
from compactlog.server.authorizer.standard import StandardAuthorizer
from compactlog.server.dispatch import DECLARED_APIS, advertised_apis, dispatch_table
from compactlog.server.messages import OPERATIONS_NOT_REQUESTED, ZERO_UUID, build, nested
from compactlog.server.protocol import Request, encode_response
from compactlog.server.state import CLIENT_HOST
from compactlog.coordinator.txn.conftest import Broker, Clock
from compactlog.server.versions import request_schema

ALICE, ADMIN = "User:alice", "User:admin"
MS = datetime.timedelta(milliseconds=1)
HANDLERS = {a.key: a for a in DECLARED_APIS}


class AuthRequest(Request):
    """A request as the transport hands it over, with the principal it authenticated."""


@pytest.fixture
def b(tmp_path):
    broker = Broker(tmp_path / "data", Clock())
    st = broker.state
    st.apis = advertised_apis(dispatch_table())
    for name, n in (("t", 2), ("secret", 1), ("orders.eu", 1)):
        st.create_topic(name, n)
    st.authorizer = StandardAuthorizer({ADMIN})
    token = CLIENT_HOST.set("/127.0.0.1")
    yield broker
    CLIENT_HOST.reset(token)
    broker.close()


def grant(st, rtype, name, *ops, pattern=PT.LITERAL, perm=P.ALLOW, principal=ALICE, host="*"):
    assert all(c == E.none for c, _ in st.authorizer.create_acls(
        [AclBinding.of(rtype, name, pattern, principal, host, op, perm) for op in ops]))


def body(api_key, version, **fields):
    return build(request_schema(api_key, version), **fields)


def part(api_key, version, entity, **fields):
    return build(nested(request_schema(api_key, version), entity), **fields)


def call(st, api_key, version, principal=ALICE, **fields):
    """Run the declared handler of ``api_key`` on a request of ``version`` from ``principal``; the
    answer, checked to encode."""
    r = AuthRequest(api_key, version, 7, "test", None, body(api_key, version, **fields), 0, version, True)
    r.principal = principal
    api = HANDLERS[api_key]
    if api.mode == "async":
        async def run(fn, *args):
            return fn(*args)
        resp = asyncio.run(api.handler(st, r, run))
    else:
        resp = api.handler(st, r)
    if hasattr(resp, "parts"):
        return resp
    encode_response(r, resp)
    return resp


def batch(*, pid=-1, epoch=-1, seq=-1, transactional=False) -> bytes:
    spec = BatchSpec(base_offset=0, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                     transactional=transactional)
    return encode_batch(spec, [(0, 1_700_000_000_000, b"k", b"v")])


# -- Metadata -------------------------------------------------------------------------------------------

def metadata(st, topics, principal=ALICE, version=12, auto=True, ops=False):
    t = None if topics is None else tuple(part(3, version, "MetadataRequestTopic", name=n, topic_id=ZERO_UUID)
                                          for n in topics)
    return call(st, 3, version, principal, topics=t, allow_auto_topic_creation=auto,
                include_topic_authorized_operations=ops, include_cluster_authorized_operations=False)


def test_metadata_hides_topics_without_describe(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.READ)
    assert [t.name for t in metadata(st, None).topics] == ["t"]            # one of three
    assert sorted(t.name for t in metadata(st, None, ADMIN).topics) == ["orders.eu", "secret", "t"]
    [secret, missing] = metadata(st, ["secret", "missing"]).topics
    for t in (secret, missing):         # the same answer whether it exists or not
        assert (t.error_code, t.topic_id, t.partitions) == (E.topic_authorization_failed, ZERO_UUID, ())
    assert not st.has_topic("missing")


def test_metadata_auto_creation_needs_create(b):
    st = b.state
    grant(st, RT.TOPIC, "new", O.DESCRIBE)
    [t] = metadata(st, ["new"]).topics
    assert t.error_code == E.topic_authorization_failed and not st.has_topic("new")
    grant(st, RT.TOPIC, "new", O.CREATE)
    [t] = metadata(st, ["new"]).topics
    assert t.error_code == E.none and st.has_topic("new")
    grant(st, RT.CLUSTER, "kafka-cluster", O.CREATE)
    grant(st, RT.TOPIC, "new2", O.WRITE)
    assert metadata(st, ["new2"]).topics[0].error_code == E.none


def test_metadata_authorized_operations(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.READ)
    [t] = metadata(st, ["t"], ops=True, version=10).topics
    assert t.topic_authorized_operations == (1 << 3) | (1 << 8)          # READ, and DESCRIBE it implies
    assert metadata(st, ["t"], version=10).topics[0].topic_authorized_operations == OPERATIONS_NOT_REQUESTED
    r = call(st, 3, 10, topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False,
             include_cluster_authorized_operations=True)
    assert r.cluster_authorized_operations == 0
    grant(st, RT.CLUSTER, "kafka-cluster", O.ALTER)
    r = call(st, 3, 10, topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False,
             include_cluster_authorized_operations=True)
    assert r.cluster_authorized_operations == (1 << 7) | (1 << 8)


# -- Produce, Fetch, ListOffsets, DeleteRecords, DescribeProducers ---------------------------------------

def produce(st, parts, principal=ALICE, transactional_id=None):
    t_cls = "TopicProduceData"
    return call(st, 0, 9, principal, transactional_id=transactional_id, acks=-1, timeout=5000 * MS, topic_data=tuple(
        part(0, 9, t_cls, name=topic, partition_data=(part(0, 9, "PartitionProduceData", index=p, records=records),))
        for topic, p, records in parts))


def codes(resp, topics="responses", parts="partition_responses", field="error_code"):
    return [getattr(p, field) for t in getattr(resp, topics) for p in getattr(t, parts)]


def test_produce_needs_write_on_the_topic(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.WRITE)
    r = produce(st, [("t", 0, batch()), ("secret", 0, batch()), ("missing", 0, batch())])
    assert codes(r) == [E.none, E.topic_authorization_failed, E.topic_authorization_failed]
    assert st.log("secret", 0).log_end_offset == 0


def test_transactional_produce_needs_write_on_the_transactional_id(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.WRITE)
    r = produce(st, [("t", 0, batch(pid=5, epoch=0, seq=0, transactional=True))], transactional_id="tx")
    assert codes(r) == [E.transactional_id_authorization_failed]
    grant(st, RT.TRANSACTIONAL_ID, "tx", O.WRITE)
    r = produce(st, [("t", 0, batch(pid=5, epoch=0, seq=0, transactional=True))], transactional_id="tx")
    assert codes(r) != [E.transactional_id_authorization_failed]
    # an idempotent batch needs WRITE on the topic only
    assert codes(produce(st, [("t", 1, batch(pid=9, epoch=0, seq=0))])) == [E.none]


def fetch(st, topics, principal=ALICE):
    return call(st, 1, 12, principal, replica_id=-1, max_wait=0 * MS, min_bytes=0, max_bytes=1 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                topics=tuple(part(1, 12, "FetchTopic", topic=name, partitions=(part(
                    1, 12, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20,
                    current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1),)) for name in topics))


def fetch_codes(resp) -> list[int]:
    """The partition error codes of an encoded Fetch v12 answer, read back with kio."""
    data = b"".join(bytes(p) for p in resp.parts)
    answer, _ = entity_reader(FetchResponse)(data, 4 + 4 + 1)      # size, correlation id, header tags
    return [p.error_code for t in answer.responses for p in t.partitions]


def test_fetch_needs_read(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.READ)
    assert fetch_codes(fetch(st, ["t", "secret", "missing"])) == [E.none, E.topic_authorization_failed,
                                                                  E.topic_authorization_failed]


def test_list_offsets_needs_describe(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.WRITE)            # WRITE implies DESCRIBE
    r = call(st, 2, 8, replica_id=-1, isolation_level=0, topics=tuple(
        part(2, 8, "ListOffsetsTopic", name=n, partitions=(part(2, 8, "ListOffsetsPartition", partition_index=0,
                                                                current_leader_epoch=-1, timestamp=-1),))
        for n in ("t", "secret")))
    assert codes(r, "topics", "partitions") == [E.none, E.topic_authorization_failed]


def test_delete_records_needs_delete(b):
    st = b.state
    r = call(st, 21, 2, topics=(part(21, 2, "DeleteRecordsTopic", name="t", partitions=(
        part(21, 2, "DeleteRecordsPartition", partition_index=0, offset=0),)),), timeout=5000 * MS)
    assert codes(r, "topics", "partitions") == [E.topic_authorization_failed]
    grant(st, RT.TOPIC, "t", O.DELETE)
    r = call(st, 21, 2, topics=(part(21, 2, "DeleteRecordsTopic", name="t", partitions=(
        part(21, 2, "DeleteRecordsPartition", partition_index=0, offset=0),)),), timeout=5000 * MS)
    assert codes(r, "topics", "partitions") == [E.none]


def test_describe_producers_needs_read(b):
    st = b.state
    r = call(st, 61, 0, topics=(part(61, 0, "TopicRequest", name="t", partition_indexes=(0,)),))
    assert codes(r, "topics", "partitions") == [E.topic_authorization_failed]


# -- InitProducerId ----------------------------------------------------------------------------------------

def init(st, tid=None, principal=ALICE):
    return call(st, 22, 4, principal, transactional_id=tid, transaction_timeout=60000 * MS, producer_id=-1,
                producer_epoch=-1).error_code


def test_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(b):
    st = b.state
    assert init(st) == E.cluster_authorization_failed
    grant(st, RT.TOPIC, "t", O.WRITE)
    assert init(st) == E.none
    assert init(st, principal="User:bob") == E.cluster_authorization_failed
    grant(st, RT.CLUSTER, "kafka-cluster", O.IDEMPOTENT_WRITE, principal="User:bob")
    assert init(st, principal="User:bob") == E.none


def test_transactional_producer_needs_write_on_its_id(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.WRITE)
    assert init(st, "tx") == E.transactional_id_authorization_failed
    grant(st, RT.TRANSACTIONAL_ID, "tx", O.WRITE)
    assert init(st, "tx") == E.none
    assert init(st, "tx", ADMIN) == E.none


# -- topics and configs ------------------------------------------------------------------------------------

def create_topic(st, name, principal=ALICE):
    return call(st, 19, 7, principal, topics=(part(19, 7, "CreatableTopic", name=name, num_partitions=1,
                                                   replication_factor=1, assignments=(), configs=()),),
                timeout=5000 * MS, validate_only=False).topics[0]


def test_create_topics_needs_create_and_describe_configs_for_the_configs(b):
    st = b.state
    r = create_topic(st, "n1")
    assert (r.error_code, r.error_message) == (E.topic_authorization_failed, "Authorization failed.")
    grant(st, RT.TOPIC, "n", O.CREATE, pattern=PT.PREFIXED)
    r = create_topic(st, "n1")
    assert (r.error_code, r.topic_config_error_code, r.configs, r.num_partitions) == \
        (E.none, E.topic_authorization_failed, (), -1)
    assert st.has_topic("n1")
    grant(st, RT.TOPIC, "n2", O.DESCRIBE_CONFIGS)
    r = create_topic(st, "n2")
    assert (r.error_code, r.topic_config_error_code, r.num_partitions) == (E.none, E.none, 1) and r.configs


def delete_topics(st, names, principal=ALICE):
    return {r.name: r.error_code for r in call(st, 20, 5, principal, topic_names=tuple(names),
                                               timeout=5000 * MS).responses}


def test_delete_topics_needs_describe_then_delete(b):
    st = b.state
    assert delete_topics(st, ["t", "missing"]) == {"t": E.topic_authorization_failed,
                                                   "missing": E.topic_authorization_failed}
    grant(st, RT.TOPIC, "*", O.DESCRIBE)
    assert delete_topics(st, ["t", "missing"]) == {"t": E.topic_authorization_failed,
                                                   "missing": E.unknown_topic_or_partition}
    grant(st, RT.TOPIC, "t", O.DELETE)
    assert delete_topics(st, ["t"]) == {"t": E.none}
    grant(st, RT.CLUSTER, "kafka-cluster", O.DELETE, principal="User:ops")
    assert delete_topics(st, ["secret"], "User:ops") == {"secret": E.none}


def test_create_partitions_needs_alter(b):
    st = b.state

    def grow():
        return call(st, 37, 3, topics=(part(37, 3, "CreatePartitionsTopic", name="t", count=3, assignments=None),),
                    timeout=5000 * MS, validate_only=False).results[0].error_code
    assert grow() == E.topic_authorization_failed
    grant(st, RT.TOPIC, "t", O.ALTER)
    assert grow() == E.none


def describe_configs(st, resources, principal=ALICE):
    return call(st, 32, 4, principal, include_synonyms=False, include_documentation=False, resources=tuple(
        part(32, 4, "DescribeConfigsResource", resource_type=t, resource_name=n, configuration_keys=None)
        for t, n in resources)).results


def test_describe_configs_needs_describe_configs(b):
    st = b.state
    topic, broker = describe_configs(st, [(2, "t"), (4, str(st.node_id))])
    assert (topic.error_code, topic.configs) == (E.topic_authorization_failed, ())
    assert (broker.error_code, broker.error_message) == (E.cluster_authorization_failed, "Cluster authorization failed.")
    grant(st, RT.TOPIC, "t", O.ALTER_CONFIGS)           # implies DESCRIBE_CONFIGS
    grant(st, RT.CLUSTER, "kafka-cluster", O.DESCRIBE_CONFIGS)
    topic, broker = describe_configs(st, [(2, "t"), (4, str(st.node_id))])
    assert topic.error_code == E.none and topic.configs and broker.error_code == E.none


@pytest.mark.parametrize("key, version", [(33, 2), (44, 1)])
def test_alter_configs_needs_alter_configs(b, key, version):
    st = b.state
    cfg = dict(name="retention.ms", value="1000") if key == 33 else dict(name="retention.ms", value="1000",
                                                                        config_operation=0)

    def alter(principal=ALICE):
        return [r.error_code for r in call(st, key, version, principal, validate_only=False, resources=(
            part(key, version, "AlterConfigsResource", resource_type=2, resource_name="t",
                 configs=(part(key, version, "AlterableConfig", **cfg),)),
            part(key, version, "AlterConfigsResource", resource_type=4, resource_name="", configs=()))).responses]
    assert alter() == [E.topic_authorization_failed, E.cluster_authorization_failed]
    grant(st, RT.TOPIC, "t", O.ALTER_CONFIGS)
    assert alter() == [E.none, E.cluster_authorization_failed]
    assert alter(ADMIN) == [E.none, E.none]


def test_describe_cluster_and_log_dirs(b):
    st = b.state
    r = call(st, 60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert (r.error_code, r.cluster_authorized_operations) == (E.none, 0)
    r = call(st, 35, 4, topics=None)
    assert (r.error_code, r.results) == (E.cluster_authorization_failed, ())
    grant(st, RT.CLUSTER, "kafka-cluster", O.DESCRIBE)
    assert call(st, 35, 4, topics=None).error_code == E.none
    r = call(st, 60, 1, include_cluster_authorized_operations=True, endpoint_type=1)
    assert r.cluster_authorized_operations == 1 << 8


# -- groups -----------------------------------------------------------------------------------------------

def test_find_coordinator_needs_describe(b):
    st = b.state
    r = call(st, 10, 4, key_type=0, coordinator_keys=("g", "h"))
    assert [c.error_code for c in r.coordinators] == [E.group_authorization_failed] * 2
    grant(st, RT.GROUP, "g", O.READ)
    r = call(st, 10, 4, key_type=0, coordinator_keys=("g", "h"))
    assert [c.error_code for c in r.coordinators] == [E.none, E.group_authorization_failed]
    assert call(st, 10, 3, key="tx", key_type=1).error_code == E.transactional_id_authorization_failed
    grant(st, RT.TRANSACTIONAL_ID, "tx", O.WRITE)
    assert call(st, 10, 3, key="tx", key_type=1).error_code == E.none


def test_membership_apis_need_read_on_the_group(b):
    st = b.state
    grant(st, RT.GROUP, "g", O.DESCRIBE)
    join = call(st, 11, 7, group_id="g", session_timeout=10000 * MS, rebalance_timeout=10000 * MS, member_id="",
                group_instance_id=None, protocol_type="consumer",
                protocols=(part(11, 7, "JoinGroupRequestProtocol", name="range", metadata=b""),))
    assert join.error_code == E.group_authorization_failed
    sync = call(st, 14, 5, group_id="g", generation_id=1, member_id="m", group_instance_id=None,
                protocol_type="consumer", protocol_name="range", assignments=())
    assert sync.error_code == E.group_authorization_failed
    assert call(st, 12, 4, group_id="g", generation_id=1, member_id="m").error_code == E.group_authorization_failed
    leave = call(st, 13, 4, group_id="g", members=(part(13, 4, "MemberIdentity", member_id="m"),))
    assert leave.error_code == E.group_authorization_failed
    grant(st, RT.GROUP, "g", O.READ)
    assert call(st, 12, 4, group_id="g", generation_id=1, member_id="m").error_code != E.group_authorization_failed


def commit(st, group="g", topics=("t", "secret")):
    return call(st, 8, 8, group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=tuple(part(8, 8, "OffsetCommitRequestTopic", name=n, partitions=(
                    part(8, 8, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                         committed_leader_epoch=-1, committed_metadata=""),)) for n in topics))


def test_offset_commit_needs_read_on_the_group_then_the_topic(b):
    st = b.state
    assert codes(commit(st), "topics", "partitions") == [E.group_authorization_failed] * 2
    grant(st, RT.GROUP, "g", O.READ)
    grant(st, RT.TOPIC, "t", O.READ)
    assert codes(commit(st), "topics", "partitions") == [E.none, E.topic_authorization_failed]


def offset_fetch(st, topics, version=8):
    if version >= 8:
        t = None if topics is None else tuple(part(9, 8, "OffsetFetchRequestTopics", name=n, partition_indexes=(0,))
                                              for n in topics)
        return call(st, 9, 8, groups=(part(9, 8, "OffsetFetchRequestGroup", group_id="g", topics=t),),
                    require_stable=False).groups[0]
    t = None if topics is None else tuple(part(9, version, "OffsetFetchRequestTopic", name=n, partition_indexes=(0,))
                                          for n in topics)
    return call(st, 9, version, group_id="g", topics=t, require_stable=False)


def test_offset_fetch_needs_describe_on_the_group_and_hides_topics(b):
    st = b.state
    assert offset_fetch(st, None).error_code == E.group_authorization_failed
    assert offset_fetch(st, ["t"], version=1).topics[0].partitions[0].error_code == E.group_authorization_failed
    grant(st, RT.GROUP, "g", O.READ)
    grant(st, RT.TOPIC, "t", O.READ)
    grant(st, RT.TOPIC, "secret", O.READ, principal=ADMIN)
    assert codes(commit(st, topics=("t",)), "topics", "partitions") == [E.none]
    call_admin = call(st, 8, 8, ADMIN, group_id="g", generation_id_or_member_epoch=-1, member_id="",
                      group_instance_id=None, topics=(part(8, 8, "OffsetCommitRequestTopic", name="secret", partitions=(
                          part(8, 8, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                               committed_leader_epoch=-1, committed_metadata=""),)),))
    assert codes(call_admin, "topics", "partitions") == [E.none]
    every = offset_fetch(st, None)
    assert [t.name for t in every.topics] == ["t"]            # the other topic is left out
    named = offset_fetch(st, ["t", "secret"])
    assert [(t.name, t.partitions[0].error_code, t.partitions[0].committed_offset) for t in named.topics] == \
        [("t", E.none, 1), ("secret", E.topic_authorization_failed, -1)]


def test_txn_offset_commit_needs_the_transactional_id_then_the_group(b):
    st = b.state

    def txn_commit():
        return codes(call(st, 28, 3, transactional_id="tx", group_id="g", producer_id=1, producer_epoch=0,
                          generation_id=-1, member_id="", group_instance_id=None, topics=(
                              part(28, 3, "TxnOffsetCommitRequestTopic", name="t", partitions=(
                                  part(28, 3, "TxnOffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                                       committed_leader_epoch=-1, committed_metadata=""),)),)), "topics", "partitions")
    assert txn_commit() == [E.transactional_id_authorization_failed]
    grant(st, RT.TRANSACTIONAL_ID, "tx", O.WRITE)
    assert txn_commit() == [E.group_authorization_failed]
    grant(st, RT.GROUP, "g", O.READ)
    assert txn_commit() == [E.topic_authorization_failed]


def test_describe_list_and_delete_groups(b):
    st = b.state
    grant(st, RT.GROUP, "*", O.READ, principal=ADMIN)
    for g in ("g1", "g2"):
        call(st, 8, 8, ADMIN, group_id=g, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
             topics=(part(8, 8, "OffsetCommitRequestTopic", name="t", partitions=(
                 part(8, 8, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                      committed_leader_epoch=-1, committed_metadata=""),)),))
    grant(st, RT.GROUP, "g1", O.DESCRIBE)
    listed = call(st, 16, 4, states_filter=()).groups
    assert [g.group_id for g in listed] == ["g1"]
    assert sorted(g.group_id for g in call(st, 16, 4, ADMIN, states_filter=()).groups) == ["g1", "g2"]
    described = call(st, 15, 5, groups=("g1", "g2"), include_authorized_operations=True).groups
    assert [(g.group_id, g.error_code) for g in described] == [("g1", E.none), ("g2", E.group_authorization_failed)]
    assert described[0].authorized_operations == 1 << 8
    assert described[1].authorized_operations == OPERATIONS_NOT_REQUESTED
    deleted = call(st, 42, 2, groups_names=("g1",)).results
    assert [(r.group_id, r.error_code) for r in deleted] == [("g1", E.group_authorization_failed)]
    grant(st, RT.GROUP, "g1", O.DELETE)
    assert call(st, 42, 2, groups_names=("g1",)).results[0].error_code == E.none


def test_offset_delete_needs_delete_on_the_group_then_read_on_the_topic(b):
    st = b.state

    def offset_delete():
        return call(st, 47, 0, group_id="g", topics=(
            part(47, 0, "OffsetDeleteRequestTopic", name="t", partitions=(
                part(47, 0, "OffsetDeleteRequestPartition", partition_index=0),)),))
    assert offset_delete().error_code == E.group_authorization_failed
    grant(st, RT.GROUP, "g", O.DELETE)
    r = offset_delete()
    assert (r.error_code, codes(r, "topics", "partitions")) == (E.none, [E.topic_authorization_failed])


# -- transactions ---------------------------------------------------------------------------------------------

def test_transaction_apis_need_write_on_the_transactional_id(b):
    st = b.state
    add = call(st, 24, 3, v3_and_below_transactional_id="tx", v3_and_below_producer_id=1,
               v3_and_below_producer_epoch=0,
               v3_and_below_topics=(part(24, 3, "AddPartitionsToTxnTopic", name="t", partitions=(0, 1)),))
    assert codes(add, "results_by_topic_v3_and_below", "results_by_partition", "partition_error_code") == \
        [E.transactional_id_authorization_failed] * 2
    offsets = call(st, 25, 3, transactional_id="tx", producer_id=1, producer_epoch=0, group_id="g")
    assert offsets.error_code == E.transactional_id_authorization_failed
    end = call(st, 26, 3, transactional_id="tx", producer_id=1, producer_epoch=0, committed=True)
    assert end.error_code == E.transactional_id_authorization_failed
    grant(st, RT.TRANSACTIONAL_ID, "tx", O.WRITE)
    grant(st, RT.TOPIC, "t", O.WRITE)
    add = call(st, 24, 3, v3_and_below_transactional_id="tx", v3_and_below_producer_id=1,
               v3_and_below_producer_epoch=0,
               v3_and_below_topics=(part(24, 3, "AddPartitionsToTxnTopic", name="t", partitions=(0,)),
                                    part(24, 3, "AddPartitionsToTxnTopic", name="secret", partitions=(0,))))
    assert codes(add, "results_by_topic_v3_and_below", "results_by_partition", "partition_error_code") == \
        [E.operation_not_attempted, E.topic_authorization_failed]
    offsets = call(st, 25, 3, transactional_id="tx", producer_id=1, producer_epoch=0, group_id="g")
    assert offsets.error_code == E.group_authorization_failed


def test_write_txn_markers_needs_cluster_action_or_alter(b):
    st = b.state

    def markers(principal=ALICE):
        return codes(call(st, 27, 1, principal, markers=(part(27, 1, "WritableTxnMarker", producer_id=1, producer_epoch=0,
                                                               transaction_result=False, coordinator_epoch=0, topics=(
            part(27, 1, "WritableTxnMarkerTopic", name="t", partition_indexes=(0,)),)),)).markers[0], "topics",
                     "partitions")
    assert markers() == [E.cluster_authorization_failed]
    grant(st, RT.CLUSTER, "kafka-cluster", O.CLUSTER_ACTION)
    assert markers() != [E.cluster_authorization_failed]


def test_describe_and_list_transactions_need_describe(b):
    st = b.state
    grant(st, RT.TRANSACTIONAL_ID, "tx", O.WRITE, principal=ADMIN)
    assert init(st, "tx", ADMIN) == E.none
    r = call(st, 65, 0, transactional_ids=("tx",))
    assert r.transaction_states[0].error_code == E.transactional_id_authorization_failed
    assert call(st, 66, 1, state_filters=(), producer_id_filters=(), duration_filter=-1).transaction_states == ()
    assert [s.transactional_id for s in call(st, 66, 1, ADMIN, state_filters=(), producer_id_filters=(),
                                             duration_filter=-1).transaction_states] == ["tx"]
    grant(st, RT.TRANSACTIONAL_ID, "tx", O.DESCRIBE)
    assert call(st, 65, 0, transactional_ids=("tx",)).transaction_states[0].error_code == E.none


# -- without an authorizer every question is answered yes -------------------------------------------------

def test_no_authorizer_allows_everything(b):
    st = b.state
    st.authorizer = None
    assert codes(produce(st, [("secret", 0, batch())])) == [E.none]
    assert init(st) == E.none
    assert sorted(t.name for t in metadata(st, None).topics) == ["orders.eu", "secret", "t"]


def test_client_host_decides_host_acls(b):
    st = b.state
    grant(st, RT.TOPIC, "t", O.WRITE, host="10.0.0.1")
    assert codes(produce(st, [("t", 0, batch())])) == [E.topic_authorization_failed]
    token = CLIENT_HOST.set("/10.0.0.1")
    try:
        assert codes(produce(st, [("t", 0, batch())])) == [E.none]
    finally:
        CLIENT_HOST.reset(token)


def test_only_authentication_makes_a_principal():
    """A client id naming a principal is just a client id: the principal is what the transport
    authenticated, User:ANONYMOUS where it authenticated nobody."""
    from compactlog.server.authorizer import auth_helper
    r = Request(0, 9, 7, "User:alice/producer-1", None, None, 0, 9, True)
    assert auth_helper.principal_of(r) == "User:ANONYMOUS"
    assert auth_helper.principal_of(Request(0, 9, 7, "User:admin", None, None, 0, 9, True)) == "User:ANONYMOUS"
    authenticated = AuthRequest(0, 9, 7, "User:admin", None, None, 0, 9, True)
    authenticated.principal = "User:bob"
    assert auth_helper.principal_of(authenticated) == "User:bob"

