"""ListOffsets (``apis/list_offsets.py``) through the handler: the latest, earliest and max-timestamp
specs per version, a timestamp's first offset, unknown partitions."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from compactlog.server.apis.list_offsets import handle_list_offsets
from compactlog.server.conftest import batch, produce, request
from compactlog.server.messages import build, nested
from compactlog.server.versions import request_schema


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


def test_an_unknown_isolation_level_is_unknown_server_error(state):
    """ListOffsetsRequest.isolationLevel() is IsolationLevel.forId, which throws for anything but
    0 and 1; KafkaApis answers the request's getErrorResponse: UNKNOWN_SERVER_ERROR everywhere."""
    state.create_topic("t", 1)
    produce(state, [("t", 0, batch([b"a"]))])
    for level in (2, -1):
        assert list_offsets(state, "t", 0, -1, isolation=level) == (ErrorCode.unknown_server_error, -1, -1)
    assert list_offsets(state, "t", 0, -1, isolation=1) == (ErrorCode.none, 1, -1)
