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


class CleanerView:
    """What the cleaner knows of the compacted partitions, read *before* the partitions are: the
    cleaner writes its checkpoint after it swapped the cleaned segments in, so a scrape never
    shows a checkpoint newer than the sizes beside it."""

    def __init__(self, manager: CleanerManager):
        self.ratios = dict(manager.last_ratios)         # one C-level copy: the cleaner threads write it
        self.checkpoints = manager.all_cleaner_checkpoints() if self.ratios else {}


# (name, help); the values are read in PartitionScan
LOG_FAMILIES = (
    ("kafka_log_log_size", "Bytes of the partition's log segments"),
    ("kafka_log_log_numlogsegments", "Segments of the partition"),
    ("kafka_log_log_logstartoffset", "The partition's log start offset"),
    ("kafka_log_log_logendoffset", "The partition's log end offset"),
    ("kafka_cluster_partition_laststableoffsetlag", "Log end offset minus last stable offset (open transactions)"),
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

YIELD_EVERY = 128          # partitions read between two offers of the GIL (about 0.5 ms of work)

FAMILY_NAMES = tuple(f[0] for f in LOG_FAMILIES + CONSTANT_FAMILIES) + (RATIO[0], FIRST_DIRTY[0])


class PartitionScan:
    """Every open partition read once, each under its lock: the counts the broker-wide gauges
    need, the topics that exist, and (``lines``) each per-partition family's lines. Only strings
    are made per partition, which the garbage collector does not track: a scrape of thousands
    of partitions brings no collection of the broker's heap nearer."""

    def __init__(self, datadir, cleaner: CleanerView | None, per_partition: bool):
        self.partitions = 0
        self.producers = 0
        self.open_txns = 0
        self.offline = 0        # logs taken offline after a failed write or fsync
        self.topics: set[str] = set()
        self.per_partition = per_partition
        self.cleaner = cleaner
        self.lines: list[list[str]] = [[] for _ in range(len(LOG_FAMILIES) + 3)]   # + labels, ratios, dirty
        logs = datadir.logs
        for i, key in enumerate(sorted(logs)):      # the keys themselves: no (key, log) pair made
            log = logs.get(key)
            if log is not None:
                self._read(key, log)
            if i % YIELD_EVERY == YIELD_EVERY - 1:
                time.sleep(0)       # a waiting event loop takes the GIL now, not at the next switch interval

    def _read(self, key, log) -> None:
        with log.lock:
            if log.closed or log.deleted:
                return
            segments = log.segments
            size, count = segments.size_in_bytes(), len(segments)
            start, end, lso = log.log_start_offset, log.log_end_offset, log.last_stable_offset
            ps = log.producer_state
            self.offline += log.offline is not None
            self.producers += len(ps.producers)
            self.open_txns += len(ps.ongoing_txns)
        self.partitions += 1
        topic, partition = key
        self.topics.add(topic)
        if not self.per_partition:
            return
        size_l, segments_l, start_l, end_l, lag_l, labels_l, ratio_l, dirty_l = self.lines
        labels = f'{{topic="{_escape(topic)}",partition="{partition}"}}'
        labels_l.append(labels)
        size_l.append(f"{labels} {size}\n")
        segments_l.append(f"{labels} {count}\n")
        start_l.append(f"{labels} {start}\n")
        end_l.append(f"{labels} {end}\n")
        lag_l.append(f"{labels} {end - lso}\n")
        cleaner = self.cleaner
        seen = cleaner.ratios.get(key) if cleaner is not None else None
        if seen is not None:
            ratio, first_dirty = seen
            ratio_l.append(f"{labels} {_number(0.0 if ratio != ratio else ratio)}\n")
            offset = cleaner.checkpoints.get(key, first_dirty)
            if offset is not None:
                dirty_l.append(f"{labels} {offset}\n")

    def text(self) -> str:
        """The per-partition families as exposition text (the same lines in both formats)."""
        if not self.per_partition:
            return ""
        *values, labels, ratios, dirty = self.lines
        families = list(zip(LOG_FAMILIES, values))
        families += [((name, doc), [lb + f" {value}\n" for lb in labels]) for name, doc, value in CONSTANT_FAMILIES]
        if self.cleaner is not None:
            families += [(RATIO, ratios), (FIRST_DIRTY, dirty)]
        parts = []
        for (name, doc), lines in families:
            parts.append(_header(name, doc))
            if lines:           # each line is "{labels} value\n": the name goes before each
                parts += (name, name.join(lines))
            time.sleep(0)       # a waiting event loop takes the GIL now, not at the next switch interval
        return "".join(parts)


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
