"""One partition's cleaning round, as a self-contained task: the unit a Spark task runs.

The driver describes the round (``PartitionCleanPlan``, plain data, with the partition's segment
source); the task builds the key map, rewrites the segment groups into replacements the source
stages (``.cleaned`` files in a local partition directory) and returns only small results (stats
and the groups it wrote). The driver then has the source commit the swap.
Nothing the task reads is trusted before validate.py checked it (CRCs, offsets, indexes): a
violation fails the task, its ``.cleaned`` files are removed and the partition stays as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..errors import CompactlogError
from ..storage.segment_source import SegmentSource
from .grouping import SegmentSizes, group_segments_by_size
from .map_builder import build_offset_map
from .offset_map import CompactOffsetMap, InTaskOffsetMap, VersionMap
from .rewrite import RoundContext, clean_group
from .segment_writer import CleanedSegmentWriter, DryRunWriter
from .source import SegmentInfo, SourceLog
from .stats import CleanerStats
from .strategy import DEFAULT, CompactionStrategy
from .txn_state import CleanedTransactionState


@dataclass
class PartitionCleanPlan:
    topic: str
    partition: int
    source: SegmentSource                    # where the segments are: read and replaced through it
    first_dirty: int
    first_uncleanable: int
    now_ms: int
    segments: list[SegmentInfo]              # every segment of the log, the active one last
    last_offsets_in_index: dict[int, int]    # base -> offset index's last offset (grouping)
    active_producers: dict[int, tuple]       # pid -> (last data offset or None, epoch)
    delete_retention_ms: int
    segment_bytes: int
    max_index_size: int
    index_interval_bytes: int
    max_message_size: int
    broker_max_message_size: int
    io_buffer_size: int                      # one read buffer: io.buffer.size / threads / 2
    legacy_delete_horizon_ms: int
    map_kind: str = "task"
    extra: dict = field(default_factory=dict)
    strategy: CompactionStrategy = DEFAULT     # compaction.strategy: which record of a key wins

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def dir(self) -> str:
        """Where the partition is, as messages name it (the partition directory of a local source)."""
        return self.source.location()


@dataclass
class PartitionCleanResult:
    topic: str
    partition: int
    end_offset: int
    groups: list[list[int]]                  # base offsets of the old segments of each written group
    stats: dict
    map_kind: str = "task"
    map_reason: str = ""
    staged: list = field(default_factory=list)   # the replacements' descriptors (remote segments)
    # a round over both tiers (``zone_cuts``): what each tier's groups read, kept and removed
    # (``_add_group``); None for a log in one tier
    tiers: dict | None = None

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def plan_groups(plan: PartitionCleanPlan, end_offset: int) -> list[list[int]]:
    """Kafka's groupSegmentsBySize over the segments below ``end_offset``; no group crosses one
    of ``extra["zone_cuts"]`` (the boundary between the remote and the local tier, where the two
    are cleaned as one log: tiered-storage.md §5.2), each zone grouped on its own."""
    sizes = [SegmentSizes(s.base_offset, s.log_bytes, s.offset_index_bytes, s.time_index_bytes,
                          plan.last_offsets_in_index.get(s.base_offset, s.base_offset))
             for s in _segments_below(plan, end_offset)]
    zones, cuts = [[]], sorted(plan.extra.get("zone_cuts", ()))
    for s in sizes:
        if zones[-1] and any(zones[-1][0].base_offset < c <= s.base_offset for c in cuts):
            zones.append([])
        zones[-1].append(s)
    groups = []
    for i, zone in enumerate(zones):
        # the last offset a zone's last group may hold: the next zone's start - 1
        upper = zones[i + 1][0].base_offset if i + 1 < len(zones) else plan.first_uncleanable
        groups += group_segments_by_size(zone, plan.segment_bytes, plan.max_index_size, upper)
    return [[s.base_offset for s in g] for g in groups]


def _segments_below(plan: PartitionCleanPlan, end_offset: int) -> list[SegmentInfo]:
    if end_offset <= 0:
        return []
    bases = [s.base_offset for s in plan.segments]
    import bisect
    j = bisect.bisect_left(bases, end_offset)
    return plan.segments[:j]


def clean_partition(plan: PartitionCleanPlan, offset_map=None, *, dry_run: bool = False,
                    observer=None) -> PartitionCleanResult:
    """Build the map, rewrite every group into ``.cleaned`` files; nothing is swapped here.

    ``dry_run`` decides everything but writes nothing (explain); ``observer`` hears about every
    tombstone and marker that stays.
    """
    stats = CleanerStats(start_s=time.time())
    log = SourceLog(plan.source, plan.segments, plan.max_message_size)
    try:
        if offset_map is None and plan.strategy.versioned:
            offset_map = version_map(plan, plan.extra.get("expected_keys", 1024))
            build_offset_map(log, plan.first_dirty, plan.first_uncleanable, offset_map, stats, plan.strategy)
        elif offset_map is None:
            if CompactOffsetMap.fits(plan.first_dirty, plan.first_uncleanable):
                offset_map = CompactOffsetMap(plan.first_dirty, plan.extra.get("expected_keys", 1024))
            else:
                offset_map = InTaskOffsetMap()
            build_offset_map(log, plan.first_dirty, plan.first_uncleanable, offset_map, stats)
        end_offset = offset_map.latest_offset + 1
        stats.map_keys = len(offset_map)
        stats.map_bytes = getattr(offset_map, "bytes_used", 0)
        stats.map_done_s = time.time()
        groups = plan_groups(plan, end_offset)
        ctx = RoundContext(now_ms=plan.now_ms, delete_retention_ms=plan.delete_retention_ms,
                           upper_bound=plan.first_uncleanable, active_producers=plan.active_producers,
                           offset_map=offset_map, io_buffer_size=plan.io_buffer_size,
                           max_message_size=plan.max_message_size,
                           broker_max_message_size=plan.broker_max_message_size,
                           legacy_delete_horizon_ms=plan.legacy_delete_horizon_ms, observer=observer,
                           strategy=plan.strategy)
        txn = CleanedTransactionState()
        by_base = {s.base_offset: s for s in log.segments}
        writers = []
        cuts = plan.extra.get("zone_cuts")
        tiers = {"remote": _tier_totals(), "local": _tier_totals()} if cuts else None
        try:
            for group in groups:
                segs = [by_base[b] for b in group]
                before = _counters(stats) if tiers is not None else None
                if dry_run:
                    w = DryRunWriter(group[0])
                else:
                    w = CleanedSegmentWriter(plan.source, group[0], index_interval_bytes=plan.index_interval_bytes,
                                             max_index_size=plan.max_index_size, members=group)
                writers.append(w)
                clean_group(log, segs, w, ctx, txn, stats)
                w.finish(mtime_ms=segs[-1].info.mtime_ms)
                stats.write_seconds += w.io_seconds
                if tiers is not None:
                    # the remote tier's groups lie below the cut (groups never straddle it)
                    _add_group(tiers["remote" if group[0] < min(cuts) else "local"], len(group), before,
                               _counters(stats))
            _refuse_keyless(plan, stats)
        except BaseException:
            for w in writers:
                w.abort()
            raise
        stats.end_s = time.time()
        return PartitionCleanResult(plan.topic, plan.partition, end_offset, groups, stats.to_dict(),
                                    plan.map_kind, plan.extra.get("map_reason", ""),
                                    [s for s in (getattr(w, "staged", None) for w in writers) if s], tiers)
    finally:
        log.close()


def _tier_totals() -> dict:
    return {"segments": 0, "recordsRead": 0, "recordsKept": 0, "bytesRead": 0, "bytesKept": 0, "removed": {}}


def _counters(stats: CleanerStats) -> tuple:
    return stats.messages_read, stats.messages_written, stats.bytes_read, stats.bytes_written, dict(stats.removed)


def _add_group(t: dict, segments: int, before: tuple, after: tuple) -> None:
    """One group's share of the round's counters, added to its tier's totals."""
    t["segments"] += segments
    for name, b, a in zip(("recordsRead", "recordsKept", "bytesRead", "bytesKept"), before[:4], after[:4]):
        t[name] += a - b
    for reason, n in after[4].items():
        d = n - before[4].get(reason, 0)
        if d:
            t["removed"][reason] = t["removed"].get(reason, 0) + d


def version_map(plan: PartitionCleanPlan, expected_keys: int = 1024) -> VersionMap:
    """The key map of a version strategy, its offsets relative to the log's first segment (the
    clean section is ranked too)."""
    base = plan.segments[0].base_offset if plan.segments else plan.first_dirty
    if not VersionMap.fits(base, plan.first_uncleanable):
        raise CompactlogError(f"{plan.dir}: compaction.strategy={plan.strategy.name} ranks offsets within 2**40 "
                              f"of the log start; {base}..{plan.first_uncleanable} is wider")
    return VersionMap(base, expected_keys)


def _refuse_keyless(plan: PartitionCleanPlan, stats: CleanerStats) -> None:
    """A partition compacted only by ``clean --config`` keeps its keyless records unless the run
    says ``--drop-keyless``: the driver counted none before it planned, so any here arrived since
    (``offline.find_keyless``); the task fails and its ``.cleaned`` files go."""
    keyless = stats.removed.get("keyless", 0)
    if keyless and plan.extra.get("refuse_keyless"):
        raise CompactlogError(f"{plan.dir}: {keyless} records without a key would be removed (the topic is "
                              f"compacted only by this run's --config); nothing of the partition changed; "
                              f"--drop-keyless removes them")

