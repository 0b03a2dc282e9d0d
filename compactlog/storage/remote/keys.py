"""Object keys of the remote tier, as Aiven's ``ObjectKeyFactory`` builds them, and Kafka's ids.

A segment's objects share one *main path*::

    <key.prefix><topic>-<topicId>/<partition>/<start offset, 20 digits>-<segmentId>.<suffix>

with the ids in Kafka's ``Uuid.toString`` form (URL-safe base64 of the 16 bytes, no padding;
``record.remote_log_metadata.uuid_to_str``), the prefix pasted as is (Aiven adds no ``/``: ``rsm.config.key.prefix=tiered/`` gives ``tiered/foo-…``),
and the start offset zero-padded to 20 digits as Kafka names segment files. Aiven's suffixes since
the indexes were concatenated (Oct 2023) are ``log``, ``indexes`` and ``rsm-manifest``; compactlog
adds ``compactlog-keys`` beside them and one ``compactlog-partition.json`` per partition, which
cannot be mistaken for a segment key (no ``<20 digits>-<id>.`` stem).

Sans-IO: strings in, strings out.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ...record.remote_log_metadata import uuid_from_str, uuid_to_str

LOG = "log"
INDEXES = "indexes"
RSM_MANIFEST = "rsm-manifest"
COMPACTLOG_KEYS = "compactlog-keys"
# every suffix a segment may have, in the order they are written (the rsm-manifest last: its
# presence says the rest is complete); deletion removes all of them
SEGMENT_SUFFIXES = (LOG, INDEXES, COMPACTLOG_KEYS, RSM_MANIFEST)
PARTITION_MANIFEST = "compactlog-partition.json"

ZERO_UUID = b"\x00" * 16
ONE_UUID = b"\x00" * 15 + b"\x01"      # Kafka's METADATA_TOPIC_ID


def new_uuid() -> str:
    """A fresh random id as Kafka's ``Uuid.randomUuid`` draws it: never the reserved 0 and 1, never
    one whose text starts with ``-`` (it would read as a command-line option)."""
    while True:
        raw = bytearray(os.urandom(16))
        raw[6] = (raw[6] & 0x0F) | 0x40         # java.util.UUID.randomUUID: version 4, IETF variant
        raw[8] = (raw[8] & 0x3F) | 0x80
        raw = bytes(raw)
        text = uuid_to_str(raw)
        if raw not in (ZERO_UUID, ONE_UUID) and not text.startswith("-"):
            return text


def offset_prefix(offset: int) -> str:
    """The start offset as Kafka's ``filenamePrefixFromOffset`` writes it: 20 digits, zero-padded."""
    if offset < 0:
        raise ValueError(f"a segment start offset is not negative: {offset}")
    return f"{offset:020d}"


def partition_prefix(prefix: str, topic: str, topic_id: str, partition: int) -> str:
    """``<prefix><topic>-<topicId>/<partition>/``: every object of one partition, and nothing of
    another (the topic id makes ``foo`` and ``foo-1`` distinct)."""
    return f"{prefix}{topic}-{topic_id}/{partition}/"


@dataclass(frozen=True)
class SegmentKey:
    """The parts of a segment's main path (Aiven's ``ObjectKeyFactory.mainPath``)."""

    prefix: str
    topic: str
    topic_id: str
    partition: int
    start_offset: int
    segment_id: str

    @property
    def main(self) -> str:
        return (partition_prefix(self.prefix, self.topic, self.topic_id, self.partition)
                + f"{offset_prefix(self.start_offset)}-{self.segment_id}")

    def key(self, suffix: str) -> str:
        return f"{self.main}.{suffix}"

    def keys(self) -> list[str]:
        return [self.key(s) for s in SEGMENT_SUFFIXES]


def partition_manifest_key(prefix: str, topic: str, topic_id: str, partition: int) -> str:
    return partition_prefix(prefix, topic, topic_id, partition) + PARTITION_MANIFEST


_SEGMENT_NAME = re.compile(r"^(\d{20})-([A-Za-z0-9_-]{22})\.([a-z-]+)$")


def parse_segment_key(key: str, part_prefix: str) -> tuple[int, str, str] | None:
    """(start offset, segment id, suffix) of a key under ``part_prefix`` (from
    ``partition_prefix``), or None for any other key (another partition's, the partition
    manifest, a foreign object)."""
    if not key.startswith(part_prefix):
        return None
    m = _SEGMENT_NAME.match(key[len(part_prefix):])
    if not m:
        return None
    try:
        uuid_from_str(m.group(2))
    except ValueError:
        return None
    return int(m.group(1)), m.group(2), m.group(3)
