"""Compaction of the remote tier, the partition owner's side (tiered-storage.md §5.2, §5.5, §5.6):
what Kafka refuses (``LogConfig.validateNoRemoteStorageForCompactedTopic``), built on Kafka's
segment state machine (``RemoteLogSegmentState``) and the partition manifest's CAS.

* ``tiered_source``: at planning, under the log's lock, the partition's one logical log
  (``source.TieredSource``: the remote segments of the current manifest generation, then the local
  segments above the highest remote offset) and the round opened: until ``end_round`` the copy
  task uploads nothing of the partition (a segment uploaded during a round would stay in the
  bucket uncleaned while its local copy loses records: a tombstone dropped later would let an
  older value come back, §5.2) and the orphan sweep leaves its objects alone.
* ``commit_remote`` (§5.5): the tasks wrote each changed remote group as a new segment (fresh id,
  create-only objects); here, under the partition's remote lock: **D1** one journal batch of
  COPY_SEGMENT_STARTED (api 0) for the new ids; **D2** one manifest CAS replacing every old
  group by its new segment, the old ids moved to ``pendingDeletion`` with ``deleteAfterMs = now +
  compactlog.remote.compaction.delete.delay.ms`` (the commit point; readers switch with the
  manifest); **D3** one batch: COPY_SEGMENT_FINISHED for the new ids, DELETE_SEGMENT_STARTED for
  the replaced ones; **D4** the local groups swapped in by Kafka's renames. A CAS that fails
  because the remote tier changed (remote retention) rolls the new segments back (rule 5) and the
  round is retried; a store that fails mid-way leaves the partition to be reconciled (the
  manifest wins: rolled forward or back) before its next use.
* ``delete_due`` (§5.5 step G): past ``deleteAfterMs`` the replaced objects are deleted,
  DELETE_SEGMENT_FINISHED appended, and a CAS drops them from ``pendingDeletion``; every
  ``compactlog.remote.orphan.min.age.ms`` the partition's orphans are swept (objects no manifest
  and no journal entry names: a task's output whose round never committed).

Test hook: ``COMPACTLOG_TEST_REMOTE_KILL_FILE`` (manager.py) with the steps ``compaction-objects``
(tasks done, before D1), ``compaction-started`` (after D1), ``compaction-manifest`` (after D2) and
``compaction-deleted`` (G: objects deleted, before DELETE_FINISHED).
"""

from __future__ import annotations

import logging
import os
import threading

from ...errors import CompactlogError
from ...record.remote_log_metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, SegmentState
from ..segment_source import LocalDirSource
from . import faults, keys
from .partition_manifest import Fenced, ManifestError, ManifestSegment, PartitionManifest
from .segment_objects import delete_segment
from .source import RemoteSegmentSource, TieredSource, forget_staged
from .store import RemoteStorageError

log = logging.getLogger("kafka.log.remote.RemoteLogCompaction")

ENABLE = "compactlog.remote.compaction.enable"
DELETE_DELAY = "compactlog.remote.compaction.delete.delay.ms"

# the remote log managers of this process, by data dir (the cleaner finds a log's owner here)
_managers: dict[str, object] = {}
_managers_lock = threading.Lock()


class RoundAborted(CompactlogError):
    """The remote tier changed under the round (remote retention, another owner): nothing of the
    round is committed; it is cleaned again later."""


def register(datadir_path: str, manager) -> None:
    with _managers_lock:
        _managers[os.path.abspath(datadir_path)] = manager


def unregister(datadir_path: str, manager) -> None:
    with _managers_lock:
        if _managers.get(os.path.abspath(datadir_path)) is manager:
            del _managers[os.path.abspath(datadir_path)]


def manager_for_log(plog):
    with _managers_lock:
        return _managers.get(os.path.dirname(os.path.abspath(plog.dir)))


def compacts_remote_tier(plog) -> bool:
    """Whether the cleaner cleans ``plog``'s remote tier with its local segments here."""
    rm = manager_for_log(plog)
    return rm is not None and plog.remote_log_enabled and rm.datadir.broker.get(ENABLE)


def remote_only_segments(plog) -> list[tuple[int, int, int]]:
    """(start offset, bytes, largest timestamp) of the remote segments below the first local
    segment and not below the log start (zone R of §1.1), from the manifest as it is (no lock: an
    immutable value)."""
    rm = manager_for_log(plog)
    rp = rm.partitions.get((plog.topic, plog.partition)) if rm is not None else None
    if rp is None or rp.manifest is None:
        return []
    first_local = plog.segments[0].base_offset if len(plog.segments) else plog.log_end_offset
    return [(s.start_offset, s.size_in_bytes,
             s.max_timestamp_ms if s.max_timestamp_ms >= 0 else s.event_timestamp_ms)
            for s in rp.manifest.segments if s.start_offset < first_local and s.end_offset >= plog.log_start_offset]


def remote_only_first_batch_timestamps(plog, from_offset: int) -> list[int]:
    """The first batch timestamps of the remote-only segments holding offsets at or above
    ``from_offset`` (their max timestamp where the manifest has none: a later bound, so
    max.compaction.lag.ms may force a clean later than Kafka would, never earlier)."""
    rm = manager_for_log(plog)
    rp = rm.partitions.get((plog.topic, plog.partition)) if rm is not None else None
    if rp is None or rp.manifest is None:
        return []
    first_local = plog.segments[0].base_offset if len(plog.segments) else plog.log_end_offset
    out = []
    for s in rp.manifest.segments:
        if s.start_offset < first_local and s.end_offset >= max(from_offset, plog.log_start_offset):
            ts = s.first_batch_timestamp_ms if s.first_batch_timestamp_ms >= 0 else s.max_timestamp_ms
            if ts > 0:
                out.append(ts)
    return out


def _meta(rp, seg: ManifestSegment) -> RemoteLogSegmentMetadata:
    return RemoteLogSegmentMetadata(RemoteLogSegmentId(rp.tip, seg.id), seg.start_offset, seg.end_offset,
                                    seg.broker_id, seg.max_timestamp_ms, seg.event_timestamp_ms,
                                    seg.segment_leader_epochs, seg.size_in_bytes)


# -- planning --------------------------------------------------------------------------------------

def tiered_source(plog) -> TieredSource | None:
    """The partition's logical log over both tiers, its round opened (``end_round`` closes it);
    None when the log is not tiered here or its remote tier cannot be compacted with it (no remote
    log manager in this process, the setting off, local segments that straddle the remote end)."""
    rm = manager_for_log(plog)
    if rm is None or not plog.remote_log_enabled or not rm.datadir.broker.get(ENABLE):
        return None
    # called under the log's lock: the remote lock is not taken here (the copy task takes it, then
    # the log's); a partition not reconciled yet is left to a later round
    rp = rm.partitions.get((plog.topic, plog.partition))
    if rp is None or not rp.ready or rp.failed_copy:
        return None
    m = rp.manifest
    segs = [s for s in m.segments if s.end_offset >= plog.log_start_offset]
    local = [s.base_offset for s in plog.segments]
    boundary = segs[-1].end_offset + 1 if segs else local[0]
    above = [b for b in local if b >= boundary]
    if not above or above[0] != boundary:
        log.warning(f"{plog.name}: no local segment starts at the remote tier's end {boundary}; the remote "
                    f"tier is not compacted this round")
        return None
    if segs and segs[0].start_offset > plog.log_start_offset:
        return None
    m = PartitionManifest(m.topic, m.topic_id, m.partition, m.generation, m.owner, m.log_start_offset,
                          m.cleaner_checkpoint, tuple(segs), ())
    rp.round_open = True
    remote = RemoteSegmentSource(rm.store_config, plog.topic, rp.topic_id, plog.partition, m,
                                 broker_id=rm.broker_id, store=rm.store)
    return TieredSource(remote, LocalDirSource(plog.dir), boundary)


def end_round(source) -> None:
    """The round of ``source`` is over (committed, failed or dropped): uploads go on."""
    if not isinstance(source, TieredSource):
        return
    with _managers_lock:
        rm = _managers.get(os.path.dirname(os.path.abspath(source.local.dir)))
    if rm is None:
        return
    rp = rm.partitions.get((source.remote.topic, source.remote.partition))
    if rp is not None:
        rp.round_open = False


def remote_segment_infos(source: TieredSource, index_interval_bytes: int) -> list:
    """The planner's view of the remote segments (sizes from the manifest; index sizes estimated
    from the log size, as only grouping reads them)."""
    from ...cleaner.source import SegmentInfo
    out = []
    for s in source.remote.manifest.segments:
        est = max(s.size_in_bytes // max(index_interval_bytes, 1), 1)
        mtime = s.max_timestamp_ms if s.max_timestamp_ms >= 0 else s.event_timestamp_ms
        out.append(SegmentInfo(s.start_offset, s.size_in_bytes, est * 8, est * 12, mtime))
    return out


# -- the commit (§5.5) -----------------------------------------------------------------------------

def commit_remote(source: TieredSource, plog, staged: list) -> None:
    """D1-D3 of a round (module docstring), under the partition's remote lock, never under the
    log's. Also for a round that changed no remote segment: the remote tier must still end where
    the round's local part begins (a copy that was in flight when the round was planned would
    leave an uncleaned remote copy of a segment the local swap cleans: the round is dropped)."""
    rm = manager_for_log(plog) if plog is not None else None
    if rm is None:
        raise RemoteStorageError(f"{source}: no remote log manager owns this partition here; the round is dropped")
    changed = [d for d in staged if d]
    new = [ManifestSegment.from_dict(d["segment"]) for d in changed]
    rp = rm.partition(plog)
    with rp.lock:
        if rp.manifest.highest_offset + 1 != source.boundary and (rp.manifest.segments or source.remote.manifest.segments):
            _roll_back(rm, rp, new, journaled=False)
            raise RoundAborted(f"{rp.topic}-{rp.partition}: a segment was uploaded while the log was cleaned; the "
                               f"round is retried")
        if changed:
            _commit_remote(rm, rp, source, changed, new)


def _commit_remote(rm, rp, source: TieredSource, changed: list[dict], new: list[ManifestSegment]) -> None:
    replaced = {n.id: list(d["replaced"]) for n, d in zip(new, changed)}
    delay = rm.datadir.broker.get(DELETE_DELAY)
    with rp.lock:
        faults.maybe_die("compaction-objects")
        current = {s.id for s in rp.manifest.segments}
        if any(i not in current for ids in replaced.values() for i in ids):
            _roll_back(rm, rp, new, journaled=False)
            raise RoundAborted(f"{rp.topic}-{rp.partition}: the remote tier changed while it was cleaned (remote "
                               f"retention); the round is retried")
        rm._journal(rp, [_meta(rp, n) for n in new])                           # D1
        faults.maybe_die("compaction-started")
        now = rm.clock()

        def change(m: PartitionManifest) -> PartitionManifest:
            return swap_segments(m, new, replaced, now + delay)
        try:
            rp.writer.update(change)                                          # D2: the commit point
        except (ManifestError, Fenced) as e:
            # nothing landed (the change did not apply, or another owner holds the partition)
            _roll_back(rm, rp, new, journaled=True)
            raise RoundAborted(f"{rp.topic}-{rp.partition}: the remote tier could not be switched: {e}") from None
        except BaseException:
            rp.failed_copy = True            # landed or not: reconciliation decides (the manifest wins)
            raise
        faults.maybe_die("compaction-manifest")
        forget_staged(rp.topic_id, rp.partition, [n.id for n in new])
        events = [rm._update(rp, n.id, SegmentState.COPY_SEGMENT_FINISHED) for n in new]
        events += [rm._update(rp, i, SegmentState.DELETE_SEGMENT_STARTED)
                   for ids in replaced.values() for i in ids if _state(rm, rp, i) == SegmentState.COPY_SEGMENT_FINISHED]
        try:
            rm._journal(rp, events)                                           # D3
        except BaseException:
            rp.failed_copy = True            # committed: reconciliation appends what is missing
            raise
    old_bytes = sum(s.size_in_bytes for s in source.remote.manifest.segments
                    if s.id in {i for ids in replaced.values() for i in ids})
    rm.stats["compacted_segments"] = rm.stats.get("compacted_segments", 0) + len(new)
    log.info(f"Compacted the remote tier of {rp.topic}-{rp.partition}: {sum(map(len, replaced.values()))} segment(s) "
             f"({old_bytes} bytes) replaced by {len(new)} ({sum(n.size_in_bytes for n in new)} bytes); the old "
             f"objects go after {delay} ms")


def _state(rm, rp, seg_id: str):
    js = rm.journal.get((rp.topic_id, rp.partition), {}).get(seg_id)
    return None if js is None else js.state


def _roll_back(rm, rp, new: list[ManifestSegment], *, journaled: bool) -> None:
    """New segments never committed: deleted (with their journal's DELETE states when STARTED was
    appended), quietly where the store fails (what stays is an orphan for the sweep)."""
    try:
        if journaled:
            rm._delete_segments(rp, [_meta(rp, n) for n in new],
                                [SegmentState.COPY_SEGMENT_STARTED] * len(new))
        else:
            for n in new:
                delete_segment(rm.store, keys.SegmentKey(rm.prefix, rp.topic, rp.topic_id, rp.partition,
                                                         n.start_offset, n.id), quiet=True)
    except (RemoteStorageError, OSError) as e:
        log.warning(f"{rp.topic}-{rp.partition}: rolling back an uncommitted remote round failed ({e}); its "
                    f"objects are left to the orphan sweep")
    forget_staged(rp.topic_id, rp.partition, [n.id for n in new])


def swap_segments(m: PartitionManifest, new: list[ManifestSegment], replaced: dict[str, list[str]],
                  delete_after_ms: int) -> PartitionManifest:
    """``m`` with each new segment in place of the segments it replaces (which must be listed,
    consecutive and span exactly its range), those moved to ``pendingDeletion``."""
    by_id = {s.id: s for s in m.segments}
    old_of = {}
    for n in new:
        olds = [by_id.get(i) for i in replaced[n.id]]
        if any(o is None for o in olds):
            raise ManifestError(f"{m.where()}: a segment replaced by {n.id} is no longer listed")
        if olds[0].start_offset != n.start_offset or olds[-1].end_offset != n.end_offset:
            raise ManifestError(f"{m.where()}: {n.id} ({n.start_offset}-{n.end_offset}) does not span the segments "
                                f"it replaces")
        for o in olds:
            old_of[o.id] = n
    segments, placed = [], set()
    for s in m.segments:
        n = old_of.get(s.id)
        if n is None:
            segments.append(s)
        elif n.id not in placed:
            segments.append(n)
            placed.add(n.id)
    from dataclasses import replace
    from .partition_manifest import PendingDeletion
    pending = m.pending_deletion + tuple(PendingDeletion(s.id, s.start_offset, s.end_offset, delete_after_ms)
                                         for s in m.segments if s.id in old_of)
    # checked sorted, contiguous and with unique ids by the manifest itself
    return replace(m, segments=tuple(segments), pending_deletion=pending)


# -- after the grace period (§5.5 G) and the orphan sweep --------------------------------------------

def delete_due(rm, plog, now: int) -> int:
    """Replaced segments past their ``deleteAfterMs`` deleted; the partition's orphans swept every
    ``compactlog.remote.orphan.min.age.ms``. How many segments were deleted."""
    rp = rm.partition(plog)
    with rp.lock:
        due = [p for p in rp.manifest.pending_deletion if p.delete_after_ms <= now]
        if due:
            for p in due:
                delete_segment(rm.store, keys.SegmentKey(rm.prefix, rp.topic, rp.topic_id, rp.partition,
                                                         p.start_offset, p.id))
            faults.maybe_die("compaction-deleted")
            events = []
            for p in due:
                st = _state(rm, rp, p.id)
                if st == SegmentState.COPY_SEGMENT_FINISHED:
                    events.append(rm._update(rp, p.id, SegmentState.DELETE_SEGMENT_STARTED))
                    st = SegmentState.DELETE_SEGMENT_STARTED
                if st == SegmentState.DELETE_SEGMENT_STARTED:
                    events.append(rm._update(rp, p.id, SegmentState.DELETE_SEGMENT_FINISHED))
            if events:
                rm._journal(rp, events)
            ids = {p.id for p in due}
            rp.writer.update(lambda m: m.without_pending(ids))
            rm.stats["deleted_segments"] += len(due)
            log.info(f"{plog.name}: {len(due)} replaced remote segment(s) deleted after their grace period")
        min_age = rm.datadir.broker.get("compactlog.remote.orphan.min.age.ms")
        if not rp.round_open and now - rp.last_sweep_ms >= min_age:
            rm._sweep_orphans(rp)
            rp.last_sweep_ms = now
    return len(due)


__all__ = ["tiered_source", "end_round", "commit_remote", "delete_due", "swap_segments", "remote_segment_infos",
           "register", "unregister", "manager_for_log", "RoundAborted", "ENABLE", "DELETE_DELAY"]
