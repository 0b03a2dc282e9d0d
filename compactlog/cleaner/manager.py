"""May this partition be cleaned now? Kafka's LogCleanerManager, for one data dir.

Under one lock (with a condition for those waiting on a clean to stop) it keeps:
- each partition's cleaning state: in progress (a cleaner grabbed it), aborted (a change of the
  log asked it to stop: the clean stops at its next phase boundary, without error), or paused n
  times (retention, DeleteRecords, truncation or a topic deletion is changing the log; nothing
  cleans it until each of them resumed);
- the uncleanable partitions, each with the reason its clean failed and when it is tried again
  (``log.cleaner.backoff.ms`` later);
- the cleaner checkpoint (``cleaner-offset-checkpoint``): the cleaner reads and writes it only
  through here.

``grab_filthiest_compacted_logs`` is Kafka's grabFilthiestCompactedLog: it skips the partitions in
progress, paused or backing off before looking at them, computes each remaining compacted log's
status once (``plan.partition_status``: checkpoint reset, cleanable range, dirty ratio,
max.compaction.lag.ms), and marks the filthiest eligible ones in progress. The status it returns
is what the cleaner plans from: a grab opens and locks each partition once.

The data dir calls ``abort_and_pause_cleaning`` / ``resume_cleaning`` / ``forget_partition``
around its changes (``DataDir.cleaning_paused``); ``for_datadir`` registers the manager with it.

What each look for work saw is kept for the LogCleanerManager gauges, as Kafka keeps
``timeOfLastRun``, ``dirtiestLogCleanableRatio`` and each thread's ``PreCleanStats``:
``time_of_last_run_ms``, ``selections`` (per cleaner thread) and ``last_ratios`` (every compacted
partition's dirty ratio and first dirty offset at its last look); ``uncleanable_bytes`` is
computed when asked, as Kafka's gauge does.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import TopicError
from .plan import PartitionStatus, partition_status, select_logs

IN_PROGRESS = "in progress"
ABORTED = "aborted"


@dataclass(frozen=True)
class Paused:
    """Cleaning paused by ``count`` changes of the log still under way."""
    count: int

    def __str__(self) -> str:
        return f"paused ({self.count})"


@dataclass(frozen=True)
class Uncleanable:
    """A partition whose last clean failed: why, and from when it may be tried again (ms)."""
    reason: str
    retry_at_ms: int


class GrabbedLog(NamedTuple):
    """A partition marked in progress, with the status it was chosen by and the log's
    ``structure_epoch`` then (the plan is made from this status unless the log changed since)."""
    status: PartitionStatus
    structure_epoch: int

    @property
    def key(self) -> tuple[str, int]:
        return self.status.topic, self.status.partition


class Selection(NamedTuple):
    """What one look for work saw (Kafka's PreCleanStats, plus the dirtiest ratio): the compacted
    logs considered (not in progress, paused or backing off; not empty), how many were eligible,
    how many are past their max.compaction.lag.ms (``delayedPartitions``), the largest overrun of
    max.compaction.lag.ms (ms) and the highest dirty ratio among them."""
    time_ms: int
    considered: int
    cleanable: int
    delayed: int
    max_compaction_delay_ms: int
    dirtiest_ratio: float


class CleaningStateError(RuntimeError):
    """A state change the cleaning states do not allow (a bug in a caller: resume without pause)."""


_registry_lock = threading.Lock()


class CleanerManager:
    def __init__(self, datadir):
        self.datadir = datadir
        self._lock = threading.Lock()
        self._paused_cond = threading.Condition(self._lock)
        self._states: dict[tuple[str, int], object] = {}          # IN_PROGRESS, ABORTED or Paused
        self._uncleanable: dict[tuple[str, int], Uncleanable] = {}
        self._checkpoint = datadir.cleaner_checkpoint
        self.time_of_last_run_ms: int | None = None
        self.selections: dict[str, Selection] = {}          # cleaner thread name -> its last look
        self.last_ratios: dict[tuple[str, int], tuple[float, int | None]] = {}

    @classmethod
    def for_datadir(cls, datadir) -> "CleanerManager":
        """The data dir's manager: made and registered with it (``DataDir.use_cleaner``) on the
        first call, so that every cleaner of one data dir shares the same states."""
        with _registry_lock:
            if isinstance(datadir.cleaner, CleanerManager):
                return datadir.cleaner
            manager = cls(datadir)
            datadir.use_cleaner(manager)
            return manager

    # -- the cleaner checkpoint
    def all_cleaner_checkpoints(self) -> dict[tuple[str, int], int]:
        return dict(self._checkpoint.read_cached())

    def update_checkpoints(self, changes: dict[tuple[str, int], int]) -> None:
        if changes:
            self._checkpoint.update(changes)

    # -- choosing
    def grab_filthiest_compacted_log(self, now_ms: int) -> GrabbedLog | None:
        """Kafka's grabFilthiestCompactedLog: the filthiest eligible partition, marked in
        progress, or None."""
        grabbed = self.grab_filthiest_compacted_logs(now_ms, 1)
        return grabbed[0] if grabbed else None

    def grab_filthiest_compacted_logs(self, now_ms: int, limit: int | None = 1) -> list[GrabbedLog]:
        """The filthiest eligible compacted partitions (at most ``limit``; None: all), filthiest
        first, each marked in progress; the caller ends each with ``done_cleaning``.

        A log whose checkpoint is out of range (below the log start or past the end) has it reset
        to the log start, as Kafka does when it looks at the log; for a grabbed one the cleaner
        writes it with its result (or leaves it when the clean fails)."""
        with self._lock:
            skip = set(self._states) | self._backing_off(now_ms)
        checkpoints = self.all_cleaner_checkpoints()
        seen: list[GrabbedLog] = []
        logs = {}
        compacted: dict[str, bool] = {}
        # the data dir's cached partition map; a topic that is not compacted is skipped on its
        # config alone, before any of its logs is opened (a broker opens logs on first use)
        for key in self.datadir.all_partitions():
            if key in skip:
                continue
            topic = key[0]
            if topic not in compacted:
                config = self.datadir.topic_config(topic)
                compacted[topic] = bool(config.compact and config.known)
            if not compacted[topic]:
                continue
            try:
                log = self.datadir.open_log(*key)
            except (TopicError, FileNotFoundError):
                continue                # deleted since it was listed: skipped quietly
            if not log.config.compact or not log.config.known:
                continue
            # under the partition lock: appends, retention and other cleaner threads change the
            # segments and the producer state meanwhile
            with log.lock:
                if log.deleted:
                    continue
                log.producer_state.remove_expired(now_ms)
                seen.append(GrabbedLog(partition_status(log, checkpoints.get(key), now_ms),
                                       log.structure_epoch))
                logs[key] = log
        broker = self.datadir.broker
        enabled = broker.get("log.cleaner.enable") and broker.get("log.cleaner.threads") > 0
        by_key = {g.key: g for g in seen}
        grabbed: list[GrabbedLog] = []
        with self._lock:
            self._note_selection(now_ms, [g.status for g in seen])
            backing_off = self._backing_off(now_ms)
            for st in select_logs([g.status for g in seen]) if enabled else []:
                key = (st.topic, st.partition)
                if key in self._states or key in backing_off:     # taken meanwhile
                    continue
                if logs[key].deleted:
                    # its topic was deleted since it was looked at (the deletion paused, deleted
                    # and resumed it meanwhile): skipped quietly
                    continue
                self._states[key] = IN_PROGRESS
                grabbed.append(by_key[key])
                if limit is not None and len(grabbed) >= limit:
                    break
            taken = {g.key for g in grabbed}
            # under the lock: a partition another thread grabs meanwhile writes its own result
            self.update_checkpoints({g.key: g.status.first_dirty for g in seen
                                     if g.status.force_checkpoint_update and g.status.first_dirty is not None
                                     and g.key not in taken and g.key not in self._states})
        return grabbed

    def _note_selection(self, now_ms: int, statuses: list[PartitionStatus]) -> None:
        """Under the lock: what this look saw, for the gauges (LogCleanerManager's timeOfLastRun
        and dirtiestLogCleanableRatio, the thread's PreCleanStats)."""
        considered = [s for s in statuses if s.compacted and s.clean_bytes + s.cleanable_bytes > 0]
        self.time_of_last_run_ms = now_ms
        self.selections[threading.current_thread().name] = Selection(
            now_ms, len(considered), sum(1 for s in considered if s.eligible),
            sum(1 for s in considered if s.max_compaction_delay_ms > 0),
            max((s.max_compaction_delay_ms for s in considered), default=0),
            max((s.dirty_ratio for s in considered), default=0.0))
        for s in statuses:
            if s.compacted:
                self.last_ratios[(s.topic, s.partition)] = (s.dirty_ratio, s.first_dirty)

    def uncleanable_bytes(self, partitions, now_ms: int) -> int:
        """Kafka's uncleanable-bytes: the cleanable bytes of ``partitions`` (those whose clean failed)."""
        total = 0
        checkpoints = None
        for key in partitions:
            log = self.datadir.logs.get(key)
            if log is None or log.closed:
                continue
            if checkpoints is None:
                checkpoints = self.all_cleaner_checkpoints()
            with log.lock:
                if not log.deleted:
                    total += partition_status(log, checkpoints.get(key), now_ms).cleanable_bytes
        return total

    # -- cleaning states
    def cleaning_state(self, topic: str, partition: int):
        """IN_PROGRESS, ABORTED, a Paused, or None (nothing going on)."""
        with self._lock:
            return self._states.get((topic, partition))

    def cleaning_aborted(self, topic: str, partition: int) -> bool:
        """Kafka's checkCleaningAborted, asked by a clean at its phase boundaries."""
        with self._lock:
            return self._states.get((topic, partition)) == ABORTED

    def done_cleaning(self, topic: str, partition: int) -> None:
        """A clean ended (cleaned, failed or stopped): an aborted one leaves the partition paused
        for whoever aborted it, and wakes them."""
        key = (topic, partition)
        with self._lock:
            state = self._states.get(key)
            if state == IN_PROGRESS:
                del self._states[key]
            elif state == ABORTED:
                self._states[key] = Paused(1)
                self._paused_cond.notify_all()
            else:
                raise CleaningStateError(f"{topic}-{partition}: cleaning is {state or 'not in progress'}; "
                                         f"it cannot be done")

    def abort_and_pause_cleaning(self, topic: str, partition: int) -> None:
        """Stop a clean in progress, waiting until it has, and keep the partition from being
        cleaned until ``resume_cleaning`` (as many resumes as pauses)."""
        key = (topic, partition)
        with self._lock:
            while True:
                state = self._states.get(key)
                if state is None:
                    self._states[key] = Paused(1)
                    return
                if isinstance(state, Paused):
                    self._states[key] = Paused(state.count + 1)
                    return
                if state == IN_PROGRESS:
                    self._states[key] = ABORTED
                    # done_cleaning turns it into Paused(1): this caller's pause
                    while self._states.get(key) == ABORTED:
                        self._paused_cond.wait(0.1)
                    return
                # aborted by another change (Kafka refuses this): wait for the clean to stop,
                # then pause on top of that change
                self._paused_cond.wait(0.1)

    def resume_cleaning(self, topic: str, partition: int) -> None:
        key = (topic, partition)
        with self._lock:
            state = self._states.get(key)
            if not isinstance(state, Paused):
                raise CleaningStateError(f"{topic}-{partition}: cleaning is {state or 'not paused'}; "
                                         f"it cannot be resumed")
            if state.count == 1:
                del self._states[key]
            else:
                self._states[key] = Paused(state.count - 1)

    def forget_partition(self, topic: str, partition: int) -> None:
        """The partition was deleted: its uncleanable entry goes (its checkpoint entry went with
        the topic, ``DataDir.delete_topic``)."""
        with self._lock:
            self._uncleanable.pop((topic, partition), None)
            self.last_ratios.pop((topic, partition), None)

    def cleaning_states(self) -> dict[tuple[str, int], object]:
        """Every partition with a cleaning state (in progress, aborted, paused), at once."""
        with self._lock:
            return dict(self._states)

    # -- uncleanable partitions
    def mark_uncleanable(self, topic: str, partition: int, reason: str, now_ms: int) -> Uncleanable:
        """A clean failed at ``now_ms``: the partition is skipped for log.cleaner.backoff.ms."""
        entry = Uncleanable(reason, now_ms + self.datadir.broker.get("log.cleaner.backoff.ms"))
        with self._lock:
            self._uncleanable[(topic, partition)] = entry
        return entry

    def clear_uncleanable(self, topic: str, partition: int) -> None:
        with self._lock:
            self._uncleanable.pop((topic, partition), None)

    def uncleanable_partitions(self) -> dict[tuple[str, int], Uncleanable]:
        with self._lock:
            return dict(self._uncleanable)

    def busy_partitions(self, now_ms: int) -> set[tuple[str, int]]:
        """The partitions retention leaves alone this time (Kafka's LogCleanerManager.deletableLogs
        skips them): those being cleaned and the uncleanable ones backing off."""
        with self._lock:
            return {k for k, st in self._states.items() if st in (IN_PROGRESS, ABORTED)} | self._backing_off(now_ms)

    def backing_off(self, now_ms: int) -> set[tuple[str, int]]:
        """The uncleanable partitions not to be tried again yet."""
        with self._lock:
            return self._backing_off(now_ms)

    def _backing_off(self, now_ms: int) -> set[tuple[str, int]]:
        return {key for key, u in self._uncleanable.items() if u.retry_at_ms > now_ms}
