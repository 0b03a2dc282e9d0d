"""``spark.read.format("kafka-log")``: Kafka data directories as Spark DataFrames, no broker needed.

PATH is a data dir, a topic (``<data-dir>/<topic>``, i.e. every ``<topic>-<N>`` beside it) or one
partition directory. The schema is the one of Spark's built-in Kafka source (key, value, topic,
partition, offset, timestamp, timestampType, and headers with ``includeHeaders=true``), with the
same option names (``startingOffsets``/``endingOffsets``: earliest, latest or JSON per partition;
``startingTimestamp``/``endingTimestamp``), plus:

* ``topic``, ``partitions`` (comma list) to choose partitions;
* ``includeControl`` (transaction markers as rows), ``isolationLevel`` (``read_committed``, the
  default, hides aborted transactional records and, as a Kafka consumer, reads no further than
  the last stable offset, so "latest" is the LSO; ``read_uncommitted`` reads everything);
* ``includeMetadata=true`` adds segment, producerId, producerEpoch, isTransactional, isControl,
  partitionLeaderEpoch;
* ``maxBytesPerSplit`` (default 64 MiB) and ``minPartitions`` (default: this machine's cores):
  the segments to read are cut, at offset-index entries, into splits of about equal bytes, at
  most maxBytesPerSplit each and a multiple of minPartitions of them (reads under 4 MiB a task
  stay in fewer tasks); a big segment is read by several tasks and small segments, of any
  partitions, share one task;
* ``recordsPerBatch`` (default 65536): rows per Arrow batch sent to Spark (also at most ~32 MiB
  of keys and values).

Rows travel as Arrow record batches built by numba kernels (``storage/reader.py``), never as
Python tuples. Reading never writes to the directory.
"""

from __future__ import annotations

import bisect
import json
import os
import struct
from typing import NamedTuple

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from ..errors import StorageError
from ..storage import files
from ..storage.reader import PartitionReader

BASE_SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
               "timestamp timestamp, timestampType int")
HEADERS_SCHEMA = "headers array<struct<key:string,value:binary>>"
METADATA_SCHEMA = ("segment long, producerId long, producerEpoch int, isTransactional boolean, "
                   "isControl boolean, partitionLeaderEpoch int")
BASE_NAMES = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
METADATA_NAMES = ["segment", "producerId", "producerEpoch", "isTransactional", "isControl",
                  "partitionLeaderEpoch"]
DEFAULT_SPLIT_BYTES = 64 << 20
MIN_AUTO_SPLIT_BYTES = 4 << 20
DEFAULT_BATCH_RECORDS = 1 << 16
BATCH_BYTES = 32 << 20            # keys + values of one Arrow batch, at most (about)
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
            if r.timestamp >= ts and r.offset >= reader.log_start_offset:
                return r.offset
    return reader.log_end_offset


class OffsetRange(NamedTuple):
    """Offsets [start, end) of one partition, all in the segment with base offset ``segment``."""
    topic: str
    partition: int
    path: str
    start: int
    end: int
    segment: int
    size: int                  # estimated bytes, for packing ranges into splits


class KafkaLogPartition(InputPartition):
    """One Spark task: consecutive offset ranges, of one or several Kafka partitions.

    ``aborted`` holds, per partition directory, {producer id: [(first, last offset)]} of the aborted
    transactions overlapping the ranges read (empty for read_uncommitted), found once at planning.
    """

    def __init__(self, ranges: list[OffsetRange], aborted: dict | None = None):
        super().__init__([(r.topic, r.partition, r.start) for r in ranges[:1]])
        self.ranges = ranges
        self.aborted = aborted or {}

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


def _sibling(seg_path: str, suffix: str) -> str:
    """The index file beside a segment (``.log`` or ``.log.swap``) with the same marker suffix."""
    name = os.path.basename(seg_path)
    base, _, extra = name.partition(files.LOG_SUFFIX)
    return os.path.join(os.path.dirname(seg_path), base + suffix + extra)


def index_cuts(seg_path: str, base: int) -> list[tuple[int, int]]:
    """(offset just after an indexed batch, its file position) from a segment's offset index.

    Only a hint for cutting: the reader walks batch headers and filters records by offset, so a
    stale or untrimmed index cannot make a split read wrong records, only split unevenly.
    """
    try:
        with open(_sibling(seg_path, files.INDEX_SUFFIX), "rb") as f:
            raw = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return []
    out = []
    for rel, pos in struct.iter_unpack(">ii", raw[:len(raw) - len(raw) % 8]):
        if rel == 0 and pos == 0 and out:
            break   # the zero tail of a preallocated (active) index
        if out and (base + rel + 1 <= out[-1][0] or pos <= out[-1][1]):
            break   # not increasing: garbage after the live entries
        out.append((base + rel + 1, pos))
    return out


class SegmentRange(NamedTuple):
    """Offsets [start, end) of one segment to read, with what is needed to cut it further."""
    topic: str
    partition: int
    path: str                  # partition directory
    segment: int               # base offset
    start: int
    end: int
    cuts: list                 # [(offset, position)] inside (start, end), from the offset index
    first_pos: int             # estimated file position of ``start``
    end_pos: int               # estimated file position of ``end``

    @property
    def size(self) -> int:
        return max(self.end_pos - self.first_pos, 0)


def segment_range(topic: str, partition: int, pdir: str, seg, start: int, end: int) -> SegmentRange:
    cuts = index_cuts(seg.path, seg.base_offset)
    offs = [o for o, _ in cuts]

    def pos_of(offset: int) -> int:
        i = bisect.bisect_right(offs, offset) - 1
        return cuts[i][1] if i >= 0 else 0

    end_pos = pos_of(end) if cuts and end <= offs[-1] else max(seg.size, cuts[-1][1] if cuts else 0)
    inside = [(o, p) for o, p in cuts if start < o < end]
    return SegmentRange(topic, partition, pdir, seg.base_offset, start, end, inside, pos_of(start), end_pos)


def plan_splits(segments: list[SegmentRange], count: int) -> list[list[OffsetRange]]:
    """Cut the ranges (in order) into ``count`` splits of about equal bytes.

    A split boundary falls at the index entry nearest to each multiple of total/count, so a big
    segment is shared by several splits and small segments (of any partitions) share one.
    """
    total = sum(s.size for s in segments)
    if not segments:
        return []
    count = max(1, min(count, total or 1))
    bounds = [total * k // count for k in range(1, count)]
    splits, cur, cum, bi = [], [], 0, 0

    def close():
        nonlocal cur
        if cur:
            splits.append(cur)
            cur = []

    for s in segments:
        while bi < len(bounds) and bounds[bi] <= cum:
            close()
            bi += 1
        start, start_pos = s.start, s.first_pos
        for off, pos in s.cuts:
            if bi >= len(bounds):
                break
            want = bounds[bi] - cum + s.first_pos        # the boundary as a position in the file
            if pos < want:
                continue
            # the first index entry at or past the boundary: cut there (or just before it)
            cur.append(OffsetRange(s.topic, s.partition, s.path, start, off, s.segment, pos - start_pos))
            close()
            start, start_pos = off, pos
            while bi < len(bounds) and bounds[bi] - cum + s.first_pos <= pos:
                bi += 1
        cur.append(OffsetRange(s.topic, s.partition, s.path, start, s.end, s.segment,
                               max(s.end_pos - start_pos, 0)))
        cum += s.size
    close()
    return splits


def split_count(total: int, max_bytes: int, parallelism: int, explicit: bool) -> int:
    """How many splits: at most ``max_bytes`` each, and a multiple of ``parallelism`` once each
    task gets at least MIN_AUTO_SPLIT_BYTES (a Spark task costs more than reading a few MiB)."""
    n = max(1, -(-total // max(1, max_bytes)))
    if parallelism > 1:
        if total >= parallelism * MIN_AUTO_SPLIT_BYTES or explicit and n > 1:
            n = -(-max(n, parallelism) // parallelism) * parallelism
        else:
            n = max(n, min(parallelism, -(-total // MIN_AUTO_SPLIT_BYTES)))
    return n


class KafkaLogReader(DataSourceReader):
    def __init__(self, options: dict, schema):
        self.options = options
        self.include_headers = _flag(options, "includeHeaders")
        self.include_control = _flag(options, "includeControl")
        self.include_metadata = _flag(options, "includeMetadata")
        level = str(options.get("isolationLevel", "read_committed")).strip().lower()
        if level not in ("read_committed", "read_uncommitted"):
            raise StorageError(f"isolationLevel {level!r}: use read_committed or read_uncommitted")
        self.read_committed = level == "read_committed"
        self.split_bytes = max(1, int(options.get("maxBytesPerSplit", DEFAULT_SPLIT_BYTES)))
        self.explicit_split = options.get("maxBytesPerSplit") is not None
        self.batch_records = max(1, int(options.get("recordsPerBatch", DEFAULT_BATCH_RECORDS)))
        min_parts = options.get("minPartitions")
        self.min_partitions = int(min_parts) if min_parts is not None else (os.cpu_count() or 1)

    def partitions(self):
        o = self.options
        path = o.get("path")
        if not path:
            raise StorageError("kafka-log needs a path: .load(<data dir | data dir/topic | partition dir>)")
        starting = _offset_spec(o.get("startingOffsets"), EARLIEST)
        ending = _offset_spec(o.get("endingOffsets"), LATEST)
        ranges: list[SegmentRange] = []
        aborted: dict[str, dict] = {}
        for topic, part, pdir in resolve_partition_dirs(path, o.get("topic"), o.get("partitions")):
            reader = PartitionReader(pdir)
            log_start = reader.log_start_offset
            # read_committed reads up to the last stable offset, as a Kafka consumer (and Spark's
            # Kafka source with isolation.level=read_committed): "latest" is the LSO there
            log_end = _last_stable_offset(reader, pdir) if self.read_committed else reader.log_end_offset
            start = _resolve(_pick(starting, topic, part, EARLIEST), log_start, log_end)
            end = _resolve(_pick(ending, topic, part, LATEST), log_start, log_end)
            if o.get("startingTimestamp") is not None:
                start = min(offset_for_timestamp(reader, int(o["startingTimestamp"])), log_end)
            if o.get("endingTimestamp") is not None:
                end = min(offset_for_timestamp(reader, int(o["endingTimestamp"])), log_end)
            if start >= end:
                continue
            if self.read_committed:
                txns = _aborted_ranges(reader, start, end)
                if txns:
                    aborted[pdir] = txns
            segs = reader.segments()
            for i, seg in enumerate(segs):
                seg_start = max(start, seg.base_offset)
                seg_end = min(end, segs[i + 1].base_offset if i + 1 < len(segs) else end)
                if seg_start < seg_end:
                    ranges.append(segment_range(topic, part, pdir, seg, seg_start, seg_end))
        total = sum(r.size for r in ranges)
        count = split_count(total, self.split_bytes, self.min_partitions, self.explicit_split)
        out = [KafkaLogPartition(rs, {p: aborted[p] for p in {r.path for r in rs} if p in aborted})
               for rs in plan_splits(ranges, count)]
        return out or [KafkaLogPartition([])]

    def read(self, partition: KafkaLogPartition):
        readers: dict[str, PartitionReader] = {}
        for r in partition.ranges:
            reader = readers.get(r.path)
            if reader is None:
                reader = readers[r.path] = PartitionReader(r.path, chunk_records=self.batch_records,
                                                              chunk_bytes=BATCH_BYTES)
            aborted = partition.aborted.get(r.path)
            for batch in reader.iter_columns(r.start, r.end, include_control=self.include_control,
                                             with_headers=self.include_headers):
                batch = self._shape(batch, r, aborted)
                if batch.num_rows:
                    yield batch

    def _shape(self, batch: pa.RecordBatch, p: OffsetRange, aborted) -> pa.RecordBatch:
        if aborted:
            mask = _aborted_mask(batch, aborted)
            if mask.any():
                batch = batch.filter(pa.array(~mask))
        n = batch.num_rows
        ts = batch.column("timestamp").to_numpy() * 1000
        cols = [
            _binary(batch.column("key")),
            _binary(batch.column("value")),
            _constant_string(p.topic, n),
            pa.array(np.full(n, p.partition, dtype=np.int32)),
            batch.column("offset"),
            pa.Array.from_buffers(pa.timestamp("us", tz="UTC"), n, [None, pa.py_buffer(ts)]),
            batch.column("timestamp_type"),
        ]
        names = list(BASE_NAMES)
        if self.include_headers:
            cols.append(batch.column("headers"))
            names.append("headers")
        if self.include_metadata:
            cols += [pa.array(np.full(n, p.segment, dtype=np.int64)),
                     batch.column("producer_id"),
                     batch.column("producer_epoch").cast(pa.int32()),
                     batch.column("is_transactional"),
                     batch.column("is_control"),
                     batch.column("partition_leader_epoch")]
            names += METADATA_NAMES
        return pa.RecordBatch.from_arrays(cols, names=names)


def _binary(col: pa.Array) -> pa.Array:
    return col if col.type == pa.binary() else col.cast(pa.binary())


def _constant_string(text: str, n: int) -> pa.Array:
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([text])).cast(pa.string())


def _resolve(spec: int, log_start: int, log_end: int) -> int:
    if spec == EARLIEST:
        return log_start
    if spec == LATEST:
        return log_end
    return min(max(spec, log_start), log_end)


def _last_stable_offset(reader: PartitionReader, pdir: str) -> int:
    return reader.last_stable_offset()


def _aborted_ranges(reader: PartitionReader, start: int, end: int) -> dict[int, list[tuple[int, int]]]:
    """producer id -> [(first, last offset)] of the aborted transactions overlapping [start, end)
    (the reader's read_committed view: Kafka's collectAbortedTxns over checked ``.txnindex`` files)."""
    out: dict[int, list[tuple[int, int]]] = {}
    for t in reader.aborted_transactions(start, end):
        out.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))
    return out


def _aborted_mask(batch: pa.RecordBatch, aborted: dict[int, list[tuple[int, int]]]) -> np.ndarray:
    """Rows of aborted transactions: transactional data records of an aborted (producer, range)."""
    txn = batch.column("is_transactional").to_numpy(zero_copy_only=False)
    mask = np.zeros(batch.num_rows, dtype=bool)
    if not txn.any():
        return mask
    pid = batch.column("producer_id").to_numpy()
    ctl = batch.column("is_control").to_numpy(zero_copy_only=False)
    off = batch.column("offset").to_numpy()
    lo, hi = int(off.min()), int(off.max())
    candidates = txn & ~ctl
    for producer in np.unique(pid[candidates]).tolist():
        spans = [(a, b) for a, b in aborted.get(producer, ()) if a <= hi and b >= lo]
        if not spans:
            continue
        mine = candidates & (pid == producer)
        for a, b in spans:
            mask |= mine & (off >= a) & (off <= b)
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
