"""The sans-IO protocol core on real client frames (tests/data/wire-captures) and made-up ones:
decoding, framing across reads, the close rules of Kafka's SocketServer, ApiVersions answers."""

from __future__ import annotations

import dataclasses
import datetime
import io
import os
import struct
import uuid
import warnings

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

with warnings.catch_warnings():                   # kafka-python loads its schemas deprecatedly
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        from kafka.protocol.metadata.api_versions import (
            ApiVersionsResponse as KafkaPythonApiVersions)
    except ImportError:                           # kafka-python < 3 lays its protocol out otherwise
        KafkaPythonApiVersions = None

from compactlog.server.conftest import (ALL_APIS, CAPTURE_NAMES, KIO_MAX_APIS, capture, framed,
                                        with_key_version)
from compactlog.server.protocol import (NEED_DATA, RECEIVE_BUFFER_BYTES, Close, Connection, EncodedResponse,
                                        FileRegion, Request, encode_response)
from compactlog.server.dispatch import BROKER, BROKER_APIS, TXN_APIS
from compactlog.server.versions import SupportedApis
from compactlog.server.messages import build, nested
from compactlog.server.versions import request_schema, response_schema


def decode_one(payload: bytes, apis=KIO_MAX_APIS, **kw):
    conn = Connection(apis, **kw)
    conn.receive_data(framed(payload))
    event = conn.next_event()
    if isinstance(event, Request):
        assert conn.next_event() is NEED_DATA
    return event


def encode_request(header, body) -> bytes:
    out = io.BytesIO()
    entity_writer(type(header))(out, header)
    entity_writer(type(body))(out, body)
    return out.getvalue()


def records_counts(request: Request) -> list[int]:
    """RecordsCount of the single batch of each partition (bytes 57..61 of a v2 batch)."""
    out = []
    for _, _, records in request.produce_records():
        assert struct.unpack_from(">i", records, 8)[0] + 12 == len(records)   # one whole batch
        assert records[16] == 2                                                # magic
        out.append(struct.unpack_from(">i", records, 57)[0])
    return out


def offsets(topic) -> list[tuple[int, int]]:
    return [(p.partition_index, p.committed_offset) for p in topic.partitions]


S = datetime.timedelta(seconds=1)
AIO_MEMBER = "aiokafka-0.14.0-011460d8-1231-42a8-9655-a6a2f0b38a84"
KP_MEMBER = "kafka-python-3.0.12-5ca15d16-489b-42bd-b2ce-e04cfb248503"
RD_MEMBER = "rdkafka-67b0cb2b-f80b-4bd3-9a2b-fa39b16cdf60"

# name: (correlation id, client id, check of the body against the captures' README)
EXPECTED = {
    "0_7": (3, "aiokafka-producer-1", lambda b, r: (
        b.acks == 1 and b.timeout == 40 * S and b.transactional_id is None
        and [(t, p) for t, p, _ in r.produce_records()]
        == [("aio-a3d451", 2), ("aio-a3d451", 0), ("aio-a3d451", 1)]
        and records_counts(r) == [20, 10, 20])),
    "0_9": (3, "kafka-python-producer-1", lambda b, r: (
        b.acks == 1 and b.timeout == 30 * S
        and [(t, p) for t, p, _ in r.produce_records()]
        == [("kp-79005f", 0), ("kp-79005f", 1), ("kp-79005f", 2)]
        and records_counts(r) == [10, 20, 20])),
    "0_10": (2, "rdkafka", lambda b, r: (
        b.acks == 1 and b.timeout == 30 * S
        and [(t, p) for t, p, _ in r.produce_records()] == [("compacted-e210e3", 1)]
        and records_counts(r) == [15])),
    "1_11": (4, "aiokafka-0.14.0", lambda b, r: (
        b.max_wait == datetime.timedelta(milliseconds=500) and b.min_bytes == 1
        and b.max_bytes == 52428800 and b.isolation_level == 0
        and (b.session_id, b.session_epoch) == (0, -1)
        and b.topics[0].topic == "aio-a3d451"
        and [(p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch)
             for p in b.topics[0].partitions]
        == [(1, 0, 1048576, -1), (2, 0, 1048576, -1), (0, 0, 1048576, -1)])),
    "1_12": (4, "kafka-python-3.0.12", lambda b, r: (
        (b.session_id, b.session_epoch) == (0, 0) and b.isolation_level == 0
        and b.topics[0].topic == "kp-79005f"
        and [(p.partition, p.last_fetched_epoch) for p in b.topics[0].partitions]
        == [(0, -1), (1, -1), (2, -1)])),
    "1_16": (7, "rdkafka", lambda b, r: (
        b.topics[0].topic_id == uuid.UUID("19977646-e0c4-44d6-a701-d2e8f6f419d5")
        and [p.partition for p in b.topics[0].partitions] == [1, 2]
        and all(p.current_leader_epoch == 0 for p in b.topics[0].partitions)
        and b.isolation_level == 1
        and (b.replica_state.replica_id, b.replica_state.replica_epoch) == (-1, -1))),
    "2_3": (3, "aiokafka-0.14.0", lambda b, r: (
        b.isolation_level == 0 and b.topics[0].name == "aio-a3d451"
        and [(p.partition_index, p.timestamp) for p in b.topics[0].partitions]
        == [(0, -2), (1, -2), (2, -2)])),
    "2_7": (4, "rdkafka", lambda b, r: (
        b.isolation_level == 1 and b.topics[0].name == "compacted-e210e3"
        and [(p.partition_index, p.timestamp, p.current_leader_epoch)
             for p in b.topics[0].partitions] == [(2, -2, -1)])),
    "2_11": (3, "kafka-python-3.0.12", lambda b, r: (
        b.isolation_level == 0 and b.timeout == datetime.timedelta(0)
        and b.topics[0].name == "kp-79005f"
        and [p.timestamp for p in b.topics[0].partitions] == [-2, -2, -2])),
    "3_5": (2, "aiokafka-0.14.0", lambda b, r: (
        b.topics == () and b.allow_auto_topic_creation is True)),
    "3_13": (2, "kafka-python-3.0.12", lambda b, r: (
        b.topics == () and b.allow_auto_topic_creation is True
        and b.include_topic_authorized_operations is False)),
    "8_3": (7, "aiokafka-0.14.0", lambda b, r: (
        b.group_id == "aiog-43095e" and b.generation_id_or_member_epoch == 1
        and b.member_id == AIO_MEMBER and b.retention_time == datetime.timedelta(milliseconds=-1)
        and b.topics[0].name == "aio-a3d451" and offsets(b.topics[0]) == [(0, 30), (1, 60), (2, 60)]
        and all(p.committed_metadata == "" for p in b.topics[0].partitions))),
    "8_8": (5, "kafka-python-3.0.12", lambda b, r: (
        b.group_id == "kpg-855bf8" and b.member_id == KP_MEMBER
        and offsets(b.topics[0]) == [(2, 60), (0, 30), (1, 60)]
        and all(p.committed_leader_epoch == 0 for p in b.topics[0].partitions))),
    "8_9": (8, "rdkafka", lambda b, r: (
        b.group_id == "g-5a220e" and b.member_id == RD_MEMBER
        and b.topics[0].name == "compacted-e210e3"
        and offsets(b.topics[0]) == [(0, 60), (1, 45), (2, 45)])),
    "9_3": (4, "aiokafka-0.14.0", lambda b, r: (
        b.group_id == "aiog-43095e" and b.topics[0].name == "aio-a3d451"
        and b.topics[0].partition_indexes == (0,))),
    "9_8": (4, "kafka-python-3.0.12", lambda b, r: (
        [g.group_id for g in b.groups] == ["kpg-855bf8"] and b.require_stable is False
        and b.groups[0].topics[0].name == "kp-79005f"
        and b.groups[0].topics[0].partition_indexes == (0, 1, 2))),
    "9_9": (7, "rdkafka", lambda b, r: (
        b.groups[0].group_id == "g-5a220e" and b.groups[0].member_id is None
        and b.groups[0].member_epoch == -1 and b.require_stable is True
        and b.groups[0].topics[0].partition_indexes == (0, 1, 2))),
    "10_1": (3, "aiokafka-0.14.0", lambda b, r: b.key == "aiog-43095e" and b.key_type == 0),
    "10_2": (3, "rdkafka", lambda b, r: b.key == "unused" and b.key_type == 0),
    "10_6": (2, "kafka-python-3.0.12", lambda b, r: (
        b.coordinator_keys == ("kpg-855bf8",) and b.key_type == 0)),
    "11_5": (2, "aiokafka-0.14.0", lambda b, r: (
        b.group_id == "aiog-43095e" and b.session_timeout == 10 * S
        and b.rebalance_timeout == 10 * S and b.member_id == "" and b.protocol_type == "consumer"
        and [p.name for p in b.protocols] == ["roundrobin"]
        and b"aio-a3d451" in b.protocols[0].metadata)),
    "11_7": (2, "kafka-python-3.0.12", lambda b, r: (
        b.group_id == "kpg-855bf8" and b.session_timeout == 10 * S
        and b.rebalance_timeout == 300 * S and b.member_id == ""
        and [p.name for p in b.protocols] == ["range", "roundrobin"])),
    "12_3": (6, "rdkafka", lambda b, r: (
        b.group_id == "g-5a220e" and b.generation_id == 1 and b.member_id == RD_MEMBER
        and b.group_instance_id is None)),
    "13_1": (8, "aiokafka-0.14.0", lambda b, r: (
        b.group_id == "aiog-43095e" and b.member_id == AIO_MEMBER)),
    "13_5": (6, "kafka-python-3.0.12", lambda b, r: (
        b.group_id == "kpg-855bf8" and [m.member_id for m in b.members] == [KP_MEMBER]
        and b.members[0].group_instance_id is None and b.members[0].reason is None)),
    "14_3": (3, "aiokafka-0.14.0", lambda b, r: (
        b.group_id == "aiog-43095e" and b.generation_id == 1 and len(b.assignments) == 1
        and b"aio-a3d451" in b.assignments[0].assignment)),
    "14_5": (3, "kafka-python-3.0.12", lambda b, r: (
        b.protocol_type == "consumer" and b.protocol_name == "range" and len(b.assignments) == 1
        and b"kp-79005f" in b.assignments[0].assignment)),
    "18_0": (1, "aiokafka-0.14.0", lambda b, r: True),
    "18_3": (1, "rdkafka", lambda b, r: (
        b.client_software_name == "confluent-kafka-python"
        and b.client_software_version == "2.16.1-rdkafka-2.16.0")),
    "18_4": (1, "kafka-python-3.0.12", lambda b, r: (
        b.client_software_name == "kafka-python" and b.client_software_version == "3.0.12")),
    "19_3": (2, "aiokafka-0.14.0", lambda b, r: (
        [(t.name, t.num_partitions, t.replication_factor) for t in b.topics] == [("aio-a3d451", 3, 1)]
        and [(c.name, c.value) for c in b.topics[0].configs] == [("cleanup.policy", "compact")]
        and b.timeout == 40 * S)),
    "19_4": (3, "rdkafka", lambda b, r: (
        [(t.name, t.num_partitions, t.replication_factor) for t in b.topics]
        == [("compacted-e210e3", 3, 1)]
        and [(c.name, c.value) for c in b.topics[0].configs]
        == [("cleanup.policy", "compact"), ("min.cleanable.dirty.ratio", "0.1")]
        and b.timeout == 60 * S)),
    "19_7": (3, "kafka-python-3.0.12", lambda b, r: (
        [(t.name, t.num_partitions, t.replication_factor) for t in b.topics] == [("kp-79005f", 3, 1)]
        and b.timeout == 10 * S and b.validate_only is False)),
    "22_0": (2, "aiokafka-producer-3", lambda b, r: (
        b.transactional_id is None
        and b.transaction_timeout == datetime.timedelta(milliseconds=2147483647))),
    "22_4": (2, "kafka-python-producer-3", lambda b, r: (
        b.transactional_id is None and b.transaction_timeout == datetime.timedelta(0)
        and (b.producer_id, b.producer_epoch) == (-1, -1))),
    "32_1": (5, "rdkafka", lambda b, r: (
        [(x.resource_type, x.resource_name, x.configuration_keys) for x in b.resources]
        == [(2, "compacted-e210e3", None)] and b.include_synonyms is True)),
    "32_2": (3, "aiokafka-0.14.0", lambda b, r: (
        b.resources[0].resource_name == "aio-a3d451" and b.include_synonyms is False)),
    "32_4": (4, "kafka-python-3.0.12", lambda b, r: (
        b.resources[0].resource_name == "kp-79005f" and b.include_synonyms is False
        and b.include_documentation is False)),
    "44_1": (6, "kafka-python-3.0.12", lambda b, r: (
        b.resources[0].resource_name == "kp-79005f" and b.validate_only is False
        and [(c.name, c.config_operation, c.value) for c in b.resources[0].configs]
        == [("cleanup.policy", 0, "compact"), ("delete.retention.ms", 0, "1000")])),
}


def test_all_captures_are_covered():
    assert sorted(EXPECTED) == sorted(CAPTURE_NAMES) and len(CAPTURE_NAMES) == 39


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_capture_decodes_and_reencodes(name):
    payload = capture(name)
    key, version = map(int, name.split("_"))
    event = decode_one(payload)
    assert isinstance(event, Request), event
    correlation_id, client_id, check = EXPECTED[name]
    assert (event.api_key, event.api_version, event.response_version) == (key, version, version)
    assert (event.correlation_id, event.client_id) == (correlation_id, client_id)
    assert (event.header.request_api_key, event.header.request_api_version) == (key, version)
    assert type(event.body) is request_schema(key, version)
    assert event.frame_size == len(payload)
    assert event.expects_response
    assert check(event.body, event), event.body
    assert encode_request(event.header, event.body) == payload


# Versions above the §2.1 caps: clients never send them to a broker advertising the caps.
# (OffsetFetch v8 and FindCoordinator v4, the batched forms, are advertised with the groups, and
# OffsetCommit/OffsetFetch v9, the member epochs of KIP-848, too.)
ABOVE_CAPS = {"1_16", "2_11", "3_13", "10_6", "13_5"}


@pytest.mark.parametrize("name", CAPTURE_NAMES)
def test_capture_under_the_advertised_table(name):
    event = decode_one(capture(name), ALL_APIS)
    if name in ABOVE_CAPS:
        assert isinstance(event, Close)
        assert "enabled versions are" in event.reason
    else:
        assert isinstance(event, Request)


def test_group_apis_are_closed_until_enabled():
    event = decode_one(capture("11_5"), BROKER)
    assert isinstance(event, Close)
    assert "JoinGroup" in event.reason and "does not enable" in event.reason
    assert isinstance(decode_one(capture("11_5"), ALL_APIS), Request)


def test_produce_records_are_the_batches_as_sent():
    event = decode_one(capture("0_9"))
    (topic, partition, records), *_ = event.produce_records()
    assert (topic, partition) == ("kp-79005f", 0)
    payload = capture("0_9")
    assert type(records) is bytes and payload.find(records) > 0
    with pytest.raises(TypeError):
        next(decode_one(capture("3_5")).produce_records())


def test_produce_with_acks_0_expects_no_response():
    event = decode_one(capture("0_9"))
    body = dataclasses.replace(event.body, acks=0)
    silent = decode_one(encode_request(event.header, body))
    assert isinstance(silent, Request) and silent.body.acks == 0
    assert silent.expects_response is False
    response = response_schema(0, 9)(responses=(), throttle_time=datetime.timedelta(0))
    with pytest.raises(ValueError, match="acks=0"):
        encode_response(silent, response)
    for acks in (1, -1):
        loud = decode_one(encode_request(event.header, dataclasses.replace(event.body, acks=acks)))
        assert loud.expects_response is True


@pytest.mark.parametrize("version", [0, 1, 2])
def test_produce_below_v3_closes_although_advertised(version):
    event = decode_one(with_key_version(capture("0_7"), 0, version), BROKER)
    assert isinstance(event, Close)
    assert f"Produce v{version}" in event.reason and "KAFKA-18659" in event.reason
    advertised = {k.api_key: (k.min_version, k.max_version)
                  for k in BROKER.api_versions_response(3, _software("a", "1")).api_keys}
    assert advertised[0] == (0, 12)


@pytest.mark.parametrize("key,version", [(1, 3), (1, 13), (3, 13), (2, 0), (19, 1), (60, 2)])
def test_version_outside_the_enabled_range_closes(key, version):
    event = decode_one(with_key_version(capture("3_5"), key, version), BROKER)
    assert isinstance(event, Close) and "enabled versions are" in event.reason


@pytest.mark.parametrize("key", [-1, 99, 1000, 32767])
def test_unknown_api_key_closes(key):
    event = decode_one(with_key_version(capture("3_5"), key, 0))
    assert isinstance(event, Close) and f"unknown API key {key}" in event.reason


def test_known_but_not_enabled_api_closes():
    event = decode_one(with_key_version(capture("3_5"), 24, 3))       # AddPartitionsToTxn
    assert isinstance(event, Close)
    assert "AddPartitionsToTxn" in event.reason and "does not enable" in event.reason


# --- framing -----------------------------------------------------------------------------------

def _stream(names) -> bytes:
    return b"".join(framed(capture(n)) for n in names)


def _drain(conn: Connection) -> list:
    events = []
    while (event := conn.next_event()) is not NEED_DATA:
        events.append(event)
        if isinstance(event, Close):
            break
    return events


def _summary(events) -> list:
    return [(e.api_key, e.api_version, e.correlation_id, e.frame_size) for e in events]


def test_one_byte_at_a_time():
    names = CAPTURE_NAMES
    conn = Connection(KIO_MAX_APIS)
    events = []
    for b in _stream(names):
        conn.receive_data(bytes([b]))
        events += _drain(conn)
    assert _summary(events) == [(*map(int, n.split("_")), EXPECTED[n][0], len(capture(n)))
                                for n in names]
    assert conn.buffered == 0


def test_many_frames_in_one_read():
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(_stream(CAPTURE_NAMES) + framed(capture("0_9"))[:100])
    events = _drain(conn)
    assert len(events) == 39 and all(isinstance(e, Request) for e in events)
    assert conn.next_event() is NEED_DATA and conn.buffered == 100
    conn.receive_data(framed(capture("0_9"))[100:])
    (last,) = _drain(conn)
    assert last.api_key == 0 and conn.buffered == 0


@pytest.mark.parametrize("name", ["0_10", "18_3", "1_12"])
def test_every_split_point(name):
    data = _stream([name, "3_5"])
    for cut in range(len(data) + 1):
        conn = Connection(KIO_MAX_APIS)
        conn.receive_data(data[:cut])
        first = _drain(conn)
        conn.receive_data(data[cut:])
        events = first + _drain(conn)
        assert [e.api_key for e in events] == [int(name.split("_")[0]), 3], cut


def test_any_bytes_like_input_is_accepted_and_copied():
    data = bytearray(_stream(["0_10", "3_5"]))
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(data[:10])
    conn.receive_data(memoryview(data)[10:])
    data[:] = b"\xff" * len(data)            # the caller may reuse its buffer
    events = _drain(conn)
    assert [e.api_key for e in events] == [0, 3]
    assert records_counts(events[0]) == [15]


def _feed_buffered(conn, data: bytes, sizes) -> list:
    """``data`` through get_buffer/buffer_updated, reads of the given sizes in turn (as asyncio's
    BufferedProtocol transports write them), draining events after each read."""
    events, pos, i = [], 0, 0
    while pos < len(data):
        room = conn.get_buffer(-1)
        n = min(sizes[i % len(sizes)], len(room), len(data) - pos)
        room[:n] = data[pos:pos + n]
        room.release()
        conn.buffer_updated(n)
        pos, i = pos + n, i + 1
        events += _drain(conn)
    return events


@pytest.mark.parametrize("sizes", [[1], [7, 300, 5000], [16384], [1 << 20]])
def test_buffered_reads_give_the_same_requests(sizes):
    data = _stream(CAPTURE_NAMES) * 3
    conn = Connection(KIO_MAX_APIS)
    events = _feed_buffered(conn, data, sizes)
    assert _summary(events) == _summary(_drain(_fed(data)))
    assert conn.buffered == 0 and len(events) == 3 * len(CAPTURE_NAMES)


def _fed(data: bytes) -> Connection:
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(data)
    return conn


def test_buffered_large_frame_grows_the_buffer_towards_it():
    # a 3 MB Produce: the buffer doubles with what has arrived, up to the frame, and is reused
    payload = capture("0_9")
    big = payload + b"\0" * (3_000_000 - len(payload))     # trailing bytes are ignored, as Kafka
    data = framed(big) * 2 + framed(capture("3_5"))
    conn = Connection(KIO_MAX_APIS)
    seen = []
    events, pos = [], 0
    while pos < len(data):
        room = conn.get_buffer(-1)
        seen.append(len(room) + conn.buffered)
        n = min(len(room), len(data) - pos)
        room[:n] = data[pos:pos + n]
        room.release()
        conn.buffer_updated(n)
        pos += n
        events += _drain(conn)
    assert [e.api_key for e in events] == [0, 0, 3]
    assert max(seen) <= 2 * (len(big) + 4)
    assert len(seen) < 20                       # large reads, not 64 KiB ones
    conn.release_buffer()
    assert conn.get_buffer(-1).nbytes == RECEIVE_BUFFER_BYTES      # a fresh buffer of the first size


def test_buffered_size_above_max_closes_without_growing():
    conn = Connection(KIO_MAX_APIS, max_request_size=1000)
    room = conn.get_buffer(-1)
    room[:4] = struct.pack(">i", 50_000_000)
    room.release()
    conn.buffer_updated(4)
    assert conn.get_buffer(-1).nbytes == RECEIVE_BUFFER_BYTES - 4     # no room made for the claimed frame
    event = conn.next_event()
    assert isinstance(event, Close) and "socket.request.max.bytes" in event.reason


def test_a_decoded_request_keeps_nothing_of_the_reused_buffer():
    # the next read overwrites the buffer a request was decoded from: its fields are copies
    payload = capture("0_9")
    conn = Connection(KIO_MAX_APIS)
    (request,) = _feed_buffered(conn, framed(payload), [1 << 20])
    expected = decode_one(payload)
    records = [r for _, _, r in request.produce_records()]
    room = conn.get_buffer(-1)                  # the same memory, from its start again
    room[:] = b"\xff" * len(room)
    room.release()
    conn.buffer_updated(len(framed(payload)))   # a garbage "frame" over the old one
    assert [r for _, _, r in request.produce_records()] == records
    assert records == [r for _, _, r in expected.produce_records()] and all(type(r) is bytes for r in records)
    assert (request.correlation_id, request.client_id, request.body) == \
        (expected.correlation_id, expected.client_id, expected.body)
    assert records_counts(request) == records_counts(expected)


def test_small_requests_keep_the_first_buffer():
    conn = Connection(KIO_MAX_APIS)
    data = b"".join(framed(capture("3_5")) for _ in range(2000))
    events = _feed_buffered(conn, data, [1000, 50_000, 70_000, 3])
    assert len(events) == 2000 and conn.buffered == 0
    assert len(conn._buffer) == RECEIVE_BUFFER_BYTES        # partial frames moved, never grown


@pytest.mark.slow          # 3 MB of pipelined requests, every one decoded: 2 s of CPU
def test_unread_pipelined_requests_grow_the_buffer_by_doubling():
    # a busy connection reads on (up to the transport's pause): a few doublings, not a new
    # buffer and a copy of everything per read
    frame = framed(capture("3_5"))
    data = frame * (3_000_000 // len(frame))
    conn = Connection(KIO_MAX_APIS)
    sizes, pos = [], 0
    while pos < len(data):
        room = conn.get_buffer(-1)
        n = min(len(room), 65536, len(data) - pos)
        room[:n] = data[pos:pos + n]
        room.release()
        conn.buffer_updated(n)
        pos += n
        if not sizes or sizes[-1] != len(conn._buffer):
            sizes.append(len(conn._buffer))
    assert len(sizes) <= 8 and sizes[-1] < 2 * len(data), sizes
    events = _drain(conn)
    assert len(events) == len(data) // len(frame) and conn.buffered == 0


def test_buffered_frame_above_the_pre_authentication_limit_grows_nothing():
    # a SASL listener before authentication: its limit, not socket.request.max.bytes, bounds growth
    conn = Connection(KIO_MAX_APIS)
    conn.limit_frames(524288, "sasl.server.max.receive.size")
    room = conn.get_buffer(-1)
    room[:4 + 60_000] = struct.pack(">i", 600_000) + b"\0" * 60_000
    room.release()
    conn.buffer_updated(4 + 60_000)
    assert len(conn.get_buffer(-1)) + conn.buffered == RECEIVE_BUFFER_BYTES * 2     # doubled, not 600 KB
    event = conn.next_event()
    assert isinstance(event, Close) and event.oversized and "sasl.server.max.receive.size" in event.reason


def test_release_buffer_keeps_a_partial_frame():
    data = framed(capture("3_5"))
    conn = Connection(KIO_MAX_APIS)
    _feed_buffered(conn, data[:10], [10])
    conn.release_buffer()                       # something is pending: kept
    assert conn.buffered == 10
    conn.receive_data(data[10:])                # receive_data goes through the buffer too
    (event,) = _drain(conn)
    assert event.api_key == 3 and conn.buffered == 0


def test_trailing_bytes_after_the_body_are_ignored_like_kafka():
    event = decode_one(capture("3_5") + b"\x00\x01\x02")
    assert isinstance(event, Request) and event.frame_size == len(capture("3_5")) + 3


def test_null_client_id_reads_as_empty():
    payload = capture("18_0")
    header_end = 8 + 2 + struct.unpack_from(">h", payload, 8)[0]
    event = decode_one(payload[:8] + b"\xff\xff" + payload[header_end:])
    assert isinstance(event, Request) and event.client_id == "" and event.header.client_id is None


# --- close rules -------------------------------------------------------------------------------

def test_size_above_max_closes_before_the_body_arrives():
    conn = Connection(KIO_MAX_APIS, max_request_size=1000)
    conn.receive_data(struct.pack(">i", 1001))
    event = conn.next_event()
    assert isinstance(event, Close) and "1001" in event.reason and "socket.request.max.bytes" in event.reason
    conn = Connection(KIO_MAX_APIS, max_request_size=len(capture("0_9")))
    conn.receive_data(framed(capture("0_9")))
    assert isinstance(conn.next_event(), Request)


def test_default_max_request_size():
    conn = Connection()
    conn.receive_data(struct.pack(">i", 104857600))
    assert conn.next_event() is NEED_DATA
    conn = Connection()
    conn.receive_data(struct.pack(">i", 104857601))
    assert isinstance(conn.next_event(), Close)


@pytest.mark.parametrize("size", [-1, -2147483648])
def test_negative_size_closes(size):
    conn = Connection()
    conn.receive_data(struct.pack(">i", size) + b"\x00" * 20)
    event = conn.next_event()
    assert isinstance(event, Close) and "negative" in event.reason


@pytest.mark.parametrize("payload", [b"", b"\x00", b"\x00\x03\x00"])
def test_frame_too_short_for_a_header_closes(payload):
    event = decode_one(payload)
    assert isinstance(event, Close) and "too short" in event.reason


def test_truncated_header_closes():
    event = decode_one(capture("3_5")[:12])
    assert isinstance(event, Close) and "header" in event.reason


@pytest.mark.parametrize("name", ["0_9", "1_11", "19_4", "44_1"])
def test_truncated_body_closes(name):
    payload = capture(name)
    for cut in (len(payload) - 1, len(payload) // 2, 40):
        event = decode_one(payload[:cut])
        assert isinstance(event, Close), cut
        assert "malformed" in event.reason


def test_huge_array_counts_close_instead_of_aborting():
    # kio would reserve memory for the declared count first; the scan refuses it.
    legacy = capture("19_3")                       # CreateTopics v3: topics is an int32 array
    header_end = 8 + 2 + struct.unpack_from(">h", legacy, 8)[0]
    for count in (2147483647, 1 << 24, 1000):
        forged = legacy[:header_end] + struct.pack(">i", count) + legacy[header_end + 4:]
        event = decode_one(forged)
        assert isinstance(event, Close) and "declares" in event.reason, count
    compact = capture("19_7")                      # CreateTopics v7: compact array
    header_end = 8 + 2 + struct.unpack_from(">h", compact, 8)[0] + 1
    forged = compact[:header_end] + b"\xff\xff\xff\xff\x7f" + compact[header_end + 1:]
    event = decode_one(forged)
    assert isinstance(event, Close) and "declares 34359738366 elements" in event.reason


def test_closed_stays_closed():
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(framed(capture("3_5")) + struct.pack(">i", -5) + framed(capture("3_5")))
    assert isinstance(conn.next_event(), Request)
    close = conn.next_event()
    assert isinstance(close, Close) and conn.closed is close
    conn.receive_data(framed(capture("0_9")))
    assert conn.next_event() is close and conn.next_event() is close


# --- responses ---------------------------------------------------------------------------------

def _software(name, version):
    return request_schema(18, 3)(client_software_name=name, client_software_version=version)


def _api_versions_request(version: int) -> bytes:
    """An ApiVersions request of any version, from the v0 and v4 captures."""
    if version >= 3:
        return with_key_version(capture("18_4"), 18, version)
    return with_key_version(capture("18_0"), 18, version)


def _parse_response(frame: bytes, key: int, version: int):
    size, correlation_id = struct.unpack_from(">ii", frame, 0)
    assert size == len(frame) - 4
    cls = response_schema(key, version)
    offset = 8 if cls.__header_schema__.__version__ == 0 else 9
    body, used = entity_reader(cls)(frame, offset)
    assert offset + used == len(frame)
    return correlation_id, body


@pytest.mark.filterwarnings("ignore::DeprecationWarning")     # kafka-python's schema loading
@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_api_versions_answer(version):
    request = decode_one(_api_versions_request(version), ALL_APIS)
    assert isinstance(request, Request) and request.response_version == version
    body = ALL_APIS.api_versions_response(version, request.body)
    frame = encode_response(request, body)
    correlation_id, parsed = _parse_response(frame, 18, version)    # response header v0 always
    assert correlation_id == request.correlation_id
    assert parsed.error_code == ErrorCode.none
    table = [(a.api_key, a.min_version, a.max_version) for a in parsed.api_keys]
    assert table == [(r.key, r.min_version, r.max_version) for r in ALL_APIS]
    assert (0, 0, 12) in table and (1, 4, 12) in table and (18, 0, 4) in table
    if version >= 1:
        assert parsed.throttle_time == datetime.timedelta(0)
    if KafkaPythonApiVersions is not None:       # an independent reader: a client's own
        theirs = KafkaPythonApiVersions.decode(frame, version=version, header=True, framed=True)
        assert theirs.error_code == 0 and len(theirs.api_keys) == len(table)


@pytest.mark.parametrize("version", [5, 99, 32767, -1])
def test_api_versions_of_an_unknown_version_gets_a_v0_unsupported_answer(version):
    payload = _api_versions_request(version)
    garbage_body = payload + b"\xde\xad"             # the body of an unknown version is not read
    for p in (payload, garbage_body):
        request = decode_one(p, ALL_APIS)
        assert isinstance(request, Request)
        assert (request.api_version, request.response_version) == (version, 0)
        frame = encode_response(request, ALL_APIS.api_versions_response(version, request.body))
        assert frame == (struct.pack(">ii", 16, request.correlation_id)
                         + bytes.fromhex("0023" "00000001" "0012" "0000" "0004"))


@pytest.mark.parametrize("name,version,ok", [
    ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", True),
    ("kafka-python", "3.0.12", True), ("a", "1", True), ("a.b", "1.0", True),
    ("-kafka", "1", False), ("kafka-", "1", False), ("kafka_python", "1", False),
    ("kafka python", "1", False), ("", "1", False), ("kafka", "", False), ("kafka", "1.0\n", False),
])
def test_api_versions_v3_checks_the_client_software(name, version, ok):
    request = decode_one(encode_request(decode_one(capture("18_4")).header,
                                        request_schema(18, 4)(client_software_name=name,
                                                              client_software_version=version)),
                         ALL_APIS)
    body = ALL_APIS.api_versions_response(4, request.body)
    _, parsed = _parse_response(encode_response(request, body), 18, 4)
    if ok:
        assert parsed.error_code == ErrorCode.none and parsed.api_keys
    else:
        assert parsed.error_code == ErrorCode.invalid_request and parsed.api_keys == ()


def test_flexible_responses_use_header_v1():
    request = decode_one(capture("3_13"))
    body = response_schema(3, 13)(throttle_time=datetime.timedelta(0), brokers=(), cluster_id="c",
                                  controller_id=1, topics=(), error_code=ErrorCode.none)
    frame = encode_response(request, body)
    assert frame[8] == 0                            # the response header's empty tag section
    correlation_id, parsed = _parse_response(frame, 3, 13)
    assert correlation_id == 2 and parsed == body
    old = decode_one(capture("3_5"))
    frame = encode_response(old, response_schema(3, 5)(
        throttle_time=datetime.timedelta(0), brokers=(), cluster_id="c", controller_id=1, topics=()))
    assert _parse_response(frame, 3, 5)[0] == 2


def test_response_of_the_wrong_api_or_version_is_refused():
    request = decode_one(capture("3_5"))
    wrong_version = response_schema(3, 6)(throttle_time=datetime.timedelta(0), brokers=(),
                                          cluster_id="c", controller_id=1, topics=())
    with pytest.raises(ValueError, match="Metadata v5"):
        encode_response(request, wrong_version)
    with pytest.raises(ValueError):
        encode_response(request, request.body)              # a request, not a response
    with pytest.raises(ValueError):
        encode_response(request, BROKER.api_versions_response(0, None))
    request = decode_one(capture("18_0"), BROKER)
    answer = BROKER.api_versions_response(0, None)
    assert Connection().encode_response(request, answer) == encode_response(request, answer)


# --- the output: Connection.send -----------------------------------------------------------------

def _produce_answer(version, *codes):
    """A Produce answer for topic "t", partition i refused with codes[i]."""
    cls = response_schema(0, version)
    t_cls, p_cls = nested(cls, "TopicProduceResponse"), nested(cls, "PartitionProduceResponse")
    parts = tuple(build(p_cls, index=i, error_code=c, base_offset=-1, log_append_time=None,
                        log_start_offset=-1, record_errors=(), error_message=None) for i, c in enumerate(codes))
    return build(cls, responses=(build(t_cls, name="t", partition_responses=parts),),
                 throttle_time=datetime.timedelta(0))


def _acks(event, conn, acks):
    conn.receive_data(framed(encode_request(event.header, dataclasses.replace(event.body, acks=acks))))
    return conn.next_event()


def test_send_encodes_an_answer_as_one_part():
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(framed(capture("18_3")))
    request = conn.next_event()
    answer = KIO_MAX_APIS.api_versions_response(3, request.body)
    out = conn.send(request, answer)
    assert isinstance(out, EncodedResponse) and out.parts == [encode_response(request, answer)]
    assert out.size == len(out.parts[0])


def test_send_passes_an_encoded_response_through(tmp_path):
    conn = Connection(KIO_MAX_APIS)
    conn.receive_data(framed(capture("0_9")))
    request = conn.next_event()
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 10)
    region = FileRegion(os.open(path, os.O_RDONLY), 2, 5)
    framed_parts = EncodedResponse([bytearray(b"head"), region], 9)
    assert conn.send(request, framed_parts) is framed_parts
    assert region.read() == b"xxxxx"
    framed_parts.close()
    assert region.fd == -1


def test_send_with_acks_0_sends_nothing_or_closes():
    event = decode_one(capture("0_9"))
    conn = Connection(KIO_MAX_APIS)
    silent = _acks(event, conn, 0)
    assert conn.send(silent, _produce_answer(9, ErrorCode.none, ErrorCode.none)) is None
    silent = _acks(event, conn, 0)
    out = conn.send(silent, _produce_answer(9, ErrorCode.none, ErrorCode.invalid_record))
    assert isinstance(out, Close)
    assert out.reason == (f"Closing connection due to error during produce request with correlation id "
                          f"{silent.correlation_id} from client id {silent.client_id} with ack=0: "
                          f"t-1 -> INVALID_RECORD")
    assert conn.next_event() is out            # the connection is closed for good


def test_without_an_api_table_only_framing_applies():
    conn = Connection()
    conn.receive_data(framed(capture("18_3")))
    event = conn.next_event()
    assert isinstance(event, Close) and "does not enable" in event.reason


@pytest.mark.parametrize("key,version", [(26, 3), (26, 0), (24, 3), (24, 0)])
def test_a_cached_response_body_is_kios_encoding_under_each_requests_header(key, version):
    """The broker keeps the bytes of bodies it answered (``protocol._body_bytes``): each frame is
    still kio's own header and body for its request, correlation ids never shared."""
    from compactlog.server import protocol
    from compactlog.server.apis.transactions import _add_partitions_response
    from compactlog.server.messages import NO_THROTTLE
    cls = response_schema(key, version)
    if key == 26:
        body = build(cls, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, producer_id=5, producer_epoch=0)
    else:
        body = _add_partitions_response(cls, {"t": [0, 1]}, lambda tp: ErrorCode.none)
    header_cls = cls.__header_schema__
    frames = []
    for correlation_id in (7, 123456, 7):
        request = Request(key, version, correlation_id, "c", None, None, 0, version, True)
        frame = encode_response(request, body)
        out = io.BytesIO()
        out.write(b"\0\0\0\0")
        entity_writer(header_cls)(out, header_cls(correlation_id=correlation_id))
        entity_writer(cls)(out, body)
        expected = bytearray(out.getvalue())
        struct.pack_into(">i", expected, 0, len(expected) - 4)
        assert frame == bytes(expected)
        frames.append(frame)
    assert frames[0] == frames[2] != frames[1]
    assert protocol._RESPONSES.get(body) is not None


def _with_correlation_id(payload: bytes, correlation_id: int) -> bytes:
    return payload[:4] + struct.pack(">i", correlation_id) + payload[8:]


def _transaction_requests() -> dict[str, bytes]:
    """A transactional producer's AddPartitionsToTxn v0 and EndTxn v1 (librdkafka's versions),
    and AddPartitionsToTxn v3 (flexible), written by kio's writer as a client frames them."""
    add0, add3, end1 = request_schema(24, 0), request_schema(24, 3), request_schema(26, 1)
    bodies = {
        "24_0": build(add0, v3_and_below_transactional_id="bench", v3_and_below_producer_id=4000,
                      v3_and_below_producer_epoch=2, v3_and_below_topics=(
                          build(nested(add0, "AddPartitionsToTxnTopic"), name="t", partitions=(0, 3)),)),
        "24_3": build(add3, v3_and_below_transactional_id="bench", v3_and_below_producer_id=4000,
                      v3_and_below_producer_epoch=2, v3_and_below_topics=(
                          build(nested(add3, "AddPartitionsToTxnTopic"), name="t", partitions=(1,)),)),
        "26_1": build(end1, transactional_id="bench", producer_id=4000, producer_epoch=2, committed=True),
    }
    out = {}
    for name, body in bodies.items():
        key, version = map(int, name.split("_"))
        header_cls = type(body).__header_schema__
        out[name] = encode_request(build(header_cls, request_api_key=key, request_api_version=version,
                                         correlation_id=1, client_id="rdkafka"), body)
    return out


TRANSACTION_REQUESTS = _transaction_requests()
TXN_TABLE = SupportedApis(BROKER_APIS + TXN_APIS)         # with the transaction APIs as the broker advertises them


@pytest.mark.parametrize("name", CAPTURE_NAMES + sorted(TRANSACTION_REQUESTS))
def test_a_repeated_body_is_the_entity_read_the_first_time(name):
    """The same body bytes under a new header (a producer's AddPartitionsToTxn and EndTxn every
    transaction): the request carries the entity read before, equal to kio's reading of it, and
    its own header; other APIs' bodies are read every time."""
    payload = TRANSACTION_REQUESTS.get(name) or capture(name)
    apis = TXN_TABLE if name in TRANSACTION_REQUESTS else KIO_MAX_APIS
    conn = Connection(apis)
    conn.receive_data(framed(_with_correlation_id(payload, 7001)) + framed(_with_correlation_id(payload, 7002)))
    first, again = conn.next_event(), conn.next_event()
    assert (first.correlation_id, again.correlation_id) == (7001, 7002)
    assert again.body == first.body == decode_one(payload, apis).body
    assert (again.body is first.body) == (first.api_key in (24, 26))
    assert encode_request(again.header, again.body) == _with_correlation_id(payload, 7002)


def test_a_body_kept_is_never_one_that_failed():
    # the same malformed EndTxn body closes each connection it comes on; the good one after it is read
    good = TRANSACTION_REQUESTS["26_1"]
    for bad in (good[:-1], good[:-3]):
        for _ in range(2):
            event = decode_one(bad, TXN_TABLE)
            assert isinstance(event, Close) and "malformed" in event.reason
    assert isinstance(decode_one(good, TXN_TABLE), Request)
    # a body one byte different (another producer epoch) is a body of its own
    other = bytearray(good)
    other[-2] ^= 1
    a, b = decode_one(good, TXN_TABLE), decode_one(bytes(other), TXN_TABLE)
    assert b.body is not a.body and b.body.producer_epoch != a.body.producer_epoch


# -- unknown tagged fields (wire-protocol.md §1.3: readers skip unknown tags) ---------------------

def _header_v2(key: int, version: int, correlation_id: int = 5, tags: bytes = b"\0") -> bytes:
    return struct.pack(">hhih", key, version, correlation_id, 6) + b"client" + tags


def _metadata_v12_body(topic_tags: bytes = b"\0", body_tags: bytes = b"\0") -> bytes:
    # topics [ {topic_id (16 zero bytes), name "t", tags} ], allow auto creation, no operations
    topic = bytes(16) + b"\x02t" + topic_tags
    return b"\x02" + topic + b"\x01\x00" + body_tags


@pytest.mark.parametrize("header_tags, topic_tags, body_tags", [
    (b"\x01\x09\x01z", b"\0", b"\0"),                               # one in the header
    (b"\0", b"\x01\x07\x02ab", b"\0"),                              # one in an array element
    (b"\0", b"\0", b"\x02\x03\x00\x7f\x83\x01" + bytes(131)),      # two at the end, one of 131 bytes
    (b"\x01\x00\x00", b"\x01\x07\x00", b"\x01\x07\x00"),          # empty ones everywhere
])
def test_unknown_tagged_fields_are_skipped(header_tags, topic_tags, body_tags):
    """Kafka's generated readers keep an unknown tag's bytes aside (readUnknownTaggedField) and
    read on: the request is the one without them, answered as usual."""
    plain = decode_one(_header_v2(3, 12) + _metadata_v12_body())
    assert isinstance(plain, Request)
    event = decode_one(_header_v2(3, 12, tags=header_tags) + _metadata_v12_body(topic_tags, body_tags))
    assert isinstance(event, Request), event
    assert (event.api_key, event.api_version, event.correlation_id, event.client_id) == (3, 12, 5, "client")
    assert event.body == plain.body


def test_unknown_tagged_fields_beside_known_ones():
    """Fetch v12's top-level section knows tag 0 (cluster_id): an unknown tag 5 after it is
    skipped, tag 0 is read."""
    cls = request_schema(1, 12)
    body = cls(replica_id=-1, max_wait=datetime.timedelta(milliseconds=100), min_bytes=1, max_bytes=1000,
               isolation_level=0, session_id=0, session_epoch=-1, topics=(), forgotten_topics_data=(),
               rack_id="", cluster_id="c1")
    out = io.BytesIO()
    entity_writer(cls)(out, body)
    encoded = out.getvalue()
    assert encoded.endswith(b"\x01\x00\x03\x03c1")               # tag 0, 3 bytes: "c1" compact
    mixed = encoded[:-6] + b"\x02\x00\x03\x03c1\x05\x04wxyz"
    event = decode_one(_header_v2(1, 12) + mixed)
    assert isinstance(event, Request), event
    assert event.body == body


@pytest.mark.parametrize("tags", [
    b"\x01\x07\x05ab",          # the field's size runs past the end of the frame
    b"\x02\x07\x01a",           # a second field announced but missing
    b"\x01\x07",                # no size
])
def test_a_malformed_unknown_tagged_field_still_closes(tags):
    event = decode_one(_header_v2(3, 12) + _metadata_v12_body(body_tags=tags))
    assert isinstance(event, Close), event
    # in the header, of a frame that ends there (a body after it would be read as the field's)
    event = decode_one(_header_v2(3, 12, tags=tags))
    assert isinstance(event, Close), event


def test_an_unknown_api_versions_version_with_header_tags_is_answered():
    """An ApiVersions of a version above the broker's, from a client whose header v2 carries a
    tagged field: RequestHeader.parse skips the tag, so Kafka answers it (v0, UNSUPPORTED_VERSION)."""
    event = decode_one(_header_v2(18, 99, tags=b"\x01\x03\x02hi") + b"\x00")
    assert isinstance(event, Request), event
    assert (event.api_version, event.response_version, event.correlation_id, event.client_id) == \
        (99, 0, 5, "client")


FLEXIBLE_CAPTURES = [n for n in CAPTURE_NAMES if request_schema(*map(int, n.split("_"))).__flexible__]


@pytest.mark.parametrize("name", FLEXIBLE_CAPTURES)
def test_captures_with_unknown_tags_read_as_without(name):
    """Every flexible capture, with an unknown tagged field in its header and another in its
    body's top-level section (the body's last byte, an empty section in every capture), reads
    as the capture itself."""
    payload = capture(name)
    plain = decode_one(payload)
    assert isinstance(plain, Request) and payload.endswith(b"\0")
    client_id = struct.unpack_from(">h", payload, 8)[0]
    section = 10 + max(client_id, 0)
    assert payload[section] == 0
    tagged = (payload[:section] + b"\x01\x21\x02xy" + payload[section + 1:-1]
              + b"\x02\x40\x01z\x41\x00")
    event = decode_one(tagged)
    assert isinstance(event, Request), event
    assert (event.header, event.body) == (plain.header, plain.body)


# -- lengths below -1 (Kafka's generated readers: any negative length of a nullable field is null) --

def test_a_nullable_field_with_a_length_below_minus_one_reads_as_null():
    # Metadata v4: the topics array (nullable from v1) with count -7: null, every topic
    event = decode_one(struct.pack(">hhih", 3, 4, 9, 1) + b"c" + struct.pack(">i", -7) + b"\x01")
    assert isinstance(event, Request), event
    assert event.body.topics is None and event.body.allow_auto_topic_creation
    # Produce v3: transactional_id (a nullable string) of length -2, acks 1, no topics
    event = decode_one(struct.pack(">hhih", 0, 3, 9, 1) + b"c" + struct.pack(">hhii", -2, 1, 1000, 0))
    assert isinstance(event, Request), event
    assert (event.body.transactional_id, event.body.acks, event.body.topic_data) == (None, 1, ())
    # the header's client_id (a nullable string) of length -3: null, read as ""
    event = decode_one(struct.pack(">hhih", 3, 4, 9, -3) + struct.pack(">i", -1) + b"\x01")
    assert isinstance(event, Request), event
    assert (event.correlation_id, event.client_id) == (9, "")


def test_a_non_nullable_field_with_a_negative_length_still_closes():
    # a topic name (not nullable) of length -2: Kafka throws "non-nullable field ... was serialized as null"
    payload = struct.pack(">hhih", 3, 4, 9, 1) + b"c" + struct.pack(">ih", 1, -2) + b"\x01"
    assert isinstance(decode_one(payload), Close)
