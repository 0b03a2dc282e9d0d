"""``format("kafka-log")``: Kafka data directories as a Spark source (batch and streaming) and sink.

Behaves as Spark's built-in Kafka source (``KafkaSourceProvider``, ``KafkaMicroBatchStream``,
``KafkaWriter``) with a data directory in place of a broker: the load path is a data dir, a
``<data-dir>/<topic>`` or a partition directory. Same schema (key, value, topic, partition,
offset, timestamp, timestampType, and headers with ``includeHeaders=true``), same options with the
same defaults: ``assign``/``subscribe``/``subscribePattern``; ``startingOffsets`` (batch: earliest,
stream: latest) and ``endingOffsets`` (latest), or per partition in JSON with -2/-1;
``startingOffsetsByTimestamp``/``endingOffsetsByTimestamp``/``startingTimestamp``/
``endingTimestamp`` with ``startingOffsetsByTimestampStrategy``; ``failOnDataLoss`` (true);
``kafka.isolation.level`` (read_uncommitted); ``minPartitions``, ``maxRecordsPerPartition``;
streams: ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay`` (15m) and
Trigger.AvailableNow. See ``options.py`` for compactlog's own options and ``planning.py`` for the
rules. Reading never writes to the directory.

What the Python Data Source API imposes, and where this differs from Spark's Kafka source:

* Errors: PySpark reports an exception raised in its workers with the worker's traceback; for the
  errors raised here on purpose (bad options, lost data, unreadable files) the traceback is left
  out, so the message is one line: ``[PYTHON_DATA_SOURCE_ERROR] ...: KafkaLogError: kafka-log: ...``.
* ``minOffsetsPerTrigger`` with ``maxOffsetsPerTrigger``: Python sources cannot return Spark's
  composite read limit, so the default limit names the maximum and the source applies both (and
  ``maxTriggerDelay``) itself; under ``ReadAllAvailable`` (Trigger.Once) neither applies, as in Spark.
* The starting offsets of a new stream are computed by ``initialOffset``; Spark's Kafka source
  also writes them to the checkpoint before the first batch (the Python API has no checkpoint
  path), so a query that dies before its first batch completes recomputes "latest" on restart.
* The sink needs ``mode("append")``: the Python Data Source API refuses Spark's default mode
  (ErrorIfExists), which Spark's Kafka sink treats as append; ``overwrite`` is refused, as there.
"""

from __future__ import annotations

import functools
import os
import time

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceReader, DataSourceStreamReader,
                                    InputPartition, WriterCommitMessage)
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from ..errors import CompactlogError
from . import options as O
from .options import KafkaLogError, surface
from .planning import (DEFAULT_BATCH_RECORDS, DEFAULT_SPLIT_BYTES, PartitionState, ReadSettings, Split,
                       TopicPartition, check_specs, data_loss, find_partitions, make_splits, read_split,
                       resolve_end, resolve_start, schema_ddl, select_partitions)

DEFAULT_MAX_TRIGGER_DELAY = "15m"


def one_line(fn):
    """Errors raised on purpose reach the user as their own message (see ``options.surface``)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except CompactlogError as e:
            raise surface(e)
    return wrapper


def one_line_gen(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            yield from fn(*args, **kwargs)
        except CompactlogError as e:
            raise surface(e)
    return wrapper


class ReadConfig:
    """Every read option parsed and checked; ``streaming`` None while the mode is not known yet."""

    def __init__(self, options, streaming: bool | None):
        O.check_names(options, O.READ_OPTIONS, "read")
        if streaming:
            for name in O.BATCH_ONLY:
                if O.get(options, name) is not None:
                    raise KafkaLogError(f"kafka-log: option {name} is not valid in a streaming query "
                                        f"(a stream has no end)")
        self.path = O.get(options, "path")
        if not self.path:
            raise KafkaLogError("kafka-log: no path: .load(<data dir | data dir/topic | partition dir>)")
        # a bucket (s3://…): its store settings by Aiven's names (rsm.config.storage.s3.endpoint.url,
        # …), in force in this process, which plans; the tasks get them with the sources they read
        from ..storage.remote.bucket import is_bucket_url, use_settings
        if is_bucket_url(self.path):
            use_settings({str(k).lower(): str(v) for k, v in options.items() if str(k).lower().startswith("rsm.config.")})
        self.strategy = O.strategy(options)
        self.level = O.isolation_level(options)
        self.read_committed = self.level == "read_committed"
        self.fail_on_data_loss = O.flag(options, "failOnDataLoss", True)
        self.start = O.offset_spec(options, "starting", "latest" if streaming else "earliest")
        self.end = O.offset_spec(options, "ending", "latest")
        self.settings = ReadSettings(
            include_headers=O.flag(options, "includeHeaders", False),
            include_control=O.flag(options, "includeControl", False),
            include_metadata=O.flag(options, "includeMetadata", False),
            batch_records=O.integer(options, "recordsPerBatch", DEFAULT_BATCH_RECORDS, minimum=1),
            fail_on_data_loss=self.fail_on_data_loss)
        self.split_bytes = O.integer(options, "maxBytesPerSplit", DEFAULT_SPLIT_BYTES, minimum=1)
        self.explicit_split = O.get(options, "maxBytesPerSplit") is not None
        self.min_partitions = O.integer(options, "minPartitions", os.cpu_count() or 1, minimum=1)
        self.max_records = O.integer(options, "maxRecordsPerPartition", None, minimum=1)
        self.max_offsets = O.integer(options, "maxOffsetsPerTrigger", None, minimum=1)
        self.min_offsets = O.integer(options, "minOffsetsPerTrigger", None, minimum=0)
        self.max_trigger_delay_ms = O.duration_ms(options, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY)
        if self.min_offsets is not None and self.max_offsets is not None and self.min_offsets > self.max_offsets:
            raise KafkaLogError(f"kafka-log: minOffsetsPerTrigger ({self.min_offsets}) is higher than "
                                f"maxOffsetsPerTrigger ({self.max_offsets})")

    def splits(self, work) -> list[Split]:
        return make_splits(work, split_bytes=self.split_bytes, explicit_split=self.explicit_split,
                           parallelism=self.min_partitions, max_records=self.max_records)


class KafkaLogPartition(InputPartition):
    """One Spark task (a ``planning.Split``)."""

    def __init__(self, split: Split):
        super().__init__([(r.topic, r.partition, r.start) for r in split.ranges[:1]])
        self.split = split

    @property
    def ranges(self):
        return self.split.ranges

    @property
    def aborted(self):
        return self.split.aborted

    @property
    def size(self) -> int:
        return self.split.size


# --- batch ---------------------------------------------------------------------------------------

class KafkaLogReader(DataSourceReader):
    @one_line
    def __init__(self, options, schema=None):
        self.config = ReadConfig(options, streaming=False)

    @one_line
    def plan(self) -> dict:
        """[start, end) of every partition read: TopicPartition -> (start, end, state)."""
        c = self.config
        selected = select_partitions(c.path, c.strategy, streaming=False)
        check_specs(c.start, c.end, selected, batch=True)
        out = {}
        for tp in selected:
            st = PartitionState(tp, c.read_committed)
            start = resolve_start(c.start, st, c.fail_on_data_loss)
            end = resolve_end(c.end, st, c.fail_on_data_loss, c.level)
            out[tp] = (start, end, st)
        return out

    @one_line
    def partitions(self):
        work = [(st, s, e) for s, e, st in self.plan().values()]
        out = [KafkaLogPartition(s) for s in self.config.splits(work)]
        return out or [KafkaLogPartition(Split([]))]

    @one_line_gen
    def read(self, partition: KafkaLogPartition):
        yield from read_split(partition.split, self.config.settings)


# --- streaming -----------------------------------------------------------------------------------

def _to_dict(offsets: dict) -> dict:
    """{(topic, partition): offset} as the JSON Spark keeps in the checkpoint: {"t": {"0": 12}}
    (the format of Spark's KafkaSourceOffset)."""
    out: dict = {}
    for (t, p), off in sorted(offsets.items()):
        out.setdefault(t, {})[str(p)] = int(off)
    return out


def _from_dict(doc: dict | None) -> dict:
    out = {}
    for t, parts in (doc or {}).items():
        for p, off in parts.items():
            out[(t, int(p))] = int(off)
    return out


class KafkaLogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over a data dir that a broker or ``compactlog produce`` appends to; per
    partition offsets (Spark's KafkaSourceOffset JSON) in the checkpoint, so a restarted query
    goes on exactly where its last committed batch ended."""

    @one_line
    def __init__(self, options, schema=None):
        self.config = ReadConfig(options, streaming=True)
        self._last_trigger_ms = 0          # Spark's lastTriggerMillis: the first trigger never waits
        self._latest: dict | None = None
        self._target: dict | None = None   # Trigger.AvailableNow: the offsets to stop at
        self._clock = None                 # tests: a function returning ms

    def _now_ms(self) -> int:
        return self._clock() if self._clock is not None else int(time.time() * 1000)

    def _partitions_now(self) -> dict[tuple[str, int], TopicPartition]:
        c = self.config
        return {(tp.topic, tp.partition): tp for tp in select_partitions(c.path, c.strategy, streaming=True)}

    def _states(self) -> dict[tuple[str, int], PartitionState]:
        return {k: PartitionState(tp, self.config.read_committed) for k, tp in self._partitions_now().items()}

    @one_line
    def initialOffset(self) -> dict:
        c = self.config
        states = self._states()
        check_specs(c.start, None, [st.tp for st in states.values()], batch=False)
        return _to_dict({k: resolve_start(c.start, st, c.fail_on_data_loss) for k, st in states.items()})

    def getDefaultReadLimit(self):
        c = self.config
        if c.max_offsets is not None:
            return ReadMaxRows(c.max_offsets)
        if c.min_offsets is not None:
            return ReadMinRows(c.min_offsets)
        return ReadAllAvailable()

    def reportLatestOffset(self):
        return self._latest

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {k: (st.latest, st.log_start) for k, st in self._states().items()}

    @one_line
    def latestOffset(self, start: dict, limit) -> dict:
        c = self.config
        begin = _from_dict(start)
        if self._target is not None:
            now = self._target
        else:
            now = {k: (st.latest, st.log_start) for k, st in self._states().items()}
        latest = {k: v[0] for k, v in now.items()}
        self._latest = _to_dict(latest) or None
        if isinstance(limit, ReadAllAvailable):
            return _to_dict(latest)
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else c.max_offsets
        min_rows = limit.min_rows if isinstance(limit, ReadMinRows) else c.min_offsets
        if min_rows is not None and self._target is None and self._delay(min_rows, begin, now):
            return start
        if max_rows is not None:
            return _to_dict(self._rate_limit(max_rows, begin, now))
        return _to_dict(latest)

    def _delay(self, min_rows: int, begin: dict, now: dict) -> bool:
        """Spark's delayBatch: wait for minOffsetsPerTrigger new offsets, at most maxTriggerDelay."""
        t = self._now_ms()
        if t - self._last_trigger_ms >= self.config.max_trigger_delay_ms:
            self._last_trigger_ms = t
            return False
        new = sum(latest - begin.get(k, log_start) for k, (latest, log_start) in now.items())
        if new < min_rows:
            return True
        self._last_trigger_ms = t
        return False

    @staticmethod
    def _rate_limit(limit: int, begin: dict, now: dict) -> dict:
        """Spark's rateLimit: ``limit`` offsets shared among partitions in proportion to what each
        has waiting (at least one offset for a partition with any)."""
        sizes = {}
        for k, (latest, log_start) in now.items():
            size = latest - begin.get(k, log_start)
            if size > 0:
                sizes[k] = size
        total = float(sum(sizes.values()))
        out = {k: latest for k, (latest, _) in now.items()}
        if total < 1:
            return out
        for k, size in sizes.items():
            share = limit * (size / total)
            share = int(-(-share // 1)) if share < 1 else int(share)
            out[k] = min(now[k][0], begin.get(k, now[k][1]) + share)
        return out

    @one_line
    def partitions(self, start: dict, end: dict):
        c = self.config
        begin, until = _from_dict(start), _from_dict(end)
        present = {(tp.topic, tp.partition): tp for tp in find_partitions(c.path, must_exist=False)}
        gone = sorted(set(begin) - set(until)) + sorted(k for k in until if k not in present)
        if gone:
            data_loss(c.fail_on_data_loss, f"{', '.join(f'{t}-{p}' for t, p in gone)}: partition(s) deleted; "
                                           f"records after the last batch may not have been read")
        work = []
        for k, stop in sorted(until.items()):
            if k not in present:
                continue
            st = PartitionState(present[k], c.read_committed)
            name = f"{k[0]}-{k[1]}"
            if k in begin:
                first = begin[k]
            else:
                first = st.log_start
                if first != 0:
                    data_loss(c.fail_on_data_loss, f"new partition {name} starts at offset {first} instead of 0")
            if first < st.log_start:
                data_loss(c.fail_on_data_loss, f"{name}: offsets [{first}, {st.log_start}) were deleted before "
                                               f"the stream read them")
                first = st.log_start
            if stop < first:
                data_loss(c.fail_on_data_loss, f"{name}: its offsets went back from {first} to {stop} (the "
                                               f"partition was truncated or recreated)")
                continue
            work.append((st, first, stop))
        return [KafkaLogPartition(s) for s in c.splits(work)]

    @one_line_gen
    def read(self, partition: KafkaLogPartition):
        yield from read_split(partition.split, self.config.settings)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint (Spark's Kafka source commits nothing)."""


# --- sink ----------------------------------------------------------------------------------------

class KafkaLogCommit(WriterCommitMessage):
    def __init__(self, rows: int, path: str | None, data: bytes | None):
        self.rows = rows
        self.path = path
        self.data = data


class KafkaLogWriter(DataSourceArrowWriter):
    """Tasks encode their rows; the commit appends them all under the data dir's lock (sink.py)."""

    def __init__(self, path: str, topic: str | None, compression: str, staging: str, settings: dict | None = None):
        self.path = path
        self.topic = topic
        self.compression = compression
        self.staging = staging
        self.settings = settings        # a bucket's store settings (the commit runs in another worker)

    @one_line
    def write(self, iterator) -> KafkaLogCommit:
        from .sink import encode_task
        return KafkaLogCommit(*encode_task(iterator, self.topic, self.staging))

    @one_line
    def commit(self, messages) -> None:
        from .sink import append, append_to_bucket, remove_staging
        tasks = [(m.path, m.data) for m in messages if m is not None]
        try:
            if self.settings is not None:
                append_to_bucket(self.path, self.settings, tasks, compression=self.compression)
            else:
                append(self.path, tasks, compression=self.compression)
        finally:
            remove_staging(self.staging)

    def abort(self, messages) -> None:
        from .sink import remove_staging
        remove_staging(self.staging)


# --- the source ----------------------------------------------------------------------------------

class KafkaLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    @one_line
    def schema(self) -> str:
        ReadConfig(self.options, streaming=None)       # every option checked at load()
        return schema_ddl(O.flag(self.options, "includeHeaders", False),
                          O.flag(self.options, "includeMetadata", False))

    def reader(self, schema):
        return KafkaLogReader(self.options, schema)

    def streamReader(self, schema):
        return KafkaLogStreamReader(self.options, schema)

    @one_line
    def writer(self, schema, overwrite: bool):
        from .sink import check_columns, staging_dir
        if overwrite:
            raise KafkaLogError("kafka-log sink: mode overwrite is not supported: a Kafka log is append-only "
                                "(Spark's Kafka sink refuses it too); use mode(\"append\")")
        O.check_names(self.options, O.WRITE_OPTIONS, "write")
        path = O.get(self.options, "path")
        if not path:
            raise KafkaLogError("kafka-log sink: no path: .save(<data dir>)")
        from ..storage.remote.bucket import is_bucket_url, parse_bucket_url
        settings = None
        if is_bucket_url(path):
            # a copied data dir in a bucket (sink.append_to_bucket); its URL checked here, on the driver
            settings = {str(k).lower(): str(v) for k, v in self.options.items() if str(k).lower().startswith("rsm.config.")}
            try:
                parse_bucket_url(path, settings)
            except CompactlogError as e:
                raise KafkaLogError(f"kafka-log sink: {e}") from None
        elif not os.path.isdir(path):
            raise KafkaLogError(f"kafka-log sink: {os.path.abspath(path)}: data directory does not exist")
        topic = O.get(self.options, "topic")
        topic = topic.strip() if topic is not None else None
        compression = O.get(self.options, "kafka.compression.type") or "none"
        if compression.strip().lower() not in ("none", "gzip", "snappy", "lz4", "zstd"):
            raise KafkaLogError(f"kafka-log sink: option kafka.compression.type={compression!r}: expected none, "
                                f"gzip, snappy, lz4 or zstd")
        check_columns({f.name: f.dataType.simpleString() for f in schema.fields}, topic)
        staging = staging_dir()
        os.makedirs(staging, exist_ok=True)
        return KafkaLogWriter(path if settings is not None else os.path.abspath(path), topic,
                              compression.strip().lower(), staging, settings)


def register(spark) -> None:
    """Make ``format("kafka-log")`` available on this session (read, readStream, write)."""
    spark.dataSource.register(KafkaLogDataSource)
