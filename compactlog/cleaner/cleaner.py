"""One cleaner run over a data dir: plan on the driver, clean in tasks, swap and checkpoint here.

Kafka's LogCleaner thread picks the filthiest log, cleans it and repeats (``clean_filthiest``,
over the data dir's ``CleanerManager``: the broker's cleaner threads and ``cleaner run``); one run
(``run``: ``clean``) chooses every partition Kafka would clean at that time and cleans each once,
the partitions in parallel tasks. Segments are read, staged and swapped in only through the log's
segment source (``storage/segment_source.py``; a local directory's by Kafka's renames,
``.cleaned`` -> ``.swap`` -> live, old -> ``.deleted``), and the cleaner checkpoint is written after
the swap. A clean whose partition a change of the log is waiting for
(``CleanerManager.abort_and_pause_cleaning``) stops before it is planned or before its swap,
without error.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CompactlogError, TopicError
from ..storage.datadir import DataDir
from ..storage.segment_source import LocalDirSource
from .executor import InProcessExecutor, TaskFailure
from .manager import CleanerManager, GrabbedLog
from .plan import PartitionStatus, both_tiers, partition_status
from .source import SegmentInfo
from .stats import CleanerStats
from .strategy import CompactionStrategy
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
    aborted: bool = False       # stopped for a change of the log (not an error; cleaned again later)
    tiers: dict | None = None   # a round over both tiers: each tier's share (PartitionCleanResult.tiers)

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
        if self.tiers is not None:
            d["byTier"] = self.tiers
        return d


class _Round:
    """One round's outcomes, plans and checkpoint changes, as the cleaner fills them in."""

    def __init__(self):
        self.outcomes: dict[tuple[str, int], PartitionOutcome] = {}
        self.plans: list[PartitionCleanPlan] = []
        self.planned_epochs: dict[tuple[str, int], int] = {}
        self.checkpoint_updates: dict[tuple[str, int], int] = {}

    def add(self, st: PartitionStatus) -> PartitionOutcome:
        key = (st.topic, st.partition)
        self.outcomes[key] = out = PartitionOutcome(st.topic, st.partition, st)
        # a checkpoint out of range is reset to the log start (written with the round's results)
        if st.force_checkpoint_update and st.first_dirty is not None:
            self.checkpoint_updates[key] = st.first_dirty
        else:
            self.checkpoint_updates.pop(key, None)
        return out

    def abort(self, out: PartitionOutcome) -> None:
        out.aborted = True
        self.checkpoint_updates.pop((out.topic, out.partition), None)   # the log is being changed


def compacted_partitions(datadir: DataDir, topic=None, partition: int | None = None):
    """(topic, partition) of ``topic`` (a name or a list of names; every topic when None or
    empty), or only ``partition`` of it; a topic or partition that does not exist is an error."""
    names = [topic] if isinstance(topic, str) else list(topic or ())
    by_topic = {t: datadir.partitions(t) for t in dict.fromkeys(names)} if names else datadir.partition_map()
    out = []
    for t, parts in by_topic.items():
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


# how long a tombstone outlives its key's other records when it must never be removed: far enough
# that no clock reaches it, near enough that now + it stays a long
KEEP_TOMBSTONES_MS = 1 << 62


def tombstone_retention_ms(log, both_tiers: bool = False) -> int:
    """delete.retention.ms (Kafka's rule). A tombstone may go once every older record of its key
    is gone; for a tiered log that holds only when this round cleans the remote tier with the
    local one (``both_tiers``: one logical log, one map, tiered-storage.md §5.2; in the broker,
    and offline, where ``compactlog clean`` opens the data dir's remote log manager:
    storage/remote/offline.py). A round over the local segments alone (remote compaction off,
    the store unreachable in a broker) keeps every tombstone: the bucket may still hold an older
    value of the key, which would come back to every reader from the log start once local
    retention trims the local copy."""
    if both_tiers:
        return log.config.delete_retention_ms
    if log.remote_log_enabled or log.highest_remote_offset >= 0 or log.log_start_offset < log.local_log_start_offset:
        return KEEP_TOMBSTONES_MS
    return log.config.delete_retention_ms


def make_plan(datadir: DataDir, log, status: PartitionStatus, now_ms: int, source=None) -> PartitionCleanPlan:
    """The plan of one partition's clean; ``source``: a tiered log's logical log over both tiers
    (storage/remote/compaction.tiered_source), else the log's own directory."""
    broker = datadir.broker
    threads = max(broker.get("log.cleaner.threads"), 1)
    io_buffer = broker.get("log.cleaner.io.buffer.size") // threads // 2
    extra = {}
    if source is None:
        segments = segment_infos(log)
        last_offsets = {s.base_offset: s.offset_index.last_offset for s in log.segments}
    else:
        from ..storage.remote.compaction import remote_segment_infos
        remote = remote_segment_infos(source, log.config.index_interval_bytes)
        segments = remote + [s for s in segment_infos(log) if s.base_offset >= source.boundary]
        last_offsets = {s.base_offset: s.offset_index.last_offset for s in log.segments
                        if s.base_offset >= source.boundary}
        extra["zone_cuts"] = [source.boundary]
    clean_infos = [s for s in segments if s.base_offset < status.first_dirty] if status.first_dirty > 0 else []
    delete_retention_ms = tombstone_retention_ms(log, both_tiers=source is not None)
    legacy_horizon = (clean_infos[-1].mtime_ms - delete_retention_ms) if clean_infos else 0
    from .map_choice import choose_map
    from .offset_map import BYTES_PER_KEY, VERSION_BYTES_PER_KEY
    strategy = CompactionStrategy.of(log.config)
    map_kind, map_reason, expected_keys = choose_map(log, status.first_dirty, status.first_uncleanable, broker,
                                                     VERSION_BYTES_PER_KEY if strategy.versioned else BYTES_PER_KEY)
    return PartitionCleanPlan(
        map_kind=map_kind, extra={"map_reason": map_reason, "expected_keys": expected_keys, **extra},
        topic=log.topic, partition=log.partition, source=source or log.segment_source,
        first_dirty=status.first_dirty, first_uncleanable=status.first_uncleanable, now_ms=now_ms,
        segments=segments, last_offsets_in_index=last_offsets,
        active_producers=log.last_records_of_active_producers(),
        delete_retention_ms=delete_retention_ms, segment_bytes=log.config.segment_bytes,
        max_index_size=log.config.max_index_size, index_interval_bytes=log.config.index_interval_bytes,
        max_message_size=log.config.max_message_size,
        broker_max_message_size=broker.get("message.max.bytes"), io_buffer_size=io_buffer,
        legacy_delete_horizon_ms=legacy_horizon, strategy=strategy)


def swap_in(log, result: PartitionCleanResult, source=None) -> None:
    """Replace every cleaned group in one commit the source finishes or undoes after a crash."""
    (source or log.segment_source).commit_swap(result.groups, log, staged=result.staged)


def _tiered_source(log):
    """The log's logical log over both tiers when its remote tier is compacted with it here (None:
    the local directory alone). A store that does not answer leaves the round local (and every
    tombstone kept)."""
    if not (log.remote_log_enabled or log.highest_remote_offset >= 0):
        return None
    from ..storage.remote.compaction import tiered_source
    from ..storage.remote.store import RemoteStorageError
    try:
        return tiered_source(log)
    except RemoteStorageError as e:
        import logging
        logging.getLogger("kafka.log.LogCleaner").warning(
            f"{log.name}: the remote tier is not compacted this round (the store failed: {e}); tombstones are kept")
        return None


def _end_round(plan: PartitionCleanPlan) -> None:
    if not isinstance(plan.source, LocalDirSource):
        from ..storage.remote.compaction import end_round
        end_round(plan.source)


def _size_below(log, offset: int | None) -> int:
    """Bytes of the segments that start below ``offset`` (the cleanable range and the clean section)."""
    if offset is None:
        return log.size()
    with log.lock:
        return sum(s.size for s in log.segments if s.base_offset < offset)


def discard_cleaned_files(source) -> None:
    """Every replacement a task staged (``.cleaned`` files) and that will not be swapped in."""
    source.discard_replacements()


class Cleaner:
    """Plans, runs and swaps in cleans of one data dir; which partitions, and the cleaner
    checkpoint, are its ``CleanerManager``'s (the data dir's one, unless given)."""

    # the segment source a log's plan reads and stages through, when not its own directory (a
    # shadow of a bucket: storage/remote/bucket_clean.py); None: ``log.segment_source``
    source_for = None

    def __init__(self, datadir: DataDir, executor=None, manager: CleanerManager | None = None):
        self.datadir = datadir
        self.executor = executor or InProcessExecutor()
        self.manager = manager or CleanerManager.for_datadir(datadir)

    def statuses(self, now_ms: int, topic=None, partition: int | None = None) -> list[PartitionStatus]:
        checkpoints = self.manager.all_cleaner_checkpoints()
        out = []
        for t, p in compacted_partitions(self.datadir, topic, partition):
            log = self.datadir.open_log(t, p)
            # under the partition lock: in a broker, appends, retention and other cleaner threads
            # change the segments and the producer state meanwhile
            with log.lock:
                log.producer_state.remove_expired(now_ms)
                out.append(partition_status(log, checkpoints.get((t, p)), now_ms))
        return out

    def run(self, now_ms: int, *, topic=None, partition: int | None = None, force: bool = False,
            refuse_keyless=frozenset()) -> list[PartitionOutcome]:
        """One cleaner run at ``now_ms`` (``clean``): every eligible partition cleaned once; what
        happened to every compacted partition. ``topic``: a name or a list of names (None: every
        topic). A partition in ``refuse_keyless`` fails rather than lose a record without a key."""
        statuses = self.statuses(now_ms, topic, partition)
        round_ = _Round()
        enabled = self.datadir.broker.get("log.cleaner.enable") and self.datadir.broker.get("log.cleaner.threads") > 0
        for st in statuses:
            out = round_.add(st)
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
                plan = self._plan(round_, log, out, now_ms)
            if plan is not None and (st.topic, st.partition) in refuse_keyless:
                plan.extra["refuse_keyless"] = True
        self._execute(round_)
        return [round_.outcomes[(s.topic, s.partition)] for s in statuses]

    def clean_filthiest(self, now_ms: int, limit: int | None = 1) -> list[PartitionOutcome]:
        """Kafka's CleanerThread.cleanFilthiestLog: grab the filthiest partitions (at most
        ``limit``) from the manager, clean them, and tell it how each ended: a failed one backs
        off (uncleanable), a cleaned one no longer does, a stopped one (aborted) neither. What
        happened to each, filthiest first (with no limit, a whole round, in partition order as
        ``run`` plans it); [] when nothing is eligible."""
        grabbed = self.manager.grab_filthiest_compacted_logs(now_ms, limit)
        if limit is None:
            grabbed.sort(key=lambda g: g.key)
        try:
            outcomes = self._clean_grabbed(grabbed, now_ms) if grabbed else []
            for o in outcomes:
                if o.error:
                    self.manager.mark_uncleanable(o.topic, o.partition, o.error, now_ms)
                elif o.cleaned:
                    self.manager.clear_uncleanable(o.topic, o.partition)
        finally:
            for g in grabbed:
                self.manager.done_cleaning(*g.key)
        return outcomes

    def _clean_grabbed(self, grabbed: list[GrabbedLog], now_ms: int) -> list[PartitionOutcome]:
        round_ = _Round()
        for g in grabbed:
            out = round_.add(g.status)
            if self.manager.cleaning_aborted(*g.key):       # stopped before it was planned
                round_.abort(out)
                continue
            try:
                log = self.datadir.open_log(*g.key)
            except TopicError:          # deleted since it was grabbed: nothing to clean, no error
                round_.abort(out)
                continue
            with log.lock:
                if log.deleted:
                    round_.abort(out)
                    continue
                if log.structure_epoch != g.structure_epoch:
                    # changed since it was chosen (only by a caller that did not pause the
                    # cleaner): the status is made again from the log as it is now
                    log.producer_state.remove_expired(now_ms)
                    checkpoint = self.manager.all_cleaner_checkpoints().get(g.key)
                    out = round_.add(partition_status(log, checkpoint, now_ms))
                    if not out.status.eligible:
                        continue
                self._plan(round_, log, out, now_ms)
        self._execute(round_)
        return [round_.outcomes[g.key] for g in grabbed]

    def _plan(self, round_: "_Round", log, out: PartitionOutcome, now_ms: int) -> PartitionCleanPlan | None:
        """Under the log's lock: the plan of one partition's clean, and the epoch it was made at.
        None: a tiered log whose range starts in its remote tier, which cannot be read this time
        (not reconciled yet, the store failing): cleaned at a later round."""
        discard_cleaned_files(log.segment_source)
        source = _tiered_source(log)
        if source is None and both_tiers(log):
            out.status.reason = "the remote tier is not ready to be cleaned with the local log; retried later"
            round_.abort(out)
            return None
        # the cleaned range's size, as Kafka's "Start size" (the active segment keeps growing)
        out.start_size = _size_below(log, out.status.first_uncleanable)
        plan = make_plan(self.datadir, log, out.status, now_ms, source=source)
        if source is None and self.source_for is not None:
            plan.source = self.source_for(log)
        round_.plans.append(plan)
        round_.planned_epochs[(out.topic, out.partition)] = log.structure_epoch
        return plan

    def _execute(self, round_: "_Round") -> None:
        """Run the planned tasks, swap each result in, and write the cleaner checkpoint once."""
        plans = {(p.topic, p.partition): p for p in round_.plans}
        try:
            self._finish(round_, plans)
        finally:
            for p in round_.plans:
                _end_round(p)
        self.manager.update_checkpoints(round_.checkpoint_updates)

    def _finish(self, round_: "_Round", plans: dict) -> None:
        results = self.executor.run(round_.plans) if round_.plans else []
        for res in results:
            key = (res.topic, res.partition)
            out = round_.outcomes[key]
            if self.manager.cleaning_aborted(*key):
                # a change of the log (retention, DeleteRecords, truncation, topic deletion) is
                # waiting for this clean: it stops here, without error, and is cleaned again later
                discard_cleaned_files(plans[key].source)
                round_.abort(out)
                continue
            log = self.datadir.open_log(res.topic, res.partition)
            if not isinstance(res, TaskFailure) and not isinstance(plans[key].source, LocalDirSource):
                # a tiered round's remote commit (one manifest CAS) is made outside the log's lock:
                # the remote tier's own lock is never taken under it (the copy task takes them in
                # the other order); the local swap follows under the log's lock
                from ..storage.remote.compaction import RoundAborted, commit_remote
                try:
                    commit_remote(plans[key].source, log, res.staged)
                except RoundAborted as e:
                    # the remote tier changed under the round (an upload, remote retention): like a
                    # change of the local log, no error; cleaned again at the next round
                    discard_cleaned_files(plans[key].source)
                    out.status.reason = str(e)
                    round_.abort(out)
                    continue
                except (CompactlogError, OSError) as e:
                    discard_cleaned_files(plans[key].source)
                    out.error = f"{log.dir}: committing the cleaned remote segments failed: {e}"
                    continue
            if isinstance(res, TaskFailure):
                out.error = res.error
                discard_cleaned_files(plans[key].source)
                round_.checkpoint_updates.pop(key, None)   # a partition that could not be read stays as it was
                continue
            with log.lock:
                if log.structure_epoch != round_.planned_epochs[key]:
                    # truncated, trimmed by retention or replaced while it was cleaned (Kafka aborts
                    # such a cleaning): the result may cover segments that are gone
                    discard_cleaned_files(plans[key].source)
                    out.error = (f"{log.dir}: cleaning aborted: the log changed while it was cleaned "
                                 f"(truncation, retention or another swap); it is retried next round")
                    continue
                try:
                    swap_in(log, res, plans[key].source)
                except (CompactlogError, OSError) as e:
                    out.error = f"{log.dir}: swapping in cleaned segments failed: {e}"
                    continue
            out.cleaned = True
            out.end_offset = res.end_offset
            out.groups = res.groups
            out.map_kind = res.map_kind
            out.map_reason = res.map_reason
            out.stats = CleanerStats.from_dict(res.stats)
            out.tiers = res.tiers
            out.end_size = _size_below(log, res.end_offset)
            round_.checkpoint_updates[key] = res.end_offset

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
