"""DescribeProducers (61) through its handler: each partition's producers as the producer state
holds them, Kafka's errors for illegal names, unknown topics and unknown partitions."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.server.apis.describe_producers import handle_describe_producers
from compactlog.server.dispatch import dispatch_table, error_response
from compactlog.server.conftest import batch, produce, request
from compactlog.server.messages import build, nested
from compactlog.server.protocol import encode_response
from compactlog.server.versions import request_schema


def describe(state, topics):
    cls = request_schema(61, 0)
    t_cls = nested(cls, "TopicRequest")
    body = build(cls, topics=tuple(build(t_cls, name=n, partition_indexes=tuple(ps)) for n, ps in topics))
    req = request(61, 0, body)
    resp = handle_describe_producers(state, req)
    encode_response(req, resp)
    return resp


def test_active_producers_of_each_partition(state):
    state.create_topic("t", 2)
    produce(state, [("t", 0, batch([b"a", b"b"], pid=4, epoch=1, seq=0))])
    lg = state.log("t", 0)
    lg.append_records([b"x"], [b"y"], producer_id=9, producer_epoch=2, base_sequence=0, transactional=True)
    lg.append_control(commit=False, producer_id=5, producer_epoch=0, coordinator_epoch=3, timestamp=1234)
    resp = describe(state, [("t", [0, 1, 7]), ("nope", [0]), ("bad name", [0])])
    t, nope, bad = resp.topics
    p0, p1, p7 = t.partitions
    assert (p0.error_code, p1.error_code, p1.active_producers) == (ErrorCode.none, ErrorCode.none, ())
    got = [(p.producer_id, p.producer_epoch, p.last_sequence, p.coordinator_epoch, p.current_txn_start_offset)
           for p in p0.active_producers]
    assert got == [(4, 1, 1, -1, -1), (5, 0, -1, 3, -1), (9, 2, 0, -1, 2)]
    assert p0.active_producers[1].last_timestamp == 1234
    assert (p7.error_code, p7.error_message) == (ErrorCode.unknown_topic_or_partition, None)
    assert nope.partitions[0].error_code == ErrorCode.unknown_topic_or_partition
    assert bad.partitions[0].error_code == ErrorCode.invalid_topic_exception
    assert "Topic name is invalid" in bad.partitions[0].error_message


def test_declared_with_its_error_response(state):
    assert dispatch_table()[61].handler is handle_describe_producers and 61 in state.apis
    cls = request_schema(61, 0)
    body = build(cls, topics=(build(nested(cls, "TopicRequest"), name="t", partition_indexes=(0, 1)),))
    resp = error_response(request(61, 0, body), ErrorCode.unknown_server_error, "boom")
    assert [p.error_code for p in resp.topics[0].partitions] == [ErrorCode.unknown_server_error] * 2
