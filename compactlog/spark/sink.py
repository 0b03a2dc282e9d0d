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
appends through the producer the CLI and the Python API use (``compactlog.producer``: topics,
partitioner, batches of up to 1 MiB, the broker's record checks). A task writes its IPC stream to a staging directory the driver created (local mode, or a
directory shared with the executors) or, when that directory is not visible to it, returns the
bytes in its commit message (through the driver's memory: bounded by spark.driver.maxResultSize).
Everything is checked (topics, partitions, null topics, keyless records for compacted topics,
timestamps, record sizes) before the first append; a refused lock fails the write with the lock's message and
nothing is written.

A bucket URL (``save("s3://bucket/prefix")``: a Kafka data dir copied there) is written as ``clean``
writes one (``append_to_bucket``): a new generation beside it and one conditional PUT of its
switch object, so a batch becomes visible all at once; the store settings are write options by
Aiven's names (``rsm.config.storage.s3.endpoint.url``, ...) or the AWS environment of the driver.
"""

from __future__ import annotations

import os
import random
import shutil
import uuid

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CompactlogError, InvalidTopicError, TopicError
from ..producer import (HEADERS_TYPE, BatchRefused, OutgoingRecords, Producer, RecordRefused, TopicTarget,
                        outgoing_records)
from ..record import compression as codecs
from ..storage.partitioner import StickyPartitioner
from ..storage.validator import batch_size_limit
from .options import KafkaLogError

SCHEMA = pa.schema([
    pa.field("topic", pa.string()),
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("partition", pa.int32()),
    pa.field("headers", HEADERS_TYPE),
    pa.field("timestamp", pa.int64()),        # ms since the epoch; null: the append time
])
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
    from .local_dir import default_local_dir
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

class _ObjectsProducer(Producer):
    """The producer over a bucket's shadow (``append_to_bucket``): a partition whose active
    segment is an object (immutable) is rolled before its first append, so the batch lands in a
    new segment, a new object of the generation."""

    def _log(self, target, partition: int):
        log = super()._log(target, partition)
        if log.active_segment.size > 0 and getattr(log.active_segment.log, "_body", None) is not None:
            log.roll()
        return log


def append(path: str, tasks: list, *, compression: str = "none", create_topics: bool = True,
           rng: random.Random | None = None, producer_class=Producer, create: bool = False) -> dict:
    """Append every task's rows (``tasks``: (file, bytes) pairs in task order) to the data dir at
    ``path``, as a producer in the order Spark numbered the tasks (``compactlog.producer``), once
    every row passed the producer's checks. Returns counts per partition."""
    from ..storage.datadir import DataDir
    codec = codecs.CODEC_BY_NAME.get(compression.strip().lower())
    if codec is None:
        raise KafkaLogError(f"kafka-log sink: option kafka.compression.type={compression!r}: expected none, gzip, "
                            f"snappy, lz4 or zstd")
    with DataDir(path, writable=True, create=create, command=COMMAND) as dd:
        producer = producer_class(dd, compression=codec, create_topics=create_topics,
                                  partitioner=StickyPartitioner(rng=rng or random.Random()))
        for task in tasks:
            for batch in read_task(*task):
                for target, rows in _by_topic(producer, batch):
                    now = dd.clock()
                    _check(producer, target, _outgoing(rows, now), now)
        written: dict[str, int] = {}
        for task in tasks:
            for batch in read_task(*task):
                for target, rows in _by_topic(producer, batch):
                    try:
                        sent = producer.send(target, _outgoing(rows, dd.clock()))
                    except BatchRefused as e:
                        raise e.error from None
                    for a in sent:
                        written[f"{a.topic}-{a.partition}"] = written.get(f"{a.topic}-{a.partition}", 0) + a.records
        for log in list(dd.logs.values()):
            log.flush()
    return written


def append_to_bucket(url: str, settings: dict, tasks: list, *, compression: str = "none") -> dict:
    """``append`` to a Kafka data dir copied to a bucket (``s3://bucket/prefix``): the rows are
    appended to a local shadow of it (``storage.remote.bucket_clean``: small files fetched, the
    segments' bytes left in their objects; each partition written gets a new segment), which is
    then written as a new generation (create-only PUTs of the new segments and changed small
    files, server-side copies of the rest) and switched to by one conditional PUT, so a reader of
    the bucket sees the whole batch or none of it. A prefix with no data dir yet starts empty."""
    from ..storage.remote.bucket import use_settings
    from ..storage.remote.bucket_clean import shadow_generation
    use_settings(settings)
    with shadow_generation(url, allow_empty=True) as gen:
        written = append(gen.shadow, tasks, compression=compression, producer_class=_ObjectsProducer, create=True)
        if any(written.values()):
            gen.publish()
    return written


def _by_topic(producer: Producer, batch: pa.RecordBatch):
    """(topic, its rows) of one batch in SCHEMA, topics in order of first appearance."""
    topics = batch.column(0)
    if topics.null_count:
        raise KafkaLogError("kafka-log sink: a row has a null topic; set the topic option for a default topic")
    names = pc.unique(topics).to_pylist()
    for name in names:
        try:
            target = producer.target(name)
        except InvalidTopicError as e:
            raise KafkaLogError(f"kafka-log sink: topic column: {e}") from None
        except TopicError as e:
            raise KafkaLogError(f"kafka-log sink: {e}") from None
        yield target, batch if len(names) == 1 else batch.filter(pc.equal(topics, name))


def _outgoing(rows: pa.RecordBatch, now: int) -> OutgoingRecords:
    """Rows in SCHEMA as the producer's records; a null timestamp is the append time ``now``."""
    ts = rows.column(5)
    stamps = ts.fill_null(now).to_numpy() if ts.null_count else ts.to_numpy()
    try:
        return outgoing_records(rows.column(1), rows.column(2), stamps, headers=rows.column(4),
                                partitions=rows.column(3))
    except CompactlogError as e:
        raise KafkaLogError(f"kafka-log sink: {e}") from None


def _check(producer: Producer, target: TopicTarget, records: OutgoingRecords, now: int) -> None:
    """The producer's checks, refusals worded as Spark's sink words them."""
    try:
        producer.check(target, records, now)
    except RecordRefused as e:
        topic = target.name
        if e.rule == "partition":
            why = f"partition column: {topic}-{e.value} does not exist ({topic} has {target.partitions} partition(s))"
        elif e.rule == "key":
            why = (f"topic {topic} is compacted (cleanup.policy=compact) and refuses records without a key, "
                   f"as Kafka's broker does")
        elif e.rule == "size":
            limit, name = batch_size_limit(target.config)
            why = f"a record of {e.value} bytes for topic {topic} is larger than its {name} ({limit})"
        else:
            why = str(e)
        raise KafkaLogError(f"kafka-log sink: {why}") from None
