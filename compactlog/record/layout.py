"""Where each field of a RecordBatch v2 header lies: the one table of byte offsets.

Kafka's ``DefaultRecordBatch`` names each field's offset (``BASE_OFFSET_OFFSET`` ..
``RECORDS_OFFSET``); every reader and writer of batch headers here takes them from this module,
numba kernels included (module-level ints are compile-time constants to numba), instead of
writing ``17`` or ``57`` again. The attribute bits and the legacy (magic 0/1) entry prefix are
here too. Nothing in this module does I/O or imports another part of compactlog.

    0  baseOffset            int64      base offset (outside the CRC)
    8  batchLength           int32      bytes after this field
   12  partitionLeaderEpoch  int32      (outside the CRC)
   16  magic                 int8       2
   17  crc                   uint32     CRC-32C of bytes [21, end)
   21  attributes            int16
   23  lastOffsetDelta       int32
   27  baseTimestamp         int64
   35  maxTimestamp          int64
   43  producerId            int64
   51  producerEpoch         int16
   53  baseSequence          int32
   57  recordsCount          int32
   61  records
"""

from __future__ import annotations

import struct

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = 61

RECORD_BATCH_OVERHEAD = RECORDS_OFFSET      # the whole fixed header
LOG_OVERHEAD = LENGTH_OFFSET + 4            # base offset + length: what batchLength leaves out
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1  # enough to tell a v2 batch from a legacy entry
MIN_LEGACY_SIZE = 14                        # LegacyRecord.RECORD_OVERHEAD_V0

MAGIC_V0 = 0
MAGIC_V1 = 1
MAGIC_V2 = 2

# attributes
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

# whole-header and partial codecs
HEADER = struct.Struct(">qiibIhiqqqhii")     # every field, baseOffset .. recordsCount
PREFIX = struct.Struct(">qiib")              # baseOffset, batchLength, partitionLeaderEpoch, magic
AFTER_CRC = struct.Struct(">hiqqqhii")       # attributes .. recordsCount (what the CRC covers)
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")

assert HEADER.size == RECORD_BATCH_OVERHEAD
assert PREFIX.size == HEADER_SIZE_UP_TO_MAGIC
assert CRC_OFFSET + UINT32.size == ATTRIBUTES_OFFSET
assert ATTRIBUTES_OFFSET + AFTER_CRC.size == RECORDS_OFFSET
