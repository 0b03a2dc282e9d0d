"""The data-plane handlers without sockets: Produce's checks in Kafka's order with Kafka's codes,
idempotent producers, Metadata (auto-creation, topic ids, internal topics), ListOffsets,
InitProducerId, Fetch reads and the error responses."""

from __future__ import annotations

import asyncio
import datetime
import os
import time
import uuid

import pytest
from kio.schema.errors import ErrorCode

from compactlog.record import compression
from compactlog.record.batch import BatchSpec, encode_batch
from compactlog.server.apis.fetch import handle_fetch, read_fetch
from compactlog.server.apis.init_producer_id import handle_init_producer_id
from compactlog.server.apis.list_offsets import handle_list_offsets
from compactlog.server.apis.metadata import handle_metadata
from compactlog.server.apis.produce import handle_produce
from compactlog.server.dispatch import advertised_apis, dispatch_table, error_response
from compactlog.server.messages import build, nested
from compactlog.server.protocol import FileRegion, Request, encode_response
from compactlog.server.state import BrokerState, Listener, ProducerIdManager, load_identity
from compactlog.server.versions import request_schema
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir


@pytest.fixture
def state(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({}), writable=True, command="test")
    node, cluster = load_identity(dd.path, None)
    st = BrokerState(dd, node, cluster, Listener("PLAINTEXT", "127.0.0.1", 9092),
                     producer_ids=ProducerIdManager(dd.path))
    st.apis = advertised_apis(dispatch_table())
    yield st
    dd.close()


def now_ms() -> int:
    return int(time.time() * 1000)


def batch(keys, *, pid=-1, epoch=-1, seq=-1, codec=compression.NONE, ts=None, base_offset=0,
          transactional=False) -> bytes:
    t = now_ms() if ts is None else ts
    spec = BatchSpec(base_offset=base_offset, compression=codec, producer_id=pid,
                     producer_epoch=epoch, base_sequence=seq, transactional=transactional)
    return encode_batch(spec, [(base_offset + i, t, k, b"v%d" % i) for i, k in enumerate(keys)])


def request(api_key: int, version: int, body, client_id: str = "test", expects: bool = True):
    return Request(api_key, version, 7, client_id, None, body, 0, version, expects)


def produce(state, parts, *, version=9, acks=-1, client_id="test", transactional_id=None):
    """parts: [(topic, partition, records)]; the kio response's partitions."""
    cls = request_schema(0, version)
    t_cls, p_cls = nested(cls, "TopicProduceData"), nested(cls, "PartitionProduceData")
    topics = {}
    for topic, partition, records in parts:
        topics.setdefault(topic, []).append(build(p_cls, index=partition, records=records))
    body = build(cls, transactional_id=transactional_id, acks=acks, timeout=datetime.timedelta(seconds=5),
                 topic_data=tuple(build(t_cls, name=t, partition_data=tuple(ps))
                                  for t, ps in topics.items()))
    resp = handle_produce(state, request(0, version, body, client_id, acks != 0))
    return [p for t in resp.responses for p in t.partition_responses]


def test_produce_appends_and_answers_base_offsets(state):
    state.create_topic("t", 2)
    [r] = produce(state, [("t", 0, batch([b"a", b"b"]))])
    assert (r.error_code, r.base_offset, r.log_start_offset) == (ErrorCode.none, 0, 0)
    [r] = produce(state, [("t", 0, batch([b"c"]))])
    assert r.base_offset == 2
    assert [x.key for x in state.log("t", 0).records()] == [b"a", b"b", b"c"]


def test_produce_checks_in_kafkas_order(state):
    state.create_topic("t", 1)
    state.create_topic("c", 1, {"cleanup.policy": "compact", "segment.bytes": "200"})
    good = batch([b"k"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    two = good + good
    magic1 = bytearray(good)
    magic1[16] = 1
    offset5 = batch([b"k"], base_offset=5)
    old = batch([b"k"], ts=now_ms() - 10**12)
    future = batch([b"k"], ts=now_ms() + 2 * 3600 * 1000)
    big = batch([b"k" * 300])
    rs = produce(state, [("nope", 0, good), ("t", 5, good), ("t", 0, b""), ("t", 0, two),
                         ("t", 0, bytes(magic1)), ("t", 0, offset5), ("t", 0, bytes(corrupt)),
                         ("c", 0, batch([b"k", None, b"j", None])), ("c", 0, big)])
    codes = [r.error_code for r in rs]
    assert codes == [ErrorCode.unknown_topic_or_partition, ErrorCode.unknown_topic_or_partition,
                     ErrorCode.invalid_record, ErrorCode.invalid_record, ErrorCode.invalid_record,
                     ErrorCode.invalid_record, ErrorCode.corrupt_message, ErrorCode.invalid_record,
                     ErrorCode.record_list_too_large]
    keyless = rs[7]
    why = "Compacted topic cannot accept message without key in topic partition c-0"
    assert [(e.batch_index, e.batch_index_error_message) for e in keyless.record_errors] == [(1, why), (3, why)]
    assert keyless.error_message == (      # Kafka's LogValidator.processRecordErrors, word for word
        f"One or more records have been rejected due to 2 record errors in total, and only showing "
        f"the first three errors at most: [RecordError(batchIndex=1, message='{why}'), "
        f"RecordError(batchIndex=3, message='{why}')]")
    assert state.log("t", 0).log_end_offset == 0 and state.log("c", 0).log_end_offset == 0
    # message.timestamp.after.max.ms (1 h since Kafka 4.0) is not the default here; a topic sets it
    state.datadir.alter_topic("t", {"message.timestamp.after.max.ms": "3600000",
                                    "message.timestamp.before.max.ms": "3600000"})
    rs = produce(state, [("t", 0, old), ("t", 0, future)])
    assert [r.error_code for r in rs] == [ErrorCode.invalid_timestamp] * 2
    assert rs[0].record_errors[0].batch_index == 0
    assert rs[0].record_errors[0].batch_index_error_message.startswith("Timestamp ")
    assert " of message with offset 0 is out of range. The timestamp should be within [" in \
        rs[0].record_errors[0].batch_index_error_message
    assert rs[0].error_message == "One or more records have been rejected due to invalid timestamp"


def test_produce_acks_internal_zstd_and_replicas(state):
    state.create_topic("t", 1)
    [r] = produce(state, [("t", 0, batch([b"k"]))], acks=2)
    assert r.error_code == ErrorCode.invalid_required_acks
    [r] = produce(state, [("t", 0, batch([b"k"], codec=compression.ZSTD))], version=6)
    assert r.error_code == ErrorCode.unsupported_compression_type
    [r] = produce(state, [("t", 0, batch([b"k"], codec=compression.ZSTD))], version=7)
    assert r.error_code == ErrorCode.none
    state.datadir.create_topic("__consumer_offsets", 1, {"cleanup.policy": "compact"})
    [r] = produce(state, [("__consumer_offsets", 0, batch([b"k"]))])
    assert r.error_code == ErrorCode.invalid_topic_exception
    [r] = produce(state, [("__consumer_offsets", 0, batch([b"k"]))], client_id="__admin_client")
    assert r.error_code == ErrorCode.none
    state.datadir.create_topic("isr", 1, {"min.insync.replicas": "2"})
    [r] = produce(state, [("isr", 0, batch([b"k"]))], acks=-1)
    assert r.error_code == ErrorCode.not_enough_replicas
    [r] = produce(state, [("isr", 0, batch([b"k"]))], acks=1)
    assert r.error_code == ErrorCode.none
    # a transactional batch without a transactional id (transactions.md §2.7 rule 1; before the
    # coordinator existed this was INVALID_TXN_STATE)
    [r] = produce(state, [("t", 0, batch([b"k"], pid=1, epoch=0, seq=0, transactional=True))])
    assert r.error_code == ErrorCode.transactional_id_authorization_failed


def test_idempotent_producer_sequences_epochs_and_duplicates(state):
    state.create_topic("t", 1)
    pid = state.producer_ids.allocate()
    b0, b1 = batch([b"a", b"b"], pid=pid, epoch=0, seq=0), batch([b"c"], pid=pid, epoch=0, seq=2)
    assert [r.base_offset for r in produce(state, [("t", 0, b0)])] == [0]
    assert [r.base_offset for r in produce(state, [("t", 0, b1)])] == [2]
    # a retry of either of the last 5 batches: its original offset, nothing appended
    for b, offset in ((b0, 0), (b1, 2)):
        [r] = produce(state, [("t", 0, b)])
        assert (r.error_code, r.base_offset) == (ErrorCode.none, offset)
    assert state.log("t", 0).log_end_offset == 3
    [r] = produce(state, [("t", 0, batch([b"d"], pid=pid, epoch=0, seq=7))])
    assert r.error_code == ErrorCode.out_of_order_sequence_number
    [r] = produce(state, [("t", 0, batch([b"d"], pid=pid, epoch=1, seq=3))])
    assert r.error_code == ErrorCode.out_of_order_sequence_number
    [r] = produce(state, [("t", 0, batch([b"d"], pid=pid, epoch=1, seq=0))])
    assert (r.error_code, r.base_offset) == (ErrorCode.none, 3)
    [r] = produce(state, [("t", 0, batch([b"e"], pid=pid, epoch=0, seq=3))])
    assert r.error_code == ErrorCode.invalid_producer_epoch


def test_init_producer_id(state, tmp_path):
    cls = request_schema(22, 4)

    def init(tid=None, pid=-1, epoch=-1):
        body = build(cls, transactional_id=tid, transaction_timeout=datetime.timedelta(seconds=60),
                     producer_id=pid, producer_epoch=epoch)
        return handle_init_producer_id(state, request(22, 4, body))

    a, b = init(), init(pid=5, epoch=3)
    assert (a.error_code, a.producer_epoch, b.producer_epoch) == (ErrorCode.none, 0, 0)
    assert b.producer_id == a.producer_id + 1
    assert init(pid=5).error_code == ErrorCode.invalid_request
    assert init(tid="").error_code == ErrorCode.invalid_request
    # a transactional id goes to the transaction coordinator (apis/transactions_test.py); none runs here
    assert init(tid="tx").error_code == ErrorCode.coordinator_not_available
    # ids are never handed out twice, across restarts too
    again = ProducerIdManager(state.datadir.path)
    assert again.allocate() > b.producer_id
    assert ProducerIdManager(state.datadir.path, highest_in_logs=5000).allocate() == 5001


def metadata(state, names, version=12, auto=True):
    cls = request_schema(3, version)
    t_cls = nested(cls, "MetadataRequestTopic")
    topics = None if names is None else tuple(build(t_cls, name=n, topic_id=None) for n in names)
    body = build(cls, topics=topics, allow_auto_topic_creation=auto,
                 include_topic_authorized_operations=False, include_cluster_authorized_operations=False)
    resp = handle_metadata(state, request(3, version, body))
    encode_response(request(3, version, body), resp)
    return resp


def test_metadata_auto_creates_and_keeps_topic_ids(state):
    resp = metadata(state, ["new", "bad name", "__consumer_offsets"])
    new, bad, internal = resp.topics
    assert (new.error_code, len(new.partitions), new.partitions[0].leader_id) == (ErrorCode.none, 1, 0)
    assert new.topic_id != uuid.UUID(int=0)
    assert bad.error_code == ErrorCode.invalid_topic_exception
    assert internal.error_code == ErrorCode.unknown_topic_or_partition
    assert metadata(state, ["new"]).topics[0].topic_id == new.topic_id
    assert metadata(state, ["other"], auto=False).topics[0].error_code == \
        ErrorCode.unknown_topic_or_partition
    assert [t.name for t in metadata(state, None).topics] == ["new"]
    assert metadata(state, [], version=1).topics == ()
    assert [t.name for t in metadata(state, [], version=0).topics] == ["new"]
    assert resp.brokers[0].port == 9092 and resp.cluster_id == state.cluster_id
    state.datadir.create_topic("__consumer_offsets", 2, {"cleanup.policy": "compact"})
    assert metadata(state, ["__consumer_offsets"]).topics[0].is_internal


def test_metadata_refuses_replication_factors_one_node_cannot_hold(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({"default.replication.factor": "3"}),
                 writable=True, command="test")
    st = BrokerState(dd, 0, "c", Listener("PLAINTEXT", "h", 1))
    try:
        assert metadata(st, ["x"]).topics[0].error_code == ErrorCode.invalid_replication_factor
        assert not dd.has_topic("x")
    finally:
        dd.close()



def test_metadata_refuses_a_broker_min_insync_replicas_one_node_cannot_meet(tmp_path):
    dd = DataDir(str(tmp_path), broker=BrokerConfig({"min.insync.replicas": "2"}),
                 writable=True, command="test")
    st = BrokerState(dd, 0, "c", Listener("PLAINTEXT", "h", 1))
    try:
        assert metadata(st, ["x"]).topics[0].error_code == ErrorCode.invalid_config
        assert not dd.has_topic("x")
        assert not any(n.startswith("x-") for n in os.listdir(dd.path))
    finally:
        dd.close()

def list_offsets(state, topic, partition, timestamp, version=7, isolation=0):
    cls = request_schema(2, version)
    t_cls, p_cls = nested(cls, "ListOffsetsTopic"), nested(cls, "ListOffsetsPartition")
    body = build(cls, replica_id=-1, isolation_level=isolation, topics=(build(
        t_cls, name=topic, partitions=(build(p_cls, partition_index=partition, timestamp=timestamp,
                                             current_leader_epoch=-1),)),))
    [t] = handle_list_offsets(state, request(2, version, body)).topics
    [p] = t.partitions
    return p.error_code, p.offset, p.timestamp


def test_list_offsets(state):
    state.create_topic("t", 1)
    base = 1_700_000_000_000
    for i in range(3):
        produce(state, [("t", 0, batch([b"a", b"b"], ts=base + 100 * i))])
    assert list_offsets(state, "t", 0, -1) == (ErrorCode.none, 6, -1)
    assert list_offsets(state, "t", 0, -2) == (ErrorCode.none, 0, -1)
    assert list_offsets(state, "t", 0, -3) == (ErrorCode.none, 4, base + 200)
    assert list_offsets(state, "t", 0, -3, version=6)[0] == ErrorCode.unsupported_version
    assert list_offsets(state, "t", 0, base + 50) == (ErrorCode.none, 2, base + 100)
    assert list_offsets(state, "t", 0, base + 10**6) == (ErrorCode.none, -1, -1)
    assert list_offsets(state, "t", 9, -1)[0] == ErrorCode.unknown_topic_or_partition


def fetch_body(topic, partition, offset, *, version=12, max_bytes=1 << 20, part_max=1 << 20,
               isolation=0, max_wait_ms=0, min_bytes=1):
    cls = request_schema(1, version)
    t_cls, p_cls = nested(cls, "FetchTopic"), nested(cls, "FetchPartition")
    return build(cls, replica_id=-1, max_wait=datetime.timedelta(milliseconds=max_wait_ms),
                 min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=isolation, session_id=0,
                 session_epoch=-1, forgotten_topics_data=(), rack_id="", cluster_id=None,
                 topics=(build(t_cls, topic=topic, partitions=(build(
                     p_cls, partition=partition, fetch_offset=offset, partition_max_bytes=part_max,
                     current_leader_epoch=-1, log_start_offset=-1, last_fetched_epoch=-1),)),))


def test_fetch_reads_whole_batches_within_limits(state):
    state.create_topic("t", 1)
    sizes = []
    for i in range(4):
        b = batch([b"k%d" % i] * 3)
        sizes.append(len(b))
        produce(state, [("t", 0, b)])
    r = read_fetch(state, fetch_body("t", 0, 4), 12)
    [(_, [p])] = r.topics
    assert (p.error, p.high_watermark, p.last_stable_offset) == (0, 12, 12)
    assert len(p.records) == sum(sizes[1:]) and p.aborted is None
    # the first partition gets one whole batch even over both limits
    r = read_fetch(state, fetch_body("t", 0, 0, max_bytes=10, part_max=10), 12)
    assert len(r.topics[0][1][0].records) == sizes[0]
    r = read_fetch(state, fetch_body("t", 0, 0), 12, zero_copy_min=1)
    region = r.topics[0][1][0].records
    assert isinstance(region, FileRegion) and region.count == sum(sizes)
    r.close()
    r = read_fetch(state, fetch_body("t", 0, 13), 12)
    assert r.topics[0][1][0].error == ErrorCode.offset_out_of_range.value and r.has_error
    r = read_fetch(state, fetch_body("t", 0, 0, isolation=1), 12)
    assert r.topics[0][1][0].aborted == []


def test_fetch_long_poll_wakes_on_append(state):
    state.create_topic("t", 1)

    async def scenario():
        state.appends.bind(asyncio.get_running_loop())
        run = lambda fn, *args: asyncio.get_running_loop().run_in_executor(None, fn, *args)  # noqa: E731
        body = fetch_body("t", 0, 0, max_wait_ms=5000)
        started = time.monotonic()
        task = asyncio.ensure_future(handle_fetch(state, request(1, 12, body), run))
        await asyncio.sleep(0.2)
        assert not task.done()
        await run(produce, state, [("t", 0, batch([b"k"]))])
        resp = await asyncio.wait_for(task, 3)
        assert time.monotonic() - started < 3
        return resp

    resp = asyncio.run(scenario())
    assert resp.size > 100


def test_error_responses_encode_for_every_api(state):
    table = dispatch_table()
    for api in state.apis:
        for version in range(api.accepted_min, api.max_version + 1):
            if api.key == 18:
                continue
            body = _sample_body(api.key, version)
            if body is None:
                continue
            resp = error_response(request(api.key, version, body), -1, "boom")
            assert resp is not None, (api.name, version)
            encode_response(request(api.key, version, body), resp)
    assert set(table) >= {0, 1, 2, 3, 18, 22}


def _sample_body(api_key, version):
    if api_key == 0:
        cls = request_schema(0, version)
        return build(cls, transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=1),
                     topic_data=(build(nested(cls, "TopicProduceData"), name="t", partition_data=(
                         build(nested(cls, "PartitionProduceData"), index=0, records=b""),)),))
    if api_key == 1:
        return fetch_body("t", 0, 0, version=version)
    if api_key == 3:
        cls = request_schema(3, version)
        return build(cls, topics=(build(nested(cls, "MetadataRequestTopic"), name="t", topic_id=None),))
    cls = request_schema(api_key, version)
    try:
        return build(cls)
    except TypeError:
        return None

