"""``spark.read.format("kafka-log")``: Kafka data directories as Spark DataFrames, no broker needed.

PATH is a data dir, a topic (``<data-dir>/<topic>``, i.e. every ``<topic>-<N>`` beside it) or one
partition directory. The schema is the one of Spark's built-in Kafka source (key, value, topic,
partition, offset, timestamp, timestampType, and headers with ``includeHeaders=true``), with the
same option names (``startingOffsets``/``endingOffsets``: earliest, latest or JSON per partition;
``startingTimestamp``/``endingTimestamp``), plus:

* ``topic``, ``partitions`` (comma list) to choose partitions;
* ``includeControl`` (transaction markers as rows), ``isolationLevel`` (``read_committed``, the
  default, hides aborted transactional records; ``read_uncommitted`` shows them);
* ``includeMetadata=true`` adds segment, producerId, producerEpoch, isTransactional, isControl,
  partitionLeaderEpoch;
* ``maxBytesPerSplit`` (default 64 MiB): large segments are split at offset-index entries so one
  big partition is read by several tasks.

Rows travel as Arrow record batches built by numba kernels (``storage/reader.py``), never as
Python tuples. Reading never writes to the directory.
"""

from __future__ import annotations

import bisect
import json
import os
import struct

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..errors import StorageError
from ..storage import files
from ..storage.reader import PartitionReader
from ..storage.txn_index import TransactionIndex

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
               "timestamp timestamp, timestampType int")
HEADERS_SCHEMA = "headers array<struct<key:string,value:binary>>"
METADATA_SCHEMA = ("segment long, producerId long, producerEpoch int, isTransactional boolean, "
                   "isControl boolean, partitionLeaderEpoch int")
DEFAULT_SPLIT_BYTES = 64 << 20
EARLIEST, LATEST = -2, -1


def _flag(options, name: str, default: bool = False) -> bool:
    v = options.get(name)
    return default if v is None else str(v).strip().lower() == "true"


def resolve_partition_dirs(path: str, topic: str | None = None, partitions: str | None = None) -> list[tuple[str, int, str]]:
    """(topic, partition, directory) for a data dir, a ``<data-dir>/<topic>`` path or a partition dir."""
    path = os.path.abspath(path)
    found = []
    if os.path.isdir(path) and _is_partition_dir(path):
        t, p = files.parse_partition_dir(path)
        found.append((t, p, path))
    elif os.path.isdir(path):
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if os.path.isdir(full) and _is_partition_dir(full):
                t, p = files.parse_partition_dir(full)
                found.append((t, p, full))
    else:
        parent, wanted = os.path.dirname(path), os.path.basename(path)
        if os.path.isdir(parent):
            for name in sorted(os.listdir(parent)):
                full = os.path.join(parent, name)
                if os.path.isdir(full) and _is_partition_dir(full) and files.parse_partition_dir(full)[0] == wanted:
                    found.append((wanted, files.parse_partition_dir(full)[1], full))
    if not found:
        raise StorageError(f"{path}: no Kafka partition directory (<topic>-<N>) found there")
    if topic:
        found = [f for f in found if f[0] == topic]
        if not found:
            raise StorageError(f"{path}: topic {topic!r} not found")
    if partitions:
        wanted_p = {int(x) for x in str(partitions).split(",") if x.strip()}
        found = [f for f in found if f[1] in wanted_p]
    return sorted(found, key=lambda f: (f[0], f[1]))


def _is_partition_dir(path: str) -> bool:
    try:
        files.parse_partition_dir(path)
    except ValueError:
        return False
    return True


def _offset_spec(raw: str | None, default: int) -> dict | int:
    if raw is None:
        return default
    s = str(raw).strip()
    if s == "earliest":
        return EARLIEST
    if s == "latest":
        return LATEST
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        raise StorageError(f"invalid offsets option {raw!r}: use earliest, latest or JSON "
                           f'like {{"topic":{{"0":23,"1":-2}}}}') from None


def _pick(spec, topic: str, partition: int, default: int) -> int:
    if isinstance(spec, int):
        return spec
    v = spec.get(topic, {}).get(str(partition))
    return default if v is None else int(v)


def offset_for_timestamp(reader: PartitionReader, ts: int) -> int:
    """First offset whose record timestamp >= ts (Kafka's ListOffsets rule), or the log end."""
    for b in reader.batches():
        if b.max_timestamp < ts:
            continue
        for r in b.records():
            if r.timestamp >= ts:
                return r.offset
    return reader.log_end_offset


class KafkaLogPartition(InputPartition):
    def __init__(self, topic: str, partition: int, path: str, start: int, end: int, segment: int):
        super().__init__((topic, partition, start))
        self.topic = topic
        self.partition = partition
        self.path = path
        self.start = start
        self.end = end
        self.segment = segment


def split_points(seg_path: str, base: int, start: int, end: int, max_bytes: int) -> list[int]:
    """Offsets that cut a segment's [start, end) into pieces of about ``max_bytes`` (index entries)."""
    idx = seg_path[:-len(files.LOG_SUFFIX)] + files.INDEX_SUFFIX
    try:
        with open(idx, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return []
    points, last_pos = [], 0
    for rel, pos in struct.iter_unpack(">ii", raw[:len(raw) - len(raw) % 8]):
        off = base + rel
        if rel == 0 and pos == 0 and points:
            break   # the zero tail of a preallocated (active) index
        if pos - last_pos >= max_bytes and start < off + 1 < end:
            points.append(off + 1)
            last_pos = pos
    return points


class KafkaLogReader(DataSourceReader):
    def __init__(self, options: dict, schema):
        self.options = options
        self.include_headers = _flag(options, "includeHeaders")
        self.include_control = _flag(options, "includeControl")
        self.include_metadata = _flag(options, "includeMetadata")
        self.read_committed = str(options.get("isolationLevel", "read_committed")).lower() != "read_uncommitted"
        self.split_bytes = int(options.get("maxBytesPerSplit", DEFAULT_SPLIT_BYTES))

    def partitions(self):
        o = self.options
        path = o.get("path")
        if not path:
            raise StorageError("kafka-log needs a path: .load(<data dir | data dir/topic | partition dir>)")
        starting = _offset_spec(o.get("startingOffsets"), EARLIEST)
        ending = _offset_spec(o.get("endingOffsets"), LATEST)
        out = []
        for topic, part, pdir in resolve_partition_dirs(path, o.get("topic"), o.get("partitions")):
            reader = PartitionReader(pdir)
            log_start, log_end = reader.log_start_offset, reader.log_end_offset
            start = _resolve(_pick(starting, topic, part, EARLIEST), log_start, log_end)
            end = _resolve(_pick(ending, topic, part, LATEST), log_start, log_end)
            if o.get("startingTimestamp") is not None:
                start = offset_for_timestamp(reader, int(o["startingTimestamp"]))
            if o.get("endingTimestamp") is not None:
                end = offset_for_timestamp(reader, int(o["endingTimestamp"]))
            segs = reader.segments()
            bases = [s.base_offset for s in segs]
            for i, seg in enumerate(segs):
                seg_start = max(start, seg.base_offset)
                seg_end = min(end, segs[i + 1].base_offset if i + 1 < len(segs) else log_end)
                if seg_start >= seg_end:
                    continue
                cuts = [seg_start] + split_points(seg.path, seg.base_offset, seg_start, seg_end,
                                                  self.split_bytes) + [seg_end]
                for a, b in zip(cuts, cuts[1:]):
                    if a < b:
                        out.append(KafkaLogPartition(topic, part, pdir, a, b, seg.base_offset))
            del bases
        return out or [KafkaLogPartition("", -1, "", 0, 0, 0)]

    def read(self, partition: KafkaLogPartition):
        if partition.partition < 0:
            return
        reader = PartitionReader(partition.path)
        aborted = _aborted_txns(partition.path) if self.read_committed else []
        for batch in reader.iter_columns(partition.start, partition.end, include_control=self.include_control,
                                         with_headers=self.include_headers):
            yield self._shape(batch, partition, aborted)

    def _shape(self, batch: pa.RecordBatch, p: KafkaLogPartition, aborted) -> pa.RecordBatch:
        if aborted:
            batch = batch.filter(pa.array(~_aborted_mask(batch, aborted)))
        n = batch.num_rows
        cols = {
            "key": batch.column("key").cast(pa.binary()),
            "value": batch.column("value").cast(pa.binary()),
            "topic": _constant_string(p.topic, n),
            "partition": pa.array(np.full(n, p.partition, dtype=np.int32)),
            "offset": batch.column("offset"),
            "timestamp": pa.array(batch.column("timestamp").to_numpy() * 1000, pa.timestamp("us", tz="UTC")),
            "timestampType": batch.column("timestamp_type"),
        }
        if self.include_headers:
            cols["headers"] = batch.column("headers")
        if self.include_metadata:
            cols["segment"] = pa.array(np.full(n, p.segment, dtype=np.int64))
            cols["producerId"] = batch.column("producer_id")
            cols["producerEpoch"] = batch.column("producer_epoch").cast(pa.int32())
            cols["isTransactional"] = batch.column("is_transactional")
            cols["isControl"] = batch.column("is_control")
            cols["partitionLeaderEpoch"] = batch.column("partition_leader_epoch")
        return pa.RecordBatch.from_pydict(cols)


def _constant_string(text: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([text])).cast(pa.string())


def _resolve(spec: int, log_start: int, log_end: int) -> int:
    if spec == EARLIEST:
        return log_start
    if spec == LATEST:
        return log_end
    return min(max(spec, log_start), log_end)


def _aborted_txns(pdir: str):
    out = []
    for name in sorted(os.listdir(pdir)):
        if name.endswith(files.TXN_INDEX_SUFFIX) and name[:-len(files.TXN_INDEX_SUFFIX)].isdigit():
            base = files.offset_from_filename(name)
            out.extend(TransactionIndex(os.path.join(pdir, name), base).entries())
    return out


def _aborted_mask(batch: pa.RecordBatch, aborted) -> np.ndarray:
    pid = batch.column("producer_id").to_numpy()
    txn = batch.column("is_transactional").to_numpy(zero_copy_only=False)
    ctl = batch.column("is_control").to_numpy(zero_copy_only=False)
    off = batch.column("offset").to_numpy()
    mask = np.zeros(batch.num_rows, dtype=bool)
    for t in aborted:
        mask |= (pid == t.producer_id) & txn & ~ctl & (off >= t.first_offset) & (off <= t.last_offset)
    return mask


class KafkaLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    def schema(self) -> str:
        parts = [BASE_SCHEMA]
        if _flag(self.options, "includeHeaders"):
            parts.append(HEADERS_SCHEMA)
        if _flag(self.options, "includeMetadata"):
            parts.append(METADATA_SCHEMA)
        return ", ".join(parts)

    def reader(self, schema):
        return KafkaLogReader(self.options, schema)


def register(spark) -> None:
    """Make ``spark.read.format("kafka-log")`` available on this session."""
    spark.dataSource.register(KafkaLogDataSource)
