"""Why a partition is (not) cleaned, what a clean would remove, and when tombstones and markers go.

``explain`` runs the real round in dry-run mode (same map, same rules, nothing written) and
collects, per reason, what would be removed, plus every tombstone and marker that would stay.
``clean --dry-run`` is this for every partition a clean would touch; with ``roll`` the round is
planned on the log as ``clean --roll`` would leave it (``rolled_view``), still writing nothing.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..record.control import CONTROL_TYPE_NAMES
from .cleaner import Cleaner, _tiered_source, make_plan
from .plan import PartitionStatus, both_tiers, log_to_clean, partition_status
from .rolled_view import as_rolled
from .strategy import CompactionStrategy
from .task import clean_partition

# the removal reasons a preview names, in order ("discarded": a whole aborted batch; "marker": a
# transaction marker past its delete horizon)
REASONS = ("superseded", "tombstone-expired", "keyless", "aborted", "marker", "discarded")


@dataclass
class RetainedItem:
    kind: str                    # "tombstone" or marker type ("COMMIT", "ABORT", ...)
    offset: int
    key: str | None
    delete_horizon_ms: int | None
    note: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Explanation:
    topic: str
    partition: int
    now_ms: int
    status: PartitionStatus
    would_clean: bool
    forced: bool
    records_read: int = 0
    records_kept: int = 0
    removed: dict = field(default_factory=dict)
    retained: list[RetainedItem] = field(default_factory=list)
    dirty_range: tuple | None = None
    bytes_read: int = 0
    bytes_kept: int = 0
    rolled: bool = False         # planned as after ``clean --roll``
    strategy: str = "offset"     # compaction.strategy: which record of a key the round keeps
    tiers: dict | None = None    # over both tiers: what each tier's groups would read, keep and lose

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def previewed(self) -> bool:
        """Whether a round was run (dry): eligible, or what a forced clean would do."""
        return self.dirty_range is not None

    def to_dict(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "nowMs": self.now_ms,
                "status": self.status.to_dict(), "wouldClean": self.would_clean, "forced": self.forced,
                "rolled": self.rolled, "compactionStrategy": self.strategy,
                "dirtyRange": self.dirty_range, "recordsRead": self.records_read,
                "recordsKept": self.records_kept, "recordsRemoved": self.records_read - self.records_kept,
                "bytesRead": self.bytes_read, "bytesKept": self.bytes_kept,
                "bytesRemoved": self.bytes_read - self.bytes_kept, "removed": self.removed,
                "retained": [r.to_dict() for r in self.retained],
                **({"byTier": self.tiers} if self.tiers is not None else {})}

    def removal_text(self) -> str:
        """``would remove R of N records (B of M bytes): 3 superseded, 0 tombstones, ...``."""
        words = dict(_REASON_WORDS)
        if self.strategy != "offset":   # superseded by a record that wins by its version
            words["superseded"] = f"superseded (compaction.strategy {self.strategy})"
        counts = ", ".join(f"{self.removed.get(r, 0)} {words[r]}" for r in REASONS
                           if r in ("superseded", "tombstone-expired", "keyless", "aborted") or self.removed.get(r))
        return (f"would remove {self.records_read - self.records_kept} of {self.records_read} records "
                f"({self.bytes_read - self.bytes_kept} of {self.bytes_read} bytes): {counts}")


_REASON_WORDS = {"superseded": "superseded", "tombstone-expired": "tombstones", "keyless": "keyless",
                 "aborted": "aborted", "marker": "markers", "discarded": "in discarded batches"}


def _key_text(key: bytes | None) -> str | None:
    if key is None:
        return None
    try:
        return key.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + key.hex()


class _Collector:
    def __init__(self, now_ms: int, delete_retention_ms: int):
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.items: list[RetainedItem] = []

    def retained_tombstones(self, header, offsets, keys, horizon):
        if header.has_delete_horizon:
            note = (f"delete horizon {horizon} already stamped; removed by the first clean at or after it "
                    f"(the partition must be selected again, which needs new dirty data)")
        else:
            note = (f"this clean stamps delete horizon {horizon} (now + delete.retention.ms); removed by the "
                    f"first clean at or after it")
        for off, key in zip(offsets, keys):
            self.items.append(RetainedItem("tombstone", off, _key_text(key), horizon, note))

    def retained_marker(self, header, horizon, can_discard, control_type):
        name = CONTROL_TYPE_NAMES.get(control_type, "CONTROL")
        if not can_discard:
            note = ("its transaction still has data in the log: kept; once that data is gone a later clean "
                    "stamps a delete horizon, and the marker goes delete.retention.ms after that")
            horizon = None
        elif header.has_delete_horizon:
            note = f"no data left; delete horizon {horizon}: removed by the first clean at or after it"
        else:
            note = f"no data left; this clean stamps delete horizon {horizon}: removed by the first clean after it"
        self.items.append(RetainedItem(name, header.base_offset, None, horizon, note))


def explain_partition(cleaner: Cleaner, topic: str, partition: int, now_ms: int, *,
                      roll: bool = False, simulate_force: bool = True) -> Explanation:
    """What a clean at ``now_ms`` would do to one partition (with ``roll``: a clean after
    ``--roll``); when it is not eligible, what ``clean --force`` would do (unless not
    ``simulate_force``). Writes nothing."""
    log = cleaner.datadir.open_log(topic, partition)
    checkpoint = cleaner.manager.all_cleaner_checkpoints().get((topic, partition))
    with log.lock:
        log.producer_state.remove_expired(now_ms)
        view = as_rolled(log) if roll else log
        status = partition_status(view, checkpoint, now_ms)
    ex = Explanation(topic, partition, now_ms, status, status.eligible, False, rolled=view is not log,
                     strategy=str(CompactionStrategy.of(log.config)))
    if not status.compacted:
        return ex
    if not status.eligible:
        if not simulate_force:
            return ex
        # what a forced clean would do: the dirty ratio and min.compaction.lag.ms ignored
        upper = min(view.last_stable_offset, view.active_segment.base_offset)
        ltc = log_to_clean(view, status.first_dirty, max(status.first_dirty, upper))
        if ltc.cleanable_bytes == 0:
            return ex
        forced = PartitionStatus(**{**status.__dict__})
        forced.first_uncleanable = ltc.first_uncleanable
        status_for_plan = forced
        ex.forced = True
    else:
        status_for_plan = status
    source, round_was_open = None, False
    if both_tiers(log):
        # the remote tier planned with the local one, as the clean would (its manifest as read,
        # storage/remote/offline.py); a tier that cannot be planned: what the clean says. Planning
        # opens a round (uploads wait for it): closed after, unless a clean had it open already
        from ..storage.remote.compaction import manager_for_log
        rp = manager_for_log(log).partitions.get((log.topic, log.partition))
        round_was_open = rp is not None and rp.round_open
        source = _tiered_source(view)
        if source is None:
            ex.would_clean = ex.forced = False
            status.reason = "the remote tier is not ready to be cleaned with the local log; retried later"
            return ex
    try:
        plan = make_plan(cleaner.datadir, view, status_for_plan, now_ms, source=source)
        if source is None and cleaner.source_for is not None:   # a bucket's shadow: read where they are
            plan.source = cleaner.source_for(log)
        collector = _Collector(now_ms, log.config.delete_retention_ms)
        result = clean_partition(plan, dry_run=True, observer=collector)
    finally:
        if source is not None and not round_was_open:
            from ..storage.remote.compaction import end_round
            end_round(source)
    ex.tiers = result.tiers
    stats = result.stats
    ex.dirty_range = (plan.first_dirty, result.end_offset)
    ex.records_read = stats["messages_read"]
    ex.records_kept = stats["messages_written"]
    ex.bytes_read = stats["bytes_read"]
    ex.bytes_kept = stats["bytes_written"]
    ex.removed = dict(stats["removed"])
    ex.retained = collector.items
    return ex
