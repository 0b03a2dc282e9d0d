"""Control records: transaction markers (COMMIT/ABORT) and the other control types: their keys and
marker values (a marker batch is built by ``batch.encode_marker``)."""

from __future__ import annotations

import struct
from typing import NamedTuple

from ..errors import CorruptRecordError

ABORT, COMMIT = 0, 1
CONTROL_TYPE_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LEADER_CHANGE", 3: "SNAPSHOT_HEADER",
                      4: "SNAPSHOT_FOOTER", 5: "KRAFT_VERSION", 6: "KRAFT_VOTERS"}
UNKNOWN = -1

_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


class ControlKey(NamedTuple):
    version: int
    type: int

    @property
    def name(self) -> str:
        return CONTROL_TYPE_NAMES.get(self.type, "UNKNOWN")


def parse_control_key(key: bytes | None) -> ControlKey:
    """Version and type of a control record key; newer versions are read by their first fields."""
    if key is None or len(key) < 4:
        raise CorruptRecordError(f"control record key of {0 if key is None else len(key)} bytes, need 4",
                                 field="key")
    version, ctype = _KEY.unpack_from(key, 0)
    if version < 0:
        raise CorruptRecordError(f"negative control record key version {version}", field="key")
    return ControlKey(version, ctype if ctype in CONTROL_TYPE_NAMES else UNKNOWN)


def control_key(ctype: int) -> bytes:
    return _KEY.pack(0, ctype)


def marker_value(coordinator_epoch: int) -> bytes:
    return _MARKER_VALUE.pack(0, coordinator_epoch)


def parse_marker_value(value: bytes | None) -> int:
    """The coordinator epoch of a COMMIT/ABORT marker."""
    if value is None or len(value) < 6:
        raise CorruptRecordError("transaction marker value shorter than 6 bytes", field="value")
    version, epoch = _MARKER_VALUE.unpack_from(value, 0)
    if version < 0:
        raise CorruptRecordError(f"negative transaction marker version {version}", field="value")
    return epoch
