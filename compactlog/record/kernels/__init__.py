"""numba kernels for the per-record work, by what they do: ``scan`` (decoding record sections and
walking segments), ``encode`` (writing records and gathering byte spans), ``hashing`` (the key
map's digests). This package gathers their names, so ``from compactlog.record import kernels``
and ``kernels.<name>`` keep reaching every kernel and constant.

Every kernel works on a uint8 numpy view of the bytes and writes into preallocated arrays, so the
Python layers above only loop over batches, never over records. Each is compiled once, cached
beside its source (``cache=True``, ``make venv`` runs ``python -m compactlog.warmup``), and runs in
plain Python on small work (``record/jit.py``).
"""

from __future__ import annotations

# with the private helpers that kernels elsewhere (cleaner/, storage/, producer.py) inline
from .scan import (BM_ATTRIBUTES, BM_BASE_OFFSET, BM_BASE_SEQUENCE, BM_BASE_TIMESTAMP, BM_CRC, BM_FIELDS,
                   BM_FIRST_RECORD, BM_LAST_OFFSET_DELTA, BM_LEADER_EPOCH, BM_MAGIC, BM_MAX_TIMESTAMP,
                   BM_POS, BM_PRODUCER_EPOCH, BM_PRODUCER_ID, BM_RECORDS_COUNT, BM_SIZE, BM_SOURCE,
                   ERROR_MESSAGES, ERR_BATCH_SIZE, ERR_CODEC, ERR_HEADER_COUNT, ERR_HEADER_KEY, ERR_MAGIC,
                   ERR_OFFSET_ORDER, ERR_RECORDS_COUNT, ERR_RECORD_SIZE, ERR_TRAILING_BYTES, ERR_TRUNCATED,
                   ERR_VARINT_TOO_LONG, FRAME_BAD_LENGTH, FRAME_INCOMPLETE, FRAME_OK, FRAME_SHORT_V2,
                   INT64_MAX, INT64_MIN, MAX_CODEC, MIN_RECORD_SIZE, R32_BATCH, R32_HDR_COUNT, R32_KEY_LEN,
                   R32_ROWS, R32_VAL_LEN, R64_KEY_POS, R64_OFFSET, R64_RECORD_END, R64_ROWS, R64_TAIL_POS,
                   R64_TIMESTAMP, R64_VAL_POS, SCAN_COMPRESSED, SCAN_END, SCAN_FULL, SCAN_LEGACY,
                   SCAN_STOPPED, batch_frame, last_batch_end, scan_capacity, scan_headers,
                   scan_log_uncompressed, scan_records, scan_section_records, seek_batch, _be_i16, _be_i32,
                   _be_i64, _be_u, _read_varint, _read_varlong)
from .encode import (encode_records_memcpy, gather_bytes, record_size, reencode_records,
                     write_record_from_tail, _put_be, _uvarint_size, _write_uvarint, _zigzag32, _zigzag64)
from .hashing import hash_keys, murmur3_128, xxh64
