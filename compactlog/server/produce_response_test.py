"""The Produce answer's own writer against kio's, byte for byte, in every version the broker
answers, and the answers it leaves to kio."""

from __future__ import annotations

import datetime
import io

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from compactlog.server.apis.produce import PRODUCE
from compactlog.server.messages import NO_THROTTLE, build, nested
from compactlog.server.produce_response import encode_produce_response
from compactlog.server.versions import response_schema

VERSIONS = range(PRODUCE.accepted_min, PRODUCE.max_version + 1)      # 3 to 12
UTC = datetime.timezone.utc


def kio_bytes(body) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


def answer(version: int, topics, throttle=NO_THROTTLE, **partition_extra):
    cls = response_schema(0, version)
    t_cls, p_cls = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")
    return build(cls, throttle_time=throttle, responses=tuple(
        build(t_cls, name=name, partition_responses=tuple(
            build(p_cls, index=i, error_code=code, base_offset=offset, log_append_time=append_time,
                  log_start_offset=start, record_errors=(), error_message=message, **partition_extra)
            for i, code, offset, append_time, start, message in parts))
        for name, parts in topics))


CASES = [
    [],
    [("t", [(0, ErrorCode.none, 0, None, 0, None)])],
    [("orders", [(0, ErrorCode.none, 41, None, 3, None),
                 (7, ErrorCode.not_leader_or_follower, -1, None, -1, "not the leader")]),
     ("ünïcode-topic", [(2, ErrorCode.invalid_record, -1, None, -1, "ünïcode message " * 20)])],
    [("t", [(2**31 - 1, ErrorCode.none, 2**62, datetime.datetime(2026, 12, 7, 2, 40, 1, 123000, tzinfo=UTC),
             2**40, None)])],
    [("t" * 300, [(i, ErrorCode.none, i * 1000, None, 0, "" if i % 2 else None) for i in range(130)])],
]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", range(len(CASES)))
def test_same_bytes_as_kio(version, case):
    for throttle in (NO_THROTTLE, datetime.timedelta(milliseconds=1234)):
        body = answer(version, CASES[case], throttle)
        assert encode_produce_response(body) == kio_bytes(body)


@pytest.mark.parametrize("version", range(8, PRODUCE.max_version + 1))
def test_record_errors_are_left_to_kio(version):
    cls = response_schema(0, version)
    e_cls = nested(cls, "BatchIndexAndErrorMessage")
    body = answer(version, [("t", [(0, ErrorCode.invalid_record, -1, None, -1, "bad")])])
    p = body.responses[0].partition_responses[0]
    with_errors = build(cls, throttle_time=NO_THROTTLE, responses=(build(
        nested(cls, "TopicProduceResponse"), name="t", partition_responses=(build(
            nested(cls, "PartitionProduceResponse"), index=p.index, error_code=p.error_code, base_offset=-1,
            log_append_time=None, log_start_offset=-1, error_message="bad",
            record_errors=(build(e_cls, batch_index=0, batch_index_error_message="no key"),)),)),))
    assert encode_produce_response(with_errors) is None


@pytest.mark.parametrize("version", range(10, PRODUCE.max_version + 1))
def test_leader_hints_are_left_to_kio(version):
    cls = response_schema(0, version)
    leader = nested(cls, "LeaderIdAndEpoch")(leader_id=1, leader_epoch=3)
    assert encode_produce_response(answer(version, [("t", [(0, ErrorCode.not_leader_or_follower, -1, None, -1,
                                                             None)])], current_leader=leader)) is None
    endpoint = nested(cls, "NodeEndpoint")(node_id=1, host="h", port=9092, rack=None)
    body = build(cls, throttle_time=NO_THROTTLE, responses=(), node_endpoints=(endpoint,))
    assert encode_produce_response(body) is None
    assert kio_bytes(body)      # kio writes it


def test_a_layout_it_does_not_know_is_left_to_kio():
    """v13 names topics by id: not this writer's layout (the broker answers up to v12)."""
    cls = response_schema(0, 13)
    assert encode_produce_response(build(cls, throttle_time=NO_THROTTLE, responses=())) is None
