"""What a ``kafka-log`` read covers and how it is cut into tasks; the reading of one task.

No PySpark here: the batch and streaming readers (``datasource.py``) and the in-process snapshot
(``snapshot.py``) share it. The rules are those of Spark's Kafka source (``KafkaOffsetReaderAdmin``,
``KafkaMicroBatchStream``, ``KafkaDataConsumer``) over a data directory instead of a broker:

* partitions are chosen by the strategy (assign / subscribe / subscribePattern) among the
  ``<topic>-<N>`` directories under the path;
* "earliest" is the log start offset, "latest" the log end offset (read_uncommitted) or the last
  stable offset (read_committed, as a Kafka consumer's ListOffsets and fetches);
* a timestamp maps to the first offset whose record has a timestamp >= it (Kafka's ListOffsets:
  ``LogSegment.findOffsetByTimestamp``), among offsets below that "latest";
* offsets that are gone (below the log start: retention, DeleteRecords, a recreated topic) are
  data loss: an error with ``failOnDataLoss=true`` (the default), skipped otherwise.

Every partition is read through its segment source (``storage/segment_source.py``): the ranges
and splits carry the source itself (plain data), and a task reads the segments from it wherever
it runs. Planning reads one state of each partition (the source's ``pin``); a task runs later, in
another process, and cannot hold the planner's files. Each range names the file of the segment it
was planned in (its identity in the source: device and inode locally) and the partition's planned
end. A task that finds the same file reads
the planned state. One that finds another (a broker's cleaner swapped a compacted one in since)
still reads the range when its state's active segment starts at or below the planned end: a clean
only removes a record for a later one of its key below the active segment's base, so every key's
last record below the planned end is still there. Past that, a record of the range may be gone for
one beyond the planned end, which the query does not read: the task fails the query, saying to run
it again, rather than return a short result.

Rows travel as Arrow record batches built by numba kernels (``storage/reader.py``).
"""

from __future__ import annotations

import bisect
import os
import struct
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from ..errors import StorageError
from ..storage.pinned import changed
from ..storage import files
from ..storage.isolation import READ_COMMITTED, READ_UNCOMMITTED
from ..storage.reader import PartitionReader
from ..storage.segment_source import SegmentSource, local_partitions
from ..storage.visible import drop_aborted
from .options import EARLIEST, LATEST, KafkaLogError, OffsetSpec, Strategy

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
DATA_LOSS_HINT = ("the data was deleted (retention, DeleteRecords) or the topic recreated before it was "
                  "read; set the option failOnDataLoss to false to skip what is gone")


def schema_ddl(include_headers: bool, include_metadata: bool) -> str:
    parts = [BASE_SCHEMA]
    if include_headers:
        parts.append(HEADERS_SCHEMA)
    if include_metadata:
        parts.append(METADATA_SCHEMA)
    return ", ".join(parts)


# --- partitions ----------------------------------------------------------------------------------

class TopicPartition(NamedTuple):
    topic: str
    partition: int
    dir: str

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def source(self) -> SegmentSource:
        """The partition's segments, as tasks read them: for a tiered partition of a data dir
        whose broker config names a store, its remote segments (read from the bucket by the
        tasks, never copied to local disk) then its local ones (``storage.remote.tiered_read``);
        for a partition of a bucket (``s3://…``, ``storage.remote.bucket``), its objects."""
        from ..storage.remote.bucket import is_bucket_url, partition_url_source
        if is_bucket_url(self.dir):
            return partition_url_source(self.dir)
        from ..storage.remote.tiered_read import partition_source
        return partition_source(self.dir)


def find_partitions(path: str, *, must_exist: bool = True) -> list[TopicPartition]:
    """Every partition directory under PATH: a data dir, ``<data-dir>/<topic>`` (each
    ``<topic>-<N>`` beside it) or one partition directory; listed by the segment sources'
    ``local_partitions``. A bucket URL (``s3://bucket/prefix``, ``file:///dir``) is listed as the
    data dir it holds (``storage.remote.bucket``): each partition's ``dir`` is then its URL."""
    from ..storage.remote.bucket import is_bucket_url
    if is_bucket_url(path):
        return _bucket_partitions(path, must_exist=must_exist)
    from ..storage.datadir import deleting_topics
    path = os.path.abspath(path)
    if os.path.isdir(path) and files.is_partition_dir(path) and not _holds_partitions(path):
        t, p = files.parse_partition_dir(path)
        found = [TopicPartition(t, p, path)]
    elif os.path.isdir(path):
        # a topic whose deletion a kill interrupted before its renames is no topic (as in DataDir)
        gone = deleting_topics(path)
        found = [TopicPartition(t, p, src.dir) for t, p, src in local_partitions(path) if t not in gone]
    else:
        parent, wanted = os.path.dirname(path), os.path.basename(path)
        if not _looks_like_data_dir(parent):
            # a stream may wait for a topic to appear, but not on a path that is no data dir at all
            raise StorageError(f"{path}: no such data directory, and {parent} is not a data directory "
                               f"holding a topic {wanted!r}")
        found = [TopicPartition(t, p, src.dir) for t, p, src in local_partitions(parent)
                 if t == wanted and t not in deleting_topics(parent)]
    if not found and must_exist:
        raise StorageError(f"{path}: no Kafka partition directory (<topic>-<N>) found there")
    return sorted(found, key=lambda f: (f.topic, f.partition))


def _bucket_partitions(url: str, *, must_exist: bool) -> list[TopicPartition]:
    from ..storage.remote.bucket import list_bucket, parse_bucket_url
    try:
        listing = list_bucket(parse_bucket_url(url))
    except StorageError:
        if must_exist:
            raise
        return []
    return [TopicPartition(p.topic, p.partition, p.url) for p in listing.partitions]


def _looks_like_data_dir(path: str) -> bool:
    """A directory a broker or compactlog keeps a log in: partition directories, the topics file,
    Kafka's checkpoints, meta.properties or the lock."""
    if not os.path.isdir(path):
        return False
    marks = {files.LOG_START_OFFSET_CHECKPOINT, files.RECOVERY_POINT_CHECKPOINT, files.CLEANER_CHECKPOINT,
             "compactlog.topics.json", "meta.properties", ".lock"}
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return bool(marks & set(names)) or _holds_partitions(path)


def _holds_partitions(path: str) -> bool:
    """A data dir whose own name looks like ``name-N`` (``build/data-1``) is still a data dir."""
    try:
        return bool(local_partitions(path))
    except OSError:
        return False


def select_partitions(path: str, strategy: Strategy, *, streaming: bool) -> list[TopicPartition]:
    """The partitions a query reads now. A batch query fails on a named topic or an assigned
    partition that is not there; a stream may start before its topics exist (as Spark's does)."""
    every = find_partitions(path, must_exist=not streaming)
    chosen = [tp for tp in every if strategy.wants(tp.topic, tp.partition)]
    present = {tp.topic for tp in every}
    if strategy.kind == "assign":
        have = {(tp.topic, tp.partition) for tp in every}
        missing = sorted(strategy.assigned - have)
        if missing:
            raise KafkaLogError(f"kafka-log: option assign names {', '.join(f'{t}-{p}' for t, p in missing)}, "
                                f"not found under {_where(path)}")
    elif strategy.kind == "subscribe" and not streaming:
        missing = [t for t in strategy.topics if t not in present]
        if missing:
            there = ", ".join(sorted(present)) or "none"
            raise KafkaLogError(f"kafka-log: topic {', '.join(repr(t) for t in missing)} not found under "
                                f"{_where(path)} (topics there: {there})")
    return chosen


def _where(path: str) -> str:
    from ..storage.remote.bucket import is_bucket_url
    return path if is_bucket_url(path) else os.path.abspath(path)


# --- partition state and offsets -----------------------------------------------------------------

class PartitionState:
    """One partition as a query sees it now: log start, the offset reads go up to, a reader."""

    def __init__(self, tp: TopicPartition, read_committed: bool):
        self.tp = tp
        self.reader = PartitionReader(tp.source)
        self.view = self.reader.visible(READ_COMMITTED if read_committed else READ_UNCOMMITTED)
        self.log_start = self.reader.log_start_offset
        self.log_end = self.reader.log_end_offset
        # a read_committed consumer reads (and lists offsets) up to the last stable offset
        self.latest = max(self.view.end, self.log_start)

    def offset_for_timestamp(self, ts: int) -> int | None:
        """Kafka's ListOffsets for a timestamp: -2 earliest, -1 latest, else the first offset at or
        after the log start whose record timestamp >= ts, if it is below "latest"; else None."""
        if ts == EARLIEST:
            return self.log_start
        if ts == LATEST:
            return self.latest
        return self.reader.offset_for_timestamp(ts, end=self.latest)


def _check_keys(spec: OffsetSpec, selected: list[TopicPartition]) -> None:
    """Spark's Kafka source needs JSON offsets and timestamps for exactly the partitions read."""
    if spec.kind not in ("offsets", "timestamps"):
        return
    wanted = {(tp.topic, tp.partition) for tp in selected}
    given = set(spec.per_partition)
    if given == wanted:
        return
    missing = sorted(wanted - given)
    extra = sorted(given - wanted)
    parts = []
    if missing:
        parts.append(f"misses {', '.join(f'{t}-{p}' for t, p in missing)}")
    if extra:
        parts.append(f"names {', '.join(f'{t}-{p}' for t, p in extra)}, which the query does not read")
    fill = " (-2 earliest, -1 latest)" if spec.kind == "offsets" else ""
    raise KafkaLogError(f"kafka-log: option {spec.option} {' and '.join(parts)}: give every partition "
                        f"the query reads{fill}, as Spark's Kafka source requires")


def check_specs(start: OffsetSpec, end: OffsetSpec | None, selected: list[TopicPartition], *, batch: bool) -> None:
    """What Spark's KafkaSourceProvider checks before reading anything."""
    if batch:
        if start.kind == "latest":
            raise KafkaLogError("kafka-log: startingOffsets=latest is not valid in a batch query (it would read "
                                "nothing); use earliest, JSON offsets or a timestamp")
        if start.kind == "offsets":
            for (t, p), v in sorted(start.per_partition.items()):
                if v == LATEST:
                    raise KafkaLogError(f"kafka-log: startingOffsets for {t}-{p} is -1 (latest), which is not "
                                        f"valid in a batch query")
        if end is not None and end.kind == "earliest":
            raise KafkaLogError("kafka-log: endingOffsets=earliest is not valid in a batch query")
        if end is not None and end.kind == "offsets":
            for (t, p), v in sorted(end.per_partition.items()):
                if v == EARLIEST:
                    raise KafkaLogError(f"kafka-log: endingOffsets for {t}-{p} is -2 (earliest), which is not "
                                        f"valid in a batch query")
    _check_keys(start, selected)
    if end is not None:
        _check_keys(end, selected)
        if start.kind == end.kind and start.kind in ("offsets", "timestamps"):
            for key, s in sorted(start.per_partition.items()):
                e = end.per_partition[key]
                if s >= 0 and e >= 0 and s > e:
                    raise KafkaLogError(f"kafka-log: {start.option} for {key[0]}-{key[1]} ({s}) is after "
                                        f"{end.option} ({e})")


def data_loss(fail: bool, message: str) -> None:
    """Spark's reportDataLoss: an error when failOnDataLoss, else the caller skips what is gone."""
    if fail:
        raise KafkaLogError(f"kafka-log: data loss: {message}; {DATA_LOSS_HINT}")


def resolve_start(spec: OffsetSpec, st: PartitionState, fail_on_data_loss: bool) -> int:
    """The first offset to read of one partition."""
    name = st.tp.name
    if spec.kind == "earliest":
        return st.log_start
    if spec.kind == "latest":
        return st.latest
    if spec.kind in ("timestamps", "timestamp"):
        ts = spec.timestamp if spec.kind == "timestamp" else spec.per_partition[(st.tp.topic, st.tp.partition)]
        off = st.offset_for_timestamp(ts)
        if off is None:
            if spec.strategy_latest:
                return st.latest
            raise KafkaLogError(f"kafka-log: option {spec.option}: no record of {name} at or after timestamp "
                                f"{ts} (set startingOffsetsByTimestampStrategy=latest to start at the end instead)")
        return off
    v = spec.per_partition[(st.tp.topic, st.tp.partition)]
    if v == EARLIEST:
        return st.log_start
    if v == LATEST:
        return st.latest
    if v < st.log_start:
        data_loss(fail_on_data_loss, f"{spec.option} asks for {name} from offset {v}, but the log starts at "
                                     f"{st.log_start}: offsets [{v}, {st.log_start}) are gone")
        return st.log_start
    return v


def resolve_end(spec: OffsetSpec, st: PartitionState, fail_on_data_loss: bool, level: str) -> int:
    """The offset to stop before, of one partition (batch queries)."""
    name = st.tp.name
    if spec.kind == "latest":
        return st.latest
    if spec.kind in ("timestamps", "timestamp"):
        ts = spec.timestamp if spec.kind == "timestamp" else spec.per_partition[(st.tp.topic, st.tp.partition)]
        off = st.offset_for_timestamp(ts)
        return st.latest if off is None else off
    v = spec.per_partition[(st.tp.topic, st.tp.partition)]
    if v == LATEST:
        return st.latest
    if v > st.latest:
        what = "its last stable offset (read_committed)" if level == "read_committed" and st.latest < st.log_end \
            else "its end"
        raise KafkaLogError(f"kafka-log: option {spec.option} asks for {name} up to offset {v}, past {what} "
                            f"at {st.latest} (-1 reads to the latest offset)")
    if v < st.log_start:
        data_loss(fail_on_data_loss, f"{spec.option} asks for {name} up to offset {v}, but the log starts at "
                                     f"{st.log_start}")
        return st.log_start
    return v


# --- cutting ranges into tasks -------------------------------------------------------------------

class OffsetRange(NamedTuple):
    """Offsets [start, end) of one partition, all in the segment with base offset ``segment``."""
    topic: str
    partition: int
    source: SegmentSource      # where the partition's segments are read from
    start: int
    end: int
    segment: int
    size: int                  # estimated bytes, for packing ranges into splits
    file: tuple | None = None  # (device, inode) of the segment when planned
    planned_end: int | None = None     # the offset the query reads the partition up to


class Split:
    """One Spark task: consecutive offset ranges, of one or several Kafka partitions.

    ``aborted`` holds, per partition's source, {producer id: [(first, last offset)]} of the aborted
    transactions overlapping the ranges read (empty for read_uncommitted), found once at planning.
    """

    def __init__(self, ranges: list[OffsetRange], aborted: dict | None = None):
        self.ranges = ranges
        self.aborted = aborted or {}

    @property
    def size(self) -> int:
        return sum(r.size for r in self.ranges)


def index_cuts(raw: bytes | None, base: int) -> list[tuple[int, int]]:
    """(offset just after an indexed batch, its file position) from a segment's offset index
    (its bytes ``raw``, None when it has none).

    Only a hint for cutting: the reader walks batch headers and filters records by offset, so a
    stale or untrimmed index cannot make a split read wrong records, only split unevenly.
    """
    if not raw:
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
    source: SegmentSource      # where the partition's segments are
    segment: int               # base offset
    start: int
    end: int
    cuts: list                 # [(offset, position)] inside (start, end), from the offset index
    first_pos: int             # estimated file position of ``start``
    end_pos: int               # estimated file position of ``end``
    file: tuple | None = None  # (device, inode) of the segment
    planned_end: int | None = None     # the offset the query reads the partition up to

    @property
    def size(self) -> int:
        return max(self.end_pos - self.first_pos, 0)


def segment_range(topic: str, partition: int, source: SegmentSource, seg, start: int, end: int,
                  file: tuple | None = None, planned_end: int | None = None,
                  offset_index: bytes | None = None) -> SegmentRange:
    cuts = index_cuts(offset_index, seg.base_offset)
    offs = [o for o, _ in cuts]

    def pos_of(offset: int) -> int:
        i = bisect.bisect_right(offs, offset) - 1
        return cuts[i][1] if i >= 0 else 0

    end_pos = pos_of(end) if cuts and end <= offs[-1] else max(seg.size, cuts[-1][1] if cuts else 0)
    inside = [(o, p) for o, p in cuts if start < o < end]
    return SegmentRange(topic, partition, source, seg.base_offset, start, end, inside, pos_of(start), end_pos, file,
                        planned_end)


def segment_ranges(st: PartitionState, start: int, end: int) -> list[SegmentRange]:
    segs = st.reader.segments()
    out = []
    for i, seg in enumerate(segs):
        seg_start = max(start, seg.base_offset)
        seg_end = min(end, segs[i + 1].base_offset if i + 1 < len(segs) else end)
        if seg_start < seg_end:
            out.append(segment_range(st.tp.topic, st.tp.partition, st.reader.source, seg, seg_start, seg_end,
                                     st.reader.segment_identity(seg.base_offset), end,
                                     st.reader.index_bytes(seg.base_offset, files.INDEX_SUFFIX)))
    return out


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
            cur.append(OffsetRange(s.topic, s.partition, s.source, start, off, s.segment, pos - start_pos, s.file,
                                   s.planned_end))
            close()
            start, start_pos = off, pos
            while bi < len(bounds) and bounds[bi] - cum + s.first_pos <= pos:
                bi += 1
        cur.append(OffsetRange(s.topic, s.partition, s.source, start, s.end, s.segment,
                               max(s.end_pos - start_pos, 0), s.file, s.planned_end))
        cum += s.size
    close()
    return splits


def limit_records(splits: list[list[OffsetRange]], max_records: int | None) -> list[list[OffsetRange]]:
    """Spark's maxRecordsPerPartition: no task reads more than that many offsets of a partition
    (offsets, as Spark counts them: a compacted range holds fewer records)."""
    if not max_records:
        return splits
    out = []
    for split in splits:
        keep = []
        for r in split:
            if r.end - r.start <= max_records:
                keep.append(r)
                continue
            n = r.end - r.start
            for lo in range(r.start, r.end, max_records):
                hi = min(lo + max_records, r.end)
                out.append([r._replace(start=lo, end=hi, size=r.size * (hi - lo) // n)])
        if keep:
            out.append(keep)
    return out


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


class Planned(NamedTuple):
    """What a batch read or a micro-batch covers: [start, end) per partition, and its splits."""
    ranges: dict                  # TopicPartition -> (start, end)
    splits: list


def make_splits(work: list[tuple[PartitionState, int, int]], *, split_bytes: int, explicit_split: bool,
                parallelism: int, max_records: int | None) -> list[Split]:
    """Splits of about equal bytes over [start, end) of each partition, with the aborted
    transactions each needs (read_committed: the partition's view knows its isolation level)."""
    seg_ranges: list[SegmentRange] = []
    aborted: dict[str, dict] = {}
    for st, start, end in work:
        if start >= end:
            continue
        txns = st.view.aborted(start, end)
        if txns:
            aborted[st.reader.source] = txns
        seg_ranges.extend(segment_ranges(st, start, end))
    total = sum(r.size for r in seg_ranges)
    count = split_count(total, split_bytes, parallelism, explicit_split)
    planned = limit_records(plan_splits(seg_ranges, count), max_records)
    return [Split(rs, {p: aborted[p] for p in {r.source for r in rs} if p in aborted}) for rs in planned]


# --- reading a split -----------------------------------------------------------------------------

class ReadSettings(NamedTuple):
    include_headers: bool = False
    include_control: bool = False
    include_metadata: bool = False
    batch_records: int = DEFAULT_BATCH_RECORDS
    fail_on_data_loss: bool = True


def read_split(split: Split, settings: ReadSettings):
    """The split's rows as Arrow record batches in the source's schema."""
    readers: dict[SegmentSource, PartitionReader] = {}
    for r in split.ranges:
        reader = readers.get(r.source)
        if reader is None:
            reader = readers[r.source] = PartitionReader(r.source, chunk_records=settings.batch_records,
                                                          chunk_bytes=BATCH_BYTES)
        start = r.start
        if reader.log_start_offset > start:
            # deleted between planning and reading (retention, DeleteRecords): Spark's consumer
            # finds the offset out of range in the same way
            data_loss(settings.fail_on_data_loss,
                      f"{r.topic}-{r.partition}: offsets [{start}, {reader.log_start_offset}) were deleted "
                      f"before they could be read")
            start = reader.log_start_offset
        if start >= r.end:
            continue
        check_planned_state(reader, r)
        aborted = split.aborted.get(r.source)
        for batch in reader.iter_columns(start, r.end, include_control=settings.include_control,
                                         with_headers=settings.include_headers):
            batch = shape(batch, r, aborted, settings)
            if batch.num_rows:
                yield batch


def check_planned_state(reader: PartitionReader, r: OffsetRange) -> None:
    """May the task read ``r`` from the state ``reader`` holds (see the module's docstring)?"""
    if r.file is None or reader.segment_identity(r.segment) == r.file:
        return
    segments = reader.segments()
    active_base = segments[-1].base_offset if segments else None
    if r.planned_end is not None and active_base is not None and active_base <= r.planned_end:
        return
    raise changed(r.source.location(), f"the segment {os.path.basename(r.source.location(r.segment))} planned for "
                          f"offsets [{r.start}, {r.end}) was replaced before a task read it, and the log "
                          f"went past the offset {r.planned_end} the query reads up to")


def shape(batch: pa.RecordBatch, p: OffsetRange, aborted, settings: ReadSettings) -> pa.RecordBatch:
    batch = drop_aborted(batch, aborted)
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
    if settings.include_headers:
        cols.append(batch.column("headers"))
        names.append("headers")
    if settings.include_metadata:
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
