"""Helpers for the server unit tests: the captured client requests, two API tables, and a fake
transaction coordinator."""

from __future__ import annotations

import dataclasses
import os
import struct

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map

from compactlog.server.dispatch import BROKER_APIS, GROUP_APIS
from compactlog.server.versions import SupportedApis

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
