"""Storage failures on the wire: Kafka's code (KAFKA_STORAGE_ERROR for a data partition,
COORDINATOR_NOT_AVAILABLE for a coordinator), never a server path in a message. The failures are
injected (a full disk, an I/O error) into the handlers, which run without sockets."""

from __future__ import annotations

import errno
import os

from kio.schema.errors import ErrorCode

from compactlog.errors import StorageError, TopicError
from compactlog.server import wire_errors
from compactlog.server.apis.handler import THREAD, Api
from compactlog.server.apis.list_offsets import handle_list_offsets
from compactlog.server.apis.fetch import read_fetch
from compactlog.server.apis import groups_test as groups_handlers
from compactlog.server.apis.groups_test import call, req
from compactlog.server.conftest import batch, fetch_body, produce, request
from compactlog.server.messages import build, nested
from compactlog.server.versions import request_schema
from compactlog.storage import segment as segment_mod
from compactlog.storage.datadir import DataDir

group_state = groups_handlers.state       # the group coordinator's fixture


def enospc(path):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)


def test_scrub_keeps_names_inside_the_data_dir_and_drops_other_paths():
    d = "/srv/kafka/data"
    assert wire_errors.scrub(f"{d}/t-0/00000000000000000000.log: short write", d) == \
        "t-0/00000000000000000000.log: short write"
    assert wire_errors.scrub("cannot read '/etc/secret/x.json' (no)", d) == "cannot read 'x.json' (no)"
    assert wire_errors.scrub("offset 5 of t-0 is out of range", d) == "offset 5 of t-0 is out of range"


def test_codes_by_kind_of_failure():
    d = "/data"
    code, msg = wire_errors.partition_error(enospc("/data/t-0/x.log"), d)
    assert code == ErrorCode.kafka_storage_error and "No space left on device" in msg and "/" not in msg
    code, msg = wire_errors.coordinator_error(enospc("/data/__consumer_offsets-0/partition.metadata.tmp"), d)
    assert code == ErrorCode.coordinator_not_available and "/" not in msg
    assert wire_errors.partition_error(StorageError("/data/t-0/a.log: bad"), d) == \
        (ErrorCode.kafka_storage_error, "t-0/a.log: bad")
    assert wire_errors.partition_error(TopicError("no t"), d)[0] == ErrorCode.unknown_topic_or_partition
    assert wire_errors.request_error(enospc("/data/p"), True, d)[0] == ErrorCode.coordinator_not_available
    assert wire_errors.request_error(enospc("/data/p"), False, d)[0] == ErrorCode.kafka_storage_error
    code, msg = wire_errors.request_error(RuntimeError("a bug at /data/t-0"), False, d)
    assert code == ErrorCode.unknown_server_error and msg == "RuntimeError: a bug at t-0"


def test_find_coordinator_on_a_full_disk(group_state, monkeypatch):
    """The reproduction: FindCoordinator answered UNKNOWN_SERVER_ERROR with the server's path."""
    def full(self, topic, *a, **k):
        raise enospc(os.path.join(self.path, f"{topic}-0", "partition.metadata.tmp"))

    monkeypatch.setattr(DataDir, "create_topic", full)
    for version in (3, 4):
        fields = {"key": "g", "key_type": 0} if version < 4 else {"key_type": 0, "coordinator_keys": ("g",)}
        r = call(group_state, req(10, version, **fields))
        answer = r if version < 4 else r.coordinators[0]
        assert answer.error_code == ErrorCode.coordinator_not_available and answer.node_id == -1
        if version < 4:
            assert group_state.datadir.path not in answer.error_message and "/" not in answer.error_message
        else:       # handleFindCoordinatorRequestV4AndAbove sets no message on a key
            assert answer.error_message is None


def test_produce_on_a_full_disk_is_a_storage_error_of_that_partition(state, monkeypatch):  # noqa: F811
    state.create_topic("t", 2)
    real = segment_mod.FileRecords.append

    def append(self, data):
        if os.path.basename(os.path.dirname(self.path)) == "t-1":   # (not "pytest-1x" in the tmp path)
            raise enospc(self.path)
        return real(self, data)

    monkeypatch.setattr(segment_mod.FileRecords, "append", append)
    r0, r1 = produce(state, [("t", 0, batch([b"a"])), ("t", 1, batch([b"b"]))])
    assert (r0.error_code, r0.base_offset) == (ErrorCode.none, 0), r0.error_message
    assert r1.error_code == ErrorCode.kafka_storage_error and "/" not in r1.error_message
    assert state.log("t", 1).log_end_offset == 0


def test_a_log_that_cannot_be_opened_answers_storage_error(state, monkeypatch):  # noqa: F811
    state.create_topic("t", 1)
    state.datadir.logs.clear()          # as after a clean start: opened on first use

    def broken(*a, **k):
        raise StorageError(os.path.join(state.datadir.path, "t-0", "leader-epoch-checkpoint") + ": I/O error")

    monkeypatch.setattr(state.datadir, "open_log", broken)
    [r] = produce(state, [("t", 0, batch([b"a"]))])
    assert r.error_code == ErrorCode.kafka_storage_error and state.datadir.path not in r.error_message
    result = read_fetch(state, fetch_body("t", 0, 0), 12)
    assert result.topics[0][1][0].error == ErrorCode.kafka_storage_error
    cls = request_schema(2, 7)
    body = build(cls, replica_id=-1, isolation_level=0, topics=(build(
        nested(cls, "ListOffsetsTopic"), name="t", partitions=(build(
            nested(cls, "ListOffsetsPartition"), partition_index=0, timestamp=-1, current_leader_epoch=-1),)),))
    resp = handle_list_offsets(state, request(2, 7, body))
    assert resp.topics[0].partitions[0].error_code == ErrorCode.kafka_storage_error


def test_fetch_read_failure_fails_only_its_partition(state, monkeypatch):  # noqa: F811
    state.create_topic("t", 2)
    produce(state, [("t", 0, batch([b"a"])), ("t", 1, batch([b"b"]))])
    real = segment_mod.FileRecords.read

    def read(self, position, length):
        if os.path.basename(os.path.dirname(self.path)) == "t-1":   # (not "pytest-1x" in the tmp path)
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real(self, position, length)

    monkeypatch.setattr(segment_mod.FileRecords, "read", read)
    body = fetch_body("t", 0, 0)
    p_cls = nested(request_schema(1, 12), "FetchPartition")
    second = build(p_cls, partition=1, fetch_offset=0, partition_max_bytes=1 << 20, current_leader_epoch=-1,
                   log_start_offset=-1, last_fetched_epoch=-1)
    topic = body.topics[0]
    body = build(type(body), **{**{f: getattr(body, f) for f in body.__dataclass_fields__},
                                "topics": (build(type(topic), topic="t", partitions=(topic.partitions[0], second)),)})
    result = read_fetch(state, body, 12)
    try:
        reads = result.topics[0][1]
        assert reads[0].error == ErrorCode.none and len(reads[0].records)
        assert reads[1].error == ErrorCode.kafka_storage_error
    finally:
        result.close()


def test_transport_maps_an_uncaught_storage_failure(state):  # noqa: F811
    """An exception no handler caught: the transport answers with the API's error response."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from compactlog.server.dispatch import advertised_apis, dispatch_table
    from compactlog.server.state import Listener
    from compactlog.server.transport import BrokerServer
    from compactlog.server.transport_test import frame, read_response

    def full_disk(st, request):
        raise enospc(os.path.join(st.datadir.path, "t-0", "00000000000000000000.log"))

    table = dispatch_table()
    table[2] = Api(2, full_disk, THREAD)              # ListOffsets: a data API
    table[16] = Api(16, full_disk, THREAD)            # ListGroups: a coordinator's
    state.apis = advertised_apis(table)
    state.create_topic("t", 1)

    async def scenario():
        pool = ThreadPoolExecutor(2)
        server = BrokerServer(state, table, state.apis, pool, max_request_size=1 << 20, idle_ms=0)
        state.appends.bind(asyncio.get_running_loop())
        [(_, port)] = await server.start([Listener("PLAINTEXT", "127.0.0.1", 0)])
        r, w = await asyncio.open_connection("127.0.0.1", port)
        lo_cls = request_schema(2, 7)
        lo = build(lo_cls, replica_id=-1, isolation_level=0, topics=(build(
            nested(lo_cls, "ListOffsetsTopic"), name="t", partitions=(build(
                nested(lo_cls, "ListOffsetsPartition"), partition_index=0, timestamp=-1,
                current_leader_epoch=-1),)),))
        w.write(frame(2, 7, 1, lo))
        _, lo_answer = await read_response(r, 2, 7)
        w.write(frame(16, 4, 2, build(request_schema(16, 4), states_filter=())))
        _, lg_answer = await read_response(r, 16, 4)
        w.close()
        await server.stop(5)
        pool.shutdown()
        return lo_answer, lg_answer

    lo_answer, lg_answer = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert lo_answer.topics[0].partitions[0].error_code == ErrorCode.kafka_storage_error
    assert lg_answer.error_code == ErrorCode.coordinator_not_available
