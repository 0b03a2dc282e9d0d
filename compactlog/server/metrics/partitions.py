"""The per-partition families, read under each partition's lock and written as exposition text
directly: Kafka's ``kafka.log:type=Log`` gauges (``UnifiedLog.newMetrics``: Size, NumLogSegments,
LogStartOffset, LogEndOffset) and ``kafka.cluster:type=Partition`` ones (``Partition.scala``:
ReplicasCount, UnderMinIsr, AtMinIsr, LastStableOffsetLag), and the cleaner's dirty ratio and
first dirty offset of each compacted partition (compactlog's own).

They are nearly all of a scrape (10 series a partition: 20,000 at 2,000 partitions), so they skip
prometheus_client's families: one label text per partition, one line per series, no sample
objects. Building the Prometheus text this way takes a few ms where the library's families and
encoder took ~100 ms at 2,000 partitions (benchmarks/metrics_scrape.py), and it allocates little
(a scrape makes no garbage worth a collection that would pause the broker). The lines are the
same in the Prometheus text format and in OpenMetrics (gauges; integers as integers).
``metrics.partition.level=false`` leaves all of this out.
"""

from __future__ import annotations

import math
import time

from ...cleaner.manager import CleanerManager


class PartitionReading:
    __slots__ = ("topic", "partition", "size", "segments", "start", "end", "lso", "producers", "open_txns")


def read_partitions(datadir) -> list[PartitionReading]:
    """Every open partition's numbers, each read under its lock."""
    out = []
    for (topic, partition), log in sorted(list(datadir.logs.items()), key=lambda kv: kv[0]):
        r = PartitionReading()
        with log.lock:
            if log.closed or log.deleted:
                continue
            segments = log.segments
            r.topic, r.partition = topic, partition
            r.size = segments.size_in_bytes()
            r.segments = len(segments)
            r.start = log.log_start_offset
            r.end = log.log_end_offset
            r.lso = log.last_stable_offset
            ps = log.producer_state
            r.producers = len(ps.producers)
            r.open_txns = len(ps.ongoing_txns)
        out.append(r)
    return out


# (name, help, value of a reading)
LOG_FAMILIES = (
    ("kafka_log_log_size", "Bytes of the partition's log segments", lambda r: r.size),
    ("kafka_log_log_numlogsegments", "Segments of the partition", lambda r: r.segments),
    ("kafka_log_log_logstartoffset", "The partition's log start offset", lambda r: r.start),
    ("kafka_log_log_logendoffset", "The partition's log end offset", lambda r: r.end),
    ("kafka_cluster_partition_laststableoffsetlag", "Log end offset minus last stable offset (open "
                                                    "transactions)", lambda r: r.end - r.lso),
)
# one replica, which is the whole ISR: the values a real single-node Kafka reports
CONSTANT_FAMILIES = (
    ("kafka_cluster_partition_replicascount", "Replicas (one node)", "1"),
    ("kafka_cluster_partition_underminisr", "Under min ISR (never: RF 1)", "0"),
    ("kafka_cluster_partition_atminisr", "At min ISR (always with RF 1, as Kafka reports it)", "1"),
)
RATIO = ("compactlog_log_cleanable_ratio", "Dirty ratio of a compacted partition at its last look (cleanable "
                                           "bytes / (clean + cleanable))")
FIRST_DIRTY = ("compactlog_log_first_dirty_offset", "Where the cleaner checkpoint stands (first dirty offset)")

FAMILY_NAMES = tuple(n for n, _, _ in LOG_FAMILIES + CONSTANT_FAMILIES) + (RATIO[0], FIRST_DIRTY[0])


def _escape(value: str) -> str:
    if "\\" in value or '"' in value or "\n" in value:
        return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")
    return value


def _header(name: str, doc: str) -> str:
    return f"# HELP {name} {doc}\n# TYPE {name} gauge\n"


def _number(value) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class CleanerView:
    """What the cleaner knows of the compacted partitions, read *before* the partitions are: the
    cleaner writes its checkpoint after it swapped the cleaned segments in, so a scrape never
    shows a checkpoint newer than the sizes beside it."""

    def __init__(self, manager: CleanerManager):
        self.ratios = dict(manager.last_ratios)         # one C-level copy: the cleaner threads write it
        self.checkpoints = manager.all_cleaner_checkpoints() if self.ratios else {}


def partition_text(readings: list[PartitionReading], cleaner: CleanerView | None) -> str:
    """The per-partition families as exposition text (the same lines in both formats)."""
    labels = [f'{{topic="{_escape(r.topic)}",partition="{r.partition}"}}' for r in readings]
    parts = []
    for name, doc, value in LOG_FAMILIES:
        parts.append(_header(name, doc))
        parts.append("".join([f"{name}{lb} {value(r)}\n" for lb, r in zip(labels, readings)]))
        time.sleep(0)       # a waiting event loop takes the GIL now, not at the next switch interval
    for name, doc, value in CONSTANT_FAMILIES:
        parts.append(_header(name, doc))
        tail = f" {value}\n"
        parts.append("".join([name + lb + tail for lb in labels]))
    if cleaner is not None:
        parts.append(_cleaner_text(readings, labels, cleaner.ratios, cleaner.checkpoints))
    return "".join(parts)


def _cleaner_text(readings, labels, ratios, checkpoints) -> str:
    ratio_lines, dirty_lines = [], []
    for lb, r in zip(labels, readings):
        seen = ratios.get((r.topic, r.partition))
        if seen is None:
            continue
        ratio, first_dirty = seen
        ratio_lines.append(f"{RATIO[0]}{lb} {_number(0.0 if ratio != ratio else ratio)}\n")
        offset = checkpoints.get((r.topic, r.partition), first_dirty)
        if offset is not None:
            dirty_lines.append(f"{FIRST_DIRTY[0]}{lb} {offset}\n")
    return _header(*RATIO) + "".join(ratio_lines) + _header(*FIRST_DIRTY) + "".join(dirty_lines)
