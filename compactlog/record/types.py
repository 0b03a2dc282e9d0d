"""What a reader of records gets, whatever the batch format (v2 batches, legacy v0/v1 entries):
a record, its headers, and the format's "none" values and timestamp types. No I/O, no imports of
other record modules, so every codec module can share them without importing each other."""

from __future__ import annotations

from typing import NamedTuple

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

CREATE_TIME = 0
LOG_APPEND_TIME = 1
TIMESTAMP_TYPE_NAMES = {CREATE_TIME: "CreateTime", LOG_APPEND_TIME: "LogAppendTime"}


class Header(NamedTuple):
    key: str
    value: bytes | None


class Record(NamedTuple):
    """One record as a reader sees it (timestamps and offsets absolute)."""
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple = ()

    @property
    def is_tombstone(self) -> bool:
        return self.value is None
