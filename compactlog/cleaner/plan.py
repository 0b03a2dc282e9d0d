"""What to clean and why not: Kafka's LogCleanerManager, for one data dir at one point in time.

Pure decisions over open logs: the cleaner checkpoint (with out-of-range reset), the cleanable
range (last stable offset, active segment, min.compaction.lag.ms, rounded down to a segment base),
the dirty ratio (strict ``>``), max.compaction.lag.ms forcing, and the filthiest-first order.
Nothing here reads or writes records.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

LONG_MAX = 9223372036854775807


@dataclass
class CleanableRange:
    first_dirty: int
    first_uncleanable: int      # before rounding to a segment base
    force_checkpoint_update: bool
    limit: str                  # what set first_uncleanable: "last-stable-offset", "active-segment", "min-compaction-lag"
    limit_detail: dict


def non_active_segments_from(log, offset: int):
    """Kafka's UnifiedLog.nonActiveLogSegmentsFrom: none when ``offset`` is inside the active segment
    (a cleaner checkpoint or log start offset there leaves nothing to clean)."""
    active = log.active_segment.base_offset
    if offset > active:
        return []
    return log.segments_in_range(offset, active)


def both_tiers(log) -> bool:
    """Whether a clean of ``log`` covers its remote tier too (a tiered log whose remote log
    manager runs in this process with compactlog.remote.compaction.enable)."""
    if not getattr(log, "remote_log_enabled", False):
        return False
    from ..storage.remote.compaction import compacts_remote_tier
    return compacts_remote_tier(log)


def cleanable_offsets(log, checkpoint: int | None, now_ms: int) -> CleanableRange:
    # a tiered log's records below its local log start are only in the remote tier: its range
    # starts at the log start when the remote tier is compacted with the local one here
    # (tiered-storage.md §5.2), else at the local log start
    start = log.log_start_offset if both_tiers(log) else getattr(log, "first_local_offset", log.log_start_offset)
    ckpt = start if checkpoint is None else checkpoint
    if ckpt < start or ckpt > log.log_end_offset:
        first_dirty, force = start, True
    else:
        first_dirty, force = ckpt, False
    limits = [(log.last_stable_offset, "last-stable-offset", {}),
              (log.active_segment.base_offset, "active-segment", {})]
    lag = max(log.config.min_compaction_lag_ms, 0)
    remote_limit = None
    if lag > 0 and both_tiers(log):
        # the segments only in the remote tier come first (their largest timestamp from the manifest)
        from ..storage.remote.compaction import remote_only_segments
        remote = remote_only_segments(log)
        for i, (start, _, largest) in enumerate(remote):
            nxt = remote[i + 1][0] if i + 1 < len(remote) else None
            if (nxt is None or nxt > first_dirty) and largest > now_ms - lag:
                remote_limit = (start, largest)
                limits.append((start, "min-compaction-lag",
                               {"segment": start, "largest_timestamp": largest, "cleanable_at_ms": largest + lag}))
                break
    if lag > 0 and remote_limit is None:
        for seg in non_active_segments_from(log, first_dirty):
            largest = seg.largest_timestamp()
            if largest > now_ms - lag:
                limits.append((seg.base_offset, "min-compaction-lag",
                               {"segment": seg.base_offset, "largest_timestamp": largest,
                                "cleanable_at_ms": largest + lag}))
                break
    # min() keeps the first of equal offsets, so ties are reported in the order above
    value, limit, detail = min(limits, key=lambda x: x[0])
    if limit == "last-stable-offset" and value == log.high_watermark:
        limit = "active-segment" if value >= log.active_segment.base_offset else limit
    if limit == "last-stable-offset":
        first = log.producer_state.first_unstable_offset()
        owner = log.producer_state.ongoing_txns.get(first) if first is not None else None
        detail = {"open_transaction_first_offset": first, "producer_id": owner}
    return CleanableRange(first_dirty, max(first_dirty, value), force, limit, detail)


def max_compaction_delay(log, first_dirty: int, now_ms: int) -> int:
    earliest = _earliest_first_batch_timestamp(log, first_dirty)
    earliest = LONG_MAX if earliest is None else earliest
    clean_until = now_ms - max(log.config.max_compaction_lag_ms, 0)
    return clean_until - earliest if earliest < clean_until else 0


def _earliest_first_batch_timestamp(log, first_dirty: int) -> int | None:
    """Kafka's LogCleanerManager.maxCompactionDelay looks at the dirty non-active segments' first
    batch timestamps; a tiered log compacted over both tiers has dirty segments that are only
    remote too (uploaded, then trimmed by local retention before a round): theirs count."""
    stamps = [ts for ts in (s.first_batch_timestamp() for s in non_active_segments_from(log, first_dirty))
              if ts is not None and ts > 0]
    if both_tiers(log):
        from ..storage.remote.compaction import remote_only_first_batch_timestamps
        stamps += remote_only_first_batch_timestamps(log, first_dirty)
    return min(stamps) if stamps else None


@dataclass
class LogToClean:
    topic: str
    partition: int
    first_dirty: int
    first_uncleanable: int   # rounded down to a segment base
    clean_bytes: int
    cleanable_bytes: int
    need_compaction_now: bool
    max_compaction_delay_ms: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else float("nan")


def log_to_clean(log, first_dirty: int, uncleanable_offset: int, delay_ms: int = 0) -> LogToClean:
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < first_dirty)
    nonactive = non_active_segments_from(log, uncleanable_offset)
    first_uncleanable = nonactive[0].base_offset if nonactive else log.active_segment.base_offset
    remote = []
    if both_tiers(log):
        from ..storage.remote.compaction import remote_only_segments
        remote = remote_only_segments(log)
        if remote and uncleanable_offset < log.segments[0].base_offset:
            # the segment holding the uncleanable offset is only in the remote tier
            starts = [start for start, _, _ in remote if start <= uncleanable_offset]
            first_uncleanable = starts[-1] if starts else remote[0][0]
    cleanable = sum(s.size for s in log.segments_in_range(min(first_dirty, first_uncleanable), first_uncleanable))
    if remote:
        # the segments only in the remote tier are part of the one log the round cleans
        for start, size, _ in remote:
            if start < first_dirty:
                clean_bytes += size
            elif start < first_uncleanable:
                cleanable += size
    return LogToClean(log.topic, log.partition, first_dirty, first_uncleanable, clean_bytes, cleanable,
                      delay_ms > 0, delay_ms)


@dataclass
class PartitionStatus:
    topic: str
    partition: int
    compacted: bool
    checkpoint: int | None
    log_start_offset: int
    log_end_offset: int
    first_dirty: int | None = None
    first_uncleanable: int | None = None
    clean_bytes: int = 0
    cleanable_bytes: int = 0
    dirty_ratio: float = 0.0
    min_cleanable_dirty_ratio: float = 0.0
    need_compaction_now: bool = False
    max_compaction_delay_ms: int = 0
    eligible: bool = False
    reason: str = ""
    limit: str = ""
    limit_detail: dict | None = None
    next_eligible_ms: int | None = None
    force_checkpoint_update: bool = False
    unknown_configs: bool = False

    def to_dict(self) -> dict:
        d = asdict(self)
        if d["dirty_ratio"] != d["dirty_ratio"]:   # NaN when the log has no cleanable bytes at all
            d["dirty_ratio"] = 0.0
        return d


def partition_status(log, checkpoint: int | None, now_ms: int) -> PartitionStatus:
    st = PartitionStatus(log.topic, log.partition, log.config.compact, checkpoint,
                         log.log_start_offset, log.log_end_offset,
                         min_cleanable_dirty_ratio=log.config.get("min.cleanable.dirty.ratio"))
    if not log.config.known:
        st.compacted = False
        st.reason = (f"configs unknown: topic {log.topic} has no entry in compactlog.topics.json (a Kafka "
                     f"data dir copied here?), so neither the cleaner nor retention touches it; set its "
                     f"configs with `compactlog topics alter --topic {log.topic} --config "
                     f"cleanup.policy=compact` or for one run with `clean --topic {log.topic} --config "
                     f"cleanup.policy=compact`")
        st.unknown_configs = True
        return st
    if not log.config.compact:
        st.reason = "cleanup.policy does not include compact"
        return st
    rng = cleanable_offsets(log, checkpoint, now_ms)
    delay = max_compaction_delay(log, rng.first_dirty, now_ms)
    ltc = log_to_clean(log, rng.first_dirty, rng.first_uncleanable, delay)
    st.first_dirty = rng.first_dirty
    # Kafka's first uncleanable offset is a segment base, below first_dirty when first_dirty is
    # inside that segment; nothing is cleanable then, and the range shown is the empty [d, d)
    st.first_uncleanable = max(ltc.first_uncleanable, rng.first_dirty)
    st.clean_bytes, st.cleanable_bytes = ltc.clean_bytes, ltc.cleanable_bytes
    st.dirty_ratio = ltc.cleanable_ratio if ltc.total_bytes else 0.0
    st.need_compaction_now = ltc.need_compaction_now
    st.max_compaction_delay_ms = delay
    st.limit, st.limit_detail = rng.limit, rng.limit_detail
    st.force_checkpoint_update = rng.force_checkpoint_update
    ratio_ok = ltc.total_bytes > 0 and ltc.cleanable_ratio > st.min_cleanable_dirty_ratio
    lag_ok = ltc.need_compaction_now and ltc.cleanable_bytes > 0
    st.eligible = ltc.total_bytes > 0 and (lag_ok or ratio_ok)
    if st.eligible:
        st.reason = "max.compaction.lag.ms exceeded" if lag_ok and not ratio_ok else "dirty ratio above threshold"
        return st
    st.reason = _why_not(log, ltc, rng, st)
    st.next_eligible_ms = _next_eligible(log, rng, st, now_ms)
    return st


def _why_not(log, ltc: LogToClean, rng: CleanableRange, st: PartitionStatus) -> str:
    if ltc.cleanable_bytes == 0:
        if rng.limit == "min-compaction-lag":
            d = rng.limit_detail
            return (f"min.compaction.lag.ms: segment {d['segment']} has records until "
                    f"{d['largest_timestamp']}, cleanable from {d['cleanable_at_ms']}")
        if rng.limit == "last-stable-offset":
            d = rng.limit_detail
            return (f"open transaction: producer {d['producer_id']} has an undecided transaction from offset "
                    f"{d['open_transaction_first_offset']}, which holds the last stable offset")
        if log.log_end_offset == log.log_start_offset:
            return "the log is empty"
        active = log.active_segment.base_offset
        if rng.first_dirty > active:
            origin = "the log start offset" if rng.force_checkpoint_update or st.checkpoint is None \
                else "the cleaner checkpoint"
            return (f"active segment: nothing to clean: the first dirty offset {rng.first_dirty} ({origin}) "
                    f"lies inside the active segment, which starts at {active}")
        return (f"active segment: no dirty data outside the active segment "
                f"(dirty from {rng.first_dirty}, active segment starts at {log.active_segment.base_offset})")
    return (f"dirty ratio {ltc.cleanable_ratio:.4f} is not above min.cleanable.dirty.ratio "
            f"{st.min_cleanable_dirty_ratio}")


def _next_eligible(log, rng: CleanableRange, st: PartitionStatus, now_ms: int) -> int | None:
    candidates = []
    if rng.limit == "min-compaction-lag":
        candidates.append(rng.limit_detail["cleanable_at_ms"])
    earliest = _earliest_first_batch_timestamp(log, rng.first_dirty)
    max_lag = log.config.max_compaction_lag_ms
    if earliest is not None and earliest + max_lag < LONG_MAX and st.cleanable_bytes > 0:
        candidates.append(earliest + max_lag + 1)
    future = [c for c in candidates if c > now_ms]
    return min(future) if future else None


def select_logs(statuses: list[PartitionStatus]) -> list[PartitionStatus]:
    """Eligible partitions, filthiest first (the order Kafka's cleaner threads would take them)."""
    eligible = [s for s in statuses if s.eligible]
    return sorted(eligible, key=lambda s: -s.dirty_ratio)
