"""``df.write.format("kafka-log")``: Spark's Kafka-sink columns appended to a data directory.

Follows Spark's ``KafkaWriter``/``KafkaWriteTask`` for the columns and Kafka's producer for where a
record goes: ``value`` (string or binary) is required; ``key`` (string or binary), ``headers``
(array<struct<key: string, value: binary>>), ``partition`` (int) and ``timestamp`` are optional;
``topic`` (string) is required unless the ``topic`` option is given, which then overrides it. A
record without a partition goes to murmur2(key) % partitions (Kafka's default partitioner), a
keyless one to the sticky partition (one partition per 16 KiB of keyless records, Kafka's
batch.size). Other columns are ignored, as Spark's sink ignores them. A topic that does not exist
is created with ``num.partitions`` unless ``auto.create.topics.enable=false`` (Kafka's broker).

How the rows reach the log: only the process holding the data dir's ``.lock`` may write, and Spark's
tasks run in other processes, so tasks only encode their rows as Arrow IPC (LZ4) and the commit,
which PySpark runs once on the driver, takes the lock (``DataDir(path, writable=True)``) and
appends. A task writes its IPC stream to a staging directory the driver created (local mode, or a
directory shared with the executors) or, when that directory is not visible to it, returns the
bytes in its commit message (through the driver's memory: bounded by spark.driver.maxResultSize).
Everything is checked (topics, partitions, null topics, keyless records for compacted topics,
record sizes) before the first append; a refused lock fails the write with the lock's message and
nothing is written.
"""

from __future__ import annotations

import os
import random
import shutil
import uuid

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from ..record import compression as codecs
from ..record import kernels as K
from ..record.batch import RECORD_BATCH_OVERHEAD, BatchSpec, ColumnarRecords, encode_columnar_batch
from ..storage.partitioner import RECORD_OVERHEAD_BOUND, StickyPartitioner, partitions_for_keys
from .options import KafkaLogError

HEADERS_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("partition", pa.int32()),
    pa.field("headers", HEADERS_TYPE),
    pa.field("timestamp", pa.int64()),        # ms since the epoch; null: the append time
])
BATCH_BYTES = 1 << 20                         # target size of one appended batch (before compression)
COMMAND = "compactlog (Spark kafka-log sink)"


# --- the columns (checked on the driver against Spark's schema) ---------------------------------

ACCEPTED = {"topic": ("string",), "key": ("string", "binary"), "value": ("string", "binary"),
            "partition": ("int",), "headers": ("array<struct<key:string,value:binary>>",),
            "timestamp": ("timestamp", "timestamp_ntz", "double")}


def check_columns(columns: dict[str, str], topic_option: str | None) -> None:
    """Spark's KafkaWriter.validateQuery: ``columns`` maps a column name to its simpleString type."""
    if "value" not in columns:
        raise KafkaLogError("kafka-log sink: required column 'value' not found (string or binary)")
    if "topic" not in columns and not topic_option:
        raise KafkaLogError("kafka-log sink: no 'topic' column: give one, or the topic option for every row")
    for name, types in ACCEPTED.items():
        t = columns.get(name)
        if t is not None and t not in types and not (name == "topic" and topic_option):
            raise KafkaLogError(f"kafka-log sink: column {name!r} has type {t}; it must be {' or '.join(types)}")


def normalise(batch: pa.RecordBatch, topic_option: str | None, include_timestamp: bool = True) -> pa.RecordBatch:
    """One batch of the DataFrame as SCHEMA (the executor's side; no per-row Python)."""
    n = batch.num_rows
    names = batch.schema.names

    def col(name):
        return batch.column(names.index(name)) if name in names else None

    topic = pa.repeat(pa.scalar(topic_option, pa.string()), n) if topic_option else _as(col("topic"), pa.string())
    key = col("key")
    key = pa.nulls(n, pa.binary()) if key is None else _as(key, pa.binary())
    value = _as(col("value"), pa.binary())
    part = col("partition")
    part = pa.nulls(n, pa.int32()) if part is None else part.cast(pa.int32())
    headers = col("headers")
    headers = pa.nulls(n, HEADERS_TYPE) if headers is None else headers.cast(HEADERS_TYPE)
    ts = col("timestamp") if include_timestamp else None
    if ts is None:
        ts = pa.nulls(n, pa.int64())
    elif pa.types.is_timestamp(ts.type):
        ts = ts.cast(pa.timestamp("ms", tz=ts.type.tz), safe=False).cast(pa.int64())
    else:   # double: seconds, as Spark casts a double to a timestamp
        ts = pc.multiply(ts, 1000.0).cast(pa.int64(), safe=False)
    return pa.RecordBatch.from_arrays([topic, key, value, part, headers, ts], schema=SCHEMA)


def _as(arr, typ):
    if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type) or arr.type != typ:
        return arr.cast(typ)
    return arr


# --- staging: how a task hands its rows to the commit --------------------------------------------

def staging_dir() -> str:
    from .session import default_local_dir
    return os.path.join(default_local_dir(), f"kafka-log-sink-{uuid.uuid4().hex}")


def encode_task(batches, topic_option: str | None, staging: str | None) -> tuple[int, str | None, bytes | None]:
    """(rows, staged file, inline bytes) of one task's rows as an LZ4 Arrow IPC stream."""
    use_file = staging is not None and os.path.isdir(staging)
    path = os.path.join(staging, f"task-{uuid.uuid4().hex}.arrows") if use_file else None
    sink = pa.OSFile(path, "wb") if use_file else pa.BufferOutputStream()
    try:
        options = pa.ipc.IpcWriteOptions(compression="lz4")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        options = pa.ipc.IpcWriteOptions()
    rows = 0
    with pa.ipc.new_stream(sink, SCHEMA, options=options) as writer:
        for b in batches:
            if b.num_rows:
                writer.write_batch(normalise(b, topic_option))
                rows += b.num_rows
    if use_file:
        sink.close()
        return rows, path, None
    return rows, None, sink.getvalue().to_pybytes()


def read_task(path: str | None, data: bytes | None):
    source = pa.memory_map(path) if path is not None else pa.BufferReader(data)
    with pa.ipc.open_stream(source) as reader:
        yield from reader


def remove_staging(staging: str | None) -> None:
    if staging:
        shutil.rmtree(staging, ignore_errors=True)


# --- appending (the driver, under the lock) ------------------------------------------------------

def append(path: str, tasks: list, *, compression: str = "none", create_topics: bool = True,
           rng: random.Random | None = None) -> dict:
    """Append every task's rows (``tasks``: (file, bytes) pairs in task order) to the data dir at
    ``path``, as a producer in the order Spark numbered the tasks. Returns counts per partition."""
    from ..storage.datadir import DataDir
    codec = codecs.CODEC_BY_NAME.get(compression.strip().lower())
    if codec is None:
        raise KafkaLogError(f"kafka-log sink: option kafka.compression.type={compression!r}: expected none, gzip, "
                            f"snappy, lz4 or zstd")
    with DataDir(path, writable=True, command=COMMAND) as dd:
        counts = _check(dd, tasks, create_topics)
        for topic, n in counts.items():
            if not dd.has_topic(topic):
                dd.create_topic(topic, n, {})
        sticky = StickyPartitioner(rng=rng or random.Random())
        written: dict[str, int] = {}
        for task in tasks:
            for batch in read_task(*task):
                _append_batch(dd, batch, counts, codec, sticky, written)
        for log in list(dd.logs.values()):
            log.flush()
    return written


def _check(dd, tasks, create_topics: bool) -> dict[str, int]:
    """Every problem found before the first append: topic -> partition count."""
    counts: dict[str, int] = {}
    for task in tasks:
        for batch in read_task(*task):
            topic = batch.column(0)
            if topic.null_count:
                raise KafkaLogError("kafka-log sink: a row has a null topic; set the topic option for a default topic")
            for name in pc.unique(topic).to_pylist():
                if name not in counts:
                    counts[name] = _partition_count(dd, name, create_topics)
            _check_rows(dd, batch, counts)
    return counts


def _partition_count(dd, topic: str, create_topics: bool) -> int:
    from ..storage import files
    if dd.has_topic(topic):
        return max(dd.partitions(topic)) + 1
    if not create_topics or not dd.broker.get("auto.create.topics.enable"):
        raise KafkaLogError(f"kafka-log sink: topic {topic!r} does not exist in {dd.path} "
                            f"(auto.create.topics.enable=false)")
    try:
        files.validate_topic_name(topic)
    except ValueError as e:
        raise KafkaLogError(f"kafka-log sink: topic column: {e}") from None
    return dd.broker.get("num.partitions")


def _check_rows(dd, batch: pa.RecordBatch, counts: dict[str, int]) -> None:
    topics = batch.column(0)
    for topic in pc.unique(topics).to_pylist():
        rows = batch.filter(pc.equal(topics, topic))
        count = counts[topic]
        part = rows.column(3)
        if part.null_count < len(part):
            values = part.drop_null().to_numpy()
            bad = values[(values < 0) | (values >= count)]
            if bad.size:
                raise KafkaLogError(f"kafka-log sink: partition column: {topic}-{int(bad[0])} does not exist "
                                    f"({topic} has {count} partition(s))")
        config = dd.topic_config(topic) if dd.has_topic(topic) else None
        compact = config is not None and "compact" in str(config.get("cleanup.policy"))
        if compact and rows.column(1).null_count:
            raise KafkaLogError(f"kafka-log sink: topic {topic} is compacted (cleanup.policy=compact) and refuses "
                                f"records without a key, as Kafka's broker does")
        limit = config.max_message_size if config is not None else dd.broker.get("message.max.bytes")
        sizes = _record_sizes(rows)
        if sizes.size and int(sizes.max()) + RECORD_BATCH_OVERHEAD > limit:
            raise KafkaLogError(f"kafka-log sink: a record of {int(sizes.max())} bytes for topic {topic} is larger "
                                f"than its max.message.bytes ({limit})")


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, int64 offsets from 0, valid) of a binary/string array, from its buffers."""
    n = len(arr)
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int32)[arr.offset:arr.offset + n + 1].astype(np.int64) \
        if bufs[1] is not None else np.zeros(n + 1, dtype=np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    lo = int(off[0]) if n else 0
    data = data[lo:int(off[-1])] if n else data[:0]
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(n, dtype=np.bool_)
    return data, off - lo, valid


def _record_sizes(rows: pa.RecordBatch) -> np.ndarray:
    """A bound on each record's encoded size (the check before appending: headers sized, not
    encoded)."""
    _, koff, _ = _binary_parts(rows.column(1))
    _, voff, _ = _binary_parts(rows.column(2))
    hsizes, _ = _header_sizes_of(rows.column(4))
    return np.diff(koff) + np.diff(voff) + hsizes + RECORD_OVERHEAD_BOUND


def _header_sizes_of(headers: pa.Array):
    """(encoded header section size per record, the flattened header columns or None)."""
    n = len(headers)
    if headers.null_count == n:
        return np.zeros(n, dtype=np.int64), None
    list_off = headers.offsets.to_numpy().astype(np.int64)
    list_valid = headers.is_valid().to_numpy(zero_copy_only=False)
    struct = headers.values
    hkey, hval = struct.flatten()
    if hkey.null_count:
        raise KafkaLogError("kafka-log sink: a header has a null key (Kafka header keys are strings)")
    kdata, koff, _ = _binary_parts(hkey)
    vdata, voff, vvalid = _binary_parts(hval)
    sizes = np.zeros(n, dtype=np.int64)
    _header_sizes(list_off, list_valid, koff, voff, vvalid, sizes)
    return sizes, (list_off, list_valid, kdata, koff, vdata, voff, vvalid)


def encode_headers(headers: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Each record's encoded header section (Kafka's: count varint, then key and value per header)
    from a list<struct<key, value>> array, in one numba pass: (buffer, int64 offsets)."""
    sizes, cols = _header_sizes_of(headers)
    out_off = np.zeros(len(headers) + 1, dtype=np.int64)
    np.cumsum(sizes, out=out_off[1:])
    if cols is None:
        return _read_only(np.zeros(0, np.uint8)), out_off
    list_off, list_valid, kdata, koff, vdata, voff, vvalid = cols
    out = np.empty(int(out_off[-1]), dtype=np.uint8)
    _write_headers(list_off, list_valid, kdata, koff, vdata, voff, vvalid, out_off, out)
    return _read_only(out), out_off


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.view()
    a.flags.writeable = False       # the encoder's buffers are read-only (one numba specialization)
    return a


@njit(cache=True, nogil=True)
def _header_sizes(list_off, list_valid, koff, voff, vvalid, sizes):
    for i in range(sizes.shape[0]):
        lo, hi = list_off[i], list_off[i + 1]
        if not list_valid[i] or hi == lo:
            continue            # no headers: the record encoder writes the zero count itself
        size = K._uvarint_size(K._zigzag32(hi - lo))
        for h in range(lo, hi):
            klen = koff[h + 1] - koff[h]
            size += K._uvarint_size(K._zigzag32(klen)) + klen
            if vvalid[h]:
                vlen = voff[h + 1] - voff[h]
                size += K._uvarint_size(K._zigzag32(vlen)) + vlen
            else:
                size += 1
        sizes[i] = size


@njit(cache=True, nogil=True)
def _write_headers(list_off, list_valid, kdata, koff, vdata, voff, vvalid, out_off, out):
    for i in range(out_off.shape[0] - 1):
        lo, hi = list_off[i], list_off[i + 1]
        if not list_valid[i] or hi == lo:
            continue
        pos = K._write_uvarint(out, out_off[i], K._zigzag32(hi - lo))
        for h in range(lo, hi):
            klen = koff[h + 1] - koff[h]
            pos = K._write_uvarint(out, pos, K._zigzag32(klen))
            out[pos:pos + klen] = kdata[koff[h]:koff[h] + klen]
            pos += klen
            if vvalid[h]:
                vlen = voff[h + 1] - voff[h]
                pos = K._write_uvarint(out, pos, K._zigzag32(vlen))
                out[pos:pos + vlen] = vdata[voff[h]:voff[h] + vlen]
                pos += vlen
            else:
                pos = K._write_uvarint(out, pos, K._zigzag32(-1))


def _append_batch(dd, batch: pa.RecordBatch, counts: dict[str, int], codec: int, sticky: StickyPartitioner,
                  written: dict[str, int]) -> None:
    topics = batch.column(0)
    uniq = pc.unique(topics).to_pylist()
    for topic in uniq:
        rows = batch if len(uniq) == 1 else batch.filter(pc.equal(topics, topic))
        count = counts[topic]
        n = rows.num_rows
        key = rows.column(1)
        kdata, koff, kvalid = _binary_parts(key)
        vdata, voff, vvalid = _binary_parts(rows.column(2))
        hbuf, hoff = encode_headers(rows.column(4))
        kdata, vdata = _read_only(kdata), _read_only(vdata)
        sizes = np.diff(koff) + np.diff(voff) + np.diff(hoff) + RECORD_OVERHEAD_BOUND
        chosen = rows.column(3).fill_null(-1).to_numpy().astype(np.int64)
        todo = chosen < 0
        if todo.any():
            by_key = partitions_for_keys(key, count)
            chosen = np.where(todo, by_key, chosen)
            keyless = np.flatnonzero(chosen < 0)
            if keyless.size:
                chosen[keyless] = sticky.assign(topic, count, sizes[keyless])
        ts = rows.column(5)
        now = dd.clock()
        stamps = ts.fill_null(now).to_numpy() if ts.null_count else ts.to_numpy()
        order = np.argsort(chosen, kind="stable")
        bounds = np.flatnonzero(np.diff(chosen[order])) + 1
        for idx in np.split(order, bounds) if n else []:
            p = int(chosen[idx[0]])
            log = dd.open_log(topic, p)
            limit = max(min(BATCH_BYTES, log.config.max_message_size - RECORD_BATCH_OVERHEAD), 1)
            cum = np.cumsum(sizes[idx])
            lo = 0
            while lo < idx.size:
                base = cum[lo - 1] if lo else 0
                hi = max(int(np.searchsorted(cum, base + limit, side="right")), lo + 1)
                take = idx[lo:hi]
                cols = _columns(kdata, koff, kvalid, vdata, voff, vvalid, hbuf, hoff, take)
                data = encode_columnar_batch(BatchSpec(compression=codec), cols, stamps[take])
                log.append_as_leader(data)
                written[f"{topic}-{p}"] = written.get(f"{topic}-{p}", 0) + int(take.size)
                lo = hi


def _columns(kdata, koff, kvalid, vdata, voff, vvalid, hbuf, hoff, take: np.ndarray) -> ColumnarRecords:
    """The records of ``take`` (row numbers, increasing) for the encoder, which reads each record
    at [off[i], off[i+1]) of a buffer: adjacent rows are a slice, others are copied out."""
    if int(take[-1]) - int(take[0]) + 1 == take.size:
        lo, hi = int(take[0]), int(take[-1]) + 1
        return ColumnarRecords(kdata, koff[lo:hi + 1], ~kvalid[lo:hi], vdata, voff[lo:hi + 1], ~vvalid[lo:hi],
                               hbuf, hoff[lo:hi + 1])
    kbuf, ko = _gather(kdata, koff, take)
    vbuf, vo = _gather(vdata, voff, take)
    hb, ho = _gather(hbuf, hoff, take)
    return ColumnarRecords(kbuf, ko, ~kvalid[take], vbuf, vo, ~vvalid[take], hb, ho)


def _gather(buf: np.ndarray, off: np.ndarray, take: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lens = off[take + 1] - off[take]
    out_off = np.zeros(take.size + 1, dtype=np.int64)
    np.cumsum(lens, out=out_off[1:])
    out = np.empty(int(out_off[-1]), dtype=np.uint8)
    _gather_spans(buf, off, take, out_off, out)
    return _read_only(out), out_off


@njit(cache=True, nogil=True)
def _gather_spans(buf, off, take, out_off, out):
    for j in range(take.shape[0]):
        i = take[j]
        n = off[i + 1] - off[i]
        out[out_off[j]:out_off[j] + n] = buf[off[i]:off[i] + n]
