"""The latest state of a topic: the last value of every key, tombstones and aborted data excluded.

Two engines with one result. On Spark (``latest_state``): the kafka-log source read_committed, then
per (partition, key) the record with the highest offset, dropped when it is a tombstone. "Highest"
is the topic's compaction strategy (KIP-280, ``cleaner/strategy.py``: the offset, or the timestamp
or header version then the offset), read from the data dir's topic configs unless given, so that a
snapshot agrees with what the cleaner keeps. In this
process (``latest_state_local``), for inputs a JVM would only slow down: the same read_committed
view (``planning.py``: records below the last stable offset, aborted transactions filtered out),
reduced partition by partition with Arrow and numpy (the last occurrence of each key wins), never
a Python object per record. Kafka sends a key to one partition, so the state of a key lives in its
partition; keyless records have no state and are left out.

Both write the same rows and types (key binary, value binary, partition int, offset long,
timestamp in microseconds UTC) as Parquet (Spark told to write TIMESTAMP_MICROS, as pyarrow does,
instead of its legacy INT96), JSON lines (Spark's layout: binary as base64, timestamps as
``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` in UTC) or a Delta table (Parquet plus a ``_delta_log`` commit).
"""

from __future__ import annotations

import glob
import os
import shutil
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from ..record.jit import njit

from ..errors import CompactlogError

FORMATS = ("parquet", "delta", "json")
COLUMNS = ("key", "value", "partition", "offset", "timestamp")
STATE_SCHEMA = pa.schema([pa.field("key", pa.binary()), pa.field("value", pa.binary()),
                          pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
                          pa.field("timestamp", pa.timestamp("us", tz="UTC"))])


# --- on Spark ------------------------------------------------------------------------------------

def topic_strategy(path: str, topic: str | None, broker=None):
    """The compaction strategy of ``topic`` in the data dir at ``path`` (its configs, else the
    broker's defaults: server.properties and dynamic configs); the offset for several topics."""
    from ..cleaner.strategy import DEFAULT, CompactionStrategy
    if not topic:
        return DEFAULT
    from ..storage.remote.bucket import is_bucket_url
    if is_bucket_url(path):
        # a bucket holds segments, not topic configs (Kafka keeps them in its metadata log)
        return DEFAULT
    from ..storage.datadir import DataDir, load_broker_config
    return CompactionStrategy.of(DataDir(path, broker=broker or load_broker_config(path)).topic_config(topic))


def latest_state(spark, path: str, topic: str | None = None, partitions: str | None = None, strategy=None):
    """A DataFrame (key, value, partition, offset, timestamp): the latest value per key
    (``strategy``: a ``CompactionStrategy``; default: the topic's)."""
    from pyspark.sql import functions as F
    strategy = strategy if strategy is not None else topic_strategy(path, topic)
    reader = spark.read.format("kafka-log").option("kafka.isolation.level", "read_committed")
    if topic:
        reader = reader.option("subscribe", topic)
    if partitions:
        reader = reader.option("partitions", partitions)
    if strategy.name == "header":
        reader = reader.option("includeHeaders", "true")
    records = reader.load(path).where(F.col("key").isNotNull())
    latest = (records.groupBy("partition", "key")
              .agg(F.max_by(F.struct("value", "offset", "timestamp"), strategy.spark_rank()).alias("r")))
    return (latest.where(F.col("r.value").isNotNull())
            .select("key", F.col("r.value").alias("value"), "partition", F.col("r.offset").alias("offset"),
                    F.col("r.timestamp").alias("timestamp")))


def _prepare(out: str, fmt: str, overwrite: bool) -> None:
    if fmt not in FORMATS:
        raise CompactlogError(f"unknown snapshot format {fmt!r}: use {', '.join(FORMATS)}")
    _put_back_interrupted(out)
    if os.path.lexists(out) and not overwrite:
        raise CompactlogError(f"{out} already exists (use --overwrite to replace it)")


# A snapshot is written whole beside its place (``.NAME.partial-PID``) and renamed into it at the
# end, so that a write that fails (a full disk) or a kill leaves no half table where a reader looks
# for one, and ``--overwrite`` keeps the old table until the new one is whole (it was removed
# first: a failed overwrite lost both). The old one is set aside as ``.NAME.old-PID`` for the
# instant between the two renames; the next write of the same place puts it back if a crash came
# between them, and removes what dead writers left.

def _staging_names(out: str) -> tuple[str, str]:
    parent, name = os.path.split(os.path.abspath(out))
    return parent, name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.remove(path)


def _put_back_interrupted(out: str) -> None:
    parent, name = _staging_names(out)
    if not os.path.isdir(parent):
        return
    for entry in os.listdir(parent):
        for kind in ("partial", "old"):
            prefix = f".{name}.{kind}-"
            if not entry.startswith(prefix) or not entry[len(prefix):].isdigit():
                continue
            if _alive(int(entry[len(prefix):])):
                continue
            path = os.path.join(parent, entry)
            if kind == "old" and not os.path.lexists(out):
                os.rename(path, out)        # a crash between the two renames: the old table is back
            else:
                _remove(path)


def _fsync_tree(path: str) -> None:
    """Every file and directory of the staged table on disk before it is renamed into place: a
    power loss after the rename would otherwise leave the new table's names with no bytes (and,
    for --overwrite, the old table already removed)."""
    from ..storage.fsutil import fsync_dir, fsync_file
    if not os.path.isdir(path):
        fsync_file(path)
        return
    for root, _dirs, names in os.walk(path, topdown=False):
        for n in names:
            fsync_file(os.path.join(root, n))
        fsync_dir(root)


def _staged_write(out: str, fmt: str, overwrite: bool, write) -> None:
    """``write(path)`` into a staging place, then renamed to ``out`` (see above)."""
    from ..storage.fsutil import fsync_dir
    _prepare(out, fmt, overwrite)
    parent, name = _staging_names(out)
    tmp = os.path.join(parent, f".{name}.partial-{os.getpid()}")
    _remove(tmp)
    try:
        write(tmp)
        _fsync_tree(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    try:
        if os.path.lexists(out):
            old = os.path.join(parent, f".{name}.old-{os.getpid()}")
            os.rename(out, old)
        os.rename(tmp, out)
    except BaseException:
        if old is not None and not os.path.lexists(out):
            os.rename(old, out)
            old = None
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        if old is not None and os.path.lexists(out):
            _remove(old)
    fsync_dir(parent)


def write_state(df, out: str, fmt: str = "parquet", *, overwrite: bool = False) -> None:
    """Write a state DataFrame as Parquet, a Delta table (Parquet + _delta_log) or JSON lines."""
    _staged_write(out, fmt, overwrite, lambda path: _write_state(df, path, fmt))


def _write_state(df, out: str, fmt: str) -> None:
    if fmt == "json":
        df.write.option("timeZone", "UTC").json(out)
        return
    conf = df.sparkSession.conf
    before = conf.get("spark.sql.parquet.outputTimestampType", None)
    conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    try:
        df.write.parquet(out)
    finally:
        if before is None:
            conf.unset("spark.sql.parquet.outputTimestampType")
        else:
            conf.set("spark.sql.parquet.outputTimestampType", before)
    if fmt == "delta":
        # Spark's Delta Lake writer needs jars from Maven; delta-rs turns the Parquet files Spark
        # wrote into a Delta table (a _delta_log commit listing them) without copying data.
        from deltalake import convert_to_deltalake
        for name in os.listdir(out):
            if name.startswith(("_SUCCESS", ".")) or name.endswith(".crc"):
                os.remove(os.path.join(out, name))
        convert_to_deltalake(out)


# --- in this process -----------------------------------------------------------------------------

def latest_state_local(path: str, topic: str, partitions: str | None = None, *, on_partition=None,
                       strategy=None) -> pa.Table:
    """The latest value per key (as ``latest_state``) computed here, as a pyarrow Table
    (storage.latest, the same computation as the Python API's)."""
    from ..storage.latest import latest_values
    from .options import Strategy, _partition_list
    from .planning import PartitionState, select_partitions
    compaction = strategy if strategy is not None else topic_strategy(path, topic)
    strategy = Strategy("subscribe", topics=(topic,), partitions=_partition_list(partitions))
    tables = []
    for tp in select_partitions(path, strategy, streaming=False):
        st = PartitionState(tp, read_committed=True)
        state = latest_values(st.reader, st.log_start, st.latest, compaction)
        if on_partition is not None:
            on_partition(tp)
        n = state.num_rows
        if not n:
            continue
        ts = pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n,
                                   [None, pa.py_buffer(state.column("timestamp").to_numpy() * 1000)])
        tables.append(pa.table([state.column("key"), state.column("value"),
                                pa.array(np.full(n, tp.partition, dtype=np.int32)), state.column("offset"), ts],
                               schema=STATE_SCHEMA))
    if not tables:
        return STATE_SCHEMA.empty_table()
    return pa.concat_tables(tables).combine_chunks()


def write_table(table: pa.Table, out: str, fmt: str = "parquet", *, overwrite: bool = False) -> None:
    """Write a state table as ``write_state`` writes the DataFrame, without Spark."""
    table = table.select(list(COLUMNS)).cast(STATE_SCHEMA)
    _staged_write(out, fmt, overwrite, lambda path: _write_table(table, path, fmt))


def _write_table(table: pa.Table, out: str, fmt: str) -> None:
    if fmt == "delta":
        from deltalake import write_deltalake
        write_deltalake(out, table)
        return
    os.makedirs(out)
    part = f"part-00000-{uuid.uuid4()}-c000"
    if fmt == "parquet":
        import pyarrow.parquet as pq
        pq.write_table(table, os.path.join(out, part + ".snappy.parquet"), compression="snappy")
    else:
        with open(os.path.join(out, part + ".json"), "wb") as f:
            if table.num_rows:
                f.write(json_lines(table))
    with open(os.path.join(out, "_SUCCESS"), "wb"):
        pass


def json_lines(table: pa.Table) -> bytes:
    """Spark's JSON lines for the state rows (binary as base64, UTC millisecond timestamps), built
    column-wise with Arrow string kernels."""
    ts = pc.strftime(table.column("timestamp").cast(pa.timestamp("ms", tz="UTC")), format="%Y-%m-%dT%H:%M:%SZ")
    parts = ['{"key":"', base64(table.column("key")), '","value":"', base64(table.column("value")),
             '","partition":', table.column("partition").cast(pa.string()), ',"offset":',
             table.column("offset").cast(pa.string()), ',"timestamp":"', ts, '"}']
    lines = pc.binary_join_element_wise(*parts, "")
    arr = lines.combine_chunks() if isinstance(lines, pa.ChunkedArray) else lines
    if arr.type != pa.string():
        arr = arr.cast(pa.large_string())
        odt = np.int64
    else:
        odt = np.int32
    # the buffers of a string array are the lines back to back: add a newline after each
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=odt)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    out = np.empty(int(off[-1] - off[0]) + len(arr), dtype=np.uint8)
    _copy_lines(data, off, out)
    return out.tobytes()


@njit(cache=True)
def _copy_lines(data, off, out):
    pos = 0
    for i in range(off.shape[0] - 1):
        n = off[i + 1] - off[i]
        out[pos:pos + n] = data[off[i]:off[i] + n]
        pos += n
        out[pos] = 10
        pos += 1


_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)


def base64(col) -> pa.Array:
    """Standard base64 of every item of a binary array, as a string array (one numba pass)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    arr = arr.cast(pa.binary()) if arr.type != pa.binary() else arr
    n = len(arr)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lens = (np.diff(off) + 2) // 3 * 4
    out_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=out_off[1:])
    out = np.empty(int(out_off[-1]), dtype=np.uint8)
    _b64(data, off, out, out_off, _B64)
    typ = pa.large_string() if out_off[-1] > 0x7FFFFFFF else pa.string()
    offsets = out_off if typ == pa.large_string() else out_off.astype(np.int32)
    return pa.Array.from_buffers(typ, n, [None, pa.py_buffer(offsets), pa.py_buffer(out)]).cast(pa.string())


@njit(cache=True)
def _b64(data, off, out, out_off, alphabet):
    for i in range(off.shape[0] - 1):
        src, end, dst = off[i], off[i + 1], out_off[i]
        while end - src >= 3:
            v = (np.int64(data[src]) << 16) | (np.int64(data[src + 1]) << 8) | np.int64(data[src + 2])
            out[dst] = alphabet[(v >> 18) & 63]
            out[dst + 1] = alphabet[(v >> 12) & 63]
            out[dst + 2] = alphabet[(v >> 6) & 63]
            out[dst + 3] = alphabet[v & 63]
            src += 3
            dst += 4
        rest = end - src
        if rest == 1:
            v = np.int64(data[src]) << 16
            out[dst] = alphabet[(v >> 18) & 63]
            out[dst + 1] = alphabet[(v >> 12) & 63]
            out[dst + 2] = 61
            out[dst + 3] = 61
        elif rest == 2:
            v = (np.int64(data[src]) << 16) | (np.int64(data[src + 1]) << 8)
            out[dst] = alphabet[(v >> 18) & 63]
            out[dst + 1] = alphabet[(v >> 12) & 63]
            out[dst + 2] = alphabet[(v >> 6) & 63]
            out[dst + 3] = 61


def count_rows(out: str, fmt: str) -> int:
    """Rows written under ``out`` (either engine), from file metadata: no Spark job."""
    if fmt == "json":
        total = 0
        for p in glob.glob(os.path.join(out, "*.json")):
            with open(p, "rb") as f:
                total += sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
        return total
    import pyarrow.parquet as pq
    if fmt == "delta":
        from deltalake import DeltaTable
        files = [f[len("file://"):] if f.startswith("file://") else f for f in DeltaTable(out).file_uris()]
    else:
        files = glob.glob(os.path.join(out, "*.parquet"))
    return sum(pq.ParquetFile(f).metadata.num_rows for f in files)

