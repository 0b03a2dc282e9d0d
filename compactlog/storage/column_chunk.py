"""A partition's records as Arrow columns: the schema ``PartitionReader.read_columns`` returns, the
chunk of preallocated columns the scan kernels (``record.kernels``) fill a segment at a time, and
the gather of keys, values and headers from the mapped file (and decompressed scratch) into
contiguous Arrow buffers, with numba, no per-record Python.

The scan itself (which batches, CRCs, compressed and legacy entries, errors) is the reader's
(``reader.py``); this module only holds what a chunk is and how it becomes Arrow arrays.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..record import kernels as K

MAX_BINARY_BYTES = 0x7FFFFFFF   # above this a chunk's keys or values need int64 (large_binary) offsets

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))

_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("offset", pa.int64(), nullable=False),
    pa.field("timestamp", pa.int64(), nullable=False),
    pa.field("timestamp_type", pa.int32(), nullable=False),
    pa.field("producer_id", pa.int64(), nullable=False),
    pa.field("producer_epoch", pa.int16(), nullable=False),
    pa.field("partition_leader_epoch", pa.int32(), nullable=False),
    pa.field("is_transactional", pa.bool_(), nullable=False),
    pa.field("is_control", pa.bool_(), nullable=False),
]


def column_schema(*, with_headers: bool = False, large: bool = False) -> pa.Schema:
    """The schema of ``read_columns`` (``large``: key/value as large_binary)."""
    fields = list(_BASE_FIELDS)
    if large:
        fields[0] = pa.field("key", pa.large_binary())
        fields[1] = pa.field("value", pa.large_binary())
    if with_headers:
        fields.append(pa.field("headers", HEADERS_TYPE))
    return pa.schema(fields)


def binary_array(src0, src1, source, pos, length, *, string: bool = False):
    """Arrow binary (or string) array of items gathered from two buffers; (array, is_large)."""
    n = pos.shape[0]
    nulls = int(np.count_nonzero(length < 0))
    total = int(np.maximum(length, 0).sum(dtype=np.int64))
    large = total > MAX_BINARY_BYTES
    odt = np.int64 if large else np.int32
    # Arrow's allocator (not numpy's, which asks for transparent huge pages and can stall in
    # page compaction on a fresh large allocation); the kernels write through numpy views
    off_buf = pa.allocate_buffer((n + 1) * np.dtype(odt).itemsize)
    data_buf = pa.allocate_buffer(total)
    out_off = np.frombuffer(off_buf, dtype=odt)
    out_data = np.frombuffer(data_buf, dtype=np.uint8) if total else np.zeros(0, dtype=np.uint8)
    K.gather_bytes(src0, src1, source, pos, length, out_off, out_data)
    validity = pa.py_buffer(np.packbits(length >= 0, bitorder="little")) if nulls else None
    if string:
        typ = pa.large_string() if large else pa.string()
    else:
        typ = pa.large_binary() if large else pa.binary()
    arr = pa.Array.from_buffers(typ, n, [validity, off_buf, data_buf], null_count=nulls)
    return arr, large


def headers_array(src0, src1, source, val_pos, val_len, hdr_count) -> pa.Array:
    n = val_pos.shape[0]
    total = int(hdr_count.sum(dtype=np.int64))
    hk_pos = np.empty(total, dtype=np.int64)
    hk_len = np.empty(total, dtype=np.int32)
    hv_pos = np.empty(total, dtype=np.int64)
    hv_len = np.empty(total, dtype=np.int32)
    h_src = np.empty(total, dtype=np.int8)
    K.scan_headers(src0, src1, source, val_pos, val_len, hdr_count, hk_pos, hk_len, hv_pos, hv_len, h_src)
    hkeys, _ = binary_array(src0, src1, h_src, hk_pos, hk_len, string=True)
    try:
        hkeys.validate(full=True)
    except pa.ArrowInvalid:   # invalid UTF-8: decode as the Python path does (with replacement)
        raw, _ = binary_array(src0, src1, h_src, hk_pos, hk_len)
        hkeys = pa.array([b.decode("utf-8", errors="replace") for b in raw.to_pylist()], pa.string())
    hvals, _ = binary_array(src0, src1, h_src, hv_pos, hv_len)
    if hkeys.type != pa.string():
        hkeys = hkeys.cast(pa.string())
    if hvals.type != pa.binary():
        hvals = hvals.cast(pa.binary())
    struct = pa.StructArray.from_arrays([hkeys, hvals], fields=list(HEADERS_TYPE.value_type))
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(hdr_count, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), struct, type=HEADERS_TYPE)


class Chunk:
    """Preallocated output columns for one call sequence of the scan kernels."""

    def __init__(self, records: int, batches: int):
        self.bmeta = np.empty((batches, K.BM_FIELDS), dtype=np.int64)
        self.r64 = np.empty((K.R64_ROWS, records), dtype=np.int64)
        self.r32 = np.empty((K.R32_ROWS, records), dtype=np.int32)
        self.prev_last = -1        # the last offset of the last batch checked (across flushes)
        self.reset()

    @property
    def record_capacity(self) -> int:
        return self.r64.shape[1]

    def resize(self, records: int) -> None:
        """New (empty) record columns of another capacity; only between chunks."""
        self.r64 = np.empty((K.R64_ROWS, records), dtype=np.int64)
        self.r32 = np.empty((K.R32_ROWS, records), dtype=np.int32)

    def reset(self) -> None:
        self.nb = 0
        self.nr = 0
        self.used = 0
        self.checked = 0           # batches whose CRC was validated
        self.scratch: list[bytes] = []
        self.scratch_len = 0

    def add_scratch(self, data: bytes) -> int:
        bias = self.scratch_len
        self.scratch.append(data)
        self.scratch_len += len(data)
        return bias


def to_large(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    cols = [batch.column(i).cast(schema.field(i).type) for i in range(batch.num_columns)]
    return pa.RecordBatch.from_arrays(cols, schema=schema)
