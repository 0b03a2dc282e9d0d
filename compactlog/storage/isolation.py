"""How far a consumer may read: Kafka's ``IsolationLevel`` and the fetch bound it picks
(``FetchIsolation``: ``FetchHighWatermark`` / ``FetchTxnCommitted``, as ``UnifiedLog.read`` and
``Partition.fetchOffsetForTimestamp`` choose ``lastFetchableOffset``).

One rule for every reader of a partition: the broker's Fetch and ListOffsets (a ``Log``), and the
data-dir readers (``PartitionReader`` under consume, the Python API and the Spark source). Both
kinds of log expose ``high_watermark`` and ``last_stable_offset``; only the one the isolation level
names is asked for, since a reader works the last stable offset out by scanning.
"""

from __future__ import annotations

READ_UNCOMMITTED = "read_uncommitted"
READ_COMMITTED = "read_committed"
ISOLATION_LEVELS = (READ_UNCOMMITTED, READ_COMMITTED)


def is_read_committed(isolation_level: str) -> bool:
    """True for read_committed, False for read_uncommitted; anything else is a ValueError."""
    if isolation_level not in ISOLATION_LEVELS:
        raise ValueError(f"isolation_level must be {READ_UNCOMMITTED} or {READ_COMMITTED}")
    return isolation_level == READ_COMMITTED


def last_fetchable_offset(log, read_committed: bool) -> int:
    """The offset a consumer reads up to (exclusive): the last stable offset for read_committed
    (nothing of an open transaction, nor anything after it), else the high watermark."""
    return log.last_stable_offset if read_committed else log.high_watermark
