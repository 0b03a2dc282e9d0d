"""Magic v0/v1 message sets (read only): Kafka still reads and cleans them in old logs."""

from __future__ import annotations

import struct
import zlib

from ..errors import CorruptRecordError
from . import compression
from .types import CREATE_TIME, LOG_APPEND_TIME, NO_TIMESTAMP, Record
from .layout import COMPRESSION_MASK, LOG_OVERHEAD, MAGIC_OFFSET, MIN_LEGACY_SIZE, TIMESTAMP_TYPE_MASK

# A v0/v1 entry (Kafka's LegacyRecord) starts as a v2 batch does, offset then size (LOG_OVERHEAD
# bytes, the size counting what follows), and its magic lies where a v2 batch's does; then:
LEGACY_CRC_OFFSET = LOG_OVERHEAD                    # CRC-32 (zlib) of bytes [magic, end)
LEGACY_ATTRIBUTES_OFFSET = MAGIC_OFFSET + 1
LEGACY_TIMESTAMP_OFFSET = LEGACY_ATTRIBUTES_OFFSET + 1   # v1 only (int64)

_ENTRY = struct.Struct(">qi")
_V0 = struct.Struct(">IbB")     # crc, magic, attributes
_TS = struct.Struct(">q")


class LegacyEntry:
    """One shallow entry of a v0/v1 message set: a plain message or a compressed wrapper."""

    __slots__ = ("offset", "position", "size", "magic", "crc", "attributes", "timestamp",
                 "key", "value", "_buffer", "_inner")

    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    partition_leader_epoch = -1
    is_control = False
    is_transactional = False
    has_producer_id = False
    has_delete_horizon = False
    delete_horizon_ms = None

    @classmethod
    def parse(cls, buf, pos: int) -> "LegacyEntry":
        e = cls()
        e.offset, length = _ENTRY.unpack_from(buf, pos)
        e.position = pos
        e.size = LOG_OVERHEAD + length
        e._buffer = buf
        e._inner = None
        body = memoryview(buf)[pos + LOG_OVERHEAD:pos + e.size]
        e.crc, e.magic, e.attributes = _V0.unpack_from(body, 0)
        p = 6
        if e.magic == 1:
            if len(body) < 22:
                raise CorruptRecordError("v1 message shorter than its header", position=pos,
                                         offset=e.offset)
            (e.timestamp,) = _TS.unpack_from(body, p)
            p += 8
        else:
            e.timestamp = NO_TIMESTAMP
        e.key, p = _bytes(body, p, pos, e.offset)
        e.value, p = _bytes(body, p, pos, e.offset)
        return e

    @property
    def header(self):
        return self

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if (self.magic == 1 and self.attributes & TIMESTAMP_TYPE_MASK) else CREATE_TIME

    def is_valid(self) -> bool:
        return self.computed_crc() == self.crc

    def computed_crc(self) -> int:
        body = memoryview(self._buffer)[self.position + MAGIC_OFFSET:self.position + self.size]
        return zlib.crc32(body) & 0xFFFFFFFF

    def stored_crc(self) -> int:
        return self.crc

    def ensure_valid(self) -> None:
        if not self.is_valid():
            raise CorruptRecordError(
                f"stored CRC {self.crc:#010x} does not match computed {self.computed_crc():#010x}",
                position=self.position, offset=self.offset, field="crc")

    def inner(self) -> list["LegacyEntry"]:
        """The messages of this entry: itself if plain, else the wrapper's inner messages with
        absolute offsets (Kafka's AbstractLegacyRecordBatch.DeepRecordsIterator)."""
        if self.compression == 0:
            return [self]
        if self._inner is None:
            where = dict(position=self.position, offset=self.offset)
            if self.magic not in (0, 1):
                raise CorruptRecordError(f"invalid wrapper magic {self.magic}", field="magic", **where)
            if self.compression == compression.ZSTD:
                raise CorruptRecordError("zstd is not allowed in magic v0/v1 message sets",
                                         field="attributes", **where)
            if self.value is None:
                raise CorruptRecordError("compressed wrapper message without a value", field="value",
                                         **where)
            value = self.value
            if self.magic == 0 and self.compression == compression.LZ4:
                # Kafka reads v0 lz4 wrappers ignoring the (historically miscomputed) header checksum
                value = compression.lz4_fix_header_checksum(value)
            try:
                data = compression.decompress(self.compression, value)
            except CorruptRecordError as e:
                raise e.located(**where) from None
            inner = []
            p = 0
            while p + LOG_OVERHEAD <= len(data):
                _, length = _ENTRY.unpack_from(data, p)
                if length < MIN_LEGACY_SIZE or p + LOG_OVERHEAD + length > len(data):
                    raise CorruptRecordError("truncated message inside a compressed wrapper",
                                             field="records", **where)
                m = LegacyEntry.parse(data, p)
                if m.magic not in (0, 1):
                    raise CorruptRecordError(f"invalid magic {m.magic} inside a compressed wrapper",
                                             field="magic", **where)
                if m.compression != 0:
                    raise CorruptRecordError("inner messages must not be compressed",
                                             field="attributes", **where)
                inner.append(m)
                p += LOG_OVERHEAD + length
            if not inner:
                raise CorruptRecordError("empty compressed wrapper", field="records", **where)
            if self.magic == 1:
                # v1 wrappers carry the absolute offset of the last inner message, inner offsets
                # are relative; a wrapper offset of 0 (some librdkafka producers) means "as is"
                if self.offset != 0:
                    last_rel = inner[-1].offset
                    if self.offset < last_rel:
                        raise CorruptRecordError(
                            f"wrapper offset {self.offset} is less than the last inner offset "
                            f"{last_rel}", field="offset", **where)
                    for m in inner:
                        m.offset = self.offset - last_rel + m.offset
                if self.timestamp_type == LOG_APPEND_TIME:
                    for m in inner:
                        if m.magic == 1:
                            m.timestamp = self.timestamp
            self._inner = inner
        return self._inner

    @property
    def base_offset(self) -> int:
        return self.inner()[0].offset

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def max_timestamp(self) -> int:
        # Kafka's AbstractLegacyRecordBatch.maxTimestamp(): the outer message's timestamp (the
        # leader sets a v1 wrapper's to the max of its inner messages; -1 for v0)
        return self.timestamp

    @property
    def base_timestamp(self) -> int:
        return self.inner()[0].timestamp

    @property
    def records_count(self) -> int:
        return len(self.inner())

    def records(self) -> list[Record]:
        return [Record(m.offset, m.timestamp, m.key, m.value, ()) for m in self.inner()]

    def raw(self) -> bytes:
        return bytes(memoryview(self._buffer)[self.position:self.position + self.size])

    def control_type(self):
        return None

    def __repr__(self) -> str:
        return f"LegacyEntry(magic={self.magic}, offset={self.offset}, size={self.size})"


def _bytes(body, p: int, pos: int, offset: int):
    if p + 4 > len(body):
        raise CorruptRecordError("truncated legacy message", position=pos, offset=offset)
    (n,) = struct.unpack_from(">i", body, p)
    p += 4
    if n < 0:
        return None, p
    if p + n > len(body):
        raise CorruptRecordError("legacy message field longer than the message", position=pos,
                                 offset=offset)
    return bytes(body[p:p + n]), p + n
