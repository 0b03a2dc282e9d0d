"""Helpers for the server unit tests: the captured client requests and two API tables."""

from __future__ import annotations

import dataclasses
import os
import struct

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
