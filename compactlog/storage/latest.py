"""The latest state of a partition, with Arrow: the last value of every key, read committed.

One implementation for every caller that must not need Spark: the Python API
(``latest_state``/``latest``), ``compactlog snapshot`` in this process, and the Spark path's own
equality tests. Kafka sends a key to one partition, so the state of a key lives in its partition;
tombstones and keyless records have no state; records of aborted transactions never count (the
reader's read_committed view, ``visible.py``).

Which record of a key is its latest is the topic's compaction strategy (KIP-280,
``cleaner/strategy.py``, passed in by the callers above this floor): the last offset by default, the
highest timestamp or header version with ``compaction.strategy`` timestamp or header; a snapshot
then agrees with what the cleaner keeps.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .isolation import READ_COMMITTED
from .reader import PartitionReader


def last_per_key(t: pa.Table, strategy=None) -> pa.Table:
    """The last row (in row order, which is offset order) of every key, kept in row order; with a
    version ``strategy``, every key's winner by ``strategy.latest_rows`` over the ``_ver``/``_has``
    columns."""
    codes = pc.dictionary_encode(t.column("key").combine_chunks()).indices.to_numpy()
    if strategy is not None and strategy.versioned:
        rows = strategy.latest_rows(codes, t.column("offset").to_numpy(), t.column("_ver").to_numpy(),
                                    t.column("_has").to_numpy())
        return t.take(pa.array(rows))
    last = np.full(int(codes.max()) + 1 if codes.size else 0, -1, dtype=np.int64)
    np.maximum.at(last, codes, np.arange(codes.size, dtype=np.int64))
    return t.take(pa.array(np.sort(last)))


def _binary(a: pa.Array) -> pa.Array:
    return a if a.type == pa.binary() else a.cast(pa.binary())


def latest_values(reader: PartitionReader, start: int | None = None, end: int | None = None,
                  strategy=None) -> pa.Table:
    """(key, value, offset, timestamp ms) of every live key of the partition, in offset order,
    from the records in [start, end) (default: the log start to the last stable offset), a chunk
    at a time (memory bounded by the keys, not the records); ``strategy``: the topic's
    ``cleaner.strategy.CompactionStrategy`` (None: the offset)."""
    versioned = strategy is not None and strategy.versioned
    scan = {"with_headers": True} if versioned and strategy.name == "header" else {}
    state = None
    for batch in reader.visible(READ_COMMITTED).columns(start, end, **scan):
        keys = batch.column(0)
        if keys.null_count:
            batch = batch.filter(keys.is_valid())
        if not batch.num_rows:
            continue
        columns = {"key": _binary(batch.column(0)), "value": _binary(batch.column(1)),
                   "offset": batch.column(2), "timestamp": batch.column(3)}
        if versioned:
            columns["_ver"], columns["_has"] = strategy.arrow_versions(batch)
        chunk = pa.table(columns)
        state = last_per_key(chunk if state is None else pa.concat_tables([state, chunk]), strategy)
    if versioned and state is not None:
        state = state.drop_columns(["_ver", "_has"])
    if state is None:
        return pa.table({"key": pa.array([], pa.binary()), "value": pa.array([], pa.binary()),
                         "offset": pa.array([], pa.int64()), "timestamp": pa.array([], pa.int64())})
    return state.filter(state.column("value").is_valid())
