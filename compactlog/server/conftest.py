"""Helpers for the server unit tests: the captured client requests, two API tables, a fake
transaction coordinator, and a serving broker state (the ``state`` fixture of server/'s tests)
with builders of the data-plane requests (Produce, Fetch)."""

from __future__ import annotations

import dataclasses
import datetime
import os
import struct
import time

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map

from compactlog.record import compression
from compactlog.record.batch import BatchSpec, encode_batch
from compactlog.server.apis.produce import handle_produce
from compactlog.server.dispatch import BROKER_APIS, GROUP_APIS, advertised_apis, dispatch_table
from compactlog.server.messages import build, nested
from compactlog.server.protocol import Request
from compactlog.server.state import BrokerState, Listener, ProducerIdManager, load_identity
from compactlog.server.versions import SupportedApis, request_schema
from compactlog.storage.config import BrokerConfig
from compactlog.storage.datadir import DataDir

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURES_DIR = os.path.join(REPO, "tests", "data", "wire-captures")


def _capture_key(name: str) -> tuple[int, int]:
    key, version = name.split("_")
    return int(key), int(version)


CAPTURE_NAMES = sorted((f[:-len(".bin")] for f in os.listdir(CAPTURES_DIR) if f.endswith(".bin")),
                       key=_capture_key)


def capture(name: str) -> bytes:
    """One captured request, as it followed the size prefix on the wire."""
    with open(os.path.join(CAPTURES_DIR, name + ".bin"), "rb") as f:
        return f.read()


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def with_key_version(payload: bytes, api_key: int, api_version: int) -> bytes:
    return struct.pack(">hh", api_key, api_version) + payload[4:]


def _kio_maxima(ranges) -> SupportedApis:
    return SupportedApis(dataclasses.replace(r, max_version=max(schema_name_map[api_key_map[r.key]]))
                         for r in ranges)


ALL_APIS = SupportedApis(BROKER_APIS + GROUP_APIS)
"""The advertised table of wire-protocol.md §2.1 with the group APIs."""

KIO_MAX_APIS = _kio_maxima(BROKER_APIS + GROUP_APIS)
"""Every API of §2.1 up to kio's maximum version: all 39 captures are accepted."""


class FakeTransactions:
    """``state.transactions`` with the one method Produce and TxnOffsetCommit call
    (``verify_partition``): partitions added per transactional id, or one forced answer; every
    question is recorded."""

    def __init__(self):
        self.txns: dict[str, tuple[int, int, set]] = {}
        self.answer: ErrorCode | None = None
        self.calls: list[tuple] = []
        self.before_answer = None       # run inside the call: a marker racing the append

    def add(self, tid, pid, epoch, *partitions):
        self.txns[tid] = (pid, epoch, set(partitions))

    def verify_partition(self, transactional_id, producer_id, producer_epoch, topic, partition):
        self.calls.append((transactional_id, producer_id, producer_epoch, topic, partition))
        if self.before_answer is not None:
            self.before_answer()
        if self.answer is not None:
            return self.answer
        txn = self.txns.get(transactional_id)
        if txn is None or txn[0] != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if txn[1] != producer_epoch:
            return ErrorCode.producer_fenced
        return ErrorCode.none if (topic, partition) in txn[2] else ErrorCode.transaction_abortable


# -- a serving broker state and the data-plane requests -------------------------------------------

@pytest.fixture
def state(tmp_path):
    """A broker state over a fresh data dir as ``compactlog serve`` builds it: its own node id and
    cluster id, producer ids, every API advertised (the admin APIs' tests use
    ``apis/conftest.py``'s ``make_state``: a fixed node, cluster and clock)."""
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
