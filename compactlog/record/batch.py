"""RecordBatch v2: the 61-byte header, the records section, encoding and decoding (sans-IO).

Bytes in, objects out: nothing here touches files. See FORMAT.md beside this package and
record-format.md for the layout.
"""

from __future__ import annotations

import functools
from typing import Iterable, NamedTuple, Sequence

from . import crc as _crc32c
import numpy as np

from ..errors import CorruptRecordError
from . import compression, kernels
# the header's layout (offsets, sizes, attribute bits) is record/layout.py's, re-exported here
from .layout import (ATTRIBUTES_OFFSET, BASE_TIMESTAMP_OFFSET, COMPRESSION_MASK, CONTROL_FLAG,  # noqa: F401
                     CRC_OFFSET, DELETE_HORIZON_FLAG, HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, MAGIC_V2,
                     MIN_LEGACY_SIZE, RECORD_BATCH_OVERHEAD, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG)
from .layout import AFTER_CRC as _AFTER_CRC, HEADER as _HEADER, PREFIX as _PREFIX
from .layout import BASE_OFFSET_OFFSET, INT32, INT64, PARTITION_LEADER_EPOCH_OFFSET, UINT32
from .control import ABORT, COMMIT, control_key, marker_value, parse_control_key
from .legacy import LegacyEntry
# a record, its headers and the format's "none" values: record/types.py, re-exported here
from .types import (CREATE_TIME, LOG_APPEND_TIME, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH,  # noqa: F401
                    NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, TIMESTAMP_TYPE_NAMES, Header, Record)
from .varint import encode_varint



def crc32c(data) -> int:
    return _crc32c.crc32c(data)


def compute_crc(buf, pos: int, size: int) -> int:
    """CRC-32C of a batch's bytes [21, size) starting at ``pos``."""
    return _crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + size])


_new_tuple = tuple.__new__


class BatchHeader(NamedTuple):
    """The fixed 61-byte header of a v2 batch (also the first 17 bytes of a legacy entry).

    A named tuple rather than a frozen dataclass: made from ``struct.unpack_from``'s tuple in
    one C call (0.3 us against 1.7 for the dataclass's thirteen setattrs; every append and
    every read of a batch makes one, six a single-record transaction: issue 28)."""
    base_offset: int
    length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def unpack(cls, buf, pos: int = 0) -> "BatchHeader":
        return _new_tuple(cls, _HEADER.unpack_from(buf, pos))

    @property
    def size(self) -> int:
        return self.length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & DELETE_HORIZON_FLAG else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        return last_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def first_timestamp(self) -> int:
        """The timestamp of the first record as written (Kafka's baseTimestamp, horizon aside)."""
        return self.base_timestamp


def last_sequence(base_sequence: int, delta: int) -> int:
    if base_sequence == NO_SEQUENCE:
        return NO_SEQUENCE
    if base_sequence > 0x7FFFFFFF - delta:
        return delta - (0x7FFFFFFF - base_sequence) - 1
    return base_sequence + delta


class RecordColumns(NamedTuple):
    """Structure of the records of one section, as numpy arrays (positions index ``data``)."""
    data: np.ndarray        # uint8 view of the (decompressed) records section's buffer
    rec_pos: np.ndarray
    rec_end: np.ndarray
    ts_delta: np.ndarray
    off_delta: np.ndarray
    tail_pos: np.ndarray
    key_pos: np.ndarray
    key_len: np.ndarray
    val_pos: np.ndarray
    val_len: np.ndarray
    hdr_count: np.ndarray

    def __len__(self) -> int:
        return self.rec_pos.shape[0]


def scan_section(data: np.ndarray, start: int, end: int, count: int) -> RecordColumns:
    """Decode the structure of ``count`` records in data[start:end]; CorruptRecordError if invalid."""
    if count < 0:
        raise CorruptRecordError(f"negative records count {count}", field="recordsCount")
    if count * kernels.MIN_RECORD_SIZE > end - start:
        raise CorruptRecordError(
            f"records count {count} cannot fit in {end - start} bytes", field="recordsCount")
    i64 = np.empty((7, count), dtype=np.int64)
    i32 = np.empty((3, count), dtype=np.int32)
    ts_delta, rec_pos, rec_end, tail_pos, key_pos, val_pos, off_delta64 = i64
    key_len, val_len, hdr_count = i32
    off_delta = off_delta64
    err, where = kernels.scan_records(data, start, end, count, rec_pos, rec_end, ts_delta,
                                      off_delta, tail_pos, key_pos, key_len, val_pos, val_len,
                                      hdr_count)
    if err < 0:
        raise CorruptRecordError(kernels.ERROR_MESSAGES.get(err, f"error {err}"),
                                 position=int(where), field="records")
    return RecordColumns(data, rec_pos, rec_end, ts_delta, off_delta, tail_pos, key_pos, key_len,
                         val_pos, val_len, hdr_count)


# a batch of at most this many records is scanned by ``scan_small`` (plain Python): for a
# producer's one-record batch the kernel's arrays and call cost ~10x the walk itself
SMALL_SCAN_RECORDS = 8
_U64 = (1 << 64) - 1


def _uvarint(buf, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """``kernels.scan``'s ``_read_uvarint``: (value, next position), or (0, error code)."""
    u = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            return 0, kernels.ERR_TRUNCATED
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u, pos
        shift += 7
    return 0, kernels.ERR_VARINT_TOO_LONG


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    """Zigzag int32 of at most 5 bytes, wrapped to 32 bits (the kernel's ``_read_varint``)."""
    u, pos = _uvarint(buf, pos, end, 5)
    u &= 0xFFFFFFFF
    return (u >> 1) ^ -(u & 1), pos


def _scan_small(buf, start: int, end: int, count: int):
    """The kernel's ``_scan_records`` walk for a few records: (0, ts deltas, offset deltas, key
    lengths) or (error code, position of the faulty record, None, None)."""
    pos = start
    prev_delta = -1
    ts_delta, off_delta, key_len = [], [], []
    for _ in range(count):
        size, p = _varint(buf, pos, end)
        if p < 0:
            return p, pos, None, None
        body_end = p + size
        if size < 0 or body_end > end:
            return kernels.ERR_TRUNCATED, pos, None, None
        p += 1                          # attributes: unused by Kafka
        if p > body_end:
            return kernels.ERR_RECORD_SIZE, pos, None, None
        u, p = _uvarint(buf, p, body_end, 10)
        if p < 0:
            return kernels.ERR_RECORD_SIZE, pos, None, None
        u &= _U64
        tsd = (u >> 1) ^ -(u & 1)
        od, p = _varint(buf, p, body_end)
        if p < 0:
            return kernels.ERR_RECORD_SIZE, pos, None, None
        if od <= prev_delta:
            return kernels.ERR_OFFSET_ORDER, pos, None, None
        prev_delta = od
        klen, p = _varint(buf, p, body_end)
        if p < 0:
            return kernels.ERR_RECORD_SIZE, pos, None, None
        if klen >= 0:
            p += klen
            if p > body_end:
                return kernels.ERR_RECORD_SIZE, pos, None, None
        else:
            klen = -1
        vlen, p = _varint(buf, p, body_end)
        if p < 0:
            return kernels.ERR_RECORD_SIZE, pos, None, None
        if vlen >= 0:
            p += vlen
            if p > body_end:
                return kernels.ERR_RECORD_SIZE, pos, None, None
        nh, p = _varint(buf, p, body_end)
        if p < 0:
            return kernels.ERR_RECORD_SIZE, pos, None, None
        if nh < 0 or nh > body_end - p:
            return kernels.ERR_HEADER_COUNT, pos, None, None
        for _ in range(nh):
            hk, p = _varint(buf, p, body_end)
            if p < 0:
                return kernels.ERR_RECORD_SIZE, pos, None, None
            if hk < 0:
                return kernels.ERR_HEADER_KEY, pos, None, None
            p += hk
            if p > body_end:
                return kernels.ERR_RECORD_SIZE, pos, None, None
            hv, p = _varint(buf, p, body_end)
            if p < 0:
                return kernels.ERR_RECORD_SIZE, pos, None, None
            if hv > 0:
                p += hv
                if p > body_end:
                    return kernels.ERR_RECORD_SIZE, pos, None, None
        if p != body_end:
            return kernels.ERR_RECORD_SIZE, pos, None, None
        ts_delta.append(tsd)
        off_delta.append(od)
        key_len.append(klen)
        pos = body_end
    if pos != end:
        return kernels.ERR_TRAILING_BYTES, pos, None, None
    return 0, ts_delta, off_delta, key_len


class SmallRecords(NamedTuple):
    """What validation reads of a few records (``scan_small``), as Python lists: each record's
    timestamp (the batch's base timestamp plus its delta, wrapped to int64 as numpy adds them),
    offset delta and key length (-1: a null key)."""
    timestamps: list
    off_delta: list
    key_len: list


def scan_small(buf, start: int, end: int, count: int, base_timestamp: int) -> SmallRecords:
    """``scan_section`` of 1 to ``SMALL_SCAN_RECORDS`` records in plain Python: the same checks,
    in the same order, and the same CorruptRecordError (message, position, field) for bytes it
    refuses, without the numpy arrays and the kernel call that cost more than a few records'
    walk (a producer's batch of one record: issue 28)."""
    if count * kernels.MIN_RECORD_SIZE > end - start:
        raise CorruptRecordError(
            f"records count {count} cannot fit in {end - start} bytes", field="recordsCount")
    err, got, off_delta, key_len = _scan_small(buf, start, end, count)
    if err < 0:         # ``got``: where the faulty record starts
        raise CorruptRecordError(kernels.ERROR_MESSAGES.get(err, f"error {err}"),
                                 position=got, field="records")
    timestamps = [((base_timestamp + d + (1 << 63)) & _U64) - (1 << 63) for d in got]
    return SmallRecords(timestamps, off_delta, key_len)


def as_u8(buf) -> np.ndarray:
    """A read-only uint8 view of a buffer (bytes, mmap, memoryview or uint8 array; an empty array
    for an empty one): the one form every numba kernel over log bytes takes, so each kernel is
    compiled for one array type only."""
    if isinstance(buf, np.ndarray) and buf.dtype == np.uint8:
        arr = buf
    else:
        arr = np.frombuffer(buf, dtype=np.uint8) if len(buf) else np.zeros(0, dtype=np.uint8)
    return _read_only(arr)


class RecordBatch:
    """A v2 batch over a buffer: header fields decoded, records decoded on demand.

    ``max_decompressed_size``: the most bytes its records section may inflate to (None: the
    codec module's default bound, see compression.decompressed_limit).
    """

    __slots__ = ("header", "buffer", "position", "_columns", "_section", "max_decompressed_size")

    def __init__(self, header: BatchHeader, buffer, position: int, max_decompressed_size: int | None = None):
        self.header = header
        self.buffer = buffer
        self.position = position
        self.max_decompressed_size = max_decompressed_size
        self._columns: RecordColumns | None = None
        self._section = None

    def __getattr__(self, name):
        return getattr(self.header, name)

    # the header fields every append reads, as properties: ``__getattr__`` runs only after the
    # normal lookup has failed (an AttributeError made and dropped), ~58 times a transaction
    @property
    def size(self) -> int:
        return self.header.size

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def last_offset(self) -> int:
        return self.header.last_offset

    @property
    def max_timestamp(self) -> int:
        return self.header.max_timestamp

    @property
    def records_count(self) -> int:
        return self.header.records_count

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def producer_id(self) -> int:
        return self.header.producer_id

    def raw(self) -> bytes:
        return bytes(memoryview(self.buffer)[self.position:self.position + self.header.size])

    def stored_crc(self) -> int:
        return self.header.crc

    def computed_crc(self) -> int:
        return compute_crc(self.buffer, self.position, self.header.size)

    def is_valid(self) -> bool:
        return self.header.size >= RECORD_BATCH_OVERHEAD and self.header.crc == self.computed_crc()

    def ensure_valid(self) -> None:
        """Kafka's ensureValid: size and CRC."""
        h = self.header
        if h.size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"batch size {h.size} is less than the minimum {RECORD_BATCH_OVERHEAD}",
                offset=h.base_offset, field="length")
        computed = self.computed_crc()
        if h.crc != computed:
            raise CorruptRecordError(
                f"stored CRC {h.crc:#010x} does not match computed {computed:#010x}",
                offset=h.base_offset, field="crc")

    def section(self) -> tuple[np.ndarray, int, int]:
        """The records section as (uint8 array, start, end), decompressed if needed."""
        if self._section is None:
            h = self.header
            start = self.position + RECORD_BATCH_OVERHEAD
            end = self.position + h.size
            codec = h.compression
            if codec == compression.NONE:
                self._section = (as_u8(self.buffer), start, end)
            else:
                try:
                    plain = compression.decompress(codec, memoryview(self.buffer)[start:end],
                                                   max_size=self.max_decompressed_size)
                except CorruptRecordError as e:
                    raise e.located(position=self.position, offset=h.base_offset) from None
                self._section = (np.frombuffer(plain, dtype=np.uint8), 0, len(plain))
        return self._section

    def columns(self) -> RecordColumns:
        if self._columns is None:
            if self.header.records_count == 0:
                # as Kafka's iterator: a batch of 0 records yields nothing, whatever its section holds
                self._columns = _empty_columns()
                return self._columns
            data, start, end = self.section()
            try:
                self._columns = scan_section(data, start, end, self.header.records_count)
            except CorruptRecordError as e:
                raise e.located(offset=self.header.base_offset) from None
        return self._columns

    def small_records(self) -> SmallRecords | None:
        """``scan_small`` of an uncompressed batch of 1 to ``SMALL_SCAN_RECORDS`` records (the
        CorruptRecordError located at its base offset, as ``columns`` locates it); None for any
        other batch (``columns`` then)."""
        h = self.header
        n = h.records_count
        if n < 1 or n > SMALL_SCAN_RECORDS or h.attributes & COMPRESSION_MASK:
            return None
        try:
            return scan_small(self.buffer, self.position + RECORD_BATCH_OVERHEAD, self.position + h.size, n,
                              h.base_timestamp)
        except CorruptRecordError as e:
            raise e.located(offset=h.base_offset) from None

    def record_timestamps(self) -> np.ndarray:
        h = self.header
        cols = self.columns()
        if h.timestamp_type == LOG_APPEND_TIME:
            return np.full(len(cols), h.max_timestamp, dtype=np.int64)
        return h.base_timestamp + cols.ts_delta

    def records(self) -> list[Record]:
        """The batch's records as Python objects (for tools and small reads, not hot paths)."""
        h = self.header
        if h.records_count == 0:
            return []
        cols = self.columns()
        return records_from_columns(cols, h.base_offset, self.record_timestamps())

    def __iter__(self):
        return iter(self.records())

    def control_type(self) -> int | None:
        """The control record type of a control batch (None when it holds no record)."""
        if not self.header.is_control or self.header.records_count == 0:
            return None
        cols = self.columns()
        data = cols.data
        kp, kl = int(cols.key_pos[0]), int(cols.key_len[0])
        return parse_control_key(bytes(data[kp:kp + kl]) if kl >= 0 else None).type

    def __repr__(self) -> str:
        h = self.header
        return (f"RecordBatch(base_offset={h.base_offset}, last_offset={h.last_offset}, "
                f"count={h.records_count}, position={self.position}, size={h.size})")


def _empty_columns() -> RecordColumns:
    i64 = np.zeros(0, dtype=np.int64)
    i32 = np.zeros(0, dtype=np.int32)
    return RecordColumns(np.zeros(0, dtype=np.uint8), i64, i64, i64, i64, i64, i64, i32, i64, i32, i32)


def records_from_columns(cols: RecordColumns, base_offset: int, timestamps: np.ndarray) -> list[Record]:
    if len(cols) == 0:
        return []
    # copy only the records' own bytes (cols.data may be a whole segment buffer)
    lo, hi = int(cols.rec_pos[0]), int(cols.rec_end[-1])
    raw = cols.data[lo:hi].tobytes()
    out = []
    offsets = (base_offset + cols.off_delta).tolist()
    ts = timestamps.tolist()
    kpos, klen = (cols.key_pos - lo).tolist(), cols.key_len.tolist()
    vpos, vlen = (cols.val_pos - lo).tolist(), cols.val_len.tolist()
    hcount = cols.hdr_count.tolist()
    for i in range(len(offsets)):
        key = raw[kpos[i]:kpos[i] + klen[i]] if klen[i] >= 0 else None
        value = raw[vpos[i]:vpos[i] + vlen[i]] if vlen[i] >= 0 else None
        headers = ()
        if hcount[i]:
            start = vpos[i] + max(vlen[i], 0)
            headers = _parse_headers(raw, start, hcount[i])
        out.append(Record(offsets[i], ts[i], key, value, headers))
    return out


def _parse_headers(raw: bytes, pos: int, count: int) -> tuple:
    from .varint import decode_varint
    _, pos = decode_varint(raw, pos)  # the header count itself
    headers = []
    for _ in range(count):
        klen, pos = decode_varint(raw, pos)
        hkey = raw[pos:pos + klen].decode("utf-8", errors="replace")
        pos += klen
        vlen, pos = decode_varint(raw, pos)
        if vlen >= 0:
            hval = raw[pos:pos + vlen]
            pos += vlen
        else:
            hval = None
        headers.append(Header(hkey, hval))
    return tuple(headers)


# --- reading batches from a buffer ------------------------------------------------------------

def iter_batches(buf, start: int = 0, end: int | None = None, *, max_message_bytes: int | None = None):
    """Kafka's batch iteration over a log buffer (record-format.md §12).

    Yields RecordBatch (magic 2) or legacy entries (magic 0/1) in file order; stops silently at an
    incomplete trailing batch; raises CorruptRecordError for an impossible size or magic.
    ``max_message_bytes`` (the topic's max.message.bytes) sets each v2 batch's decompression
    limit (compression.decompressed_limit); None leaves the codec module's default.
    """
    if end is None:
        end = len(buf)
    pos = start
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        base_offset, length, _epoch, magic = _PREFIX.unpack_from(buf, pos)
        if length < MIN_LEGACY_SIZE:
            raise CorruptRecordError(
                f"record size {length} is smaller than the minimum record overhead ({MIN_LEGACY_SIZE})",
                position=pos, offset=base_offset, field="length")
        if pos + LOG_OVERHEAD + length > end:
            return
        if magic == MAGIC_V2:
            if length + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD:
                raise CorruptRecordError(
                    f"batch size {length + LOG_OVERHEAD} is smaller than the v2 header ({RECORD_BATCH_OVERHEAD})",
                    position=pos, offset=base_offset, field="length")
            limit = None if max_message_bytes is None else \
                compression.decompressed_limit(max_message_bytes, length + LOG_OVERHEAD)
            yield RecordBatch(BatchHeader.unpack(buf, pos), buf, pos, limit)
        elif magic in (0, 1):
            yield LegacyEntry.parse(buf, pos)
        else:
            raise CorruptRecordError(f"invalid magic {magic}", position=pos, offset=base_offset,
                                     field="magic")
        pos += LOG_OVERHEAD + length


def batch_positions(buf, start: int = 0, end: int | None = None) -> tuple[list[int], int]:
    """Start positions of the complete batches in buf[start:end] and the end of the last one."""
    if end is None:
        end = len(buf)
    positions = []
    pos = start
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        _, length, _, _ = _PREFIX.unpack_from(buf, pos)
        if length < MIN_LEGACY_SIZE or pos + LOG_OVERHEAD + length > end:
            break
        positions.append(pos)
        pos += LOG_OVERHEAD + length
    return positions, pos


# --- writing batches --------------------------------------------------------------------------

class BatchSpec(NamedTuple):
    """Everything in a v2 header that a writer chooses. A named tuple, as ``BatchHeader``: 0.45
    us to make against 1.7 for a frozen dataclass (a coordinator's every record makes one)."""
    base_offset: int = 0
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH
    compression: int = compression.NONE
    timestamp_type: int = CREATE_TIME
    transactional: bool = False
    control: bool = False
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    base_sequence: int = NO_SEQUENCE
    delete_horizon_ms: int | None = None


def attributes_of(spec: BatchSpec) -> int:
    attrs = spec.compression & COMPRESSION_MASK
    if spec.timestamp_type == LOG_APPEND_TIME:
        attrs |= TIMESTAMP_TYPE_MASK
    if spec.transactional:
        attrs |= TRANSACTIONAL_FLAG
    if spec.control:
        attrs |= CONTROL_FLAG
    if spec.delete_horizon_ms is not None:
        attrs |= DELETE_HORIZON_FLAG
    return attrs


def assemble_batch(spec: BatchSpec, last_offset_delta: int, base_timestamp: int, max_timestamp: int,
                   records_count: int, records_section: bytes) -> bytes:
    """Header + (already encoded, uncompressed) records section -> batch bytes with CRC."""
    payload = records_section
    if spec.compression != compression.NONE and records_count > 0:
        payload = compression.compress(spec.compression, records_section)
    attrs = attributes_of(spec) if records_count > 0 else attributes_of(spec) & ~COMPRESSION_MASK
    after_crc = _AFTER_CRC.pack(attrs, last_offset_delta, base_timestamp, max_timestamp,
                                spec.producer_id, spec.producer_epoch, spec.base_sequence,
                                records_count) + payload
    return _framed(spec.base_offset, spec.partition_leader_epoch, after_crc)[0]


def _framed(base_offset: int, partition_leader_epoch: int, after_crc: bytes) -> tuple[bytes, int, int]:
    """A v2 batch from the bytes its CRC covers (attributes onwards): the prefix (base offset,
    length, partition leader epoch, magic) and the CRC put before them. With the CRC and the
    length, for a writer that makes the header too."""
    crc = _crc32c.crc32c(after_crc)
    length = ATTRIBUTES_OFFSET - LOG_OVERHEAD + len(after_crc)
    return _PREFIX.pack(base_offset, length, partition_leader_epoch, MAGIC_V2) + UINT32.pack(crc) + after_crc, \
        crc, length


def empty_batch(header: BatchHeader) -> bytes:
    """The 61-byte header Kafka keeps for an emptied batch (record-format.md §10)."""
    spec = BatchSpec(base_offset=header.base_offset,
                     partition_leader_epoch=header.partition_leader_epoch,
                     timestamp_type=header.timestamp_type, transactional=header.is_transactional,
                     control=header.is_control, producer_id=header.producer_id,
                     producer_epoch=header.producer_epoch, base_sequence=header.base_sequence)
    return assemble_batch(spec, header.last_offset_delta, NO_TIMESTAMP, header.max_timestamp, 0, b"")


def encode_headers(headers: Iterable) -> bytes:
    """The header section of one record: count varint, then each key and value."""
    headers = list(headers)
    parts = [encode_varint(len(headers))]
    for h in headers:
        hkey, hval = (h.key, h.value) if isinstance(h, Header) else h
        kb = hkey.encode("utf-8") if isinstance(hkey, str) else bytes(hkey)
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        if hval is None:
            parts.append(encode_varint(-1))
        else:
            vb = hval.encode("utf-8") if isinstance(hval, str) else bytes(hval)
            parts.append(encode_varint(len(vb)))
            parts.append(vb)
    return b"".join(parts)


class ColumnarRecords(NamedTuple):
    """Records to encode, as concatenated buffers with offsets (the bulk writer's input)."""
    key_buf: np.ndarray
    key_off: np.ndarray
    key_null: np.ndarray
    val_buf: np.ndarray
    val_off: np.ndarray
    val_null: np.ndarray
    hdr_buf: np.ndarray
    hdr_off: np.ndarray

    def __len__(self) -> int:
        return self.key_null.shape[0]

    def encoded_size_bound(self) -> int:
        return int(len(self) * 21 + self.key_buf.shape[0] + self.val_buf.shape[0] + self.hdr_buf.shape[0])

    def slice(self, lo: int, hi: int) -> "ColumnarRecords":
        return ColumnarRecords(self.key_buf, self.key_off[lo:hi + 1], self.key_null[lo:hi],
                               self.val_buf, self.val_off[lo:hi + 1], self.val_null[lo:hi],
                               self.hdr_buf, self.hdr_off[lo:hi + 1])


def _concat(items: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(items)
    try:
        # fast path: every item bytes-like (no None, no str), which b"".join enforces
        joined = b"".join(items)
    except TypeError:
        return _concat_mixed(items)
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=n)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    if off[-1] != len(joined):   # e.g. a multi-byte-item memoryview: let the general path decide
        return _concat_mixed(items)
    return np.frombuffer(joined, dtype=np.uint8), off, np.zeros(n, dtype=np.bool_)


def _concat_mixed(items: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = len(items)
    null = np.fromiter((x is None for x in items), dtype=np.bool_, count=n)
    if null.any():
        present = [b"" if x is None else x for x in items]
    else:
        present = items
    present = [x.encode("utf-8") if isinstance(x, str) else x for x in present] \
        if any(isinstance(x, str) for x in present) else present
    lengths = np.fromiter(map(len, present), dtype=np.int64, count=n)
    off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=off[1:])
    buf = np.frombuffer(b"".join(present), dtype=np.uint8)
    return buf, off, null


def _arrow_column(arr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, offsets, null) of a pyarrow binary/string array, reading its buffers (no Python bytes)."""
    import pyarrow as pa
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    t = arr.type
    n = len(arr)
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    bufs = arr.buffers()
    if pa.types.is_fixed_size_binary(t):
        w = t.byte_width
        data = np.frombuffer(bufs[1], dtype=np.uint8) if bufs[1] is not None else np.zeros(0, np.uint8)
        data = data[arr.offset * w:(arr.offset + n) * w]
        off = np.arange(n + 1, dtype=np.int64) * w
    elif pa.types.is_binary(t) or pa.types.is_string(t) or pa.types.is_large_binary(t) \
            or pa.types.is_large_string(t):
        odt = np.int64 if (pa.types.is_large_binary(t) or pa.types.is_large_string(t)) else np.int32
        off = np.frombuffer(bufs[1], dtype=odt)[arr.offset:arr.offset + n + 1].astype(np.int64) \
            if bufs[1] is not None else np.zeros(n + 1, dtype=np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        lo, hi = int(off[0]), int(off[-1])
        data = data[lo:hi]
        off -= lo
    elif pa.types.is_null(t):
        return np.zeros(0, np.uint8), np.zeros(n + 1, dtype=np.int64), np.ones(n, dtype=np.bool_)
    else:
        raise TypeError(f"keys/values as a pyarrow array must be binary or string, not {t}")
    if arr.null_count:
        null = arr.is_null().to_numpy(zero_copy_only=False)
    else:
        null = np.zeros(n, dtype=np.bool_)
    return data, off, null


def _column(items) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, offsets, null) of keys or values given as a Python sequence of bytes/str/None,
    a pyarrow binary/string array (chunked or not), or a 2-D uint8 numpy array (one row a record)."""
    if isinstance(items, np.ndarray) and items.ndim == 2 and items.dtype == np.uint8:
        n, w = items.shape
        return (_read_only(np.ascontiguousarray(items).reshape(-1)),
                np.arange(n + 1, dtype=np.int64) * w, np.zeros(n, dtype=np.bool_))
    if type(items).__module__.startswith("pyarrow"):
        data, off, null = _arrow_column(items)
        return _read_only(data), off, null
    return _concat(items)


def _read_only(data: np.ndarray) -> np.ndarray:
    """A read-only view, as _concat's buffers are (one numba specialization of the encoder)."""
    if data.flags.writeable:
        data = data.view()
        data.flags.writeable = False
    return data


def columnar_records(keys: Sequence, values: Sequence, headers: Sequence | None = None) -> ColumnarRecords:
    """Build the bulk writer's input from keys and values (each a Python sequence of bytes/str/None,
    a pyarrow binary/string array, or a 2-D uint8 numpy array) and optional Python headers."""
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    key_buf, key_off, key_null = _column(keys)
    val_buf, val_off, val_null = _column(values)
    n = len(keys)
    if headers is None or not any(headers):
        hdr_buf = np.zeros(0, dtype=np.uint8)
        hdr_off = np.zeros(n + 1, dtype=np.int64)
    else:
        hdr_buf, hdr_off, _ = _concat([encode_headers(h) if h else b"" for h in headers])
    return ColumnarRecords(key_buf, key_off, key_null, val_buf, val_off, val_null, hdr_buf, hdr_off)


def encode_columnar_batch(spec: BatchSpec, records: ColumnarRecords, timestamps: np.ndarray,
                          offset_deltas: np.ndarray | None = None,
                          last_offset_delta: int | None = None) -> bytes:
    """One v2 batch holding ``records`` (timestamps absolute; offset deltas default 0..n-1)."""
    n = len(records)
    if n == 0:
        raise ValueError("a batch needs at least one record; use empty_batch for an empty header")
    timestamps = np.asarray(timestamps, dtype=np.int64)
    if offset_deltas is None:
        offset_deltas = np.arange(n, dtype=np.int64)
    if last_offset_delta is None:
        last_offset_delta = int(offset_deltas[-1])
    max_ts = int(timestamps.max())
    base_ts = spec.delete_horizon_ms if spec.delete_horizon_ms is not None else int(timestamps[0])
    # records encoded after room for the header, so that an uncompressed batch is assembled in
    # place (the same bytes assemble_batch produces, without copying the records twice more)
    out = np.empty(RECORD_BATCH_OVERHEAD + records.encoded_size_bound(), dtype=np.uint8)
    end = kernels.encode_records_memcpy(out, RECORD_BATCH_OVERHEAD, timestamps - base_ts, offset_deltas,
                                        records.key_buf, records.key_off, records.key_null,
                                        records.val_buf, records.val_off, records.val_null,
                                        records.hdr_buf, records.hdr_off)
    if spec.compression != compression.NONE:
        return assemble_batch(spec, last_offset_delta, base_ts, max_ts, n,
                              out[RECORD_BATCH_OVERHEAD:end].tobytes())
    _AFTER_CRC.pack_into(out, ATTRIBUTES_OFFSET, attributes_of(spec), last_offset_delta, base_ts, max_ts,
                         spec.producer_id, spec.producer_epoch, spec.base_sequence, n)
    _PREFIX.pack_into(out, 0, spec.base_offset, end - LOG_OVERHEAD, spec.partition_leader_epoch, MAGIC_V2)
    UINT32.pack_into(out, CRC_OFFSET, _crc32c.crc32c(out[ATTRIBUTES_OFFSET:end]))
    return out[:end].tobytes()


# at most this many records without headers are encoded in plain Python (``encode_small_batch``):
# the bulk writer's numpy set-up costs more than the records themselves (a coordinator's record,
# a transaction marker: issue 28)
SMALL_BATCH_RECORDS = 4


_NULL_LENGTH = encode_varint(-1)      # a null key's or value's length


def _bytes_or_none(x):
    if x is None or isinstance(x, bytes):
        return x
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)


def encode_small_batch(spec: BatchSpec, offset_deltas: Sequence[int], timestamps: Sequence[int],
                       keys: Sequence, values: Sequence, last_offset_delta: int | None = None) -> bytes:
    """The bytes ``encode_columnar_batch`` writes for a few records without headers (keys and
    values bytes, str or None), built in Python: a record is its length, attributes 0, the
    timestamp and offset deltas, key, value and an empty header count, all varints."""
    base_ts = spec.delete_horizon_ms if spec.delete_horizon_ms is not None else timestamps[0]
    if last_offset_delta is None:
        last_offset_delta = offset_deltas[-1]
    return assemble_batch(spec, last_offset_delta, base_ts, max(timestamps), len(keys),
                          _small_records(offset_deltas, [ts - base_ts for ts in timestamps], keys, values))


def encode_plain_small_batch(base_offset: int, partition_leader_epoch: int, timestamps: Sequence[int],
                             keys: Sequence, values: Sequence) -> tuple[bytes, BatchHeader]:
    """``encode_small_batch`` of records at consecutive offsets, uncompressed, CreateTime, without
    a producer (a coordinator's own records: ``Log.append_records(trusted=True)``), with the
    header ``BatchHeader.unpack`` would read back from the bytes, made from the same values
    instead: one call where a ``BatchSpec``, ``assemble_batch`` and the unpack took four (issue
    28: three a single-record transaction). ``batch_test`` holds it to both, byte for byte."""
    n = len(keys)
    base_ts = timestamps[0]
    max_ts = max(timestamps)
    after_crc = _AFTER_CRC.pack(0, n - 1, base_ts, max_ts, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, n) \
        + _small_records(range(n), [ts - base_ts for ts in timestamps], keys, values)
    raw, crc, length = _framed(base_offset, partition_leader_epoch, after_crc)
    return raw, _new_tuple(BatchHeader, (base_offset, length, partition_leader_epoch, MAGIC_V2, crc, 0, n - 1,
                                         base_ts, max_ts, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE, n))


def _small_records(offset_deltas: Sequence[int], timestamp_deltas: Sequence[int], keys: Sequence,
                   values: Sequence) -> bytes:
    """The uncompressed records section of ``encode_small_batch``."""
    parts = []
    for delta, ts_delta, key, value in zip(offset_deltas, timestamp_deltas, keys, values):
        if key.__class__ is not bytes:
            key = _bytes_or_none(key)
        if value.__class__ is not bytes:
            value = _bytes_or_none(value)
        body = b"".join((b"\x00", encode_varint(ts_delta), encode_varint(delta),
                         _NULL_LENGTH if key is None else encode_varint(len(key)), key or b"",
                         _NULL_LENGTH if value is None else encode_varint(len(value)), value or b"",
                         b"\x00"))
        parts.append(encode_varint(len(body)))
        parts.append(body)
    return parts[0] + parts[1] if len(parts) == 2 else b"".join(parts)


def encode_batch(spec: BatchSpec, records: Sequence, *, last_offset_delta: int | None = None) -> bytes:
    """One v2 batch from Record-like items (offset, timestamp, key, value[, headers]).

    Record offsets are absolute and must be >= spec.base_offset and increasing.
    """
    if not records:
        raise ValueError("a batch needs at least one record")
    if len(records) <= SMALL_BATCH_RECORDS and all(len(r) < 5 or not r[4] for r in records):
        return encode_small_batch(spec, [int(r[0]) - spec.base_offset for r in records],
                                  [int(r[1]) for r in records], [r[2] for r in records], [r[3] for r in records],
                                  last_offset_delta)
    keys = [r[2] for r in records]
    values = [r[3] for r in records]
    headers = [r[4] if len(r) > 4 else () for r in records]
    cols = columnar_records(keys, values, headers)
    offsets = np.fromiter((r[0] for r in records), dtype=np.int64, count=len(records))
    timestamps = np.fromiter((r[1] for r in records), dtype=np.int64, count=len(records))
    return encode_columnar_batch(spec, cols, timestamps, offsets - spec.base_offset, last_offset_delta)


def with_base_offset(batch: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Overwrite a batch's base offset in place (not covered by the CRC)."""
    INT64.pack_into(batch, pos + BASE_OFFSET_OFFSET, base_offset)


def with_leader_epoch(batch: bytearray | memoryview, pos: int, epoch: int) -> None:
    INT32.pack_into(batch, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def encode_marker(*, offset: int, commit: bool, producer_id: int, producer_epoch: int,
                  coordinator_epoch: int, timestamp: int, partition_leader_epoch: int = 0) -> bytes:
    """A COMMIT or ABORT marker batch as the leader writes it (78 bytes): what ``encode_batch``
    makes of one control record, its records section taken from a small cache (it depends on
    the kind and the coordinator epoch only) and its header packed here (issue 28: one marker a
    transaction and partition)."""
    after_crc = _AFTER_CRC.pack(_MARKER_ATTRIBUTES, 0, timestamp, timestamp, producer_id, producer_epoch,
                                NO_SEQUENCE, 1) + _marker_records(commit, coordinator_epoch)
    return _framed(offset, partition_leader_epoch, after_crc)[0]


_MARKER_ATTRIBUTES = TRANSACTIONAL_FLAG | CONTROL_FLAG       # CreateTime, uncompressed


@functools.lru_cache(maxsize=1024)
def _marker_records(commit: bool, coordinator_epoch: int) -> bytes:
    return _small_records((0,), (0,), (control_key(COMMIT if commit else ABORT),), (marker_value(coordinator_epoch),))
