"""One cleaner run over a data dir: plan on the driver, clean in tasks, swap and checkpoint here.

Kafka's LogCleaner thread picks the filthiest log, cleans it and repeats; one run here chooses
every partition Kafka would clean at that time and cleans each once, the partitions in parallel
tasks. Files are replaced only by renames (``.cleaned`` -> ``.swap`` -> live, old ->
``.deleted``), and the cleaner checkpoint is written after the swap.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..errors import CompactlogError
from ..storage import files
from ..storage.datadir import DataDir
from ..storage.segment import LogSegment
from .executor import InProcessExecutor, TaskFailure
from .plan import PartitionStatus, partition_status
from .source import SegmentInfo
from .stats import CleanerStats
from .task import PartitionCleanPlan, PartitionCleanResult


@dataclass
class PartitionOutcome:
    topic: str
    partition: int
    status: PartitionStatus | None
    cleaned: bool = False
    end_offset: int | None = None
    stats: CleanerStats | None = None
    error: str | None = None
    start_size: int = 0
    end_size: int = 0
    groups: list = field(default_factory=list)
    map_kind: str = ""
    map_reason: str = ""

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    def to_dict(self) -> dict:
        d = {"topic": self.topic, "partition": self.partition, "cleaned": self.cleaned,
             "firstDirtyOffset": self.status.first_dirty if self.status else None,
             "firstUncleanableOffset": self.status.first_uncleanable if self.status else None,
             "endOffset": self.end_offset, "cleanableRatio": self.status.dirty_ratio if self.status else None,
             "startSize": self.start_size, "endSize": self.end_size, "error": self.error,
             "reason": self.status.reason if self.status else None, "map": self.map_kind or None,
             "mapReason": self.map_reason or None}
        if self.stats is not None:
            s = self.stats
            d.update({"messagesRead": s.messages_read, "bytesRead": s.bytes_read,
                      "messagesWritten": s.messages_written, "bytesWritten": s.bytes_written,
                      "mapMessagesRead": s.map_messages_read, "mapBytesRead": s.map_bytes_read,
                      "invalidMessagesRead": s.invalid_messages_read, "mapKeys": s.map_keys,
                      "mapSeconds": round(s.map_seconds, 6), "cleanSeconds": round(s.clean_seconds, 6),
                      "removed": dict(s.removed)})
        return d


def compacted_partitions(datadir: DataDir, topic: str | None = None, partition: int | None = None):
    topics = [topic] if topic else datadir.topics()
    out = []
    for t in topics:
        parts = datadir.partitions(t)
        if partition is not None:
            if partition not in parts:
                from ..errors import TopicError
                raise TopicError(f"partition {t}-{partition} does not exist in {datadir.path}")
            parts = [partition]
        out.extend((t, p) for p in parts)
    return out


def segment_infos(log) -> list[SegmentInfo]:
    return [SegmentInfo(s.base_offset, s.size, s.offset_index.entries * 8, s.time_index.entries * 12,
                        s.last_modified_ms()) for s in log.segments]


def make_plan(datadir: DataDir, log, status: PartitionStatus, now_ms: int) -> PartitionCleanPlan:
    broker = datadir.broker
    threads = max(broker.get("log.cleaner.threads"), 1)
    io_buffer = broker.get("log.cleaner.io.buffer.size") // threads // 2
    clean_segs = log.segments_in_range(0, status.first_dirty) if status.first_dirty > 0 else []
    legacy_horizon = (clean_segs[-1].last_modified_ms() - log.config.delete_retention_ms) if clean_segs else 0
    from .map_choice import choose_map
    map_kind, map_reason, expected_keys = choose_map(log, status.first_dirty, status.first_uncleanable, broker)
    return PartitionCleanPlan(
        map_kind=map_kind, extra={"map_reason": map_reason, "expected_keys": expected_keys},
        topic=log.topic, partition=log.partition, dir=log.dir, first_dirty=status.first_dirty,
        first_uncleanable=status.first_uncleanable, now_ms=now_ms, segments=segment_infos(log),
        last_offsets_in_index={s.base_offset: s.offset_index.last_offset for s in log.segments},
        active_producers=log.last_records_of_active_producers(),
        delete_retention_ms=log.config.delete_retention_ms, segment_bytes=log.config.segment_bytes,
        max_index_size=log.config.max_index_size, index_interval_bytes=log.config.index_interval_bytes,
        max_message_size=log.config.max_message_size,
        broker_max_message_size=broker.get("message.max.bytes"), io_buffer_size=io_buffer,
        legacy_delete_horizon_ms=legacy_horizon)


def swap_in(log, result: PartitionCleanResult) -> None:
    """Replace every cleaned group in one rename sequence the loader can finish or undo."""
    by_base = {s.base_offset: s for s in log.segments}
    new_segments, old_segments = [], []
    for group in result.groups:
        new_segments.append(LogSegment(log.dir, group[0], log.config, now_ms=log.clock(),
                                       suffix=files.CLEANED_SUFFIX))
        old_segments.extend(by_base[b] for b in group)
    if new_segments:
        log.replace_segments(new_segments, old_segments)


def _size_below(log, offset: int | None) -> int:
    """Bytes of the segments that start below ``offset`` (the cleanable range and the clean section)."""
    if offset is None:
        return log.size()
    with log.lock:
        return sum(s.size for s in log.segments if s.base_offset < offset)


def discard_cleaned_files(log_dir: str) -> None:
    for name in os.listdir(log_dir):
        if name.endswith(files.CLEANED_SUFFIX):
            os.remove(os.path.join(log_dir, name))


class Cleaner:
    def __init__(self, datadir: DataDir, executor=None):
        self.datadir = datadir
        self.executor = executor or InProcessExecutor()

    def statuses(self, now_ms: int, topic: str | None = None, partition: int | None = None) -> list[PartitionStatus]:
        checkpoints = self.datadir.cleaner_checkpoint.read()
        out = []
        for t, p in compacted_partitions(self.datadir, topic, partition):
            log = self.datadir.open_log(t, p)
            # under the partition lock: in a broker, appends, retention and other cleaner threads
            # change the segments and the producer state meanwhile
            with log.lock:
                log.producer_state.remove_expired(now_ms)
                out.append(partition_status(log, checkpoints.get((t, p)), now_ms))
        return out

    def run(self, now_ms: int, *, topic: str | None = None, partition: int | None = None,
            force: bool = False, exclude: set | None = None) -> list[PartitionOutcome]:
        """One cleaner run at ``now_ms``; returns what happened to every compacted partition."""
        statuses = [s for s in self.statuses(now_ms, topic, partition)
                    if not exclude or (s.topic, s.partition) not in exclude]
        checkpoint_updates = {}
        outcomes = {}
        plans = []
        planned_epochs = {}
        enabled = self.datadir.broker.get("log.cleaner.enable") and self.datadir.broker.get("log.cleaner.threads") > 0
        for st in statuses:
            key = (st.topic, st.partition)
            if st.force_checkpoint_update and st.first_dirty is not None:
                checkpoint_updates[key] = st.first_dirty
            out = PartitionOutcome(st.topic, st.partition, st)
            outcomes[key] = out
            if not st.compacted:
                continue
            if force:
                self._force(st, now_ms)
            elif not enabled:
                st.reason = "log.cleaner.enable is false or log.cleaner.threads is 0"
                continue
            if not (st.eligible or (force and st.cleanable_bytes > 0)):
                continue
            log = self.datadir.open_log(st.topic, st.partition)
            with log.lock:
                discard_cleaned_files(log.dir)
                # the cleaned range's size, as Kafka's "Start size" (the active segment keeps growing)
                out.start_size = _size_below(log, st.first_uncleanable)
                plans.append(make_plan(self.datadir, log, st, now_ms))
                planned_epochs[key] = log.structure_epoch
        results = self.executor.run(plans) if plans else []
        for res in results:
            key = (res.topic, res.partition)
            out = outcomes[key]
            log = self.datadir.open_log(res.topic, res.partition)
            if isinstance(res, TaskFailure):
                out.error = res.error
                discard_cleaned_files(log.dir)
                checkpoint_updates.pop(key, None)   # a partition that could not be read stays as it was
                continue
            with log.lock:
                if log.structure_epoch != planned_epochs[key]:
                    # truncated, trimmed by retention or replaced while it was cleaned (Kafka aborts
                    # such a cleaning): the result may cover segments that are gone
                    discard_cleaned_files(log.dir)
                    out.error = (f"{log.dir}: cleaning aborted: the log changed while it was cleaned "
                                 f"(truncation, retention or another swap); it is retried next round")
                    continue
                try:
                    swap_in(log, res)
                except (CompactlogError, OSError) as e:
                    out.error = f"{log.dir}: swapping in cleaned segments failed: {e}"
                    continue
            out.cleaned = True
            out.end_offset = res.end_offset
            out.groups = res.groups
            out.map_kind = res.map_kind
            out.map_reason = res.map_reason
            out.stats = CleanerStats.from_dict(res.stats)
            out.end_size = _size_below(log, res.end_offset)
            checkpoint_updates[key] = res.end_offset
        if checkpoint_updates:
            self.datadir.cleaner_checkpoint.update(checkpoint_updates)
        return [outcomes[(s.topic, s.partition)] for s in statuses]

    def _force(self, st: PartitionStatus, now_ms: int) -> None:
        """--force: ignore the dirty ratio and min.compaction.lag.ms, keep the LSO and active-segment limits."""
        if st.eligible or not st.compacted:
            return
        log = self.datadir.open_log(st.topic, st.partition)
        from .plan import log_to_clean
        upper = min(log.last_stable_offset, log.active_segment.base_offset)
        ltc = log_to_clean(log, st.first_dirty, max(st.first_dirty, upper))
        st.first_uncleanable = max(ltc.first_uncleanable, st.first_dirty)
        st.cleanable_bytes = ltc.cleanable_bytes
        if ltc.cleanable_bytes > 0:
            st.reason = f"forced ({st.reason})"
